------------------------------------------------------------------------------
-- Public views (brief C12).  Missing observations are NULL, never 0.
------------------------------------------------------------------------------

CREATE VIEW decoupled.catalog AS
    SELECT schema_version, catalog_version, initialized_at, changed_at
      FROM decoupled.catalog_meta;

CREATE VIEW decoupled.controller AS
    SELECT * FROM decoupled.controller_status();

CREATE VIEW decoupled.supervised AS
    SELECT * FROM decoupled.supervision();

-- The relay that carries wake-ups out of the server (C8): in_process (the
-- relay worker's NOTIFY decoupled_wakeup; followers are LISTEN sessions, not
-- counted) or external (pg_decoupled_relayd's segment: its daemon, whether
-- its heartbeat is fresh, and the processes attached to it).
CREATE VIEW decoupled.relay AS
    SELECT * FROM decoupled._relay_state();

-- unhydrated: how many objects a live deployment has not hydrated yet
-- (promote() waits for 0).
CREATE VIEW decoupled.deployments AS
    SELECT d.name::text, d.state, d.state = 'active' AS writes_enabled, d.created_at,
           d.promoted_at, d.retired_at,
           CASE WHEN d.state <> 'retired'
                THEN (SELECT count(*) FROM decoupled._unhydrated(d.name)) END AS unhydrated
      FROM decoupled.catalog_deployments d;

-- The active configuration the controller reconciled (C11.1).
CREATE VIEW decoupled.configuration AS
    SELECT config_version, settings, written_by, deployment::text, changed_at
      FROM decoupled.catalog_configuration;

CREATE VIEW decoupled.clusters AS
    SELECT c.name::text, c.managed, c.replication_factor,
           (SELECT count(*) FROM decoupled.catalog_replicas r WHERE r.cluster = c.name)
               AS replicas,
           c.created_at
      FROM decoupled.catalog_clusters c;

-- A process that reports every second (replicas, adapterd) and has not for
-- 30 s is `stalled`, whatever it said last: it is hung, gone (an external
-- replicad killed), or busy in one very long step.
-- Each replica declaration as realized by each live deployment.
CREATE VIEW decoupled.cluster_replicas AS
    SELECT r.cluster::text, r.name::text AS replica, d.name::text AS deployment,
           i.incarnation, i.pid,
           CASE WHEN i.status IN ('starting', 'running')
                     AND coalesce(i.heartbeat_at, i.started_at)
                         < clock_timestamp() - interval '30 seconds'
                THEN 'stalled' ELSE i.status END AS status,
           r.replica_id, i.host, r.external, i.heartbeat_at
      FROM decoupled.catalog_replicas r
      CROSS JOIN decoupled.catalog_deployments d
      LEFT JOIN decoupled.catalog_replica_incarnations i
             ON i.replica_id = r.replica_id AND i.deployment = d.name
            AND i.retired_at IS NULL
     WHERE d.state <> 'retired';

CREATE VIEW decoupled.replica_statuses AS
    SELECT r.cluster::text AS name, r.name::text AS replica, i.deployment::text,
           i.incarnation,
           CASE WHEN s.silent THEN 'stalled' ELSE i.status END AS status,
           CASE WHEN s.silent
                THEN format('replica has not reported for %s s',
                            floor(extract(epoch FROM clock_timestamp()
                                                     - coalesce(i.heartbeat_at, i.started_at))))
                ELSE i.error END AS error,
           CASE WHEN s.silent
                THEN 'It is hung, gone, or busy in one long step; an external replica must be '
                     'started again by whoever runs it.'
                ELSE i.hint END AS hint,
           coalesce(i.heartbeat_at, i.started_at) AS updated_at
      FROM decoupled.catalog_replica_incarnations i
      JOIN decoupled.catalog_replicas r USING (replica_id)
      CROSS JOIN LATERAL (SELECT i.status IN ('starting', 'running')
                                 AND coalesce(i.heartbeat_at, i.started_at)
                                     < clock_timestamp() - interval '30 seconds' AS silent) s
     WHERE i.retired_at IS NULL;

-- An adapter stopped on purpose shows `stopped`, with the incarnation that
-- still owns its holds.  Adapters of retired deployments are gone for good.
CREATE VIEW decoupled.adapters AS
    SELECT a.name::text, a.deployment::text, i.incarnation, i.pid,
           CASE WHEN s.adapter IS NOT NULL THEN 'stopped'
                WHEN i.status IN ('starting', 'running')
                     AND coalesce(i.heartbeat_at, i.started_at)
                         < clock_timestamp() - interval '30 seconds' THEN 'stalled'
                ELSE i.status END AS status,
           i.heartbeat_at, s.stopped_at
      FROM decoupled.catalog_adapters a
      LEFT JOIN decoupled.catalog_adapter_incarnations i
             ON i.adapter = a.name AND i.deployment = a.deployment AND i.retired_at IS NULL
      LEFT JOIN decoupled.catalog_adapter_stops s
             ON s.adapter = a.name AND s.deployment = a.deployment
     WHERE a.deployment IN (SELECT d.name FROM decoupled.catalog_deployments d
                             WHERE d.state <> 'retired');

CREATE VIEW decoupled.objects AS
    SELECT o.name::text, o.kind, o.cluster::text, o.lifetime_id, o.created_at,
           o.retain_history
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL;

CREATE VIEW decoupled.frontiers AS
    SELECT o.name::text, f.since::bigint, f.upper::bigint, b.bound::bigint AS compaction_bound,
           (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint - f.upper AS lag_ms
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.catalog_frontiers f USING (lifetime_id)
      LEFT JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE o.dropped_at IS NULL;

CREATE VIEW decoupled.requirements AS
    SELECT c.name::text AS collection, r.name::text AS required_by, q.frontier::bigint
      FROM decoupled.catalog_requirements q
      JOIN decoupled.catalog_objects c ON c.lifetime_id = q.lifetime_id
      JOIN decoupled.catalog_objects r ON r.lifetime_id = q.required_by
     WHERE c.dropped_at IS NULL AND r.dropped_at IS NULL;

-- Durable holds: one per owner incarnation and collection.
CREATE VIEW decoupled.holds AS
    SELECT h.adapter::text, h.deployment::text, h.incarnation, o.name::text AS collection,
           h.frontier::bigint, h.hold_id, h.acquired_at
      FROM decoupled.catalog_holds h
      JOIN decoupled.catalog_objects o USING (lifetime_id)
     WHERE o.dropped_at IS NULL;

-- Every session's holds, from shared memory (subscriptions' included).
CREATE VIEW decoupled.session_holds AS
    SELECT s.hold_id, s.session_pid, i.adapter::text, i.deployment::text, s.incarnation,
           o.name::text AS collection, s.frontier, s.subscription
      FROM decoupled._shared_holds() s
      JOIN decoupled.catalog_objects o USING (lifetime_id)
      JOIN decoupled.catalog_adapter_incarnations i USING (incarnation)
     WHERE o.dropped_at IS NULL
       -- A retired incarnation's holds protect nothing (its session's next
       -- protected operation says so); nor do those of a dropped catalog.
       AND i.retired_at IS NULL;

-- Health of every live object on every replica of its cluster, as the
-- active deployment's replicas report it.  An object
-- whose cluster has no replica is `paused` by placement; one nobody has
-- reported on yet is `created`.  A registered table has no replica (the
-- controller ticks it): one row with replica NULL, `running` unless its
-- last tick failed or its WAL capture is stalled (`stalled`, with the
-- error).
CREATE VIEW decoupled.object_statuses AS
    SELECT o.name::text, o.kind, r.name::text AS replica,
           CASE WHEN r.replica_id IS NULL THEN 'paused'
                WHEN q.silent THEN 'stalled'
                ELSE coalesce(h.status, 'created') END AS status,
           CASE WHEN q.silent
                THEN format('replica "%s" has not reported for %s s', r.name, q.seconds)
                ELSE decoupled._visible_error(h.error, o.relation, o.name) END AS error,
           CASE WHEN r.replica_id IS NULL THEN 'no replica is running it'
                WHEN q.silent THEN 'It is hung, gone, or busy in one long step; see '
                                   'decoupled.replica_statuses.'
                ELSE h.hint END
               AS hint,
           h.updated_at, h.transition_at, h.hydrated
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
      LEFT JOIN decoupled.replica_health h
             ON h.lifetime_id = o.lifetime_id AND h.replica_id = r.replica_id
            AND h.deployment = (SELECT d.name FROM decoupled.catalog_deployments d
                                 WHERE d.state = 'active')
      -- What the replica last said of the object holds only while it still
      -- reports (every second).
      LEFT JOIN LATERAL (
          SELECT coalesce(i.heartbeat_at, i.started_at)
                     < clock_timestamp() - interval '30 seconds' AS silent,
                 floor(extract(epoch FROM clock_timestamp()
                                          - coalesce(i.heartbeat_at, i.started_at))) AS seconds
            FROM decoupled.catalog_replica_incarnations i
           WHERE i.incarnation = h.incarnation AND i.retired_at IS NULL
             AND h.status IN ('starting', 'running')) q ON true
     WHERE o.dropped_at IS NULL AND o.kind <> 'table'
    UNION ALL
    SELECT o.name::text, o.kind, NULL,
           CASE WHEN w.stalled THEN 'stalled' ELSE coalesce(h.status, 'running') END,
           CASE WHEN NOT coalesce(w.stalled, false)
                THEN decoupled._visible_error(h.error, o.relation, o.name)
                WHEN w.last_error IS NOT NULL THEN 'WAL capture: ' || w.last_error
                WHEN w.worker_pid IS NULL THEN 'WAL capture is not running'
                ELSE 'WAL capture has made no progress for 30 s with changes waiting' END,
           CASE WHEN w.stalled THEN 'Its writes wait in the WAL; see decoupled.capture.'
                ELSE h.hint END,
           h.updated_at, h.transition_at, NULL
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.table_health h USING (lifetime_id)
      LEFT JOIN LATERAL (
          SELECT c.status = 'stalled' AS stalled, c.last_error, c.worker_pid
            FROM decoupled.capture c
           WHERE EXISTS (SELECT FROM decoupled.capture_relations r
                          WHERE r.lifetime_id = o.lifetime_id)) w ON true
     WHERE o.dropped_at IS NULL AND o.kind = 'table';

CREATE VIEW decoupled.source_statuses AS
    SELECT name, replica, status, error, hint, updated_at, transition_at
      FROM decoupled.object_statuses WHERE kind = 'source';

CREATE VIEW decoupled.sink_statuses AS
    SELECT name, replica, status, error, hint, updated_at, transition_at
      FROM decoupled.object_statuses WHERE kind = 'sink';

-- Hydration of every live object on every replica of its cluster, per
-- live deployment (C10.1): a prewarming deployment is ready for promotion
-- when each object is hydrated on one of its replicas.
CREATE VIEW decoupled.hydration AS
    SELECT o.name::text, r.name::text AS replica, coalesce(h.hydrated, false) AS hydrated,
           d.name::text AS deployment, coalesce(h.status, 'created') AS status
      FROM decoupled.catalog_objects o
      JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
      CROSS JOIN decoupled.catalog_deployments d
      LEFT JOIN (decoupled.replica_health h
                 JOIN decoupled.catalog_replica_incarnations i
                   ON i.incarnation = h.incarnation AND i.retired_at IS NULL
                  AND i.started_at >= pg_postmaster_start_time())
             ON h.lifetime_id = o.lifetime_id AND h.replica_id = r.replica_id
            AND h.deployment = d.name
     WHERE o.dropped_at IS NULL AND o.kind <> 'table' AND d.state <> 'retired'
       AND EXISTS (SELECT FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = o.lifetime_id);

CREATE VIEW decoupled.status_history AS
    SELECT o.name::text, e.replica, e.status,
           decoupled._visible_error(e.error, o.relation, o.name) AS error, e.occurred_at,
           e.incarnation
      FROM decoupled.status_events e
      JOIN decoupled.catalog_objects o USING (lifetime_id);

-- Sessions and subscriptions of live incarnations only: a predecessor's row
-- never shows up as its successor's (brief C7.1).
CREATE VIEW decoupled.sessions AS
    SELECT s.adapter::text, s.deployment::text, s.incarnation, s.session_pid, s.role,
           s.connected_at
      FROM decoupled.session_records s
      JOIN decoupled.catalog_adapter_incarnations i USING (adapter, deployment, incarnation)
     WHERE i.retired_at IS NULL;

-- Running subscriptions (C7.2), from shared memory: each holds its
-- collection at its frontier, owned by its session's live incarnation.
CREATE VIEW decoupled.subscriptions AS
    SELECT i.adapter::text, s.incarnation, s.session_pid, o.name::text AS collection,
           s.frontier, i.deployment::text, s.hold_id AS subscription_id
      FROM decoupled._shared_holds() s
      JOIN decoupled.catalog_adapter_incarnations i USING (incarnation)
      JOIN decoupled.catalog_objects o USING (lifetime_id)
     WHERE s.subscription AND i.retired_at IS NULL;


-- How each materialized view is maintained (C13.3): its strategy, the
-- construct that keeps it from being incremental, its steps of each kind,
-- and the arrangements (indexes on its input) its steps probe.
CREATE VIEW decoupled.view_maintenance AS
    SELECT o.name::text,
           CASE WHEN o.definition->>'strategy' IN ('linear', 'sums', 'groups', 'partitions') THEN 'incremental'
                ELSE 'recompute' END AS strategy,
           o.definition->>'reason' AS reason,
           o.definition->>'strategy' AS method,
           s.incremental AS incremental_steps, s.recompute AS recompute_steps,
           (SELECT array_agg(a.index_name ORDER BY a.index_name) FROM decoupled.catalog_arrangements a
             WHERE a.view_id = o.lifetime_id) AS arrangements
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.view_steps s USING (lifetime_id)
     WHERE o.kind = 'materialized view' AND o.dropped_at IS NULL;
