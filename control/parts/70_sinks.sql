------------------------------------------------------------------------------
-- Sinks (brief C5.4)
--
-- A sink writes the changes of one collection into a table of its own,
-- (mz_timestamp, mz_diff, columns...), exactly once: the rows of changes at
-- times in [a, b) are inserted in the same transaction that moves the sink's
-- upper (its durable output progress) from a to b under the frontier row
-- lock, so two replicas racing, or a replica killed at any moment, never
-- write a change twice or skip one.
--
-- The table belongs to the extension while the sink lives (nobody can hang
-- a trigger on it that would run in a replica); its creator may read it and
-- grant that on.  When the sink is dropped, the table is handed to its
-- creator.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled.create_sink(name text, from_collection text, into_table text,
                                      cluster text DEFAULT 'default',
                                      snapshot boolean DEFAULT true)
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
COMMENT ON FUNCTION decoupled.create_sink(text, text, text, text, boolean) IS
    'Write a collection''s changes (mz_timestamp, mz_diff, columns...) into a new table, exactly once.';

-- An unqualified into_table is created in the caller's current schema.
CREATE FUNCTION decoupled._create_sink(name text, from_collection text, into_table text,
                                       cluster text, snapshot boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name    text := _create_sink.name;
    v_owner   oid := decoupled._caller();
    v_input   decoupled.catalog_objects;
    v_parts   text[];
    v_schema  text;
    v_table   text;
    v_version bigint;
    v_id      bigint;
    v_as_of   bigint;
    v_before_history boolean;
    schema    text := decoupled._caller_schema();
BEGIN
    PERFORM decoupled._check_name('sink', v_name);
    IF snapshot IS NULL THEN
        RAISE EXCEPTION 'snapshot must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF into_table IS NULL THEN
        RAISE EXCEPTION 'into_table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    BEGIN
        v_parts := parse_ident(into_table);
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'invalid table name "%"', into_table USING ERRCODE = 'invalid_name';
    END;
    IF cardinality(v_parts) > 2 THEN
        RAISE EXCEPTION 'invalid table name "%"', into_table
            USING ERRCODE = 'invalid_name', HINT = 'Give a table name, optionally schema-qualified.';
    END IF;
    v_schema := CASE WHEN cardinality(v_parts) = 2 THEN v_parts[1] ELSE schema END;
    v_table := v_parts[cardinality(v_parts)];
    IF v_schema IS NULL OR to_regnamespace(quote_ident(v_schema)) IS NULL THEN
        RAISE EXCEPTION 'schema "%" does not exist', coalesce(v_schema, 'NULL')
            USING ERRCODE = 'invalid_schema_name';
    END IF;
    PERFORM decoupled._check_create_in(v_schema, 'A sink creates its table.');

    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_sink.cluster);
    v_input := decoupled._collection(from_collection);
    IF v_input.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink; a sink reads a collection', v_input.name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_input.relation IS NULL OR NOT decoupled._caller_can_select(v_input.relation) THEN
        RAISE EXCEPTION 'permission denied for % "%"', v_input.kind, v_input.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM decoupled._check_free(v_name, v_schema, v_table);
    PERFORM decoupled._check_columns(v_input.kind, v_input.name, v_input.definition->'columns');
    -- Its steps read the input's changes by time.
    PERFORM decoupled._ensure_time_index(v_input.lifetime_id);

    -- Start at the latest time the input serves that its permission allows;
    -- the bound lock keeps publication from passing it before commit (FOR
    -- UPDATE, as the commit-time permission check takes it).
    PERFORM FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_input.lifetime_id FOR UPDATE;
    -- Where a source has not ticked yet (since = upper), as_of is the
    -- first time it will be read at, and a sink without snapshot starts
    -- with the changes there: a source's state at its creation was empty
    -- (before_history).  A view's state at its first time is computed from
    -- what its inputs held before: that is its snapshot.
    SELECT greatest(b.bound, f.since, f.upper - 1),
           v_input.kind = 'source' AND greatest(b.bound, f.since, f.upper - 1) >= f.upper
      INTO v_as_of, v_before_history
      FROM decoupled.catalog_frontiers f JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE f.lifetime_id = v_input.lifetime_id;

    EXECUTE format('CREATE TABLE %I.%I (mz_timestamp bigint NOT NULL, mz_diff bigint NOT NULL, %s)',
                   v_schema, v_table, decoupled._cols(v_input.lifetime_id, '', true));
    PERFORM decoupled._assert_column_types(format('%I.%I', v_schema, v_table)::regclass,
                                           v_input.lifetime_id);
    EXECUTE format('GRANT SELECT ON %I.%I TO %s WITH GRANT OPTION', v_schema, v_table,
                   v_owner::regrole);
    INSERT INTO decoupled.catalog_objects
           (name, kind, cluster, relation, definition, created_in_version)
    VALUES (v_name, 'sink', _create_sink.cluster, format('%I.%I', v_schema, v_table)::regclass,
            jsonb_build_object('input', v_input.lifetime_id, 'snapshot', snapshot,
                               'as_of', v_as_of, 'before_history', v_before_history, 'owner', v_owner, 'schema', v_schema,
                               'table', v_table, 'columns', v_input.definition->'columns'),
            v_version)
    RETURNING lifetime_id INTO v_id;
    -- A sink has no history of its own: its upper is its output progress.
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, NULL, v_as_of);
    INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
        VALUES (v_input.lifetime_id, v_id, v_as_of);
    RETURN v_id;
END
$$;

-- One step of a sink by a replica: compare (upper = expected_upper), then
-- write the input's changes at times in [upper, input upper) — preceded,
-- on the first step of a snapshot sink, by the input's state at as_of — and
-- move the upper in the same transaction.
CREATE FUNCTION decoupled.replica_sink(incarnation bigint, lifetime_id bigint,
                                       expected_upper bigint,
                                       OUT upper bigint, OUT caught_up boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    o        decoupled.catalog_objects;
    id       bigint := replica_sink.lifetime_id;
    v_input  bigint;
    v_as_of  bigint;
    v_target bigint;
    v_from   bigint;
    v_cols   text;
    v_sql    text;
BEGIN
    upper := decoupled._lock_output(replica_sink.incarnation, id, 'sink');
    caught_up := false;
    IF upper <> expected_upper THEN
        RETURN;
    END IF;
    SELECT * INTO o FROM decoupled.catalog_objects c WHERE c.lifetime_id = id;
    v_input := (o.definition->>'input')::bigint;
    v_as_of := (o.definition->>'as_of')::bigint;
    SELECT f.upper INTO v_target FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_input;
    -- The owner must still be allowed to read the input (a revoked
    -- privilege stalls the sink), and the table must still be the sink's
    -- own: the extension's, addressed by OID, so no trigger runs here.
    IF NOT coalesce((SELECT has_table_privilege((o.definition->>'owner')::oid, i.relation, 'SELECT')
                       FROM decoupled.catalog_objects i
                      WHERE i.lifetime_id = v_input), false) THEN
        RAISE EXCEPTION 'permission denied for the input of sink "%"', o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its owner can no longer read it.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_class c JOIN pg_extension e ON e.extowner = c.relowner
                    WHERE c.oid = o.relation AND e.extname = 'pg_decoupled') THEN
        RAISE EXCEPTION 'the table of sink "%" is gone or no longer the extension''s', o.name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    caught_up := true;
    IF v_target <= upper THEN
        RETURN;
    END IF;

    v_cols := decoupled._cols(v_input);
    v_from := upper;
    IF upper = v_as_of AND NOT ((o.definition->>'before_history')::boolean IS TRUE
                                AND NOT (o.definition->>'snapshot')::boolean) THEN
        v_from := v_as_of + 1;  -- later changes only: the state at as_of is the snapshot
    END IF;
    v_sql := decoupled._changes_sql(v_input,
                                    upper = v_as_of AND (o.definition->>'snapshot')::boolean);
    -- Consolidated per (time, row): a row's copies become one line.  The
    -- mz_ names are reserved, so they cannot clash with the columns.
    EXECUTE format(
        'INSERT INTO %1$s (mz_timestamp, mz_diff, %3$s) '
        'SELECT mz_ts, mz_net, %3$s FROM ( '
        '  SELECT DISTINCT ON (mz_ts, mz_key) *, '
        '         sum(mz_diff) OVER (PARTITION BY mz_ts, mz_key) AS mz_net '
        '    FROM (SELECT c.*, ROW(%4$s)::text AS mz_key '
        '            FROM (%5$s) c(mz_ts, mz_diff, %3$s)) x '
        '   ORDER BY mz_ts, mz_key) y '
        ' WHERE mz_net <> 0 ORDER BY mz_ts, mz_key',
        o.relation::regclass, NULL, v_cols, decoupled._cols(v_input, 'c.'), v_sql)
        USING v_from, v_target, v_as_of;
    UPDATE decoupled.catalog_frontiers f SET upper = v_target, changed_at = now()
     WHERE f.lifetime_id = id;
    PERFORM decoupled._notify_upper_at_commit();
    upper := v_target;
    PERFORM decoupled._advance_requirements(id, decoupled._required_frontier(v_as_of, upper));
END
$$;

------------------------------------------------------------------------------
-- What a replica maintains besides sources
------------------------------------------------------------------------------

-- The materialized views and sinks placed on the replica's cluster, inputs
-- before what reads them (a dependent always has the larger lifetime id).
CREATE FUNCTION decoupled.replica_maintained(incarnation bigint)
RETURNS TABLE (lifetime_id bigint, name text, kind text, upper bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    i := decoupled._live_incarnation(replica_maintained.incarnation);
    RETURN QUERY
    SELECT o.lifetime_id, o.name::text, o.kind, f.upper::bigint
      FROM decoupled.catalog_replicas r
      JOIN decoupled.catalog_objects o ON o.cluster = r.cluster AND o.dropped_at IS NULL
                                      AND o.kind IN ('materialized view', 'sink')
      JOIN decoupled.catalog_frontiers f ON f.lifetime_id = o.lifetime_id
     WHERE r.replica_id = i.replica_id
     ORDER BY o.lifetime_id;
END
$$;
