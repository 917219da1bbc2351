------------------------------------------------------------------------------
-- Collections, part 2: appends, the one write path (brief C2.1)
--
-- Write authority, the append core (_append_staged: consolidate the staged
-- updates, insert, retract oldest first, advance the upper), checking JSON
-- updates, and compare-and-append (_compare_and_append, for every writer,
-- and its public form decoupled.append()).  Replicas append through
-- replica_append (50_replicas.sql), registered tables through their ticks
-- (32_registered_tables.sql), materialized views through their steps
-- (60_materialized_views.sql).
--
-- The core and compare-and-append are C (extension/append_core.cpp): their
-- statements name each collection's own storage, and kept plans per
-- collection and statement kind spare planning them again on every call.
-- What stays here is static SQL, whose plans PL/pgSQL keeps itself, and
-- the slow paths that only run to explain a refusal.
------------------------------------------------------------------------------

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
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot append on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  HINT = 'Append on the primary; the standby receives its history.';
    END IF;
    SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
     WHERE d.name = v_deployment FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'deployment "%" does not exist', v_deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_state = 'retired' AND _assert_write_authority.incarnation IS NOT NULL THEN
        -- Promotion retired it: its processes are fenced for good.
        RAISE EXCEPTION 'deployment "%" was retired', v_deployment
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'Another deployment was promoted; a retired deployment never '
                           'writes again.';
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
-- The append core.  The caller holds the collection's frontier row lock,
-- has checked upper = expected_upper < new_upper, and staged the updates in
-- the scratch c<id>_stage (in memory: extension/scratch.hpp).  Consolidates them per (time, row), inserts positive
-- multiplicities and retracts negative ones oldest first (the k-th
-- retraction of a row pairs with its k-th oldest copy present before the
-- retraction's time, found through the row hash index), empties the stage,
-- then advances the upper and queues the collection for bound publication.
-- Any violation (a time outside [expected_upper, new_upper): 22023; a
-- retraction with no copy to pair: 22023) aborts the transaction: a failed
-- append changes nothing.
------------------------------------------------------------------------------

-- work_mem: consolidating a large append sorts what it stages once; that
-- sort (and the hash join that finds many retracted rows) should not spill.
CREATE FUNCTION decoupled._append_staged(lifetime_id bigint, expected_upper bigint,
                                         new_upper bigint) RETURNS void
LANGUAGE C SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_append_staged';

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

-- The slow path of staging JSON updates (extension/append_core.cpp): when
-- the bulk conversion failed, converts each value of `updates` on its own,
-- with its column's type, and raises 22023 for the first that fails.
-- `types` is {column: type} as _column_type writes them (by OID).  It reads
-- no catalog and has no rights of its own: the caller runs it as the
-- collection's owner where a column reaches a domain (a domain's check is
-- its author's code), so every role may execute it.
CREATE FUNCTION decoupled._diagnose_values(types jsonb, name text, updates jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_error text;
BEGIN
    FOR r IN SELECT u.n, d.key, d.value, types->>d.key AS type
               FROM jsonb_array_elements(updates) WITH ORDINALITY u(v, n),
                    jsonb_each(u.v->'data') d
              WHERE types ? d.key
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
--
-- Staging JSON updates [{"mz_timestamp", "mz_diff", "data"}]: a
-- multiplicity is stored as that many rows, so what one caller may write is
-- bounded.  Every bad input is 22023 naming the update, the collection and,
-- for a value, the column:
--  * each update's shape, times and multiplicity are checked first
--    (_update_problem says what is wrong); |mz_diff| is at most 1,000,000
--    per update and the |mz_diff| of one append add up to at most
--    10,000,000;
--  * a key of "data" that names no column is refused; a missing one is NULL;
--  * values are converted by one bulk INSERT (one subtransaction per
--    append, none per row); only if it fails is each value converted on its
--    own (_diagnose_values) to name the culprit.
-- Updates that only insert go straight into c<id>_cur; others are staged
-- and go through the append core.
CREATE FUNCTION decoupled._compare_and_append(lifetime_id bigint, updates jsonb,
                                              expected_upper bigint, new_upper bigint,
                                              OUT appended boolean, OUT upper bigint)
LANGUAGE C SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_compare_and_append';

-- After an append to a registered table with a primary key: no row it
-- inserted may lack a key, and no key it inserted may name two current
-- rows.  Captured updates and deletes retract
-- a row by its key alone, and a key with two current rows would stop the
-- table's ticks for good; the caller's error undoes the append.  The rows
-- the append inserted are those of cur at or after `expected_upper`: read
-- there, as the append core converted them, the caller's values are never
-- converted again with the extension's rights.
CREATE FUNCTION decoupled._refuse_duplicate_key(o decoupled.catalog_objects, expected_upper bigint)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_names text;
    v_c     text;
    v_n     text;
    v_null  text;
    v_p     text;
    v_dup   text;
    v_cur   text := decoupled._storage(o.lifetime_id, 'cur');
BEGIN
    SELECT string_agg(format('%I', k), ', ' ORDER BY n), string_agg(format('c.%I', k), ', ' ORDER BY n),
           string_agg(format('n.%I', k), ', ' ORDER BY n),
           string_agg(format('n.%I IS NULL', k), ' OR ' ORDER BY n),
           string_agg(format('p.%I', k), ', ' ORDER BY n)
      INTO v_names, v_c, v_n, v_null, v_p
      FROM jsonb_array_elements_text(o.definition->'key') WITH ORDINALITY AS x(k, n);
    EXECUTE format('SELECT ROW(%1$s)::text FROM %2$s n WHERE n.mz_ts >= $1 AND (%3$s) LIMIT 1',
                   v_n, v_cur, v_null)
       INTO v_dup USING expected_upper;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'append would give registered table "%" a row without a key', o.name
            USING ERRCODE = 'not_null_violation',
                  DETAIL = format('Its primary key (%s) is %s; nothing was appended.', v_names, v_dup);
    END IF;
    -- Current rows, and the changes captured but not ticked yet (a row the
    -- table got before the append, which its next tick makes current).
    EXECUTE format('WITH appended AS MATERIALIZED (SELECT %4$s FROM %3$s n WHERE n.mz_ts >= $1) '
                   'SELECT ROW(%1$s)::text FROM ('
                   '  SELECT %2$s, 1::bigint AS mz_d FROM %3$s c '
                   '   WHERE (%2$s) IN (SELECT * FROM appended) '
                   '  UNION ALL '
                   '  SELECT %5$s, p.mz_diff FROM %6$s p '
                   '   WHERE (%5$s) IN (SELECT * FROM appended)) x '
                   ' GROUP BY %1$s HAVING sum(mz_d) > 1 LIMIT 1',
                   v_names, v_c, v_cur, v_n, v_p, decoupled._storage(o.lifetime_id, 'pending'))
       INTO v_dup USING expected_upper;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'append would give registered table "%" two current rows with key (%)=%',
                        o.name, v_names, v_dup
            USING ERRCODE = 'unique_violation',
                  DETAIL = 'Its captured updates and deletes find a row by its primary key, '
                           'which must name at most one current row; nothing was appended.',
                  HINT = 'Retract the current row with that key in the same append.';
    END IF;
END
$$;

-- An entry point (extension/caller.cpp): a collection's history is its
-- owner's (docs/architecture.md, "Security model"), so only a role that
-- owns the collection's relation — the registered table, the public view
-- of a source or materialized view — appends to it.
CREATE FUNCTION decoupled.append(collection text, updates jsonb, expected_upper bigint,
                                 new_upper bigint, deployment text DEFAULT NULL,
                                 incarnation bigint DEFAULT NULL) RETURNS bigint
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._append(collection text, updates jsonb, expected_upper bigint,
                                  new_upper bigint, deployment text, incarnation bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
-- Row keys are the rows' text: pin every setting that changes it.
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
DECLARE
    o        decoupled.catalog_objects;
    v_result record;
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink, not a collection', o.name USING ERRCODE = 'wrong_object_type';
    END IF;
    IF o.relation IS NOT NULL
       AND NOT coalesce(pg_has_role(decoupled._caller(),
                                    (SELECT c.relowner FROM pg_class c WHERE c.oid = o.relation),
                                    'USAGE'), false) THEN
        RAISE EXCEPTION 'must be owner of % "%" to append to its history', o.kind, o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A collection''s history is written by its owner, its capture and '
                           'its replicas only.';
    END IF;
    -- A maintained view is its query's result at every time, a source its
    -- generator's output: rows appended by hand would stay wrong for good
    -- (verify() false, a generator's values skipped).
    IF o.kind IN ('materialized view', 'source') THEN
        RAISE EXCEPTION 'cannot append to % "%"', o.kind, o.name
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Its replicas write its history.',
                  HINT = CASE WHEN o.kind = 'source' THEN 'Register a table and write to it instead.'
                              ELSE 'Write to the collections it reads.' END;
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
    -- An upper far ahead of the clock would pull every later tick, the
    -- oracle and every source that follows it that far ahead (a tick's time
    -- is past every table's upper); at the end of time nothing ticks again.
    -- So an append moves an upper at most 10 s past the wall clock (or one
    -- millisecond past the expected upper, while the oracle runs ahead of a
    -- clock that went back).
    IF new_upper > greatest((extract(epoch FROM clock_timestamp()) * 1000)::bigint + 10000,
                            expected_upper + 1) THEN
        RAISE EXCEPTION 'new upper % is more than 10 s ahead of the clock', new_upper
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The oracle''s time is %s.', decoupled.oracle_now()),
                  HINT = 'Append up to the current time; later times with later appends.';
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
    IF o.kind <> 'table' OR jsonb_array_length(updates) = 0 THEN
        RETURN new_upper;  -- (an append of nothing only moves the upper)
    END IF;
    IF jsonb_array_length(coalesce(o.definition->'key', '[]')) > 0 THEN
        PERFORM decoupled._refuse_duplicate_key(o, expected_upper);
    END IF;
    -- From now on the table's history differs from the table by what was
    -- appended: its ticks take a captured retraction that finds no current
    -- row (an append retracted it) as retracting nothing.
    IF NOT coalesce((o.definition->>'appended')::boolean, false) THEN
        UPDATE decoupled.catalog_objects c SET definition = c.definition || '{"appended": true}'
         WHERE c.lifetime_id = o.lifetime_id;
    END IF;
    RETURN new_upper;
END
$$;
COMMENT ON FUNCTION decoupled.append(text, jsonb, bigint, bigint, text, bigint) IS
    'Compare-and-append: add updates at times in [expected_upper, new_upper) iff the upper is expected_upper.';
