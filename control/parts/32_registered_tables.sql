------------------------------------------------------------------------------
-- Collections, part 3: registered tables (brief C5.2)
--
-- Captured on write, ticked into their collection: the statement-level
-- capture trigger, register_table / unregister_table, the tick of all of
-- them (tick_tables, C in extension/append_core.cpp: the one path from
-- c<id>_pending into history, whoever fills pending), and a table's health.
-- Dropping goes through 33_drops.sql like any object's.
------------------------------------------------------------------------------

-- The rows of a registered table (ordinary, read ONLY) into its
-- collection's pending changes with mz_diff `diff`, or into its cur at
-- `ts`; returns how many.  Read by a scan of its heap, never by a query:
-- planning a query over the table runs its owner's code (the constant
-- calls of its index and statistics expressions, folded by the planner),
-- and the callers read with the extension's rights
-- (extension/table_contents.cpp).
CREATE FUNCTION decoupled._take_table_rows(id bigint, source oid, diff bigint,
                                           ts bigint DEFAULT NULL) RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_take_table_rows';

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
        -- Read by a scan (_take_table_rows): this function runs with the
        -- extension's rights.  Its argument is pending's name, c<id>_pending.
        PERFORM decoupled._take_table_rows(
                    substring(TG_ARGV[0] FROM '\.c([0-9]+)_pending$')::bigint, TG_RELID, -1);
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

-- The columns of `rel`'s primary key, in the table's column order, when
-- capture can locate retractions by them (brief C14.2): every key column
-- of a built-in type, so that the capture worker's lookup of an old row by
-- key runs only PostgreSQL's own input functions and operators, and the
-- key checked at once (a deferrable one lets a transaction hold two rows
-- with one key for a while, and "the row with this key" would be
-- ambiguous).  NULL otherwise: the table then needs REPLICA IDENTITY FULL.
CREATE FUNCTION decoupled._capture_key(rel regclass) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT jsonb_agg(a.attname ORDER BY a.attnum)
      FROM pg_index x JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY (x.indkey)
     WHERE x.indrelid = rel AND x.indisprimary AND x.indimmediate
    HAVING bool_and(a.atttypid < 16384) AND count(*) > 0
$$;

CREATE FUNCTION decoupled.register_table(tbl regclass, retain_history interval DEFAULT '1 second')
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._register_table(tbl regclass, retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
-- Its copy of the table reads the table, not its history, whatever the
-- caller's decoupled.as_of.
SET decoupled.as_of = ''
AS $$
DECLARE
    v_columns jsonb;
    r         record;
    v_version bigint;
    v_id      bigint;
    v_ts      bigint;
    v_pending text;
    v_identity text;
    v_key     jsonb;
    v_wanted  text;
    v_stale   text[];
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
    -- A regclass made from a number names no relation when none has it.
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
            USING ERRCODE = 'undefined_table';
    END IF;
    -- Lock the table before reading its shape, and before the catalog
    -- version row (tables first, then the catalog: the order DROP TABLE
    -- takes too).  Writers wait from here to commit.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    -- (Dropped between the two.)
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
            USING ERRCODE = 'undefined_table';
    END IF;
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
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = tbl AND attnum > 0) THEN
        RAISE EXCEPTION 'cannot register table "%" because it has no columns', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'History keeps rows by their columns.';
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
    PERFORM decoupled._assert_column_types(v_pending::regclass, v_id);

    -- Writers are excluded since the LOCK above, so the snapshot below and
    -- the captured changes neither overlap nor leave a gap.  Capture starts
    -- with triggers; where capture is from the WAL, the capture worker
    -- adopts the table soon after (34_wal_capture.sql).
    PERFORM decoupled._create_capture_triggers(tbl, v_pending);
    -- What WAL capture retracts for an update or a delete (C14.2): with a
    -- primary key, the row its old key names (REPLICA IDENTITY DEFAULT: the
    -- WAL carries the key; the capture worker finds the row in storage,
    -- through an index on the key of cur, and of pending while the table is
    -- captured from the WAL, _index_pending_key); without one, the
    -- old row itself (REPLICA IDENTITY FULL: the whole row is in the WAL).
    -- Unregistering gives the table its own identity back.
    v_key := decoupled._capture_key(tbl);
    IF v_key IS NOT NULL THEN
        EXECUTE format('CREATE INDEX ON %s (%s)', decoupled._storage(v_id, 'cur'),
                       (SELECT string_agg(quote_ident(k), ', ') FROM jsonb_array_elements_text(v_key) k));
        -- Ticks find a retracted row's copies through the key as well
        -- (append_core.cpp), so cur needs no index on the row hash: with
        -- random hashes, every row inserted into it landed on another leaf
        -- page, 40% of what writing a tick's inserted rows cost.
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_hash_idx');
        UPDATE decoupled.catalog_objects o
           SET definition = o.definition || jsonb_build_object('key', v_key)
         WHERE o.lifetime_id = v_id;
    END IF;
    SELECT CASE c.relreplident WHEN 'd' THEN 'DEFAULT' WHEN 'n' THEN 'NOTHING'
                WHEN 'f' THEN 'FULL'
                ELSE (SELECT format('USING INDEX %I', i.relname)
                        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                       WHERE x.indrelid = tbl AND x.indisreplident) END
      INTO v_identity FROM pg_class c WHERE c.oid = tbl;
    v_wanted := CASE WHEN v_key IS NULL THEN 'FULL' ELSE 'DEFAULT' END;
    IF v_identity IS DISTINCT FROM v_wanted THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', tbl, v_wanted);
        UPDATE decoupled.catalog_objects o
           SET definition = o.definition || jsonb_build_object('replica_identity', v_identity)
         WHERE o.lifetime_id = v_id;
    END IF;
    UPDATE decoupled.catalog_objects o SET relation = tbl WHERE o.lifetime_id = v_id;

    v_ts := decoupled._next_timestamp(0);
    PERFORM decoupled._take_table_rows(v_id, tbl, 1, v_ts);
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_ts, v_ts + 1);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_ts);
    IF current_setting('decoupled.capture') = 'wal'
       AND current_setting('wal_level') <> 'logical' THEN
        RAISE NOTICE 'table "%" is captured by triggers, in its writers'' transactions', tbl
            USING HINT = 'Set wal_level = logical and restart the server: its writes are then '
                         'captured from the WAL, at no cost to its writers.';
    ELSIF current_setting('decoupled.capture') = 'trigger' THEN
        RAISE NOTICE 'table "%" is captured by triggers, in its writers'' transactions', tbl
            USING HINT = CASE WHEN current_setting('wal_level') = 'logical'
                              THEN 'Set decoupled.capture = ''wal'' and reload the '
                                   'configuration: its writes are then captured from the WAL, '
                                   'at no cost to its writers.'
                              ELSE 'Set wal_level = logical and decoupled.capture = ''wal'' and '
                                   'restart the server: its writes are then captured from the '
                                   'WAL, at no cost to its writers.' END;
    END IF;
    v_stale := decoupled._readers_without_history(tbl);
    IF v_stale IS NOT NULL THEN
        RAISE WARNING '% made before table "%" was registered read its latest state, whatever '
                      'decoupled.as_of says',
                      CASE WHEN cardinality(v_stale) = 1 THEN 'one view or function'
                           ELSE cardinality(v_stale) || ' views or functions' END, tbl
            USING DETAIL = array_to_string(v_stale, ', ') || '.',
                  HINT = 'Create them again (CREATE OR REPLACE with the same definition) to '
                         'read its history; so do materialized views built on them.';
    END IF;
    RETURN v_id;
END
$$;

-- The views, rules and SQL-body functions that read `tbl` as parsed
-- before it was registered: the read rewrite applies at parse analysis,
-- so what was stored before reads the table itself, whatever
-- decoupled.as_of says (one parsed after depends on its history view).
CREATE FUNCTION decoupled._readers_without_history(tbl regclass) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT array_agg(x.what ORDER BY x.what)
      FROM (SELECT DISTINCT
                   CASE WHEN d.classid = 'pg_proc'::regclass
                        THEN format('function %s', d.objid::regprocedure)
                        WHEN c.relkind = 'v' THEN format('view %s', c.oid::regclass)
                        ELSE format('rule %I on %s', r.rulename, c.oid::regclass) END AS what,
                   d.classid, d.objid
              FROM pg_depend d
              LEFT JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
              LEFT JOIN pg_class c ON c.oid = r.ev_class
             WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = tbl
               AND (d.classid = 'pg_proc'::regclass
                    OR (d.classid = 'pg_rewrite'::regclass AND r.ev_class <> tbl
                        AND c.relkind <> 'm'))) x
     WHERE NOT EXISTS (
           SELECT FROM pg_depend h
            WHERE h.classid = x.classid AND h.objid = x.objid
              AND h.refclassid = 'pg_class'::regclass
              AND h.refobjid = (SELECT to_regclass(decoupled._storage(o.lifetime_id, 'history'))
                                  FROM decoupled.catalog_objects o
                                 WHERE o.relation = tbl AND o.kind = 'table'
                                   AND o.dropped_at IS NULL))
$$;
COMMENT ON FUNCTION decoupled.register_table(regclass, interval) IS
    'Turn a table into a collection: its writes are captured and ticked into history.';

-- Unregistering drops the table's history and gives it back its replica
-- identity: like registering, only for whoever owns the table (an admin
-- who does not may drop views and sources, not other roles' tables'
-- history).
CREATE FUNCTION decoupled._check_table_owner(tbl regclass, verb text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- A relation gone (its DROP unregisters it first, so hardly ever) has
    -- no owner left to ask: whoever may call this may clean up after it.
    IF NOT coalesce(pg_has_role(decoupled._caller(),
                                (SELECT c.relowner FROM pg_class c WHERE c.oid = tbl), 'USAGE'),
                    true) THEN
        RAISE EXCEPTION 'must be owner of table "%" to %', tbl, verb
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

CREATE FUNCTION decoupled.unregister_table(tbl regclass) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._unregister_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_version bigint;
    o         decoupled.catalog_objects;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_version := decoupled._begin_catalog_change();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.relation = tbl AND c.kind = 'table' AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', tbl USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._check_table_owner(tbl, 'unregister it');
    PERFORM decoupled._refuse_dependents(format('table "%s"', o.name), ARRAY[o.lifetime_id],
                                         'unregister');
    PERFORM decoupled._refuse_foreign_dependents(format('table "%s"', o.name),
                                                 ARRAY[o.lifetime_id], 'unregister');
    PERFORM decoupled._drop_object(o, v_version);
END
$$;
COMMENT ON FUNCTION decoupled.unregister_table(regclass) IS
    'Stop capturing a table; its collection is dropped and its storage finalized later.';

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
-- too).  Locks every live table's frontier in id order, takes one timestamp
-- and one snapshot for all of them, and moves exactly the pending rows that
-- snapshot sees (so a transaction that wrote several tables lands in one
-- tick for all).  A table with no such row is idle: one statement advances
-- the uppers of all idle and ticked tables.  Each busy table ticks in a
-- subtransaction of its own: one whose tick fails keeps its pending changes
-- and its upper and shows `stalled` with the error (a WARNING the first
-- time, with the error only for a caller who may read the table: an error
-- may quote its rows); the others tick.  Returns the number of tables
-- ticked.  An entry point (extension/caller.cpp): the implementation knows
-- its caller.
CREATE FUNCTION decoupled.tick_tables() RETURNS integer
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._tick_tables() RETURNS integer
LANGUAGE C SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_tick_tables';
COMMENT ON FUNCTION decoupled.tick_tables() IS
    'Move committed captured changes into every registered table''s collection at a new timestamp.';
