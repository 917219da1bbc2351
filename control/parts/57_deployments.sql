------------------------------------------------------------------------------
-- Deployments (brief C10) and the reconciled configuration (C11.1)
--
-- A deployment is one generation of workers.  Exactly one is `active` and
-- holds write authority (checked at every append, 31_append.sql); others
-- are `prewarming` — their replicas follow the catalog and hydrate but never
-- write — or `retired` for good.
--
--     create_deployment(n)          promote(n)
--   ------------------> prewarming -----------> active -----------> retired
--                           |                    (the previous active one
--                           | drop_deployment(n)  is retired in the same
--                           v                     transaction)
--                        (gone)
--
-- A replica keeps no state the catalog and the durable uppers cannot
-- rebuild (bgworker/replica_engine.hpp): outputs, kept sums and arrangements
-- are shared storage, written by whichever deployment holds authority.  So a
-- prewarming replica hydrates by installing each object and computing it
-- once from the durable state into private (temporary) storage: that proves
-- its plan, privileges and inputs, and warms its session's plans and the
-- buffer cache.  Promotion then hands over at the durable uppers: warmed
-- replicas continue from there, nothing is recomputed from scratch.
------------------------------------------------------------------------------

-- Objects that `deployment` has not hydrated yet: every live source output,
-- view and sink on a cluster with replicas needs one live incarnation of the
-- deployment, started since the server did (an incarnation a crash ended
-- has not been retired yet), that reported it hydrated.  (Objects of
-- clusters without replicas are paused in every deployment and wait for
-- none.)
CREATE FUNCTION decoupled._unhydrated(deployment text)
RETURNS TABLE (name text, kind text, cluster text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT o.name::text, o.kind, o.cluster::text
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND o.kind <> 'table'
       AND EXISTS (SELECT FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = o.lifetime_id)
       AND EXISTS (SELECT FROM decoupled.catalog_replicas r WHERE r.cluster = o.cluster)
       AND NOT EXISTS (
           SELECT FROM decoupled.replica_health h
             JOIN decoupled.catalog_replica_incarnations i
               ON i.incarnation = h.incarnation AND i.retired_at IS NULL
              AND i.started_at >= pg_postmaster_start_time()
            WHERE h.lifetime_id = o.lifetime_id AND h.deployment = _unhydrated.deployment
              AND h.hydrated)
     ORDER BY o.name
$$;

CREATE FUNCTION decoupled._deployment_state(name text, lock boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_state text;
BEGIN
    IF lock THEN
        SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
         WHERE d.name = _deployment_state.name FOR UPDATE;
    ELSE
        SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
         WHERE d.name = _deployment_state.name;
    END IF;
    IF v_state IS NULL THEN
        RAISE EXCEPTION 'deployment "%" does not exist', name USING ERRCODE = 'undefined_object';
    END IF;
    RETURN v_state;
END
$$;

CREATE FUNCTION decoupled.create_deployment(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name   text := create_deployment.name;
    v_active text;
BEGIN
    PERFORM decoupled._check_name('deployment', v_name);
    PERFORM decoupled._begin_catalog_change();
    IF EXISTS (SELECT FROM decoupled.catalog_deployments d WHERE d.name = v_name) THEN
        RAISE EXCEPTION 'deployment "%" already exists', v_name
            USING ERRCODE = 'duplicate_object',
                  DETAIL = format('It is %s.', decoupled._deployment_state(v_name)),
                  HINT = 'A deployment name is used once, retired ones included.';
    END IF;
    INSERT INTO decoupled.catalog_deployments (name, state) VALUES (v_name, 'prewarming');
    -- The new generation serves the same SQL front doors.
    v_active := decoupled._active_deployment();
    INSERT INTO decoupled.catalog_adapters (name, deployment)
    SELECT a.name, v_name FROM decoupled.catalog_adapters a WHERE a.deployment = v_active;
    INSERT INTO decoupled.catalog_adapter_stops (adapter, deployment)
    SELECT s.adapter, v_name FROM decoupled.catalog_adapter_stops s WHERE s.deployment = v_active;
END
$$;
COMMENT ON FUNCTION decoupled.create_deployment(text) IS
    'Add a prewarming deployment: its replicas follow the catalog and hydrate without writing.';

CREATE FUNCTION decoupled.drop_deployment(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name  text := drop_deployment.name;
    v_state text;
BEGIN
    PERFORM decoupled._check_name('deployment', v_name);
    PERFORM decoupled._begin_catalog_change();
    v_state := decoupled._deployment_state(v_name, true);
    IF v_state <> 'prewarming' THEN
        RAISE EXCEPTION 'deployment "%" is %', v_name, v_state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Only a prewarming deployment can be dropped.',
                  HINT = CASE WHEN v_state = 'active'
                              THEN 'Promote another deployment first.'
                              ELSE 'A retired deployment stays in the catalog as a record.' END;
    END IF;
    -- Its adapters go with their incarnations (and those own no holds: no
    -- session attaches to a prewarming deployment); its replica
    -- incarnations end, fencing any process still running them.
    DELETE FROM decoupled.catalog_adapters a WHERE a.deployment = v_name;
    DELETE FROM decoupled.catalog_replica_incarnations i WHERE i.deployment = v_name;
    DELETE FROM decoupled.catalog_deployments d WHERE d.name = v_name;
END
$$;
COMMENT ON FUNCTION decoupled.drop_deployment(text) IS
    'Remove a prewarming deployment; its workers stop.';

-- Promotion (C10.2): wait until `name` is hydrated, then, in one
-- transaction, give it write authority and retire the active deployment:
-- the retired replicas' and adapters' incarnations end (fencing their
-- processes) and exactly the retired adapters' holds are released.  The
-- row lock on the active deployment waits for its in-flight appends, which
-- hold it shared (_assert_write_authority); later ones see it retired.
CREATE FUNCTION decoupled.promote(name text, wait_for_hydration interval DEFAULT '5 min')
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name     text := promote.name;
    v_state    text;
    v_retired  text;
    v_deadline timestamptz;
    v_missing  text;
    v_count    bigint;
    r          record;
BEGIN
    PERFORM decoupled._check_name('deployment', v_name);
    IF wait_for_hydration IS NULL OR wait_for_hydration < interval '0' THEN
        RAISE EXCEPTION 'wait_for_hydration must be a non-negative interval, got %',
                        coalesce(wait_for_hydration::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'decoupled.promote() needs a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'It waits for the deployment''s replicas to commit their hydration.';
    END IF;
    IF decoupled._restoring() THEN
        PERFORM decoupled._begin_catalog_change();  -- its refusal, with the hint
    END IF;
    v_state := decoupled._deployment_state(v_name);
    PERFORM decoupled._refuse_promotion(v_name, v_state);

    -- Wait without locks: nothing blocks while the replicas hydrate.
    v_deadline := clock_timestamp() + wait_for_hydration;
    LOOP
        SELECT count(*), string_agg(format('%s "%s" on cluster "%s"', u.kind, u.name, u.cluster),
                                    ', ') FILTER (WHERE u.n <= 5)
          INTO v_count, v_missing
          FROM (SELECT x.*, row_number() OVER () AS n FROM decoupled._unhydrated(v_name) x) u;
        EXIT WHEN v_count = 0;
        IF clock_timestamp() >= v_deadline THEN
            RAISE EXCEPTION 'deployment "%" is not hydrated', v_name
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('Not hydrated after %s: %s%s.', wait_for_hydration, v_missing,
                                      CASE WHEN v_count > 5
                                           THEN format(' and %s more', v_count - 5) ELSE '' END),
                      HINT = 'decoupled.hydration shows each replica''s progress; nothing was '
                             'changed.';
        END IF;
        PERFORM pg_sleep(least(0.1, greatest(extract(epoch FROM v_deadline - clock_timestamp()),
                                             0.001)));
        v_state := decoupled._deployment_state(v_name);
        PERFORM decoupled._refuse_promotion(v_name, v_state);
    END LOOP;

    -- The handover.  The catalog lock orders it with every other catalog
    -- change.  Then the locks an append takes, in the order it takes them:
    -- a replica step locks its incarnation, then its deployment (both
    -- shared), so promotion locks the active replica incarnations first and
    -- the deployment rows next — waiting for the appends in flight, and
    -- never holding one while it waits for the other.
    PERFORM decoupled._begin_catalog_change();
    PERFORM FROM decoupled.catalog_replica_incarnations i
      JOIN decoupled.catalog_deployments d ON d.name = i.deployment
     WHERE d.state = 'active' AND i.retired_at IS NULL
     ORDER BY i.incarnation FOR UPDATE OF i;
    PERFORM FROM decoupled.catalog_deployments d
     WHERE d.name = v_name OR d.state = 'active' ORDER BY d.name FOR UPDATE;
    v_state := decoupled._deployment_state(v_name);
    PERFORM decoupled._refuse_promotion(v_name, v_state);  -- a concurrent promote won
    UPDATE decoupled.catalog_deployments d SET state = 'retired', retired_at = now()
     WHERE d.state = 'active' RETURNING d.name INTO v_retired;
    UPDATE decoupled.catalog_deployments d SET state = 'active', promoted_at = now()
     WHERE d.name = v_name;
    UPDATE decoupled.catalog_replica_incarnations i SET retired_at = now(), status = 'stopped'
     WHERE i.deployment = v_retired AND i.retired_at IS NULL;
    FOR r IN SELECT i.incarnation FROM decoupled.catalog_adapter_incarnations i
              WHERE i.deployment = v_retired AND i.reclaimed_at IS NULL
    LOOP
        PERFORM decoupled._reclaim_incarnation(r.incarnation);
    END LOOP;
END
$$;
COMMENT ON FUNCTION decoupled.promote(text, interval) IS
    'Wait until a prewarming deployment is hydrated, then give it write authority and retire the active one.';

CREATE FUNCTION decoupled._refuse_promotion(name text, state text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF state = 'active' THEN
        RAISE EXCEPTION 'deployment "%" is already active', name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    ELSIF state = 'retired' THEN
        RAISE EXCEPTION 'deployment "%" is retired', name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A retired deployment never writes again.',
                  HINT = 'Create a new deployment with decoupled.create_deployment().';
    END IF;
END
$$;

-- A prewarming replica's step (C10.1): compute the object from the durable
-- state into private storage, never appending.  Returns whether it is
-- hydrated (a view whose inputs have no readable time yet is, once its
-- owner may read them).
CREATE FUNCTION decoupled.replica_prewarm(incarnation bigint, lifetime_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_replica_incarnations;
    o        decoupled.catalog_objects;
    id       bigint := replica_prewarm.lifetime_id;
    v_inputs bigint[];
    v_t      bigint;
    v_since  bigint;
    v_from   bigint;
    v_rows   bigint;
BEGIN
    i := decoupled._live_incarnation(replica_prewarm.incarnation);
    PERFORM decoupled._bound_step();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.lifetime_id = id AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'object % was dropped', id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    IF o.kind = 'materialized view' THEN
        SELECT coalesce(array_agg(x.id::bigint), '{}') INTO v_inputs
          FROM jsonb_array_elements_text(o.definition->'inputs') AS x(id);
        IF v_inputs = '{}' THEN
            SELECT f.upper - 1, f.since INTO v_t, v_since FROM decoupled.catalog_frontiers f
             WHERE f.lifetime_id = id;
        ELSE
            SELECT min(f.upper) - 1, max(f.since) INTO v_t, v_since
              FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = ANY (v_inputs);
        END IF;
        IF v_t < greatest(v_since, 0) THEN
            -- Nothing readable yet, so nothing the active deployment could
            -- have computed either — and its inputs may be on a cluster
            -- only this deployment runs, which ticks once promoted: waiting
            -- for them kept promotion waiting for ever.  Hydrated once the
            -- owner may read the inputs; the first computation follows the
            -- first readable time, as it does on the active deployment.
            PERFORM FROM jsonb_array_elements_text(o.definition->'direct') AS x(rel)
             WHERE NOT coalesce(has_table_privilege((o.definition->>'owner')::oid,
                                                    x.rel::oid, 'SELECT'), true);
            RETURN NOT FOUND;
        END IF;
        EXECUTE format('CREATE TEMP TABLE decoupled_prewarm (LIKE %s) ON COMMIT DROP',
                       decoupled._storage(id, 'stage'));
        PERFORM decoupled._stage_plan((o.definition->>'plan')::oid::regclass,
                                      (o.definition->>'owner')::oid, v_t,
                                      'pg_temp.decoupled_prewarm'::regclass);
        DROP TABLE pg_temp.decoupled_prewarm;
    ELSIF o.kind = 'sink' THEN
        -- Read what the sink's next step would write.
        SELECT s.upper, f.upper INTO v_from, v_t
          FROM decoupled.catalog_frontiers s, decoupled.catalog_frontiers f
         WHERE s.lifetime_id = id AND f.lifetime_id = (o.definition->>'input')::bigint;
        IF NOT coalesce((SELECT has_table_privilege((o.definition->>'owner')::oid, c.relation,
                                                    'SELECT')
                           FROM decoupled.catalog_objects c
                          WHERE c.lifetime_id = (o.definition->>'input')::bigint), false) THEN
            RAISE EXCEPTION 'permission denied for the input of sink "%"', o.name
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'Its owner can no longer read it.';
        END IF;
        EXECUTE format('SELECT count(*) FROM (%s) x',
                       decoupled._changes_sql((o.definition->>'input')::bigint, false))
            INTO v_rows USING v_from, greatest(v_t, v_from), v_from;
    END IF;
    RETURN true;  -- a source's generator is installed by the replica itself
END
$$;

------------------------------------------------------------------------------
-- Configuration reconciliation (C11.1)
------------------------------------------------------------------------------

-- The calling process's decoupled.* settings that the whole installation
-- shares (set in postgresql.conf; session settings and credentials —
-- decoupled.replica_conninfo — are not the catalog's business).
CREATE FUNCTION decoupled._process_settings() RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(jsonb_object_agg(s.name, s.setting ORDER BY s.name), '{}')
      FROM pg_settings s
     WHERE s.name LIKE 'decoupled.%' AND s.context IN ('postmaster', 'sighup')
       AND s.name <> 'decoupled.replica_conninfo'
$$;

-- Records the caller's settings as the active configuration with a
-- conditional update on config_version; a concurrent writer's update makes
-- it read again and retry.  Only the active deployment's processes write:
-- for any other deployment it changes nothing.  Returns the version that
-- holds the caller's settings, or NULL when it was not allowed to write.
CREATE FUNCTION decoupled.reconcile_configuration(deployment text DEFAULT NULL,
                                                  written_by text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := coalesce(reconcile_configuration.deployment,
                                  decoupled._active_deployment());
    v_settings   jsonb := decoupled._process_settings();
    v_written_by text := coalesce(reconcile_configuration.written_by,
                                  format('%s (pid %s)', session_user, pg_backend_pid()));
    c            decoupled.catalog_configuration;
BEGIN
    IF decoupled._deployment_state(v_deployment) <> 'active' THEN
        RETURN NULL;  -- a prewarming deployment never overwrites the active configuration
    END IF;
    LOOP
        SELECT * INTO STRICT c FROM decoupled.catalog_configuration;
        IF c.settings = v_settings THEN
            RETURN c.config_version;
        END IF;
        UPDATE decoupled.catalog_configuration x
           SET settings = v_settings, config_version = c.config_version + 1,
               changed_at = now(), written_by = v_written_by, deployment = v_deployment
         WHERE x.config_version = c.config_version;
        IF FOUND THEN
            RETURN c.config_version + 1;
        END IF;
        -- Another writer got there first: read its version and try again.
    END LOOP;
END
$$;
COMMENT ON FUNCTION decoupled.reconcile_configuration(text, text) IS
    'Record this process''s decoupled.* settings as the active configuration (conditional on config_version).';
