------------------------------------------------------------------------------
-- Collections, part 2: appends, the one write path (brief C2.1)
--
-- Write authority, the append core (_append_staged: consolidate the staged
-- updates, insert, retract oldest first, advance the upper), staging and
-- checking JSON updates, and compare-and-append (_compare_and_append, for
-- every writer, and its public form decoupled.append()).  Replicas append
-- through replica_append (50_replicas.sql), registered tables through their
-- ticks (32_registered_tables.sql), materialized views through their steps
-- (60_materialized_views.sql).
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
