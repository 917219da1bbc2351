------------------------------------------------------------------------------
-- Compaction permission, publication, compaction and holds (brief C3, C4)
------------------------------------------------------------------------------

-- Remember the bound as committed before this transaction, once per
-- transaction, so the commit-time check can reject a regression whatever
-- happened in between.
CREATE FUNCTION decoupled._remember_committed_bound() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.committed_bound := coalesce(NEW.committed_bound, NEW.bound);
        NEW.writer := pg_current_xact_id();
    ELSIF OLD.writer IS DISTINCT FROM pg_current_xact_id() THEN
        NEW.committed_bound := OLD.bound;
        NEW.writer := pg_current_xact_id();
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER remember_committed_bound BEFORE INSERT OR UPDATE ON decoupled.catalog_bounds
    FOR EACH ROW EXECUTE FUNCTION decoupled._remember_committed_bound();

-- Validation on the transaction's final state, at commit (C3.2).
CREATE FUNCTION decoupled._permission_trigger() RETURNS trigger
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_permission_trigger';
CREATE CONSTRAINT TRIGGER bound_permission AFTER INSERT OR UPDATE ON decoupled.catalog_bounds
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION decoupled._permission_trigger();
CREATE CONSTRAINT TRIGGER requirement_permission
    AFTER INSERT OR UPDATE ON decoupled.catalog_requirements
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION decoupled._permission_trigger();
CREATE CONSTRAINT TRIGGER hold_permission AFTER INSERT OR UPDATE ON decoupled.catalog_holds
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION decoupled._permission_trigger();

-- One publication round (C3.5) over `ids`: propose upper - retain_history
-- capped by requirements and holds, and commit the bounds that moved.
-- Returns the number of bounds advanced.  A bound row another transaction
-- holds is skipped, never waited for, and queued again for a later round: a
-- transaction creating several views holds its inputs' bound rows, and
-- storage a round may hold, outside the global lock order
-- (extension/write_locks.hpp).
CREATE FUNCTION decoupled._publish_bounds(ids bigint[]) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count  integer;
    v_locked bigint[];
BEGIN
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    -- One lock order for everyone who locks several bound rows.
    v_locked := ARRAY(SELECT b.lifetime_id FROM decoupled.catalog_bounds b
                       WHERE b.lifetime_id = ANY (ids)
                       ORDER BY b.lifetime_id FOR UPDATE SKIP LOCKED);
    IF cardinality(v_locked) < cardinality(ids) THEN
        PERFORM decoupled._queue_for_publication(ARRAY(
            SELECT b.lifetime_id FROM decoupled.catalog_bounds b
             WHERE b.lifetime_id = ANY (ids) AND b.lifetime_id <> ALL (v_locked)));
        ids := v_locked;
    END IF;
    WITH proposal AS (
        SELECT b.lifetime_id,
               decoupled._propose_bound(
                   f.upper, decoupled._retain_ms(o.retain_history), b.bound,
                   (SELECT min(q.frontier) FROM decoupled.catalog_requirements q
                     WHERE q.lifetime_id = b.lifetime_id),
                   (SELECT min(h.frontier) FROM decoupled.catalog_holds h
                     WHERE h.lifetime_id = b.lifetime_id)) AS bound
          FROM decoupled.catalog_bounds b
          JOIN decoupled.catalog_frontiers f USING (lifetime_id)
          JOIN decoupled.catalog_objects o USING (lifetime_id)
         WHERE b.lifetime_id = ANY (ids) AND o.dropped_at IS NULL)
    UPDATE decoupled.catalog_bounds b SET bound = p.bound, changed_at = now()
      FROM proposal p
     WHERE b.lifetime_id = p.lifetime_id AND p.bound > b.bound;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Drains the publication queue into an array — of every collection, or of
-- those placed on `cluster` (NULL: registered tables) — so that the
-- planner sees how few changed and probes the catalog by key.  Rows locked
-- by another publication (draining them) or by a writer that relies on them
-- (_queue_for_publication) are skipped, never waited for: they stay for a
-- later round.
CREATE FUNCTION decoupled._drain_bound_queue(every boolean, cluster text) RETURNS bigint[]
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH drained AS (
        DELETE FROM decoupled.catalog_bound_queue q
         WHERE q.ctid = ANY (ARRAY(
                   SELECT p.ctid FROM decoupled.catalog_bound_queue p
                    WHERE every OR EXISTS (SELECT FROM decoupled.catalog_objects o
                                            WHERE o.lifetime_id = p.lifetime_id
                                              AND o.cluster IS NOT DISTINCT FROM
                                                  _drain_bound_queue.cluster)
                      FOR UPDATE SKIP LOCKED))
        RETURNING q.lifetime_id)
    SELECT array_agg(DISTINCT lifetime_id) FROM drained
$$;

-- Work follows the queue of collections that changed since the last round,
-- not the catalog's size.
CREATE FUNCTION decoupled.publish_bounds() RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT decoupled._publish_bounds(decoupled._drain_bound_queue(true, NULL))
$$;
COMMENT ON FUNCTION decoupled.publish_bounds() IS
    'One compaction-bound publication round over the collections that changed since the last one.';

-- Physically compact collections to their committed bound (C2.4, C3.6) —
-- every one, or those placed on `cluster` (NULL: registered tables): since
-- moves up to the bound, never past upper, never back, and only history
-- invisible at every time >= since is deleted.  Idempotent; late or
-- concurrent runs are harmless.  Returns how many collections moved.
-- Frontier rows and storage come before bound rows in the global lock
-- order, and a caller may hold bound rows (rounds compact before they
-- publish, so theirs do not): a frontier row a writer holds,
-- or storage locked against writers, is skipped (SKIP LOCKED, NOWAIT),
-- never waited for — that collection is compacted by a later round.
CREATE FUNCTION decoupled._apply_compaction(every boolean, cluster text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_since bigint;
    v_count integer := 0;
BEGIN
    FOR r IN SELECT f.lifetime_id, f.since, f.upper, b.bound
               FROM decoupled.catalog_frontiers f
               JOIN decoupled.catalog_bounds b USING (lifetime_id)
               JOIN decoupled.catalog_objects o USING (lifetime_id)
              WHERE o.dropped_at IS NULL AND f.since < least(b.bound, f.upper)
                AND (every OR o.cluster IS NOT DISTINCT FROM _apply_compaction.cluster)
              ORDER BY f.lifetime_id
                FOR UPDATE OF f SKIP LOCKED
    LOOP
        v_since := decoupled._compacted_since(r.since, r.bound, r.upper);
        CONTINUE WHEN v_since <= r.since;
        -- Storage comes before bound rows in the lock order too: a view's
        -- creation holds its inputs' storage (SHARE, building arrangements)
        -- while it waits for their bound rows, which our caller may hold.
        -- Storage someone locks against writers is compacted by a later
        -- round, never waited for.
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ROW EXCLUSIVE MODE NOWAIT',
                           decoupled._storage(r.lifetime_id, 'dead'));
        EXCEPTION WHEN lock_not_available THEN
            CONTINUE;
        END;
        EXECUTE format('DELETE FROM %s WHERE valid_to <= $1', decoupled._storage(r.lifetime_id, 'dead'))
            USING v_since;
        UPDATE decoupled.catalog_frontiers f SET since = v_since, changed_at = now()
         WHERE f.lifetime_id = r.lifetime_id;
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

CREATE FUNCTION decoupled.apply_compaction() RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT decoupled._apply_compaction(true, NULL)
$$;
COMMENT ON FUNCTION decoupled.apply_compaction() IS
    'Compact every collection''s history up to its committed bound.';

-- The controller's round for what no replica maintains: registered tables
-- (bounds, compaction, and WAL capture's health in status history) and the
-- storage of dropped collections.
-- Compaction first, publication last: a publication's bound rows stay
-- locked until the round commits, and every view step over these tables
-- locks them too (_advance_requirements_of), so they must not stay locked
-- through compaction's deletes (a replica waited out 50 ms of them at
-- every pass).  Compaction reaches what the previous round published.
CREATE FUNCTION decoupled._maintain_tables() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count integer := decoupled._apply_compaction(false, NULL);
BEGIN
    PERFORM decoupled._record_capture_health();
    PERFORM decoupled.finalize_dropped();
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, NULL));
    RETURN v_count;
END
$$;

------------------------------------------------------------------------------
-- Holds (C4)
--
-- A session's holds live in shared memory (extension/sessions.cpp); its
-- adapter incarnation's durable hold on a collection is one row in
-- catalog_holds at or below all of them, written only by that incarnation's
-- adapterd, in transactions of its own.  A hold under established
-- protection (the committed durable hold already covers it) writes nothing
-- durable; a new or stronger one waits until adapterd has committed
-- protection for it, so it is durable before use whatever the session's
-- transaction does.  Releasing writes nothing either: adapterd raises or
-- removes durable holds at its next publication (lazy, coalesced
-- weakening).
------------------------------------------------------------------------------

-- Who called the entry point (extension/caller.cpp): public functions that
-- act on a caller's behalf are C entry points that record their caller and
-- call the SECURITY DEFINER implementation of the same name with a leading
-- underscore, which nobody may call directly.  Volatile: each call reads
-- the innermost caller frame at that moment.
CREATE FUNCTION decoupled._caller() RETURNS oid
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_caller';
CREATE FUNCTION decoupled._caller_is_admin() RETURNS boolean
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_caller_is_admin';
CREATE FUNCTION decoupled._caller_can_select(relation oid) RETURNS boolean
    LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'decoupled_caller_can_select';
CREATE FUNCTION decoupled._caller_schema() RETURNS text
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_caller_schema';

CREATE FUNCTION decoupled._session_attachment(adapter text) RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_session_attachment';
CREATE FUNCTION decoupled._session_attach(adapter text, incarnation bigint) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_session_attach';
CREATE FUNCTION decoupled._hold_register(incarnation bigint, lifetime_id bigint, frontier bigint,
                                         subscription boolean DEFAULT false)
    RETURNS bigint LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_register';
CREATE FUNCTION decoupled._hold_release(hold_id bigint, any_session boolean) RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_release';
CREATE FUNCTION decoupled._backend_start() RETURNS timestamptz
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_backend_start';
CREATE FUNCTION decoupled._shared_holds()
    RETURNS TABLE (hold_id bigint, incarnation bigint, lifetime_id bigint, frontier bigint,
                   session_pid integer, subscription boolean)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_shared_holds';

CREATE FUNCTION decoupled._publication_in_flight(incarnation bigint) RETURNS boolean
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_publication_in_flight';
CREATE FUNCTION decoupled._hold_confirm(hold_id bigint, incarnation bigint) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_confirm';
CREATE FUNCTION decoupled._request_hold_publication(incarnation bigint) RETURNS boolean
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_request_hold_publication';
CREATE FUNCTION decoupled._hold_advance(hold_id bigint, frontier bigint) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_advance';

-- The session's owner (brief C7.1, C7.4): the incarnation of its adapter
-- (decoupled.adapter) in the active deployment that it attached to at its
-- first protected operation.  A retired one is an error, never a silent
-- move to its successor; an undeclared or stopped adapter is an error too.
CREATE FUNCTION decoupled._session_owner(OUT adapter text, OUT deployment text,
                                         OUT incarnation bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_attached bigint;
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'holds and subscriptions cannot be taken on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'Protection is recorded durably, and a standby writes nothing.',
                  HINT = 'Take holds and subscriptions on the primary; AS OF reads within '
                         'retain_history work here without them.';
    END IF;
    adapter := coalesce(nullif(current_setting('decoupled.adapter', true), ''), 'default');
    deployment := decoupled._active_deployment();
    IF NOT EXISTS (SELECT FROM decoupled.catalog_adapters a
                    WHERE a.name = _session_owner.adapter
                      AND a.deployment = _session_owner.deployment) THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"',
                        _session_owner.adapter, _session_owner.deployment
            USING ERRCODE = 'undefined_object',
                  HINT = 'Declare it with decoupled.declare_adapter(), or set decoupled.adapter.';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_adapter_stops s
                WHERE s.adapter = _session_owner.adapter
                  AND s.deployment = _session_owner.deployment) THEN
        RAISE EXCEPTION 'adapter "%" is stopped', _session_owner.adapter
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'decoupled.start_adapter() starts it again; its holds stay meanwhile.';
    END IF;
    v_attached := decoupled._session_attachment(_session_owner.adapter);
    IF v_attached IS NOT NULL THEN
        IF NOT EXISTS (SELECT FROM decoupled.catalog_adapter_incarnations i
                        WHERE i.incarnation = v_attached AND i.retired_at IS NULL) THEN
            RAISE EXCEPTION 'incarnation % of adapter "%" that this session attached to was retired',
                            v_attached, _session_owner.adapter
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'Its holds are released; the session cannot take protection '
                               'from its successor.',
                      HINT = 'Reconnect to attach to the adapter''s current incarnation.';
        END IF;
        incarnation := v_attached;
        RETURN;
    END IF;
    -- First protected operation: attach to the live incarnation, which
    -- adapterd registers when it starts.
    FOR attempt IN 1 .. 500 LOOP
        SELECT a.incarnation INTO incarnation FROM decoupled.catalog_adapter_incarnations a
         WHERE a.adapter = _session_owner.adapter AND a.deployment = _session_owner.deployment
           AND a.retired_at IS NULL;
        EXIT WHEN FOUND;
        PERFORM pg_sleep(0.01);
    END LOOP;
    IF incarnation IS NULL THEN
        RAISE EXCEPTION 'adapter "%" has no running incarnation', _session_owner.adapter
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Its adapterd has not started: see decoupled.supervised.';
    END IF;
    INSERT INTO decoupled.session_records
           (adapter, deployment, incarnation, session_pid, connected_at, role)
    VALUES (_session_owner.adapter, _session_owner.deployment, incarnation, pg_backend_pid(),
            decoupled._backend_start(), session_user)
    ON CONFLICT DO NOTHING;
    PERFORM decoupled._session_attach(_session_owner.adapter, incarnation);
END
$$;

-- Registers a session hold at `frontier` under the session's owner and
-- makes sure the owner's committed durable hold covers it (C4.2).
CREATE FUNCTION decoupled._protect(lifetime_id bigint, frontier bigint, subscription boolean)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_owner   record;
    v_id      bigint;
    v_durable bigint;
BEGIN
    v_owner := decoupled._session_owner();
    v_id := decoupled._hold_register(v_owner.incarnation, _protect.lifetime_id, _protect.frontier,
                                     _protect.subscription);
    -- Registered first: a publication that starts from now on sees this
    -- hold; one in flight may still raise the durable hold past it.  Only
    -- under read committed does the next statement see the latest commit.
    IF NOT decoupled._publication_in_flight(v_owner.incarnation)
       AND current_setting('transaction_isolation') = 'read committed' THEN
        SELECT h.frontier INTO v_durable FROM decoupled.catalog_holds h
         WHERE h.incarnation = v_owner.incarnation AND h.lifetime_id = _protect.lifetime_id;
    END IF;
    IF v_durable IS NULL OR v_durable > _protect.frontier THEN
        PERFORM decoupled._hold_confirm(v_id, v_owner.incarnation);
    END IF;
    RETURN v_id;
END
$$;

-- A hold at the latest readable time (as_of NULL), first tried at
-- `frontier`.  The compaction bound may pass that time before adapterd
-- commits the hold (with little retained history it follows the upper
-- closely): the caller asked for "the latest", not for that time, so the
-- latest time is read again and held instead.  A transaction whose snapshot
-- cannot see newer frontiers gets the refusal after a few tries: the times
-- it can read are compacted.
CREATE FUNCTION decoupled._protect_latest(lifetime_id bigint, frontier bigint, subscription boolean,
                                          OUT hold_id bigint, OUT held_at bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    attempt integer := 1;
BEGIN
    held_at := frontier;
    LOOP
        BEGIN
            hold_id := decoupled._protect(_protect_latest.lifetime_id, held_at, subscription);
            RETURN;
        EXCEPTION WHEN check_violation THEN
            IF attempt >= 10 AND current_setting('transaction_isolation') <> 'read committed' THEN
                RAISE EXCEPTION 'the latest time this transaction can read of collection "%" is compacted',
                                (SELECT o.name FROM decoupled.catalog_objects o
                                  WHERE o.lifetime_id = _protect_latest.lifetime_id)
                    USING ERRCODE = 'check_violation',
                          DETAIL = format('Its snapshot sees the collection up to %s; compaction '
                                          'has passed that time since.', held_at),
                          HINT = 'Take the hold in a new transaction, or under READ COMMITTED.';
            ELSIF attempt >= 10 THEN
                RAISE;
            END IF;
        END;
        attempt := attempt + 1;
        SELECT greatest(f.since, b.bound, f.upper - 1) INTO held_at
          FROM decoupled.catalog_frontiers f
          LEFT JOIN decoupled.catalog_bounds b USING (lifetime_id)
         WHERE f.lifetime_id = _protect_latest.lifetime_id;
    END LOOP;
END
$$;

-- What a hold or a subscription (`verb`: "held", "subscribed to") starts
-- from: the collection, checked and read with its frontiers, and the time
-- asked for (NULL: the latest readable time, or since while nothing is).
CREATE FUNCTION decoupled._protection_request(collection text, as_of bigint, verb text,
                                              OUT o decoupled.catalog_objects,
                                              OUT frontier bigint, OUT since bigint,
                                              OUT upper bigint, OUT bound bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink; only collections can be %', o.name, verb
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF o.relation IS NULL OR NOT decoupled._caller_can_select(o.relation) THEN
        RAISE EXCEPTION 'permission denied for % "%"', o.kind, o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Protecting history needs the privilege to read it.';
    END IF;
    IF as_of < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', as_of
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One statement, one snapshot: read apart, a bound published in
    -- between could pass the latest time read before it.
    SELECT f.since, f.upper, b.bound INTO since, upper, bound
      FROM decoupled.catalog_frontiers f
      LEFT JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE f.lifetime_id = (o).lifetime_id;
    -- The latest readable time; with no retained history the bound may
    -- have reached the upper, and the hold is at it (readable from the
    -- next tick on).
    frontier := coalesce(as_of, greatest(since, bound, upper - 1));
END
$$;

CREATE FUNCTION decoupled.acquire_hold(collection text, as_of bigint DEFAULT NULL)
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._acquire_hold(collection text, as_of bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record := decoupled._protection_request(collection, as_of, 'held');
BEGIN
    -- Checked again, authoritatively, when adapterd writes the durable hold
    -- and at commit (C3.2); this only reports the common case early.
    IF r.frontier < r.bound THEN
        RAISE EXCEPTION 'hold on "%" is below its compaction bound', (r.o).name
            USING ERRCODE = 'check_violation',
                  DETAIL = format('The hold would be at %s; the bound is %s and history before it '
                                  'may already be compacted.', r.frontier, r.bound),
                  HINT = format('Hold at %s or later.', r.bound);
    END IF;
    -- Tests stop here: checked early, not yet protected.
    PERFORM decoupled._wait_point('acquire_hold:checked');
    IF as_of IS NULL THEN
        RETURN (decoupled._protect_latest((r.o).lifetime_id, r.frontier, false)).hold_id;
    END IF;
    RETURN decoupled._protect((r.o).lifetime_id, r.frontier, false);
END
$$;
COMMENT ON FUNCTION decoupled.acquire_hold(text, bigint) IS
    'Protect reads of a collection at times >= as_of (NULL: the latest readable time); returns the hold id.';

CREATE FUNCTION decoupled.release_hold(id bigint) RETURNS void
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._release_hold(id bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_incarnation bigint;
    v_adapter     text;
BEGIN
    IF _release_hold.id IS NULL THEN
        RAISE EXCEPTION 'hold id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT s.incarnation INTO v_incarnation FROM decoupled._shared_holds() s
     WHERE s.hold_id = _release_hold.id;
    -- The durable protection is lifted lazily, at adapterd's next hold
    -- publication (decoupled.publish_holds() runs one now).
    PERFORM decoupled._hold_release(_release_hold.id, decoupled._caller_is_admin());
    -- A hold of a retired incarnation protected nothing since it was
    -- retired: released now, and said, as at the session's other protected
    -- operations (C7.4).
    IF v_incarnation IS NOT NULL
       AND NOT EXISTS (SELECT FROM decoupled.catalog_adapter_incarnations i
                        WHERE i.incarnation = v_incarnation AND i.retired_at IS NULL) THEN
        SELECT i.adapter INTO v_adapter FROM decoupled.catalog_adapter_incarnations i
         WHERE i.incarnation = v_incarnation;
        RAISE EXCEPTION '%',
                        CASE WHEN v_adapter IS NULL
                             THEN format('incarnation %s that hold %s was taken under belongs to a '
                                         'catalog dropped since', v_incarnation, _release_hold.id)
                             ELSE format('incarnation %s of adapter "%s" that hold %s was taken '
                                         'under was retired', v_incarnation, v_adapter,
                                         _release_hold.id) END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its holds were released when it was retired; compaction may have '
                           'passed this one since.  It is gone now.',
                  HINT = 'Reconnect to attach to the adapter''s current incarnation.';
    END IF;
END
$$;
COMMENT ON FUNCTION decoupled.release_hold(bigint) IS
    'Release a hold; compaction may pass its frontier after the next hold publication.';

-- adapterd's side of a round (bgworker/adapterd.cpp): `lids` are the
-- collections its sessions hold, with the lowest hold of each (`mins`) and
-- the lowest one waiting for durable protection (`pending`, -1: none).
-- Lowers or creates the durable holds the waiting ones need and, with
-- `publish`, raises the others to the lowest session hold and removes
-- those no session holds.  Returns (collection, bound) pairs, flattened,
-- for collections with waiting holds below their compaction bound: those
-- holds are refused.
CREATE FUNCTION decoupled._adapter_apply(incarnation bigint, lids bigint[], mins bigint[],
                                         pending bigint[], publish boolean) RETURNS bigint[]
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_adapter_incarnations;
    v_failed  bigint[] := '{}';
    v_bound   bigint;
    v_changed bigint[];
    k         integer;
    v_timeout text := current_setting('lock_timeout');
BEGIN
    SELECT * INTO i FROM decoupled.catalog_adapter_incarnations a
     WHERE a.incarnation = _adapter_apply.incarnation;
    -- The bounds of the collections whose durable holds this round may
    -- write, in the one lock order of everyone who locks several bound rows
    -- (ascending id), and FOR UPDATE as the commit-time permission check
    -- takes them (a shared lock would have to be upgraded there, and two
    -- upgraders deadlock): publication cannot pass them before this commits.
    -- Not waited for beyond a moment (far below deadlock_timeout): a
    -- transaction creating several views holds its inputs' bound rows
    -- outside that order (extension/write_locks.hpp); adapterd tries the
    -- round again shortly (ZD004).
    PERFORM set_config('lock_timeout', '20ms', true);
    BEGIN
        PERFORM FROM decoupled.catalog_bounds b
         WHERE b.lifetime_id IN (SELECT l FROM unnest(lids, pending) AS p(l, w)
                                  WHERE w >= 0 OR publish)
         ORDER BY b.lifetime_id FOR UPDATE;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'compaction bounds of held collections are locked by another transaction'
            USING ERRCODE = 'ZD004',  -- busy: the protocol's own class
                  HINT = 'adapterd tries again shortly.';
    END;
    PERFORM set_config('lock_timeout', v_timeout, true);
    FOR k IN 1 .. coalesce(cardinality(lids), 0) LOOP
        CONTINUE WHEN pending[k] < 0;
        SELECT b.bound INTO v_bound FROM decoupled.catalog_bounds b
          JOIN decoupled.catalog_objects o USING (lifetime_id)
         WHERE b.lifetime_id = lids[k] AND o.dropped_at IS NULL;
        IF NOT FOUND THEN
            v_failed := v_failed || ARRAY[lids[k], 9223372036854775807];  -- dropped
            CONTINUE;
        END IF;
        -- Holds below the bound are refused; those at or above it protected.
        IF pending[k] < v_bound THEN
            v_failed := v_failed || ARRAY[lids[k], v_bound];
        END IF;
        INSERT INTO decoupled.catalog_holds (adapter, deployment, incarnation, lifetime_id, frontier)
        VALUES (i.adapter, i.deployment, i.incarnation, lids[k], greatest(pending[k], v_bound))
        ON CONFLICT (incarnation, lifetime_id) DO UPDATE
           SET frontier = least(catalog_holds.frontier, EXCLUDED.frontier), acquired_at = now()
         WHERE catalog_holds.frontier > EXCLUDED.frontier;
    END LOOP;
    IF publish THEN
        WITH kept AS (SELECT * FROM unnest(lids, mins) AS k(lifetime_id, frontier)),
        gone AS (
            DELETE FROM decoupled.catalog_holds h
             WHERE h.incarnation = _adapter_apply.incarnation
               AND NOT EXISTS (SELECT FROM kept k WHERE k.lifetime_id = h.lifetime_id)
            RETURNING h.lifetime_id),
        raised AS (
            UPDATE decoupled.catalog_holds h SET frontier = k.frontier
              FROM kept k
             WHERE h.incarnation = _adapter_apply.incarnation
               AND h.lifetime_id = k.lifetime_id AND h.frontier < k.frontier
            RETURNING h.lifetime_id)
        SELECT array_agg(lifetime_id) INTO v_changed
          FROM (SELECT lifetime_id FROM gone UNION SELECT lifetime_id FROM raised) c;
        PERFORM decoupled._queue_for_publication(v_changed);
    END IF;
    RETURN v_failed;
END
$$;

-- One hold publication now, by the adapterd of the session's adapter
-- (adapterd does it every decoupled.hold_publication_interval).  Returns
-- false when that adapter has no running adapterd.
CREATE FUNCTION decoupled.publish_holds() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_incarnation bigint;
BEGIN
    SELECT i.incarnation INTO v_incarnation FROM decoupled.catalog_adapter_incarnations i
     WHERE i.adapter = coalesce(nullif(current_setting('decoupled.adapter', true), ''), 'default')
       AND i.deployment = decoupled._active_deployment() AND i.retired_at IS NULL;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN decoupled._request_hold_publication(v_incarnation);
END
$$;
COMMENT ON FUNCTION decoupled.publish_holds() IS
    'Publish the weakening of the current adapter''s holds now (released holds lift their protection).';

------------------------------------------------------------------------------
-- Dry run (C1.5)
------------------------------------------------------------------------------

-- Runs one catalog call in a subtransaction with every deferred admission
-- check made immediate, reports what it created and dropped or the error it
-- hit, and rolls it all back.
--
-- No SET search_path: the call runs as written, as the caller and in the
-- caller's search_path.  Nothing else does: the function takes that path
-- with a qualified call first and runs everything but the call in
-- pg_catalog's (a role that may create in a schema on the caller's path
-- would otherwise have its lookalike of unnest() or split_part() run with
-- the caller's rights; the block's rollback restores pg_catalog's after
-- the call).
CREATE FUNCTION decoupled.dry_run(sql text)
RETURNS TABLE (action text, kind text, name text, detail text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    -- Types qualified too: PL/pgSQL resolves them when it compiles the
    -- function, in the caller's path.
    v_path     constant pg_catalog.text := pg_catalog.current_setting('search_path');
    v_function pg_catalog.text;
    v_before   pg_catalog.text[];
    v_after    pg_catalog.text[];
    v_marker   constant pg_catalog.text := 'pg_decoupled dry run';
    v_detail   pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF sql IS NULL THEN
        RAISE EXCEPTION 'sql must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Keywords and unquoted names in any case, as PostgreSQL reads them.
    v_function := pg_catalog.lower((pg_catalog.regexp_match(
        sql, '^\s*SELECT\s+decoupled\.([a-z_]+)\s*\(', 'i'))[1]);
    -- A release takes effect at once, and no rollback brings the hold
    -- back (README, "Holds"): running it here would release it for good.
    IF v_function = 'release_hold' THEN
        RAISE EXCEPTION 'dry_run cannot try release_hold'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A release takes effect at once; the rollback that ends a dry run '
                           'would not bring the hold back.',
                  HINT = 'decoupled.session_holds lists the holds this session may release.';
    END IF;
    IF v_function IS NULL OR sql ~ ';\s*\S'
       OR v_function NOT IN ('create_cluster', 'alter_cluster', 'drop_cluster',
                             'declare_adapter', 'drop_adapter', 'register_table',
                             'unregister_table', 'acquire_hold',
                             'publish_bounds', 'apply_compaction', 'create_source',
                             'create_materialized_view', 'create_sink', 'drop',
                             'create_deployment', 'drop_deployment', 'create_replica',
                             'drop_replica') THEN
        RAISE EXCEPTION 'dry_run takes one call of a catalog function'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the call as text, for example ''SELECT decoupled.create_cluster(...)''.';
    END IF;

    v_before := decoupled._catalog_inventory();
    BEGIN
        SET CONSTRAINTS ALL IMMEDIATE;
        PERFORM pg_catalog.set_config('search_path', v_path, true);
        EXECUTE sql;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        v_after := decoupled._catalog_inventory();
        RAISE EXCEPTION USING ERRCODE = 'DC999', MESSAGE = v_marker;
    EXCEPTION WHEN OTHERS THEN
        IF SQLSTATE <> 'DC999' OR SQLERRM <> v_marker THEN
            GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
            RETURN QUERY SELECT 'error'::text, NULL::text, NULL::text,
                                SQLSTATE || ': ' || SQLERRM
                                || CASE WHEN v_detail <> '' THEN ' (' || v_detail || ')' ELSE '' END;
            PERFORM pg_catalog.set_config('search_path', v_path, true);
            RETURN;
        END IF;
    END;
    RETURN QUERY
        SELECT 'create', split_part(e, ':', 1), substr(e, length(split_part(e, ':', 1)) + 2), NULL
          FROM unnest(v_after) e WHERE e <> ALL (v_before)
        UNION ALL
        SELECT 'drop', split_part(e, ':', 1), substr(e, length(split_part(e, ':', 1)) + 2), NULL
          FROM unnest(v_before) e WHERE e <> ALL (v_after)
        ORDER BY 1, 2, 3;
    RETURN QUERY SELECT 'admitted'::text, NULL::text, NULL::text, 'no admission error'::text;
    PERFORM pg_catalog.set_config('search_path', v_path, true);
END
$$;
COMMENT ON FUNCTION decoupled.dry_run(text) IS
    'Report what a catalog call would create or drop, or its admission error, without any effect.';

-- Everything a catalog call can create or drop, as "kind:name" strings.
CREATE FUNCTION decoupled._catalog_inventory() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(e), '{}') FROM (
        SELECT 'cluster:' || name FROM decoupled.catalog_clusters
        UNION ALL SELECT 'replica:' || cluster || '.' || name FROM decoupled.catalog_replicas
        UNION ALL SELECT 'deployment:' || name FROM decoupled.catalog_deployments
        UNION ALL SELECT 'adapter:' || name || ' (' || deployment || ')'
                    FROM decoupled.catalog_adapters
        UNION ALL SELECT kind || ':' || name FROM decoupled.catalog_objects WHERE dropped_at IS NULL
        UNION ALL SELECT 'requirement:' || c.name || ' for ' || r.name
                    FROM decoupled.catalog_requirements q
                    JOIN decoupled.catalog_objects c ON c.lifetime_id = q.lifetime_id
                    JOIN decoupled.catalog_objects r ON r.lifetime_id = q.required_by
        UNION ALL SELECT 'hold:' || o.name || ' at ' || h.frontier || ' (hold ' || h.hold_id || ')'
                    FROM decoupled.catalog_holds h JOIN decoupled.catalog_objects o USING (lifetime_id)
    ) x(e)
$$;
