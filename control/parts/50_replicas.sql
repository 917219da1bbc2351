------------------------------------------------------------------------------
-- Replicas and sources (brief C5, C6)
--
-- A replica process speaks to the server only through the replica_*
-- functions below, each fenced by its incarnation: once a newer incarnation
-- of the same replica registered, every call of the older one fails.
------------------------------------------------------------------------------

-- Starts a change of one replica of an unmanaged cluster: checks the names,
-- begins the catalog change and locks the cluster.
CREATE FUNCTION decoupled._begin_replica_change(cluster_name text, replica_name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_managed boolean;
BEGIN
    PERFORM decoupled._check_name('cluster', cluster_name);
    PERFORM decoupled._check_name('replica', replica_name);
    PERFORM decoupled._begin_catalog_change();
    SELECT c.managed INTO v_managed FROM decoupled.catalog_clusters c
     WHERE c.name = cluster_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', cluster_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_managed THEN
        RAISE EXCEPTION 'cluster "%" is managed', cluster_name
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Change its replica count with decoupled.alter_cluster().';
    END IF;
END
$$;

CREATE FUNCTION decoupled.create_replica(cluster text, name text, external boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._begin_replica_change(create_replica.cluster, create_replica.name);
    IF EXISTS (SELECT FROM decoupled.catalog_replicas r
                WHERE r.cluster = create_replica.cluster AND r.name = create_replica.name) THEN
        RAISE EXCEPTION 'replica "%" already exists in cluster "%"',
                        create_replica.name, create_replica.cluster
            USING ERRCODE = 'duplicate_object';
    END IF;
    PERFORM decoupled._check_replica_count(create_replica.cluster,
                                           (SELECT count(*)::integer + 1
                                              FROM decoupled.catalog_replicas r
                                             WHERE r.cluster = create_replica.cluster));
    INSERT INTO decoupled.catalog_replicas (cluster, name, external)
    VALUES (create_replica.cluster, create_replica.name, coalesce(create_replica.external, false));
END
$$;
COMMENT ON FUNCTION decoupled.create_replica(text, text, boolean) IS
    'Add a replica to an unmanaged cluster; external replicas are run by pg_decoupled_replicad.';

CREATE FUNCTION decoupled.drop_replica(cluster text, name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_before bigint;
BEGIN
    PERFORM decoupled._begin_replica_change(drop_replica.cluster, drop_replica.name);
    SELECT count(*) INTO v_before FROM decoupled.catalog_replicas r
     WHERE r.cluster = drop_replica.cluster;
    DELETE FROM decoupled.catalog_replicas r
     WHERE r.cluster = drop_replica.cluster AND r.name = drop_replica.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replica "%" does not exist in cluster "%"',
                        drop_replica.name, drop_replica.cluster
            USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._note_pause(drop_replica.cluster, v_before);
END
$$;
COMMENT ON FUNCTION decoupled.drop_replica(text, text) IS
    'Remove a replica of an unmanaged cluster; its process is stopped by the controller.';

------------------------------------------------------------------------------
-- Sources
------------------------------------------------------------------------------

-- Output collections of each generator: role, columns.
CREATE FUNCTION decoupled._generator_outputs(generator text)
RETURNS TABLE (role text, columns jsonb)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT g.role, g.columns FROM (VALUES
        ('counter', '', '[{"name": "n", "type": "bigint"}]'::jsonb),
        ('auction', 'auctions',
         '[{"name": "id", "type": "bigint"}, {"name": "seller", "type": "bigint"},
           {"name": "item", "type": "text"}, {"name": "end_time", "type": "timestamp with time zone"}]'),
        ('auction', 'bids',
         '[{"name": "id", "type": "bigint"}, {"name": "buyer", "type": "bigint"},
           {"name": "auction_id", "type": "bigint"}, {"name": "amount", "type": "integer"},
           {"name": "bid_time", "type": "timestamp with time zone"}]'),
        -- The auction source itself records progress only.
        ('auction', '', '[{"name": "tick", "type": "bigint"}]')
    ) g(generator, role, columns)
    WHERE g.generator = _generator_outputs.generator
$$;

-- The public relation of a collection: a view in `schema` reading the
-- latest state, or the history at decoupled.as_of.
CREATE FUNCTION decoupled._create_public_view(lifetime_id bigint, schema text, name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('CREATE VIEW %I.%I AS SELECT %s FROM %s WHERE decoupled.as_of() IS NULL '
                   'UNION ALL SELECT * FROM %s',
                   schema, name, decoupled._cols(lifetime_id), decoupled._storage(lifetime_id, 'cur'),
                   decoupled._storage(lifetime_id, 'history'));
    EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', schema, name);
END
$$;

CREATE FUNCTION decoupled._tick_ms(options jsonb) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tick interval;
BEGIN
    BEGIN
        v_tick := coalesce(options->>'tick', '1s')::interval;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'invalid tick "%"', options->>'tick'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give an interval such as ''1s'' or ''10ms''.';
    END;
    IF v_tick < interval '10 milliseconds' OR v_tick > interval '1 day' THEN
        RAISE EXCEPTION 'tick % is out of range', v_tick
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Ticks range from 10ms to 1 day.';
    END IF;
    RETURN decoupled._retain_ms(v_tick);
END
$$;

-- The entry point records its caller (extension/caller.cpp): the source's
-- relations are created in the caller's current schema.
CREATE FUNCTION decoupled.create_source(name text, generator text, cluster text DEFAULT 'default',
                                        options jsonb DEFAULT '{}',
                                        retain_history interval DEFAULT '1 second')
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
COMMENT ON FUNCTION decoupled.create_source(text, text, text, jsonb, interval) IS
    'Create a load-generator source (counter, auction) maintained by the cluster''s replicas.';

CREATE FUNCTION decoupled._create_source(name text, generator text, cluster text, options jsonb,
                                         retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_version bigint;
    v_tick    bigint;
    v_epoch   bigint;
    v_id      bigint;
    v_out     record;
    v_name    text;
    v_out_id  bigint;
    schema    text := decoupled._caller_schema();
BEGIN
    PERFORM decoupled._check_name('source', _create_source.name);
    IF generator IS NULL THEN
        RAISE EXCEPTION 'generator must not be null' USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Generators: counter, auction.';
    END IF;
    IF NOT EXISTS (SELECT FROM decoupled._generator_outputs(generator)) THEN
        RAISE EXCEPTION 'unknown load generator "%"', generator
            USING ERRCODE = 'undefined_object', HINT = 'Generators: counter, auction.';
    END IF;
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'options must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT FROM jsonb_object_keys(options) k WHERE k <> 'tick') THEN
        RAISE EXCEPTION 'unknown source option "%"',
                        (SELECT k FROM jsonb_object_keys(options) k WHERE k <> 'tick' LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Sources accept: tick.';
    END IF;
    v_tick := decoupled._tick_ms(options);
    PERFORM decoupled._check_retention(retain_history);
    PERFORM decoupled._check_create_in(schema, 'A source''s relations are created in the current schema.');
    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_source.cluster);
    FOR v_out IN SELECT * FROM decoupled._generator_outputs(generator) LOOP
        v_name := _create_source.name || CASE WHEN v_out.role = '' THEN '' ELSE '_' || v_out.role END;
        PERFORM decoupled._check_name('source', v_name);
        PERFORM decoupled._check_free(v_name, schema, v_name);
    END LOOP;

    -- Ticks fall on multiples of the tick: every replica agrees on them.
    v_epoch := (decoupled._next_timestamp(0) / v_tick + 1) * v_tick;
    FOR v_out IN SELECT * FROM decoupled._generator_outputs(generator) ORDER BY role LOOP
        v_name := _create_source.name || CASE WHEN v_out.role = '' THEN '' ELSE '_' || v_out.role END;
        INSERT INTO decoupled.catalog_objects
               (name, kind, cluster, definition, retain_history, created_in_version)
        VALUES (v_name, 'source', _create_source.cluster,
                jsonb_build_object('generator', generator, 'role', v_out.role,
                                   'tick_ms', v_tick, 'epoch', v_epoch,
                                   'schema', schema, 'columns', v_out.columns)
                || CASE WHEN v_out.role = '' THEN jsonb_build_object('options', options)
                        ELSE jsonb_build_object('parent', v_id) END,
                retain_history, v_version)
        RETURNING lifetime_id INTO v_out_id;
        IF v_out.role = '' THEN
            v_id := v_out_id;
        END IF;
        PERFORM decoupled._create_storage(v_out_id);
        PERFORM decoupled._create_public_view(v_out_id, schema, v_name);
        -- Its public view is the relation whose privileges gate every path
        -- to its history (AS OF reads, holds, subscriptions, sinks).
        UPDATE decoupled.catalog_objects o SET relation = format('%I.%I', schema, v_name)::regclass
         WHERE o.lifetime_id = v_out_id;
        INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper)
            VALUES (v_out_id, v_epoch, v_epoch);
        INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_out_id, v_epoch);
    END LOOP;
    RETURN v_id;
END
$$;

-- Drops a collection or sink by name.  Subsources go with their source; a
-- table is unregistered (the table itself stays).  Objects built on it are
-- dropped with `cascade`, else the drop is refused.
CREATE FUNCTION decoupled.drop(name text, cascade boolean DEFAULT false) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._drop(name text, cascade boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o         decoupled.catalog_objects;
    v_version bigint;
    v_roots   bigint[];
    v_victim  decoupled.catalog_objects;
    v_cascaded text[];
BEGIN
    IF _drop.cascade IS NULL THEN
        RAISE EXCEPTION 'cascade must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_version := decoupled._begin_catalog_change();
    o := decoupled._collection(_drop.name);
    IF o.kind = 'table' THEN
        PERFORM decoupled._check_table_owner(o.relation, 'unregister it');
    END IF;
    IF o.definition ? 'parent' THEN
        RAISE EXCEPTION 'cannot drop subsource "%"', o.name
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = format('Drop its source "%s" instead.',
                                (SELECT p.name FROM decoupled.catalog_objects p
                                  WHERE p.lifetime_id = (o.definition->>'parent')::bigint));
    END IF;
    SELECT array_agg(s.lifetime_id) INTO v_roots FROM decoupled.catalog_objects s
     WHERE s.dropped_at IS NULL
       AND (s.lifetime_id = o.lifetime_id OR (s.definition->>'parent')::bigint = o.lifetime_id);
    IF NOT _drop.cascade THEN
        PERFORM decoupled._refuse_dependents(format('%s "%s"', o.kind, o.name), v_roots);
        PERFORM decoupled._refuse_foreign_dependents(format('%s "%s"', o.kind, o.name), v_roots);
    END IF;
    -- Said as PostgreSQL says what a DROP ... CASCADE takes with it.
    SELECT array_agg(format('drop cascades to %s "%s"', s.kind, s.name)
                     ORDER BY s.lifetime_id DESC)
      INTO v_cascaded FROM decoupled.catalog_objects s
     WHERE s.lifetime_id = ANY (decoupled._dependents(v_roots))
       AND NOT s.lifetime_id = ANY (v_roots) AND s.dropped_at IS NULL;
    IF cardinality(v_cascaded) = 1 THEN
        RAISE NOTICE '%', v_cascaded[1];
    ELSIF cardinality(v_cascaded) > 1 THEN
        RAISE NOTICE 'drop cascades to % other objects', cardinality(v_cascaded)
            USING DETAIL = array_to_string(v_cascaded, E'\n');
    END IF;
    -- Dependents first: their plans read the storage of what they depend on.
    FOR v_victim IN SELECT * FROM decoupled.catalog_objects s
                     WHERE s.lifetime_id = ANY (v_roots || decoupled._dependents(v_roots))
                     ORDER BY s.lifetime_id DESC
    LOOP
        PERFORM decoupled._drop_object(v_victim, v_version);
    END LOOP;
END
$$;
COMMENT ON FUNCTION decoupled.drop(text, boolean) IS
    'Drop a source (with its subsources), materialized view or sink, or unregister a table; with cascade also what is built on it.';

-- Frees the name at once unless a reader holds the view; then
-- finalization removes it (a drop never waits for readers).  The view is
-- found by its OID (the relation), so a renamed schema is followed.
CREATE FUNCTION decoupled._drop_public_view(o decoupled.catalog_objects) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lock text;
BEGIN
    IF o.relation IS NULL OR o.kind NOT IN ('source', 'materialized view') THEN
        RETURN;
    END IF;
    -- Only this collection's own view: once it is gone, its OID may be
    -- another relation's.
    IF NOT EXISTS (SELECT FROM pg_depend d JOIN pg_rewrite w ON w.oid = d.objid
                    WHERE w.ev_class = o.relation
                      AND d.refobjid = to_regclass(decoupled._storage(o.lifetime_id, 'history'))) THEN
        RETURN;
    END IF;
    -- CASCADE: a drop without cascade was refused while anything outside
    -- the extension read it (_refuse_foreign_dependents), so what goes
    -- with it here was asked for, and goes now, as PostgreSQL's DROP ...
    -- CASCADE takes it, not at finalization.
    v_lock := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', '10ms', true);
    BEGIN
        EXECUTE format('DROP VIEW IF EXISTS %s CASCADE', o.relation::regclass);
    EXCEPTION WHEN lock_not_available THEN
        NULL;  -- a reader holds it: finalization takes it
    END;
    PERFORM set_config('lock_timeout', v_lock, true);
END
$$;

------------------------------------------------------------------------------
-- The replica protocol
------------------------------------------------------------------------------

-- The live incarnation row, or an error that tells a fenced process to stop.
CREATE FUNCTION decoupled._live_incarnation(incarnation bigint)
RETURNS decoupled.catalog_replica_incarnations
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    SELECT * INTO i FROM decoupled.catalog_replica_incarnations r
     WHERE r.incarnation = _live_incarnation.incarnation AND r.retired_at IS NULL FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replica incarnation % is not current', _live_incarnation.incarnation
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'A newer incarnation replaced it, or its replica was dropped; '
                           'a fenced process can never write again.';
    END IF;
    RETURN i;
END
$$;

-- Registers a new incarnation of a replica in a deployment, retiring every
-- older one of that replica and deployment (and only those).
CREATE FUNCTION decoupled.replica_start(replica_id bigint, deployment text, pid integer,
                                        host text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_incarnation bigint;
BEGIN
    PERFORM FROM decoupled.catalog_replicas r WHERE r.replica_id = replica_start.replica_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replica % does not exist', replica_start.replica_id
            USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM FROM decoupled.catalog_deployments d
     WHERE d.name = replica_start.deployment AND d.state <> 'retired';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'deployment "%" does not exist or is retired', replica_start.deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    UPDATE decoupled.catalog_replica_incarnations i
       SET retired_at = now(), status = 'stopped'
     WHERE i.replica_id = replica_start.replica_id AND i.deployment = replica_start.deployment
       AND i.retired_at IS NULL;
    BEGIN
        INSERT INTO decoupled.catalog_replica_incarnations
               (replica_id, deployment, incarnation, pid, host, status, heartbeat_at)
        VALUES (replica_start.replica_id, replica_start.deployment,
                decoupled._next_incarnation(), replica_start.pid, replica_start.host,
                'starting', now())
        RETURNING incarnation INTO v_incarnation;
    EXCEPTION WHEN unique_violation THEN
        -- Two processes started this replica at once; the other registered
        -- first and is the live incarnation.
        RAISE EXCEPTION 'replica % was started by another process at the same time',
                        replica_start.replica_id
            USING ERRCODE = 'ZD003',  -- lost race: the protocol's own class
                  DETAIL = 'Only one incarnation of a replica is live in a deployment.';
    END;
    RETURN v_incarnation;
END
$$;

-- A clean exit: the incarnation retires itself.
CREATE FUNCTION decoupled.replica_stop(incarnation bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE decoupled.catalog_replica_incarnations i
       SET retired_at = now(), status = 'stopped'
     WHERE i.incarnation = replica_stop.incarnation AND i.retired_at IS NULL
$$;

CREATE FUNCTION decoupled.replica_heartbeat(incarnation bigint, status text DEFAULT 'running',
                                            error text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    PERFORM decoupled._live_incarnation(replica_heartbeat.incarnation);
    UPDATE decoupled.catalog_replica_incarnations i
       SET heartbeat_at = now(), status = replica_heartbeat.status, error = replica_heartbeat.error
     WHERE i.incarnation = replica_heartbeat.incarnation;
    -- A subscription reads a view's changes by time from its subscriber's
    -- own transaction, which must not take the lock an index needs: a
    -- replica of the view's cluster in the active deployment makes the
    -- view's time index, here, within a second (until then the
    -- subscription's reads scan the view's rows).
    -- In ascending lifetime id, as steps lock storage.
    FOR v_id IN
        SELECT o.lifetime_id
          FROM decoupled.catalog_replica_incarnations i
          JOIN decoupled.catalog_replicas r USING (replica_id)
          JOIN decoupled.catalog_deployments d ON d.name = i.deployment AND d.state = 'active'
          JOIN decoupled.catalog_objects o ON o.cluster = r.cluster
         WHERE i.incarnation = replica_heartbeat.incarnation
           AND replica_heartbeat.status = 'running'
           AND o.kind = 'materialized view' AND o.dropped_at IS NULL
           AND o.lifetime_id IN (SELECT s.lifetime_id FROM decoupled._shared_holds() s
                                  WHERE s.subscription)
         ORDER BY o.lifetime_id
    LOOP
        PERFORM decoupled._ensure_time_index(v_id, wait => false);
    END LOOP;
END
$$;

-- What the replica should run, read in one snapshot: every live source
-- output placed on its cluster, with its generator, schedule and upper.
CREATE FUNCTION decoupled.replica_desired_state(incarnation bigint)
RETURNS TABLE (catalog_version bigint, writes_enabled boolean, source_id bigint,
               source_name text, generator text, tick_ms bigint, epoch bigint,
               output_id bigint, output_name text, output_role text, upper bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    i := decoupled._live_incarnation(replica_desired_state.incarnation);
    RETURN QUERY
    SELECT m.catalog_version, d.state = 'active',
           coalesce((o.definition->>'parent')::bigint, o.lifetime_id),
           coalesce(p.name, o.name)::text, o.definition->>'generator',
           (o.definition->>'tick_ms')::bigint, (o.definition->>'epoch')::bigint,
           o.lifetime_id, o.name::text, o.definition->>'role', f.upper::bigint
      FROM decoupled.catalog_meta m
      JOIN decoupled.catalog_deployments d ON d.name = i.deployment
      JOIN decoupled.catalog_replicas r ON r.replica_id = i.replica_id
      JOIN decoupled.catalog_objects o ON o.cluster = r.cluster AND o.dropped_at IS NULL
                                      AND o.kind = 'source'
      JOIN decoupled.catalog_frontiers f ON f.lifetime_id = o.lifetime_id
      LEFT JOIN decoupled.catalog_objects p ON p.lifetime_id = (o.definition->>'parent')::bigint
     ORDER BY 3, 8;
    IF NOT FOUND THEN
        -- Nothing to run: still report the version followed.
        RETURN QUERY SELECT m.catalog_version, d.state = 'active', NULL::bigint, NULL::text,
                            NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text,
                            NULL::text, NULL::bigint
                       FROM decoupled.catalog_meta m
                       JOIN decoupled.catalog_deployments d ON d.name = i.deployment;
    END IF;
END
$$;

-- Compare-and-append for a replica: fenced by its incarnation; losing the
-- race is not an error, it returns the actual upper to continue from.
CREATE FUNCTION decoupled.replica_append(incarnation bigint, lifetime_id bigint, updates jsonb,
                                         expected_upper bigint, new_upper bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    i       decoupled.catalog_replica_incarnations;
    v_upper bigint;
    v_lock  text := current_setting('lock_timeout');
BEGIN
    i := decoupled._live_incarnation(replica_append.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    -- Only what this replica maintains: a source or a view of its cluster
    -- (dropped ones too: the append then says so, ZD002).  A registered
    -- table's history is its capture's alone.
    IF NOT EXISTS (SELECT FROM decoupled.catalog_objects o
                     JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
                    WHERE o.lifetime_id = replica_append.lifetime_id
                      AND o.kind IN ('source', 'materialized view')
                      AND r.replica_id = i.replica_id) THEN
        RAISE EXCEPTION 'replica incarnation % does not maintain collection %',
                        replica_append.incarnation, replica_append.lifetime_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- No upper far ahead of the clock (it would pull the oracle and every
    -- tick along, _append): a source's tick, at most a day, ahead, and 10 s.
    IF new_upper > (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 86400000 + 10000 THEN
        RAISE EXCEPTION 'new upper % is more than a day ahead of the clock', new_upper
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Its frontier row a moment at most: a sibling replica's append holds
    -- it that long, and a session that holds it longer (an open
    -- apply_compaction()) fails the append with 55P03, which the replica
    -- tries again shortly, as busy storage.
    PERFORM set_config('lock_timeout', '200ms', true);
    PERFORM FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = replica_append.lifetime_id FOR UPDATE;
    PERFORM set_config('lock_timeout', v_lock, true);
    -- Its storage without waiting (ZD004, retried shortly): a transaction
    -- creating views over the collection may hold it (write_locks.hpp).
    PERFORM decoupled._lock_storage_nowait(replica_append.lifetime_id);
    SELECT c.upper INTO v_upper FROM decoupled._compare_and_append(
        replica_append.lifetime_id, updates, expected_upper, new_upper) c;
    IF v_upper IS NULL THEN
        RAISE EXCEPTION 'collection % was dropped', replica_append.lifetime_id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    RETURN v_upper;
END
$$;

-- Current health, fenced: a report from an incarnation older than the stored
-- one is ignored, so a late predecessor never restores stale health (C6.1).
-- A change of status is also a transition in the history.
CREATE FUNCTION decoupled.replica_report(incarnation bigint, lifetime_id bigint, status text,
                                         error text DEFAULT NULL, hint text DEFAULT NULL,
                                         hydrated boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_replica_incarnations;
    v_before text;
    v_name   text;
BEGIN
    i := decoupled._live_incarnation(replica_report.incarnation);
    PERFORM FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = replica_report.lifetime_id AND o.dropped_at IS NULL;
    IF NOT FOUND THEN
        RETURN;  -- dropped meanwhile: the committer already wrote its history
    END IF;
    SELECT h.status INTO v_before FROM decoupled.replica_health h
     WHERE h.lifetime_id = replica_report.lifetime_id AND h.replica_id = i.replica_id
       AND h.deployment = i.deployment FOR UPDATE;
    INSERT INTO decoupled.replica_health AS h
           (lifetime_id, replica_id, deployment, incarnation, status, error, hint, hydrated,
            transition_at, updated_at)
    VALUES (replica_report.lifetime_id, i.replica_id, i.deployment, replica_report.incarnation,
            replica_report.status, replica_report.error, replica_report.hint,
            replica_report.hydrated, now(), now())
    ON CONFLICT (lifetime_id, replica_id, deployment) DO UPDATE
       SET incarnation = EXCLUDED.incarnation, status = EXCLUDED.status, error = EXCLUDED.error,
           hint = EXCLUDED.hint, hydrated = EXCLUDED.hydrated, updated_at = now(),
           transition_at = CASE WHEN h.status IS DISTINCT FROM EXCLUDED.status THEN now()
                                ELSE h.transition_at END
     WHERE h.incarnation <= EXCLUDED.incarnation;
    -- The history is the active deployment's: a prewarming replica's
    -- transitions are visible in decoupled.hydration only.
    IF FOUND AND v_before IS DISTINCT FROM replica_report.status
       AND i.deployment = decoupled._active_deployment() THEN
        SELECT r.name INTO v_name FROM decoupled.catalog_replicas r WHERE r.replica_id = i.replica_id;
        INSERT INTO decoupled.status_events (lifetime_id, replica, incarnation, status, error)
        VALUES (replica_report.lifetime_id, v_name, replica_report.incarnation,
                replica_report.status, replica_report.error);
    END IF;
END
$$;

-- Compaction by replicas (C3.5, C5.5): apply the bounds published for what
-- runs on the replica's cluster, then publish new ones.  Every replica of a
-- cluster may run it; the row locks order them and neither since nor a
-- bound ever moves back.  Returns how many collections were compacted.
CREATE FUNCTION decoupled.replica_compact(incarnation bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i         decoupled.catalog_replica_incarnations;
    v_cluster text;
    v_count   integer;
BEGIN
    i := decoupled._live_incarnation(replica_compact.incarnation);
    SELECT r.cluster INTO v_cluster FROM decoupled.catalog_replicas r
     WHERE r.replica_id = i.replica_id;
    -- Compaction first: the bound rows a publication locks stay locked
    -- until commit (as in _maintain_tables).
    v_count := decoupled._apply_compaction(false, v_cluster);
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, v_cluster));
    RETURN v_count;
END
$$;

-- History older than the retention goes (C6.3).
CREATE FUNCTION decoupled.prune_status_history(retention interval DEFAULT '7 days')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count bigint;
BEGIN
    IF retention IS NULL THEN
        RAISE EXCEPTION 'retention must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF retention < interval '0' THEN
        RAISE EXCEPTION 'retention must not be negative, got %', retention
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Status history older than the retention goes; ''0'' prunes all of it.';
    END IF;
    DELETE FROM decoupled.status_events e WHERE e.occurred_at < now() - retention;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

------------------------------------------------------------------------------
-- Waiting for progress
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._notify_upper_at_commit() RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_notify_upper_at_commit';

CREATE FUNCTION decoupled.wait_for_upper(collection text, ts bigint,
                                         timeout interval DEFAULT '30s') RETURNS bigint
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_wait_for_upper';
COMMENT ON FUNCTION decoupled.wait_for_upper(text, bigint, interval) IS
    'Wait until the collection''s (or sink''s) upper exceeds ts; returns that upper.';
