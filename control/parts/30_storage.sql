------------------------------------------------------------------------------
-- Collections, part 1: storage (brief C2)
--
-- What every collection is made of, and the helpers the other parts share:
-- the storage schema and row-id sequence, the timestamp oracle, as_of() and
-- the history gates (C functions), names and columns of storage, storage
-- creation with its history, change and before views, and the bound
-- publication queue.  31_append.sql writes storage, 32_registered_tables.sql
-- captures tables into it, 33_drops.sql drops and finalizes it.
--
-- Each collection <id> keeps its history in schema decoupled_storage:
--
--   c<id>_cur      the rows present at upper, one physical row per unit of
--                  multiplicity, each with the time it was inserted (mz_ts)
--   c<id>_dead     rows retracted since `since`: valid over
--                  [valid_from, valid_to)
--   c<id>_stage    the row type of the append in progress's scratch, whose
--                  rows live in memory (extension/scratch.hpp)
--   c<id>_pending  registered tables only: captured, not yet ticked changes
--   c<id>_history  the state AS OF decoupled.as_of(), read with the
--                  extension's rights after _history_gate() checked
--                  readability and the reader's privilege
--
-- The state at t is cur rows with mz_ts <= t plus dead rows valid at t, so
-- an AS OF read is a filtered scan, never a replay.  Compaction to since
-- deletes dead rows with valid_to <= since: nothing readable at t >= since
-- is lost.
------------------------------------------------------------------------------

CREATE SCHEMA decoupled_storage;
COMMENT ON SCHEMA decoupled_storage IS 'Private storage of pg_decoupled collections.';

-- mz_rowid only orders identical copies of a row with the same mz_ts, which
-- no read can tell apart: each session takes 64 values at a time instead of
-- locking and, every 32 values, logging the sequence for each row written.
CREATE SEQUENCE decoupled.rowid_seq AS bigint CACHE 64;

CREATE FUNCTION decoupled._next_timestamp(at_least bigint DEFAULT 0) RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_next_timestamp';
CREATE FUNCTION decoupled.oracle_now() RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_oracle_now';
COMMENT ON FUNCTION decoupled.oracle_now() IS
    'The timestamp oracle''s current time (ms since the Unix epoch); never goes backwards.';
CREATE FUNCTION decoupled.as_of() RETURNS bigint
    LANGUAGE C STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_as_of';
COMMENT ON FUNCTION decoupled.as_of() IS 'decoupled.as_of as a timestamp, NULL when unset.';
-- Never called.  A plan of a read of a registered table depends on one of
-- these (extension/read_rewrite.cpp): made while decoupled.as_of is unset it
-- reads the table alone and depends on _planned_latest(); made while it is
-- set it keeps the gated union and depends on _planned_as_of().  When as_of
-- turns set or unset, the plans depending on the other one are planned
-- again, as after a change of a function they call.
CREATE FUNCTION decoupled._planned_latest() RETURNS void
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS '';
CREATE FUNCTION decoupled._planned_as_of() RETURNS void
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS '';
-- Never run either.  A SELECT the session runs itself keeps its reads of
-- registered tables as they are, marked by this last term of its WHERE
-- clause; the planner hook takes it out and reads the table alone while
-- decoupled.as_of is unset, the gated union otherwise.
CREATE FUNCTION decoupled._reads_at_plan_time() RETURNS boolean
    LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_reads_at_plan_time';
-- PARALLEL SAFE: its catalog read is read-only, and a parallel latest read
-- of a registered table must stay as fast as one of a plain table.
CREATE FUNCTION decoupled._history_gate(lifetime_id bigint) RETURNS boolean
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'decoupled_history_gate';
CREATE FUNCTION decoupled._history_gate_before(lifetime_id bigint) RETURNS boolean
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'decoupled_history_gate_before';
CREATE FUNCTION decoupled._execute_unrewritten(sql text) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_execute_unrewritten';
CREATE FUNCTION decoupled._propose_bound(upper bigint, retain_ms bigint, current_bound bigint,
                                         min_requirement bigint, min_hold bigint) RETURNS bigint
    LANGUAGE C IMMUTABLE AS 'MODULE_PATHNAME', 'decoupled_propose_bound';
CREATE FUNCTION decoupled._compacted_since(since bigint, bound bigint, upper bigint)
    RETURNS bigint LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_compacted_since';

------------------------------------------------------------------------------
-- Naming and columns
------------------------------------------------------------------------------

-- In C, as every helper a step calls: SQL with a SET clause is planned at
-- every call.
CREATE FUNCTION decoupled._storage(lifetime_id bigint, part text) RETURNS text
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_storage_name';

-- The collection's columns, as stored in its definition at creation:
-- `prefix` qualifies each name; with `typed` each carries its type.
-- A recorded column's type, as text to write into a statement: by OID (it
-- keeps a type modifier): its recorded name only while that name still
-- reads as that type, else the type's name now.  A type renamed or moved
-- away, and another one created under its old name (a domain whose checks
-- would run with the extension's rights when history or a sink is written,
-- or a value converted), is never picked up by name.
CREATE FUNCTION decoupled._column_type(c jsonb) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN c ? 'typid'
                     AND to_regtype(regexp_replace(c->>'type', ' COLLATE .*$', ''))
                         IS DISTINCT FROM (c->>'typid')::oid
                THEN format_type((c->>'typid')::oid, NULL)
                     || coalesce(substring(c->>'type' FROM ' COLLATE .*$'), '')
                ELSE c->>'type' END
$$;

CREATE FUNCTION decoupled._cols(lifetime_id bigint, prefix text DEFAULT '',
                                typed boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
-- PL/pgSQL, not SQL: a view's step calls it, and its statement is planned
-- once per session, not at every call.  Typed, each column's type is
-- _column_type's; _assert_column_types checks the relation made.
BEGIN
    RETURN (SELECT string_agg(prefix || quote_ident(c->>'name')
                              || CASE WHEN typed THEN ' ' || decoupled._column_type(c) ELSE '' END,
                              ', ' ORDER BY ord)
              FROM decoupled.catalog_objects o,
                   jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, ord)
             WHERE o.lifetime_id = _cols.lifetime_id);
END
$$;

-- A relation just made from a collection's typed columns (_cols) has each
-- column of the type the collection recorded: a concurrent rename between
-- the two is refused, not followed.
CREATE FUNCTION decoupled._assert_column_types(rel regclass, lifetime_id bigint) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad text;
BEGIN
    SELECT c->>'name' INTO v_bad
      FROM decoupled.catalog_objects o,
           jsonb_array_elements(o.definition->'columns') c
      LEFT JOIN pg_attribute a ON a.attrelid = rel AND a.attname = c->>'name'
                              AND a.attnum > 0 AND NOT a.attisdropped
     WHERE o.lifetime_id = _assert_column_types.lifetime_id AND c ? 'typid'
       AND a.atttypid IS DISTINCT FROM (c->>'typid')::oid
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the type of column "%" changed while % was created', v_bad, rel
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Try again.';
    END IF;
END
$$;

-- The live collection called `name`.
CREATE FUNCTION decoupled._collection(name text) RETURNS decoupled.catalog_objects
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o decoupled.catalog_objects;
BEGIN
    IF _collection.name IS NULL THEN
        RAISE EXCEPTION 'collection name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.name = _collection.name AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'collection "%" does not exist', _collection.name
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN o;
END
$$;

CREATE FUNCTION decoupled._retain_ms(retain interval) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT (floor(extract(epoch FROM retain) * 1000))::bigint
$$;

------------------------------------------------------------------------------
-- Storage
------------------------------------------------------------------------------

-- The history's two parts apart: its rows kept in cur, and those kept in
-- dead, gated alike.  A step that needs a group's least or greatest value
-- at as_of reads each part ordered by an index on it and stops at the
-- first row (extension/delta_plan.cpp, ordered extremes): through the
-- union of both, whose branches filter, the planner cannot order by an
-- index.
CREATE FUNCTION decoupled._create_history_parts(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id    bigint := _create_history_parts.lifetime_id;
    names text := decoupled._cols(id);
BEGIN
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%4$s) AND mz_ts <= decoupled.as_of()',
        decoupled._storage(id, 'history_cur'), names, decoupled._storage(id, 'cur'), id);
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%4$s) '
        '  AND valid_from <= decoupled.as_of() AND valid_to > decoupled.as_of()',
        decoupled._storage(id, 'history_dead'), names, decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s, %s TO PUBLIC', decoupled._storage(id, 'history_cur'),
                   decoupled._storage(id, 'history_dead'));
END
$$;

-- Whoever makes a collection's time index holds this until its transaction
-- ends (extension/write_locks.cpp).
CREATE FUNCTION decoupled._lock_time_index(lifetime_id bigint, wait boolean) RETURNS boolean
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_lock_time_index';

-- The time index of a collection's rows in cur (mz_ts), made if it is
-- missing: what finds the times at which the collection changed for the
-- views, sinks and subscriptions that read its changes.  A materialized view
-- whose steps replace rows has none until such a reader appears: without
-- it a step rewrites a group's row in place (a HOT update: no index entry,
-- one WAL record; docs/performance.md), with it every write moves the row.
-- Once made it stays.  The index takes a SHARE lock on cur until the
-- caller commits: only short transactions call this (creating a view or a
-- sink, a replica's heartbeat), never a reader's.  Two callers (replicas
-- of one cluster, a heartbeat and a view's creation) make it one after the
-- other: the second waits for the first's commit on a lock of the
-- extension's own (_lock_time_index: no role can take it from SQL), and
-- IF NOT EXISTS, which reads the catalog after locking cur, then finds it.
-- A replica's heartbeat never waits (`wait` false): a transaction creating
-- a view over the collection holds that lock until it ends and may
-- then wait for the replica (extension/write_locks.hpp); the next
-- heartbeat tries again.
CREATE FUNCTION decoupled._ensure_time_index(lifetime_id bigint,
                                             wait boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_name text := 'c' || _ensure_time_index.lifetime_id || '_cur_mz_ts_idx';
    v_cur  text := decoupled._storage(_ensure_time_index.lifetime_id, 'cur');
BEGIN
    IF to_regclass(v_cur) IS NULL
       OR to_regclass('decoupled_storage.' || quote_ident(v_name)) IS NOT NULL THEN
        RETURN;
    END IF;
    IF NOT decoupled._lock_time_index(_ensure_time_index.lifetime_id, _ensure_time_index.wait) THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (mz_ts)', v_name, v_cur);
END
$$;

-- The views a collection's history is read through at decoupled.as_of:
-- c<id>_history (its rows then), c<id>_delta (its changes then: rows
-- inserted (+1) and retracted (-1) at as_of; incremental views read their
-- input through it, extension/delta_plan.cpp) and c<id>_before (its rows
-- just before as_of: an incremental join step reads the inputs after the
-- changed one there).  Their branches are gated by a one-time filter:
-- without as_of they are skipped before reading a page.  The changes find
-- their rows of dead inserted at as_of and retracted since by a range on
-- valid_to closed on both sides (its upper bound always true):
-- `valid_to > as_of()` alone is, for a dead without statistics (compaction
-- empties it faster than ANALYZE runs), a third of its rows to the
-- planner, and every step of every view over the collection scanned all of
-- dead (a ten-view step's reading of 400 changes took 126 ms instead of 1;
-- docs/performance.md), where the index holds only the rows retracted
-- after as_of; with statistics the estimate is the histogram's either way.
-- (A dead that VACUUM recorded empty is planned as one page whatever the
-- predicate: the write that fills it invalidates it, extension/plan_growth.hpp.)
-- The history and before views keep their one-sided range: steps read
-- them by keys, through an arrangement on (keys, valid_to), and a range
-- guessed small would take the planner from the arrangement to the time
-- index, whose range is every row retracted since as_of — all of a
-- backlog when a view catches up.
CREATE FUNCTION decoupled._create_read_views(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id    bigint := _create_read_views.lifetime_id;
    names text := decoupled._cols(id);
    cur   text := decoupled._storage(id, 'cur');
    dead  text := decoupled._storage(id, 'dead');
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%5$s) AND mz_ts <= decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_from <= decoupled.as_of() AND valid_to > decoupled.as_of()',
        decoupled._storage(id, 'history'), names, cur, dead, id);
    EXECUTE format(
        'CREATE OR REPLACE VIEW %1$s AS '
        'SELECT %2$s, 1::bigint AS mz_diff FROM %3$s '
        ' WHERE decoupled._history_gate(%5$s) AND mz_ts = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, 1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to > decoupled.as_of() AND valid_to <= 9223372036854775807 '
        '  AND valid_from = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, -1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to = decoupled.as_of()',
        decoupled._storage(id, 'delta'), names, cur, dead, id);
    EXECUTE format(
        'CREATE OR REPLACE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND mz_ts < decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND valid_from < decoupled.as_of() AND valid_to >= decoupled.as_of()',
        decoupled._storage(id, 'before'), names, cur, dead, id);
    EXECUTE format('GRANT SELECT ON %s, %s, %s TO PUBLIC', decoupled._storage(id, 'history'),
                   decoupled._storage(id, 'delta'), decoupled._storage(id, 'before'));
END
$$;

CREATE FUNCTION decoupled._create_storage(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id   bigint := _create_storage.lifetime_id;
    defs text := decoupled._cols(id, '', true);
BEGIN
    -- mz_rowid only orders identical copies (the oldest is retracted first);
    -- nothing looks a row up by it, so it has no index: every row written
    -- to cur and dead would pay for one.
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint NOT NULL, mz_ts bigint NOT NULL, '
                   'mz_hash integer NOT NULL, %s)', decoupled._storage(id, 'cur'), defs);
    EXECUTE format('CREATE INDEX ON %s (mz_hash)', decoupled._storage(id, 'cur'));
    -- Maintained views and sinks find the times at which a collection changed
    -- (the time index; a view whose steps replace rows drops its own until
    -- something reads its changes: _ensure_time_index).
    EXECUTE format('CREATE INDEX ON %s (mz_ts)', decoupled._storage(id, 'cur'));
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint NOT NULL, valid_from bigint NOT NULL, '
                   'valid_to bigint NOT NULL, %s, CHECK (valid_from < valid_to))',
                   decoupled._storage(id, 'dead'), defs);
    EXECUTE format('CREATE INDEX ON %s (valid_to)', decoupled._storage(id, 'dead'));
    EXECUTE format('CREATE UNLOGGED TABLE %s (mz_ts bigint NOT NULL, mz_diff bigint NOT NULL, '
                   'mz_key text NOT NULL, mz_hash integer NOT NULL, %s)',
                   decoupled._storage(id, 'stage'), defs);
    PERFORM decoupled._assert_column_types(decoupled._storage(id, part)::regclass, id)
       FROM unnest(ARRAY['cur', 'dead', 'stage']) part;
    PERFORM decoupled._create_read_views(id);
    PERFORM decoupled._create_history_parts(id);
END
$$;

-- A collection's cur and dead locked ROW EXCLUSIVE without waiting (ZD004
-- when another transaction holds one): how a replica's step takes its
-- output's storage, since a transaction creating views over the collection
-- may hold it and then wait for the step (extension/write_locks.hpp).
CREATE FUNCTION decoupled._lock_storage_nowait(lifetime_id bigint) RETURNS void
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_lock_storage_nowait';

------------------------------------------------------------------------------
-- The bound publication queue.  Writers queue what they changed; a
-- publication drains it with SKIP LOCKED.  Neither side ever waits for the
-- other: a row a publication is draining is skipped (and a new one
-- inserted), and a row this transaction relies on is locked KEY SHARE so
-- that no publication drains it before this change is committed and
-- visible to the publication's snapshot.
------------------------------------------------------------------------------

-- PL/pgSQL, not SQL: a SQL function with a SET clause is planned again in
-- every transaction that calls it, PL/pgSQL keeps its plan for the session
-- (a generic one: a custom plan for each array of ids was planned at every
-- call, since the plan cache never found the generic one cheaper).
CREATE FUNCTION decoupled._queue_for_publication(ids bigint[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO decoupled.catalog_bound_queue (lifetime_id)
    SELECT x.id FROM (SELECT DISTINCT unnest(ids) AS id) x
     WHERE x.id IS NOT NULL
       AND NOT EXISTS (SELECT FROM decoupled.catalog_bound_queue q WHERE q.lifetime_id = x.id
                          FOR KEY SHARE SKIP LOCKED);
END
$$;

-- An object's error as the reader may see it: errors of a view's, a
-- source's or a table's maintenance may quote its data (a CHECK's or a
-- function's message), so they are shown to whoever may read the object's
-- relation (SELECT on it, as every path to its history asks); others see
-- that there is one.  (One without a relation has no data yet.)  Bound at creation like every view's functions: no
-- caller's search_path takes part.
CREATE FUNCTION decoupled._visible_error(error text, relation oid, name text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN error IS NULL OR relation IS NULL  -- nothing yet to read it through
                  OR coalesce(has_table_privilege(relation, 'SELECT'), false) THEN error
                ELSE format('an error (shown to roles that may read "%s")', name) END
$$;
