------------------------------------------------------------------------------
-- Collections: time, storage and the one write path (brief C2)
--
-- Each collection <id> keeps its history in schema decoupled_storage:
--
--   c<id>_cur      the rows present at upper, one physical row per unit of
--                  multiplicity, each with the time it was inserted (mz_ts)
--   c<id>_dead     rows retracted since `since`: valid over
--                  [valid_from, valid_to)
--   c<id>_stage    scratch for the append in progress (unlogged)
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

CREATE SEQUENCE decoupled.rowid_seq AS bigint;

CREATE FUNCTION decoupled._next_timestamp(at_least bigint DEFAULT 0) RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_next_timestamp';
CREATE FUNCTION decoupled.oracle_now() RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_oracle_now';
COMMENT ON FUNCTION decoupled.oracle_now() IS
    'The timestamp oracle''s current time (ms since the Unix epoch); never goes backwards.';
CREATE FUNCTION decoupled.as_of() RETURNS bigint
    LANGUAGE C STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_as_of';
COMMENT ON FUNCTION decoupled.as_of() IS 'decoupled.as_of as a timestamp, NULL when unset.';
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

CREATE FUNCTION decoupled._storage(lifetime_id bigint, part text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'decoupled_storage.c' || lifetime_id || '_' || part
$$;

-- The collection's columns, as stored in its definition at creation:
-- `prefix` qualifies each name; with `typed` each carries its type.
CREATE FUNCTION decoupled._cols(lifetime_id bigint, prefix text DEFAULT '',
                                typed boolean DEFAULT false) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT string_agg(prefix || quote_ident(c->>'name')
                      || CASE WHEN typed THEN ' ' || (c->>'type') ELSE '' END,
                      ', ' ORDER BY ord)
      FROM decoupled.catalog_objects o,
           jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, ord)
     WHERE o.lifetime_id = _cols.lifetime_id
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

CREATE FUNCTION decoupled._create_storage(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id    bigint := _create_storage.lifetime_id;
    defs  text := decoupled._cols(id, '', true);
    names text := decoupled._cols(id);
BEGIN
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint PRIMARY KEY, mz_ts bigint NOT NULL, '
                   'mz_hash integer NOT NULL, %s)', decoupled._storage(id, 'cur'), defs);
    EXECUTE format('CREATE INDEX ON %s (mz_hash)', decoupled._storage(id, 'cur'));
    -- Maintained views and sinks find the times at which a collection changed.
    EXECUTE format('CREATE INDEX ON %s (mz_ts)', decoupled._storage(id, 'cur'));
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint PRIMARY KEY, valid_from bigint NOT NULL, '
                   'valid_to bigint NOT NULL, %s, CHECK (valid_from < valid_to))',
                   decoupled._storage(id, 'dead'), defs);
    EXECUTE format('CREATE INDEX ON %s (valid_to)', decoupled._storage(id, 'dead'));
    EXECUTE format('CREATE UNLOGGED TABLE %s (mz_ts bigint NOT NULL, mz_diff bigint NOT NULL, '
                   'mz_key text NOT NULL, mz_hash integer NOT NULL, %s)',
                   decoupled._storage(id, 'stage'), defs);
    -- Both branches are gated by a one-time filter: without as_of they are
    -- skipped before reading a page.
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%5$s) AND mz_ts <= decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_from <= decoupled.as_of() AND valid_to > decoupled.as_of()',
        decoupled._storage(id, 'history'), names, decoupled._storage(id, 'cur'),
        decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', decoupled._storage(id, 'history'));
    -- Its changes at decoupled.as_of: rows inserted then (+1), retracted then
    -- (-1).  Incremental views read their input through it, gated like the
    -- history (extension/delta_plan.cpp).
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s, 1::bigint AS mz_diff FROM %3$s '
        ' WHERE decoupled._history_gate(%5$s) AND mz_ts = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, 1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to > decoupled.as_of() AND valid_from = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, -1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to = decoupled.as_of()',
        decoupled._storage(id, 'delta'), names, decoupled._storage(id, 'cur'),
        decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', decoupled._storage(id, 'delta'));
    -- Its state just before decoupled.as_of: an incremental join step reads
    -- the inputs after the changed one there.
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND mz_ts < decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND valid_from < decoupled.as_of() AND valid_to >= decoupled.as_of()',
        decoupled._storage(id, 'before'), names, decoupled._storage(id, 'cur'),
        decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', decoupled._storage(id, 'before'));
END
$$;

------------------------------------------------------------------------------
-- Write authority (brief C2.1, C10.3): enforced at append, not by process
-- ordering.  Locks are shared so that promotion or retirement waits for
-- in-flight appends and later appends see their outcome.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._assert_write_authority(deployment text, incarnation bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := coalesce(_assert_write_authority.deployment,
                                  decoupled._active_deployment());
    v_state      text;
BEGIN
    SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
     WHERE d.name = v_deployment FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'deployment "%" does not exist', v_deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_state <> 'active' THEN
        RAISE EXCEPTION 'deployment "%" has no write authority', v_deployment
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('It is %s; only the active deployment writes.', v_state);
    END IF;
    IF _assert_write_authority.incarnation IS NOT NULL THEN
        PERFORM FROM decoupled.catalog_replica_incarnations i
         WHERE i.incarnation = _assert_write_authority.incarnation
           AND i.deployment = v_deployment AND i.retired_at IS NULL
           FOR SHARE;
        IF NOT FOUND THEN
            PERFORM FROM decoupled.catalog_adapter_incarnations i
             WHERE i.incarnation = _assert_write_authority.incarnation
               AND i.deployment = v_deployment AND i.retired_at IS NULL
               FOR SHARE;
        END IF;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'incarnation % is not current in deployment "%"',
                            _assert_write_authority.incarnation, v_deployment
                USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                      DETAIL = 'A newer incarnation replaced it, or it was retired; '
                               'a fenced writer can never write again.';
        END IF;
    END IF;
END
$$;

------------------------------------------------------------------------------
-- The bound publication queue.  Writers queue what they changed; a
-- publication drains it with SKIP LOCKED.  Neither side ever waits for the
-- other: a row a publication is draining is skipped (and a new one
-- inserted), and a row this transaction relies on is locked KEY SHARE so
-- that no publication drains it before this change is committed and
-- visible to the publication's snapshot.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._queue_for_publication(ids bigint[]) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO decoupled.catalog_bound_queue (lifetime_id)
    SELECT x.id FROM (SELECT DISTINCT unnest(ids) AS id) x
     WHERE x.id IS NOT NULL
       AND NOT EXISTS (SELECT FROM decoupled.catalog_bound_queue q WHERE q.lifetime_id = x.id
                          FOR KEY SHARE SKIP LOCKED)
$$;

------------------------------------------------------------------------------
-- The append core.  The caller holds the collection's frontier row lock,
-- has checked upper = expected_upper < new_upper, and staged the updates in
-- c<id>_stage.  Consolidates them per (time, row), inserts positive
-- multiplicities and retracts negative ones oldest first, then advances the
-- upper.  Any violation aborts the transaction: a failed append changes
-- nothing.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._append_staged(lifetime_id bigint, expected_upper bigint,
                                         new_upper bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id        bigint := _append_staged.lifetime_id;
    v_cur     text := decoupled._storage(id, 'cur');
    v_dead    text := decoupled._storage(id, 'dead');
    v_stage   text := decoupled._storage(id, 'stage');
    v_names   text := decoupled._cols(id);
    v_outside bigint;
    v_wanted  bigint;
    v_moved   bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s WHERE mz_ts < $1 OR mz_ts >= $2', v_stage)
        INTO v_outside USING expected_upper, new_upper;
    IF v_outside > 0 THEN
        RAISE EXCEPTION 'update times must lie in the appended interval'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('%s update(s) lie outside [%s, %s).', v_outside, expected_upper,
                                  new_upper);
    END IF;

    EXECUTE format(
        'INSERT INTO %1$s (mz_rowid, mz_ts, mz_hash, %2$s) '
        'SELECT nextval(''decoupled.rowid_seq''), s.mz_ts, s.mz_hash, %3$s '
        '  FROM (SELECT DISTINCT ON (mz_ts, mz_key) *, '
        '               sum(mz_diff) OVER (PARTITION BY mz_ts, mz_key) AS mz_net '
        '          FROM %4$s ORDER BY mz_ts, mz_key) s, '
        '       generate_series(1, s.mz_net) '
        ' WHERE s.mz_net > 0',
        v_cur, v_names, decoupled._cols(id, 's.'), v_stage);

    -- The k-th retraction of a row pairs with the k-th oldest copy of it;
    -- that copy must exist before the retraction's time.  Copies are found
    -- through the row hash index, one probe per retracted row.
    EXECUTE format('SELECT coalesce(-sum(n), 0) FROM (SELECT sum(mz_diff) AS n FROM %s '
                   'GROUP BY mz_ts, mz_key HAVING sum(mz_diff) < 0) x', v_stage)
        INTO v_wanted;
    IF v_wanted > 0 THEN
        EXECUTE format(
            'WITH net AS (SELECT mz_ts, mz_key, mz_hash, sum(mz_diff) AS mz_net FROM %3$s '
            '              GROUP BY mz_ts, mz_key, mz_hash HAVING sum(mz_diff) < 0), '
            '     del AS (SELECT n.mz_ts, n.mz_key, '
            '                    row_number() OVER (PARTITION BY n.mz_key ORDER BY n.mz_ts) AS k '
            '               FROM net n, generate_series(1, -n.mz_net)), '
            '     cand AS (SELECT c.mz_rowid, c.mz_ts, r.mz_key, '
            '                     row_number() OVER (PARTITION BY r.mz_key '
            '                                        ORDER BY c.mz_ts, c.mz_rowid) AS k '
            '                FROM (SELECT DISTINCT mz_key, mz_hash FROM net) r '
            '                JOIN LATERAL (SELECT c.mz_rowid, c.mz_ts FROM %1$s c '
            '                               WHERE c.mz_hash = r.mz_hash '
            '                                 AND ROW(%5$s)::text = r.mz_key %6$s) c ON true), '
            '     pairs AS (SELECT c.mz_rowid, d.mz_ts AS valid_to FROM del d '
            '                 JOIN cand c ON c.mz_key = d.mz_key AND c.k = d.k '
            '                            AND c.mz_ts < d.mz_ts), '
            '     moved AS (DELETE FROM %1$s c USING pairs p WHERE c.mz_rowid = p.mz_rowid '
            '               RETURNING c.*, p.valid_to) '
            'INSERT INTO %2$s (mz_rowid, valid_from, valid_to, %4$s) '
            'SELECT mz_rowid, mz_ts, valid_to, %4$s FROM moved',
            v_cur, v_dead, v_stage, v_names, decoupled._cols(id, 'c.'),
            -- The stage has no statistics: unless the retractions are many,
            -- keep each one an index probe (OFFSET 0 keeps the subquery from
            -- being flattened into a hash join over all of cur).
            CASE WHEN v_wanted <= 10000 THEN 'OFFSET 0' ELSE '' END);
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        IF v_moved <> v_wanted THEN
            RAISE EXCEPTION 'append would make a multiplicity negative'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('%s of %s retractions match no copy of their row present '
                                      'before their time.', v_wanted - v_moved, v_wanted);
        END IF;
    END IF;

    EXECUTE format('DELETE FROM %s', v_stage);
    UPDATE decoupled.catalog_frontiers f SET upper = new_upper, changed_at = now()
     WHERE f.lifetime_id = id;
    PERFORM decoupled._queue_for_publication(ARRAY[id]);
    PERFORM decoupled._notify_upper_at_commit();
END
$$;

-- What is wrong with one JSON update of an append, or NULL: its shape, an
-- mz_timestamp that is not a bigint >= 0, an mz_diff that is not an integer
-- within +-max_diff, a key of `data` that names no column.  Checked with
-- numeric comparisons, so that no cast can fail with another SQLSTATE.
CREATE FUNCTION decoupled._update_problem(u jsonb, columns text[], max_diff bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN jsonb_typeof(u) IS DISTINCT FROM 'object' THEN 'is not a JSON object'
        WHEN (SELECT k FROM jsonb_object_keys(u) k
               WHERE k NOT IN ('mz_timestamp', 'mz_diff', 'data') LIMIT 1) IS NOT NULL
            THEN format('has unknown key "%s"',
                        (SELECT k FROM jsonb_object_keys(u) k
                          WHERE k NOT IN ('mz_timestamp', 'mz_diff', 'data') LIMIT 1))
        WHEN jsonb_typeof(u->'mz_timestamp') IS DISTINCT FROM 'number'
            THEN 'has no numeric "mz_timestamp"'
        WHEN (u->'mz_timestamp')::numeric <> trunc((u->'mz_timestamp')::numeric)
          OR (u->'mz_timestamp')::numeric NOT BETWEEN 0 AND 9223372036854775807
            THEN format('has mz_timestamp %s, not an integer timestamp', u->'mz_timestamp')
        WHEN jsonb_typeof(u->'mz_diff') IS DISTINCT FROM 'number'
            THEN 'has no numeric "mz_diff"'
        WHEN (u->'mz_diff')::numeric <> trunc((u->'mz_diff')::numeric)
          OR abs((u->'mz_diff')::numeric) > max_diff
            THEN format('has mz_diff %s, not an integer from -%s to %s', u->'mz_diff',
                        max_diff, max_diff)
        WHEN jsonb_typeof(u->'data') IS DISTINCT FROM 'object' THEN 'has no "data" object'
        WHEN (SELECT k FROM jsonb_object_keys(u->'data') k WHERE k <> ALL (columns) LIMIT 1)
             IS NOT NULL
            THEN format('names unknown column "%s" in "data"',
                        (SELECT k FROM jsonb_object_keys(u->'data') k
                          WHERE k <> ALL (columns) LIMIT 1))
    END
$$;

-- Stages JSON updates [{"mz_timestamp", "mz_diff", "data"}] for an append
-- (decoupled.append and replica_append).  Every bad input is 22023 naming
-- the update, the collection and, for a value, the column:
--  * each update's shape, times and multiplicity are checked first; |mz_diff|
--    is at most 1,000,000 per update and the |mz_diff| of one append add up
--    to at most 10,000,000: a multiplicity is stored as that many rows, so an
--    absurd one would fill the disk;
--  * a key of "data" that names no column is refused; a missing one is NULL;
--  * values are converted by one bulk INSERT (one subtransaction per append,
--    none per row); only if it fails is each value converted on its own (a
--    subtransaction per value) to name the culprit.
CREATE FUNCTION decoupled._stage_json(lifetime_id bigint, updates jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c_max_diff  constant bigint := 1000000;
    c_max_units constant bigint := 10000000;
    id        bigint := _stage_json.lifetime_id;
    v_name    text;
    v_columns text[];
    v_bad     record;
    v_ok      boolean;
    v_units   numeric;
    v_error   text;
BEGIN
    SELECT o.name, array_agg(c->>'name') INTO v_name, v_columns
      FROM decoupled.catalog_objects o, jsonb_array_elements(o.definition->'columns') c
     WHERE o.lifetime_id = id
     GROUP BY o.name;
    IF updates IS NULL OR jsonb_typeof(updates) <> 'array' THEN
        RAISE EXCEPTION 'updates must be a JSON array of {"mz_timestamp", "mz_diff", "data"} objects'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One cheap pass (the append path is hot): is every update well formed,
    -- and how many rows would they write?  Only if one is not does
    -- _update_problem say which and why.
    SELECT coalesce(bool_and(x.ok), true), coalesce(sum(x.units), 0) INTO v_ok, v_units
      FROM (SELECT CASE WHEN jsonb_typeof(u) <> 'object' THEN false
                        WHEN jsonb_typeof(u->'mz_timestamp') IS DISTINCT FROM 'number' THEN false
                        WHEN jsonb_typeof(u->'mz_diff') IS DISTINCT FROM 'number' THEN false
                        WHEN jsonb_typeof(u->'data') IS DISTINCT FROM 'object' THEN false
                        WHEN u - '{mz_timestamp,mz_diff,data}'::text[] <> '{}' THEN false
                        WHEN (u->'data') - v_columns <> '{}' THEN false
                        ELSE (u->'mz_timestamp')::numeric BETWEEN 0 AND 9223372036854775807
                             AND (u->'mz_timestamp')::numeric = trunc((u->'mz_timestamp')::numeric)
                             AND abs((u->'mz_diff')::numeric) <= c_max_diff
                             AND (u->'mz_diff')::numeric = trunc((u->'mz_diff')::numeric)
                   END AS ok,
                   CASE WHEN jsonb_typeof(u->'mz_diff') = 'number'
                        THEN abs((u->'mz_diff')::numeric) END AS units
              FROM jsonb_array_elements(updates) u) x;
    IF NOT v_ok THEN
        SELECT u.n, decoupled._update_problem(u.v, v_columns, c_max_diff) AS problem INTO v_bad
          FROM jsonb_array_elements(updates) WITH ORDINALITY u(v, n)
         WHERE decoupled._update_problem(u.v, v_columns, c_max_diff) IS NOT NULL
         ORDER BY u.n LIMIT 1;
        RAISE EXCEPTION 'update % of the append to "%" %', v_bad.n, v_name, v_bad.problem
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Updates are {"mz_timestamp": t, "mz_diff": d, "data": {column: value, ...}}.',
                  HINT = format('Columns of "%s": %s.  A multiplicity is stored as that many rows: '
                                'put a count in a column rather than in mz_diff.',
                                v_name, array_to_string(v_columns, ', '));
    END IF;
    IF v_units > c_max_units THEN
        RAISE EXCEPTION 'the append to "%" would write % rows', v_name, v_units
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The multiplicities (|mz_diff|) of one append add up to at most %s.',
                                  c_max_units),
                  HINT = 'Append in smaller steps, or put a count in a column rather than in mz_diff.';
    END IF;
    BEGIN
        EXECUTE format(
            'INSERT INTO %1$s (mz_ts, mz_diff, mz_key, mz_hash, %2$s) '
            'SELECT (u->>''mz_timestamp'')::bigint, (u->>''mz_diff'')::bigint, '
            '       ROW(%3$s)::text, hashtext(ROW(%3$s)::text), %3$s '
            '  FROM jsonb_array_elements($1) u, '
            '       LATERAL jsonb_populate_record(NULL::%4$s, u->''data'') r '
            ' WHERE (u->>''mz_diff'')::bigint <> 0',
            decoupled._storage(id, 'stage'), decoupled._cols(id), decoupled._cols(id, 'r.'),
            decoupled._storage(id, 'cur'))
            USING updates;
    EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
        PERFORM decoupled._diagnose_values(id, v_name, updates);
        -- No value fails on its own (a domain refuses a missing one's NULL).
        GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
        RAISE EXCEPTION 'the updates of the append to "%" do not convert to its columns', v_name
            USING ERRCODE = 'invalid_parameter_value', DETAIL = v_error,
                  HINT = 'A column missing from "data" is NULL.';
    END;
END
$$;

-- The slow path of _stage_json: converts each value of `updates` on its own,
-- with its column's type, and raises 22023 for the first that fails.
CREATE FUNCTION decoupled._diagnose_values(lifetime_id bigint, name text, updates jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_error text;
BEGIN
    FOR r IN SELECT u.n, d.key, d.value, c->>'type' AS type
               FROM jsonb_array_elements(updates) WITH ORDINALITY u(v, n),
                    jsonb_each(u.v->'data') d,
                    decoupled.catalog_objects o,
                    jsonb_array_elements(o.definition->'columns') c
              WHERE o.lifetime_id = _diagnose_values.lifetime_id AND c->>'name' = d.key
              ORDER BY u.n
    LOOP
        BEGIN
            EXECUTE format('SELECT x.%1$I FROM jsonb_to_record($1) AS x(%1$I %2$s)', r.key, r.type)
                USING jsonb_build_object(r.key, r.value);
        EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
            RAISE EXCEPTION 'update % of the append to "%" has an invalid value for column "%": %',
                            r.n, name, r.key, r.value
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = v_error,
                      HINT = format('Column "%s" has type %s.', r.key, r.type);
        END;
    END LOOP;
END
$$;

-- The one compare-and-append core (C2.1), for every writer: the frontier
-- row lock orders racing writers; unless the upper is still expected_upper
-- nothing is appended and the actual upper is returned.  A collection
-- dropped meanwhile appends nothing and returns upper NULL: each caller
-- reports that in its own terms (42704 to a user, ZD002 to a replica).
CREATE FUNCTION decoupled._compare_and_append(lifetime_id bigint, updates jsonb,
                                              expected_upper bigint, new_upper bigint,
                                              OUT appended boolean, OUT upper bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    appended := false;
    SELECT f.upper INTO upper
      FROM decoupled.catalog_frontiers f
      JOIN decoupled.catalog_objects o USING (lifetime_id)
     WHERE f.lifetime_id = _compare_and_append.lifetime_id AND o.dropped_at IS NULL
       FOR UPDATE OF f;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    appended := upper = expected_upper;
    IF NOT appended THEN
        RETURN;
    END IF;
    IF new_upper <= expected_upper THEN
        RAISE EXCEPTION 'new upper must be beyond the expected upper'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Expected upper %s, new upper %s.', expected_upper, new_upper);
    END IF;
    PERFORM decoupled._stage_json(_compare_and_append.lifetime_id, updates);
    PERFORM decoupled._append_staged(_compare_and_append.lifetime_id, expected_upper, new_upper);
    upper := new_upper;
END
$$;

CREATE FUNCTION decoupled.append(collection text, updates jsonb, expected_upper bigint,
                                 new_upper bigint, deployment text DEFAULT NULL,
                                 incarnation bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
-- Row keys are the rows' text: pin every setting that changes it.
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
DECLARE
    o        decoupled.catalog_objects;
    v_result record;
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink, not a collection', o.name USING ERRCODE = 'wrong_object_type';
    END IF;
    IF expected_upper IS NULL OR new_upper IS NULL THEN
        RAISE EXCEPTION 'expected_upper and new_upper must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF new_upper <= expected_upper THEN
        RAISE EXCEPTION 'new upper must be beyond the expected upper'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Expected upper %s, new upper %s.', expected_upper, new_upper);
    END IF;
    IF updates IS NULL OR jsonb_typeof(updates) <> 'array' THEN
        RAISE EXCEPTION 'updates must be a JSON array of {"mz_timestamp", "mz_diff", "data"} objects'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM decoupled._assert_write_authority(deployment, incarnation);

    SELECT * INTO v_result
      FROM decoupled._compare_and_append(o.lifetime_id, updates, expected_upper, new_upper);
    IF v_result.upper IS NULL THEN
        RAISE EXCEPTION '% "%" was dropped', o.kind, o.name USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT v_result.appended THEN
        RAISE EXCEPTION 'append to % "%" lost the race for its interval', o.kind, o.name
            USING ERRCODE = 'serialization_failure',
                  DETAIL = format('Expected upper %s, but the actual upper is %s; nothing was '
                                  'appended.', expected_upper, v_result.upper),
                  HINT = 'Read the upper again and append what is still missing from there.';
    END IF;
    RETURN new_upper;
END
$$;
COMMENT ON FUNCTION decoupled.append(text, jsonb, bigint, bigint, text, bigint) IS
    'Compare-and-append: add updates at times in [expected_upper, new_upper) iff the upper is expected_upper.';

------------------------------------------------------------------------------
-- Registered tables (brief C5.2): captured on write, ticked into their
-- collection.
------------------------------------------------------------------------------

-- Statement-level capture: one INSERT per statement into the pending table;
-- writers never wait for each other here.
CREATE FUNCTION decoupled._capture() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET decoupled.as_of = '' AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE format('INSERT INTO %s SELECT 1, n.* FROM decoupled_new n', TG_ARGV[0]);
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format('INSERT INTO %s SELECT -1, o.* FROM decoupled_old o', TG_ARGV[0]);
    ELSIF TG_OP = 'UPDATE' THEN
        EXECUTE format('INSERT INTO %s SELECT -1, o.* FROM decoupled_old o '
                       'UNION ALL SELECT 1, n.* FROM decoupled_new n', TG_ARGV[0]);
    ELSIF TG_OP = 'TRUNCATE' THEN
        -- TRUNCATE removes every row, including rows committed after an older
        -- snapshot: only a fresh snapshot sees exactly what it removes.
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'cannot truncate registered table "%" at isolation level %',
                            TG_RELID::regclass, current_setting('transaction_isolation')
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Truncate it in a READ COMMITTED transaction, or use DELETE.';
        END IF;
        EXECUTE format('INSERT INTO %s SELECT -1, t.* FROM ONLY %s t',
                       TG_ARGV[0], TG_RELID::regclass);
    END IF;
    RETURN NULL;
END
$$;

-- A relation's columns as stored in a collection's definition: name and
-- type (with a collation other than the type's).
CREATE FUNCTION decoupled._relation_columns(rel regclass) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT jsonb_agg(jsonb_build_object(
               'name', a.attname, 'typid', a.atttypid,
               'type', format_type(a.atttypid, a.atttypmod)
                       || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                               THEN ' COLLATE ' || a.attcollation::regcollation::text
                               ELSE '' END)
               ORDER BY a.attnum)
      FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
     WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
$$;

CREATE FUNCTION decoupled.register_table(tbl regclass, retain_history interval DEFAULT '1 second')
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._register_table(tbl regclass, retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
DECLARE
    v_columns jsonb;
    r         record;
    v_version bigint;
    v_id      bigint;
    v_ts      bigint;
    v_pending text;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM decoupled._check_retention(retain_history);
    -- The snapshot below must see every write committed before capture
    -- starts: only a fresh snapshot per statement does.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'register_table needs a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- Lock the table before reading its shape, and before the catalog
    -- version row (tables first, then the catalog: the order DROP TABLE
    -- takes too).  Writers wait from here to commit.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    SELECT c.relname::text AS relname, c.relkind, c.relpersistence, n.nspname::text AS nspname,
           c.relowner, c.relrowsecurity OR c.relforcerowsecurity AS rls, c.relispartition,
           c.reloftype <> 0 AS typed
      INTO r
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF NOT pg_has_role(decoupled._caller(), r.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table "%" to register it', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF r.relkind = 'p' THEN
        RAISE EXCEPTION 'cannot register partitioned table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Register an ordinary table.';
    ELSIF r.relkind <> 'r' THEN
        RAISE EXCEPTION '"%" is not an ordinary table', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF r.relpersistence <> 'p' THEN
        RAISE EXCEPTION 'cannot register temporary or unlogged table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A collection''s history must survive a crash; use a permanent table.';
    END IF;
    IF r.rls THEN
        RAISE EXCEPTION 'cannot register table "%" because it has row-level security', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history would be read without the table''s policies.';
    END IF;
    IF r.relispartition OR EXISTS (SELECT FROM pg_inherits i
                                    WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
        RAISE EXCEPTION 'cannot register table "%" because it takes part in inheritance', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Writes through a parent or to a child would bypass its capture.';
    END IF;
    IF r.nspname IN ('decoupled', 'decoupled_storage', 'pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'cannot register system table "%"', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = tbl AND attnum > 0 AND attisdropped) THEN
        RAISE EXCEPTION 'cannot register table "%" because it has dropped columns', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Copy it into a new table (CREATE TABLE ... AS) and register the copy.';
    END IF;
    -- ALTER TYPE ... CASCADE would change a typed table's columns.
    IF r.typed THEN
        RAISE EXCEPTION 'cannot register typed table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'ALTER TYPE ... CASCADE would change its shape under its history.',
                  HINT = 'Copy it into a new table (CREATE TABLE ... AS) and register the copy.';
    END IF;

    v_version := decoupled._begin_catalog_change();
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.relation = tbl AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'table "%" is already registered', tbl USING ERRCODE = 'duplicate_object';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.name = r.relname AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a collection named "%" already exists', r.relname
            USING ERRCODE = 'duplicate_object';
    END IF;

    v_columns := decoupled._relation_columns(tbl);
    PERFORM decoupled._check_columns('table', r.relname, v_columns);
    -- Its relation is recorded once the capture triggers exist: the DDL
    -- event trigger refuses trigger changes on a registered table.
    INSERT INTO decoupled.catalog_objects
           (name, kind, definition, retain_history, created_in_version)
    VALUES (r.relname, 'table',
            jsonb_build_object('schema', r.nspname, 'columns', v_columns),
            retain_history, v_version)
    RETURNING lifetime_id INTO v_id;

    PERFORM decoupled._create_storage(v_id);
    v_pending := decoupled._storage(v_id, 'pending');
    EXECUTE format('CREATE TABLE %s (mz_diff bigint NOT NULL, %s)',
                   v_pending, decoupled._cols(v_id, '', true));

    -- Writers are excluded since the LOCK above, so the snapshot below and
    -- the captured changes neither overlap nor leave a gap.
    EXECUTE format('CREATE TRIGGER decoupled_capture_insert AFTER INSERT ON %s '
                   'REFERENCING NEW TABLE AS decoupled_new FOR EACH STATEMENT '
                   'EXECUTE FUNCTION decoupled._capture(%L)', tbl, v_pending);
    EXECUTE format('CREATE TRIGGER decoupled_capture_update AFTER UPDATE ON %s '
                   'REFERENCING OLD TABLE AS decoupled_old NEW TABLE AS decoupled_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION decoupled._capture(%L)', tbl, v_pending);
    EXECUTE format('CREATE TRIGGER decoupled_capture_delete AFTER DELETE ON %s '
                   'REFERENCING OLD TABLE AS decoupled_old FOR EACH STATEMENT '
                   'EXECUTE FUNCTION decoupled._capture(%L)', tbl, v_pending);
    EXECUTE format('CREATE TRIGGER decoupled_capture_truncate BEFORE TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION decoupled._capture(%L)', tbl, v_pending);
    UPDATE decoupled.catalog_objects o SET relation = tbl WHERE o.lifetime_id = v_id;

    v_ts := decoupled._next_timestamp(0);
    EXECUTE format('INSERT INTO %s SELECT nextval(''decoupled.rowid_seq''), $1, '
                   'hashtext(ROW(%s)::text), %s FROM ONLY %s t',
                   decoupled._storage(v_id, 'cur'), decoupled._cols(v_id, 't.'),
                   decoupled._cols(v_id, 't.'), tbl)
        USING v_ts;
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_ts, v_ts + 1);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_ts);
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION decoupled.register_table(regclass, interval) IS
    'Turn a table into a collection: its writes are captured and ticked into history.';

-- Marks a collection (or sink) dropped in the committing transaction,
-- releasing exactly its holds and requirements — the ones it held on its
-- inputs too, whose bounds may then move; storage goes later
-- (finalization).
CREATE FUNCTION decoupled._drop_collection(lifetime_id bigint, catalog_version bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id         bigint := _drop_collection.lifetime_id;
    v_released bigint[];
BEGIN
    UPDATE decoupled.catalog_objects o
       SET dropped_at = now(), dropped_in_version = catalog_version
     WHERE o.lifetime_id = id;
    -- Time never goes back, even once nothing uses this upper any more.
    UPDATE decoupled.catalog_oracle
       SET high_water = greatest(high_water,
                                 (SELECT f.upper FROM decoupled.catalog_frontiers f
                                   WHERE f.lifetime_id = id));
    DELETE FROM decoupled.catalog_holds h WHERE h.lifetime_id = id;
    WITH released AS (
        DELETE FROM decoupled.catalog_requirements q
         WHERE q.lifetime_id = id OR q.required_by = id
        RETURNING q.lifetime_id)
    SELECT array_agg(r.lifetime_id) INTO v_released FROM released r WHERE r.lifetime_id <> id;
    PERFORM decoupled._queue_for_publication(v_released);
    -- Its own entries are left to the publications: they skip dropped
    -- collections, and a delete here would wait for one draining them.
    INSERT INTO decoupled.status_events (lifetime_id, status) VALUES (id, 'dropped');
END
$$;

-- Every live object that requires one of `ids`, directly or through
-- others (views over views), not counting `ids` themselves.
CREATE FUNCTION decoupled._dependents(ids bigint[]) RETURNS bigint[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE deps(id) AS (
        SELECT unnest(ids)
        UNION
        SELECT q.required_by FROM decoupled.catalog_requirements q JOIN deps ON q.lifetime_id = deps.id)
    SELECT coalesce(array_agg(d.id ORDER BY d.id), '{}')
      FROM deps d JOIN decoupled.catalog_objects o ON o.lifetime_id = d.id
     WHERE o.dropped_at IS NULL AND d.id <> ALL (ids)
$$;

CREATE FUNCTION decoupled._refuse_dependents(what text, ids bigint[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_list text;
BEGIN
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id) INTO v_list
      FROM decoupled.catalog_objects o WHERE o.lifetime_id = ANY (decoupled._dependents(ids));
    IF v_list IS NOT NULL THEN
        RAISE EXCEPTION 'cannot drop % because other objects depend on it', what
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'Depending on it: ' || v_list || '.',
                  HINT = 'Use decoupled.drop(name, cascade => true) to drop them too.';
    END IF;
END
$$;

-- Drops one object in the committing transaction: its catalog rows, then
-- what can go at once without waiting for a reader (capture triggers, the
-- written plan, the public view); finalization removes the rest.
CREATE FUNCTION decoupled._drop_object(o decoupled.catalog_objects, catalog_version bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Unregistered first: the event trigger refuses to drop capture
    -- triggers of a registered table.
    PERFORM decoupled._drop_collection(o.lifetime_id, catalog_version);
    IF o.kind = 'table' AND EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation) THEN
        EXECUTE format('DROP TRIGGER decoupled_capture_insert ON %1$s; '
                       'DROP TRIGGER decoupled_capture_update ON %1$s; '
                       'DROP TRIGGER decoupled_capture_delete ON %1$s; '
                       'DROP TRIGGER decoupled_capture_truncate ON %1$s', o.relation::regclass);
    END IF;
    IF o.kind = 'materialized view' THEN
        PERFORM decoupled._unarrange(o.lifetime_id);
        PERFORM decoupled._drop_quietly('VIEW', decoupled._storage(o.lifetime_id, 'plan'));
    END IF;
    PERFORM decoupled._drop_public_view(o);
END
$$;

-- DROP <kind> IF EXISTS <name>, unless a reader holds it or a view still
-- depends on it: then finalization retries (a drop never waits).
CREATE FUNCTION decoupled._drop_quietly(kind text, name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lock text := current_setting('lock_timeout');
BEGIN
    IF to_regclass(name) IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '10ms', true);
    BEGIN
        EXECUTE format('DROP %s IF EXISTS %s', kind, name);
    EXCEPTION WHEN lock_not_available OR dependent_objects_still_exist THEN
        NULL;
    END;
    PERFORM set_config('lock_timeout', v_lock, true);
END
$$;

CREATE FUNCTION decoupled.unregister_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_version bigint;
    o         decoupled.catalog_objects;
BEGIN
    v_version := decoupled._begin_catalog_change();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.relation = tbl AND c.kind = 'table' AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', tbl USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._refuse_dependents(format('table "%s"', o.name), ARRAY[o.lifetime_id]);
    PERFORM decoupled._drop_object(o, v_version);
END
$$;
COMMENT ON FUNCTION decoupled.unregister_table(regclass) IS
    'Stop capturing a table; its collection is dropped and its storage finalized later.';

-- One table's tick at `ts`: its committed captured changes go through the
-- append core (or, with none, only its upper moves) to upper ts + 1.  The
-- caller holds the table's frontier row lock.
CREATE FUNCTION decoupled._tick_table(lifetime_id bigint, upper bigint, ts bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id      bigint := _tick_table.lifetime_id;
    v_moved bigint;
BEGIN
    EXECUTE format(
        'WITH moved AS (DELETE FROM %1$s RETURNING *) '
        'INSERT INTO %2$s (mz_ts, mz_diff, mz_key, mz_hash, %3$s) '
        'SELECT $1, m.mz_diff, ROW(%4$s)::text, hashtext(ROW(%4$s)::text), %4$s FROM moved m',
        decoupled._storage(id, 'pending'), decoupled._storage(id, 'stage'),
        decoupled._cols(id), decoupled._cols(id, 'm.'))
        USING ts;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_moved > 0 THEN
        PERFORM decoupled._append_staged(id, upper, ts + 1);
    ELSE
        UPDATE decoupled.catalog_frontiers f SET upper = ts + 1, changed_at = now()
         WHERE f.lifetime_id = id;
        PERFORM decoupled._queue_for_publication(ARRAY[id]);
        PERFORM decoupled._notify_upper_at_commit();
    END IF;
END
$$;

-- A registered table's health after a tick (see decoupled.table_health):
-- written on a transition only, which is also a row of status history
-- (with no replica).
CREATE FUNCTION decoupled._table_health(lifetime_id bigint, status text, error text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_before text;
BEGIN
    SELECT h.status INTO v_before FROM decoupled.table_health h
     WHERE h.lifetime_id = _table_health.lifetime_id FOR UPDATE;
    INSERT INTO decoupled.table_health AS h (lifetime_id, status, error, hint)
    VALUES (_table_health.lifetime_id, _table_health.status, _table_health.error,
            CASE WHEN _table_health.status = 'stalled'
                 THEN 'Its captured changes stay pending and every tick retries it; '
                      'the other tables keep ticking.' END)
    ON CONFLICT (lifetime_id) DO UPDATE
       SET status = EXCLUDED.status, error = EXCLUDED.error, hint = EXCLUDED.hint,
           updated_at = now(),
           transition_at = CASE WHEN h.status <> EXCLUDED.status THEN now()
                                ELSE h.transition_at END;
    IF v_before IS DISTINCT FROM _table_health.status THEN
        INSERT INTO decoupled.status_events (lifetime_id, status, error)
        VALUES (_table_health.lifetime_id, _table_health.status, _table_health.error);
    END IF;
END
$$;

-- Moves committed captured changes of every registered table into its
-- collection at one new timestamp, and advances every upper (idle tables
-- too).  Each table ticks in a subtransaction of its own: one whose tick
-- fails keeps its pending changes and its upper and shows `stalled` with
-- the error; the others tick.  Returns the number of tables ticked.
CREATE FUNCTION decoupled.tick_tables() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
DECLARE
    v_ids     bigint[];
    v_stalled bigint[];
    v_ts      bigint;
    v_count   integer := 0;
    v_message text;
    v_detail  text;
    r         record;
BEGIN
    -- Lock every live table's frontier in one fixed order.
    SELECT decoupled._next_timestamp(max(f.upper)), array_agg(f.lifetime_id) INTO v_ts, v_ids
      FROM (SELECT f.lifetime_id, f.upper FROM decoupled.catalog_frontiers f
              JOIN decoupled.catalog_objects o USING (lifetime_id)
             WHERE o.kind = 'table' AND o.dropped_at IS NULL
             ORDER BY f.lifetime_id FOR UPDATE OF f) f;
    IF v_ts IS NULL THEN
        RETURN 0;
    END IF;
    SELECT coalesce(array_agg(h.lifetime_id), '{}') INTO v_stalled
      FROM decoupled.table_health h WHERE h.status = 'stalled';
    -- Exactly the tables locked above: one registered since is not ours.
    FOR r IN SELECT f.lifetime_id, f.upper, o.name FROM decoupled.catalog_frontiers f
               JOIN decoupled.catalog_objects o USING (lifetime_id)
              WHERE f.lifetime_id = ANY (v_ids) ORDER BY f.lifetime_id
    LOOP
        BEGIN
            PERFORM decoupled._tick_table(r.lifetime_id, r.upper, v_ts);
            IF r.lifetime_id = ANY (v_stalled) THEN
                PERFORM decoupled._table_health(r.lifetime_id, 'running', NULL);
            END IF;
            v_count := v_count + 1;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
            v_message := v_message || CASE WHEN v_detail <> '' THEN ' (' || v_detail || ')'
                                           ELSE '' END;
            IF r.lifetime_id <> ALL (v_stalled) THEN
                RAISE WARNING 'registered table "%" stalled: %', r.name, v_message
                    USING HINT = 'Its captured changes stay pending and every tick retries it.';
            END IF;
            PERFORM decoupled._table_health(r.lifetime_id, 'stalled', v_message);
        END;
    END LOOP;
    RETURN v_count;
END
$$;
COMMENT ON FUNCTION decoupled.tick_tables() IS
    'Move committed captured changes into every registered table''s collection at a new timestamp.';

------------------------------------------------------------------------------
-- PostgreSQL's own DDL on the extension's relations: a registered table, a
-- sink's table, the public view of a source or materialized view (each
-- object's `relation`) and a view's written plan.  A statement either goes
-- through the catalog (a DROP drops the object, with the catalog's
-- dependency rules) or is refused: none leaves the catalog and the
-- relations disagreeing.  The extension's own DDL records an object's
-- `relation` only once it created what it needs, so it is never refused
-- here; a dropped object is not live, so its removal is not either.
-- extension/ddl_guard.cpp adds what only a ProcessUtility hook can see.
------------------------------------------------------------------------------

-- Whether the innermost DROP (or DROP OWNED) statement running cascades;
-- NULL while the innermost utility statement is something else.
CREATE FUNCTION decoupled._drop_cascades() RETURNS boolean
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_drop_cascades';

-- The live object `rel` belongs to: the one whose relation it is, or the
-- materialized view whose written plan it is.  All NULL for anything else.
CREATE FUNCTION decoupled._object_of_relation(rel oid) RETURNS decoupled.catalog_objects
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT o.* FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL
       AND (o.relation = rel
            OR (o.kind = 'materialized view' AND (o.definition->>'plan')::oid = rel))
     ORDER BY o.lifetime_id LIMIT 1
$$;

-- `roots` with the subsources of the sources among them.  A subsource goes
-- only with its source, as decoupled.drop() says.
CREATE FUNCTION decoupled._with_subsources(roots bigint[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sub record;
BEGIN
    SELECT s.name, p.name AS source INTO v_sub
      FROM decoupled.catalog_objects s
      JOIN decoupled.catalog_objects p ON p.lifetime_id = (s.definition->>'parent')::bigint
     WHERE s.lifetime_id = ANY (roots) AND p.lifetime_id <> ALL (roots)
     ORDER BY s.lifetime_id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop subsource "%"', v_sub.name
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = format('Drop its source "%s" instead: decoupled.drop(%L), or DROP VIEW '
                                'of its relation.', v_sub.source, v_sub.source);
    END IF;
    RETURN roots || ARRAY(SELECT s.lifetime_id FROM decoupled.catalog_objects s
                           WHERE s.dropped_at IS NULL
                             AND (s.definition->>'parent')::bigint = ANY (roots)
                             AND s.lifetime_id <> ALL (roots)
                           ORDER BY s.lifetime_id);
END
$$;

-- Before DROP TABLE / VIEW ... without CASCADE of `rels` (ddl_guard.cpp):
-- the relation of a live object with catalog dependents is refused with
-- the catalog's own error, which names them (PostgreSQL's names a private
-- written plan, or nothing for a sink).
CREATE FUNCTION decoupled._refuse_relation_drop(rels oid[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_roots bigint[];
    v_what  text;
BEGIN
    SELECT array_agg(o.lifetime_id ORDER BY o.lifetime_id),
           string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id)
      INTO v_roots, v_what
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND o.relation = ANY (rels);
    IF v_roots IS NOT NULL THEN
        PERFORM decoupled._refuse_dependents(v_what, decoupled._with_subsources(v_roots));
    END IF;
END
$$;

-- Before ALTER TYPE ... RENAME VALUE of an enum, or ALTER TYPE ... ADD /
-- DROP / ALTER ATTRIBUTE of a composite type (ddl_guard.cpp): history
-- matches rows by their text, so a type a live collection or sink uses
-- (through domains, arrays, composites) keeps its text output.
CREATE FUNCTION decoupled._refuse_type_change(typ oid, change text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_users text;
BEGIN
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id)
      INTO v_users
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND o.definition ? 'columns'
       AND typ IN (SELECT decoupled._column_types(o.definition->'columns'));
    IF v_users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot % type % while collections or sinks use it', change, typ::regtype
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Used by: ' || v_users || '.  Their history matches rows by their '
                           'text: rows written before the change could no longer be retracted.',
                  HINT = CASE WHEN change = 'rename a value of'
                              THEN 'Add a value with ALTER TYPE ... ADD VALUE instead, or first '
                              ELSE 'Create a new type instead, or first ' END
                         || 'drop what uses the type (decoupled.drop(), '
                            'decoupled.unregister_table()).';
    END IF;
END
$$;

-- Whatever a statement drops that the catalog knows goes through the
-- catalog in the same transaction: a registered table, a sink's table, the
-- public view of a source or materialized view, or a written plan (a
-- cascade reached it) drops its object; what is built on it goes too if
-- the statement cascades, else the statement is refused.
CREATE FUNCTION decoupled._on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_roots   bigint[];
    v_plans   boolean;
    v_what    text;
    v_cascade boolean;
    v_victim  decoupled.catalog_objects;
    v_version bigint;
    v_column  record;
BEGIN
    IF to_regclass('decoupled.catalog_objects') IS NULL THEN
        RETURN;  -- the extension itself is being dropped
    END IF;
    -- Capture triggers go only with their registration (or their table).
    IF EXISTS (SELECT FROM pg_event_trigger_dropped_objects() d
                WHERE d.object_type = 'trigger' AND d.address_names[3] LIKE 'decoupled_capture_%'
                  AND EXISTS (SELECT FROM decoupled.catalog_objects o
                               WHERE o.kind = 'table' AND o.dropped_at IS NULL
                                 AND o.relation = to_regclass(format('%I.%I', d.address_names[1],
                                                                     d.address_names[2])))) THEN
        RAISE EXCEPTION 'cannot drop the capture triggers of a registered table'
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Unregister it with decoupled.unregister_table() instead.';
    END IF;
    -- A registered table's and a sink's table's shape is fixed (DROP TYPE
    -- ... CASCADE would take a column away).
    SELECT o.kind, o.name, d.address_names[3] AS col INTO v_column
      FROM pg_event_trigger_dropped_objects() d
      JOIN decoupled.catalog_objects o
        ON o.dropped_at IS NULL AND o.kind IN ('table', 'sink') AND o.relation = d.objid
     WHERE d.classid = 'pg_class'::regclass AND d.objsubid <> 0
       AND NOT EXISTS (SELECT FROM pg_event_trigger_dropped_objects() w
                        WHERE w.classid = d.classid AND w.objid = d.objid AND w.objsubid = 0)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop column "%" of % "%"', v_column.col, v_column.kind,
                        v_column.name
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history and its output are kept in its shape.',
                  HINT = 'Drop it with decoupled.drop() first.';
    END IF;
    -- Probed, then read again under the catalog lock, so that no object
    -- created meanwhile on top of them is missed.
    FOR attempt IN 1 .. 2 LOOP
        SELECT array_agg(DISTINCT o.lifetime_id), bool_or(o.relation IS DISTINCT FROM d.objid)
          INTO v_roots, v_plans
          FROM pg_event_trigger_dropped_objects() d
          JOIN decoupled.catalog_objects o
            ON o.dropped_at IS NULL
           AND (o.relation = d.objid
                OR (o.kind = 'materialized view' AND (o.definition->>'plan')::oid = d.objid))
         WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0;
        IF v_roots IS NULL THEN
            RETURN;
        END IF;
        EXIT WHEN v_version IS NOT NULL;
        v_version := decoupled._begin_catalog_change();
    END LOOP;
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id) INTO v_what
      FROM decoupled.catalog_objects o WHERE o.lifetime_id = ANY (v_roots);
    v_roots := decoupled._with_subsources(v_roots);
    -- PostgreSQL cascaded only through relations.  A statement that is no
    -- DROP cascaded if it took a written plan away.
    v_cascade := coalesce(decoupled._drop_cascades(), v_plans);
    IF NOT v_cascade THEN
        PERFORM decoupled._refuse_dependents(v_what, v_roots);
    END IF;
    FOR v_victim IN SELECT * FROM decoupled.catalog_objects o
                     WHERE o.lifetime_id = ANY (v_roots || decoupled._dependents(v_roots))
                     ORDER BY o.lifetime_id DESC
    LOOP
        PERFORM decoupled._drop_object(v_victim, v_version);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER decoupled_sql_drop ON sql_drop EXECUTE FUNCTION decoupled._on_sql_drop();

-- A trigger created, replaced or renamed on an object's relation.  A
-- registered table's owner keeps adding triggers of their own (they see
-- what capture sees), but its capture triggers stay as registration made
-- them; no trigger may run inside a replica writing a sink or on a public
-- view.
CREATE FUNCTION decoupled._check_trigger(trigger_oid oid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t record;
    o decoupled.catalog_objects;
BEGIN
    SELECT g.tgname, g.tgrelid, g.tgfoid = 'decoupled._capture'::regproc AS capture INTO t
      FROM pg_trigger g WHERE g.oid = trigger_oid;
    o := decoupled._object_of_relation(t.tgrelid);
    IF o.lifetime_id IS NULL THEN
        RETURN;
    END IF;
    IF o.kind = 'table' THEN
        IF t.capture OR t.tgname LIKE 'decoupled\_capture\_%' THEN
            RAISE EXCEPTION 'cannot create, replace or rename a capture trigger of registered '
                            'table "%"', t.tgrelid::regclass
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Its writes would no longer reach its history.',
                      HINT = 'Unregister it with decoupled.unregister_table() first.';
        END IF;
        RETURN;
    END IF;
    RAISE EXCEPTION 'cannot create triggers on the relation of % "%"', o.kind, o.name
        USING ERRCODE = 'feature_not_supported',
              HINT = format('It belongs to the extension while the %s lives.', o.kind);
END
$$;

-- ALTER, RENAME, SET SCHEMA, OWNER TO, CREATE OR REPLACE VIEW and CREATE
-- RULE on an object's relation.  A registered table's shape is fixed: its
-- history is stored in that shape (a rule on it changes nothing capture
-- sees).  The relations of sources, views and sinks belong to the
-- extension while they live; GRANT, REVOKE and COMMENT ON stay allowed.
CREATE FUNCTION decoupled._check_relation_ddl(rel oid, command_tag text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o decoupled.catalog_objects := decoupled._object_of_relation(rel);
BEGIN
    IF o.lifetime_id IS NULL OR (o.kind = 'table' AND command_tag = 'CREATE RULE') THEN
        RETURN;
    ELSIF o.kind = 'table' THEN
        RAISE EXCEPTION 'cannot alter registered table "%"', rel::regclass
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Unregister it with decoupled.unregister_table() first.';
    ELSIF o.relation IS DISTINCT FROM rel THEN
        RAISE EXCEPTION 'cannot change the written plan of materialized view "%"', o.name
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Drop the view with decoupled.drop() and create it anew.';
    END IF;
    RAISE EXCEPTION 'cannot change the relation of % "%"', o.kind, o.name
        USING ERRCODE = 'feature_not_supported',
              DETAIL = format('%s is refused: the relation belongs to the extension while the '
                              '%s lives.', command_tag, o.kind),
              HINT = format('GRANT, REVOKE and COMMENT ON work on it; to change it otherwise, '
                            'drop the %s with decoupled.drop() and create it anew.', o.kind);
END
$$;

-- No registered table (nor a sink's table) takes part in inheritance or
-- partitioning on either side: writes through a parent or to a child
-- would bypass capture, and a child's rows would show in its reads.
CREATE FUNCTION decoupled._check_inheritance() RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v record;
BEGIN
    SELECT i.inhrelid::regclass AS child, i.inhparent::regclass AS parent,
           o.relation = i.inhparent AS is_parent, o.kind,
           CASE WHEN o.kind = 'table' THEN format('registered table "%s"', o.relation::regclass)
                ELSE format('the table of sink "%s"', o.name) END AS what
      INTO v
      FROM pg_inherits i
      JOIN decoupled.catalog_objects o
        ON o.dropped_at IS NULL AND o.kind IN ('table', 'sink')
       AND o.relation IN (i.inhrelid, i.inhparent)
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    ELSIF v.is_parent THEN
        RAISE EXCEPTION 'cannot inherit from %', v.what
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = CASE WHEN v.kind = 'table'
                                THEN 'Writes to a child would bypass its capture.'
                                ELSE 'A child''s rows would show in its output.' END;
    END IF;
    RAISE EXCEPTION '% cannot become a partition or an inheritance child of "%"', v.what, v.parent
        USING ERRCODE = 'feature_not_supported',
              DETAIL = CASE WHEN v.kind = 'table'
                            THEN 'Writes through the parent would bypass its capture.'
                            ELSE 'It belongs to the extension while the sink lives.' END,
              HINT = CASE WHEN v.kind = 'table'
                          THEN 'Unregister it with decoupled.unregister_table() first.'
                          ELSE 'Drop the sink with decoupled.drop() first.' END;
END
$$;

CREATE FUNCTION decoupled._on_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
BEGIN
    IF to_regclass('decoupled.catalog_objects') IS NULL THEN
        RETURN;
    END IF;
    FOR r IN SELECT c.classid, c.objid, c.command_tag FROM pg_event_trigger_ddl_commands() c LOOP
        IF r.classid = 'pg_trigger'::regclass THEN
            PERFORM decoupled._check_trigger(r.objid);
        ELSIF r.classid = 'pg_rewrite'::regclass THEN
            PERFORM decoupled._check_relation_ddl(w.ev_class, r.command_tag)
               FROM pg_rewrite w WHERE w.oid = r.objid;
        ELSIF r.classid = 'pg_class'::regclass THEN
            PERFORM decoupled._check_relation_ddl(r.objid, r.command_tag);
        END IF;
    END LOOP;
    PERFORM decoupled._check_inheritance();
END
$$;
CREATE EVENT TRIGGER decoupled_ddl_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE',
                 'CREATE VIEW', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'CREATE RULE',
                 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION decoupled._on_ddl_end();

CREATE FUNCTION decoupled._hand_over_sink_table(o decoupled.catalog_objects) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation)
       AND EXISTS (SELECT FROM pg_roles r WHERE r.oid = (o.definition->>'owner')::oid) THEN
        EXECUTE format('ALTER TABLE %s OWNER TO %s', o.relation::regclass,
                       (o.definition->>'owner')::oid::regrole);
    END IF;
END
$$;

-- Removes the storage of dropped collections nobody reads any more.  A
-- collection still in use is skipped until a later round: a drop never
-- waits for readers (brief C2.6).  Idempotent; returns how many it removed.
CREATE FUNCTION decoupled.finalize_dropped() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id    bigint;
    v_count integer := 0;
    v_lock   text := current_setting('lock_timeout');
    v_tables text;
BEGIN
    PERFORM set_config('lock_timeout', '50ms', true);
    -- Written plans first: they read the storage of other collections.
    PERFORM decoupled._drop_quietly('VIEW', decoupled._storage(o.lifetime_id, 'plan'))
       FROM decoupled.catalog_objects o
      WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
        AND o.kind = 'materialized view';
    FOR v_id IN SELECT o.lifetime_id FROM decoupled.catalog_objects o
                 WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
                 ORDER BY o.lifetime_id DESC
    LOOP
        -- Its frontier row before its storage (the global lock order), and
        -- without waiting: a writer that locked it before the drop committed
        -- may still be at work; this collection waits for a later round.
        PERFORM FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id
            FOR UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT FROM decoupled.catalog_frontiers f
                                  WHERE f.lifetime_id = v_id) THEN
            CONTINUE;
        END IF;
        BEGIN
            PERFORM decoupled._drop_public_view(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['plan', 'delta', 'before', 'history']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            IF v_tables IS NOT NULL THEN
                EXECUTE 'DROP VIEW ' || v_tables;
            END IF;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['state', 'dstate', 'cur', 'dead', 'stage', 'pending']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            IF v_tables IS NOT NULL THEN
                EXECUTE 'DROP TABLE ' || v_tables;
            END IF;
            -- A sink's table is its creator's data: hand it over.
            PERFORM decoupled._hand_over_sink_table(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id AND o.kind = 'sink';
            DELETE FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id;
            DELETE FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_id;
            UPDATE decoupled.catalog_objects o SET finalized_at = now() WHERE o.lifetime_id = v_id;
            v_count := v_count + 1;
        EXCEPTION
            WHEN lock_not_available THEN
                NULL;  -- a reader still has it open: next round
            WHEN dependent_objects_still_exist THEN
                RAISE NOTICE 'storage of dropped collection % is still used by a view', v_id
                    USING HINT = 'Drop the views that read it; finalization retries.';
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', v_lock, true);
    RETURN v_count;
END
$$;
