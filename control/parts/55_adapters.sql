------------------------------------------------------------------------------
-- Adapters: adapterd's incarnations, stopping and starting, retirement
-- (brief C4.3, C7.1, C9.1)
--
-- The controller runs one adapterd per declared, not stopped adapter of a
-- live deployment.  Each start registers a new incarnation and retires the
-- older ones of that adapter and deployment (and only those); adapterd then
-- heartbeats, reclaims its predecessors' rows (their holds, sessions and
-- subscriptions) and publishes the weakening of its sessions' holds.  An
-- incarnation's holds outlive its process: silence never expires a hold.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._adapter_change(adapter text, OUT deployment text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._check_name('adapter', adapter);
    PERFORM decoupled._begin_catalog_change();
    deployment := decoupled._active_deployment();
    PERFORM FROM decoupled.catalog_adapters a
     WHERE a.name = _adapter_change.adapter AND a.deployment = _adapter_change.deployment FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"', adapter, deployment
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;

CREATE FUNCTION decoupled.stop_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := decoupled._adapter_change(stop_adapter.name);
BEGIN
    INSERT INTO decoupled.catalog_adapter_stops (adapter, deployment)
    VALUES (stop_adapter.name, v_deployment) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE NOTICE 'adapter "%" is already stopped', stop_adapter.name;
        RETURN;
    END IF;
    -- Its process ends now, not when the controller next looks: a
    -- start_adapter() right after would otherwise undo the stop before the
    -- controller saw it, and the old incarnation would go on.  The
    -- controller starts none while the stop stands, and a new incarnation
    -- once it is lifted.
    PERFORM pg_terminate_backend(s.pid) FROM decoupled.supervision() s
     WHERE s.kind = 'adapterd' AND s.name = stop_adapter.name
       AND s.deployment = v_deployment AND s.pid > 0;
END
$$;
COMMENT ON FUNCTION decoupled.stop_adapter(text) IS
    'Stop an adapter''s process (an outage on purpose); its declaration, incarnation and holds stay.';

CREATE FUNCTION decoupled.start_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := decoupled._adapter_change(start_adapter.name);
BEGIN
    DELETE FROM decoupled.catalog_adapter_stops s
     WHERE s.adapter = start_adapter.name AND s.deployment = v_deployment;
    IF NOT FOUND THEN
        RAISE NOTICE 'adapter "%" is not stopped', start_adapter.name;
    END IF;
END
$$;
COMMENT ON FUNCTION decoupled.start_adapter(text) IS
    'Start a stopped adapter''s process again; it runs as a new incarnation.';

-- Releases what an incarnation owned: its durable holds (the collections
-- are queued for bound publication), sessions and their subscriptions.
CREATE FUNCTION decoupled._reclaim_incarnation(incarnation bigint) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH released AS (
        DELETE FROM decoupled.catalog_holds h WHERE h.incarnation = _reclaim_incarnation.incarnation
        RETURNING h.lifetime_id)
    SELECT decoupled._queue_for_publication(array_agg(lifetime_id)) FROM released;
    DELETE FROM decoupled.session_records s WHERE s.incarnation = _reclaim_incarnation.incarnation;
    UPDATE decoupled.catalog_adapter_incarnations i
       SET reclaimed_at = now(), retired_at = coalesce(retired_at, now()), status = 'stopped'
     WHERE i.incarnation = _reclaim_incarnation.incarnation;
$$;

CREATE FUNCTION decoupled.retire_incarnation(adapter text, incarnation bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._check_name('adapter', adapter);
    IF retire_incarnation.incarnation IS NULL THEN
        RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM FROM decoupled.catalog_adapter_incarnations i
     WHERE i.adapter = retire_incarnation.adapter AND i.incarnation = retire_incarnation.incarnation
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" has no incarnation %', adapter, retire_incarnation.incarnation
            USING ERRCODE = 'undefined_object';
    END IF;
    -- Exactly this owner's holds and sessions; a peer's are never touched.
    PERFORM decoupled._reclaim_incarnation(retire_incarnation.incarnation);
END
$$;
COMMENT ON FUNCTION decoupled.retire_incarnation(text, bigint) IS
    'Retire an adapter incarnation now, releasing exactly its holds; its sessions must reconnect.';

-- adapterd's start: a new incarnation, retiring the older ones of this
-- adapter and deployment.
CREATE FUNCTION decoupled._adapter_start(adapter text, deployment text, pid integer)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_incarnation bigint;
BEGIN
    PERFORM FROM decoupled.catalog_adapters a
     WHERE a.name = _adapter_start.adapter AND a.deployment = _adapter_start.deployment FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"', adapter, deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_adapter_stops s
                WHERE s.adapter = _adapter_start.adapter AND s.deployment = _adapter_start.deployment)
    THEN
        RAISE EXCEPTION 'adapter "%" is stopped', adapter
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE decoupled.catalog_adapter_incarnations i SET retired_at = now(), status = 'stopped'
     WHERE i.adapter = _adapter_start.adapter AND i.deployment = _adapter_start.deployment
       AND i.retired_at IS NULL;
    BEGIN
        INSERT INTO decoupled.catalog_adapter_incarnations
               (adapter, deployment, incarnation, pid, status, heartbeat_at)
        VALUES (adapter, deployment, decoupled._next_incarnation(), pid, 'running', now())
        RETURNING incarnation INTO v_incarnation;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'adapter "%" was started by another process at the same time', adapter
            USING ERRCODE = 'ZD003',  -- lost race: the protocol's own class
                  DETAIL = 'Only one incarnation of an adapter is live in a deployment.';
    END;
    RETURN v_incarnation;
END
$$;

-- The start of every adapterd round: heartbeat (fenced: a retired
-- incarnation is told to stop), reclaim retired predecessors and the rows
-- of ended sessions.  The sessions' holds follow in the same transaction
-- (_adapter_apply).
CREATE FUNCTION decoupled._adapter_round(incarnation bigint)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_adapter_incarnations;
    r bigint;
BEGIN
    SELECT * INTO i FROM decoupled.catalog_adapter_incarnations a
     WHERE a.incarnation = _adapter_round.incarnation AND a.retired_at IS NULL FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter incarnation % is not current', _adapter_round.incarnation
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'It was retired or replaced; a fenced adapterd stops.';
    END IF;
    UPDATE decoupled.catalog_adapter_incarnations a SET heartbeat_at = now(), status = 'running'
     WHERE a.incarnation = _adapter_round.incarnation;
    FOR r IN SELECT a.incarnation FROM decoupled.catalog_adapter_incarnations a
              WHERE a.adapter = i.adapter AND a.deployment = i.deployment
                AND a.retired_at IS NOT NULL AND a.reclaimed_at IS NULL
    LOOP
        PERFORM decoupled._reclaim_incarnation(r);
    END LOOP;
    DELETE FROM decoupled.session_records s
     WHERE s.incarnation = _adapter_round.incarnation
       AND NOT EXISTS (SELECT FROM pg_stat_activity a
                        WHERE a.pid = s.session_pid AND a.backend_start = s.connected_at);
END
$$;
