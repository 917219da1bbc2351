-- Catalog schema version 2 (a fresh install of 1.1): fresh-install defaults
-- (C1.1), the public views of C12, private tables, and constraints that make
-- impossible states impossible.
\set SHOW_CONTEXT never
CREATE EXTENSION pg_decoupled;

-- Shared by the later test files: runs statements and reports SQLSTATE,
-- message and detail instead of failing, with timestamps masked (T).
CREATE FUNCTION regress_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM
                          || CASE WHEN detail <> '' THEN ' (' || detail || ')' ELSE '' END,
                          '\d{10,}|(?<=incarnation )\d+', 'T', 'g');
END
$$;
-- Finalization skips storage a replica still has open (a drop never waits
-- for readers): suites that count what it removed finalize until nothing
-- dropped is left, waiting for the replicas' transactions to end.
CREATE FUNCTION regress_finalize() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    total integer := 0;
BEGIN
    FOR attempt IN 1 .. 200 LOOP
        total := total + decoupled.finalize_dropped();
        EXIT WHEN NOT EXISTS (SELECT FROM decoupled.catalog_objects
                               WHERE dropped_at IS NOT NULL AND finalized_at IS NULL);
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN total;
END
$$;

SELECT schema_version, catalog_version, decoupled.supported_schema_version() AS supported
  FROM decoupled.catalog;

-- Defaults: one active deployment, the default cluster with one replica, the
-- default adapter.
SELECT name, state, writes_enabled FROM decoupled.deployments;
SELECT name, managed, replication_factor, replicas FROM decoupled.clusters;
-- (Their incarnations, pids and statuses appear once the workers started.)
SELECT cluster, replica, deployment FROM decoupled.cluster_replicas;
SELECT name, deployment FROM decoupled.adapters;

-- Nothing is maintained yet: every view is empty rather than invented.
-- (replica_statuses fills as soon as the default replica starts.)
SELECT 'objects' AS view, count(*) FROM decoupled.objects
UNION ALL SELECT 'frontiers', count(*) FROM decoupled.frontiers
UNION ALL SELECT 'requirements', count(*) FROM decoupled.requirements
UNION ALL SELECT 'holds', count(*) FROM decoupled.holds
UNION ALL SELECT 'source_statuses', count(*) FROM decoupled.source_statuses
UNION ALL SELECT 'sink_statuses', count(*) FROM decoupled.sink_statuses
UNION ALL SELECT 'status_history', count(*) FROM decoupled.status_history
UNION ALL SELECT 'hydration', count(*) FROM decoupled.hydration
UNION ALL SELECT 'sessions', count(*) FROM decoupled.sessions
UNION ALL SELECT 'subscriptions', count(*) FROM decoupled.subscriptions;

-- The public views carry at least the columns of C12, in this order.
SELECT table_name, string_agg(column_name, ', ' ORDER BY ordinal_position) AS columns
  FROM information_schema.columns
 WHERE table_schema = 'decoupled'
   AND table_name IN ('objects', 'frontiers', 'requirements', 'holds', 'cluster_replicas',
                      'replica_statuses', 'source_statuses', 'sink_statuses',
                      'status_history', 'hydration', 'adapters', 'deployments', 'sessions',
                      'subscriptions')
 GROUP BY table_name ORDER BY table_name;

-- The controller follows the fresh catalog and supervises the relay, the
-- default adapter's adapterd and the default replica.
SELECT decoupled.wait_for_controller(decoupled.catalog_version()) = decoupled.catalog_version()
    AS followed;
SELECT state, schema_version, catalog_version = decoupled.catalog_version() AS current,
       pid IS NOT NULL AS has_pid
  FROM decoupled.controller;
-- (Workers really start: their state is whatever it is right now.)
SELECT kind, name, cluster, deployment, 'supervised' AS action
  FROM decoupled.supervised ORDER BY kind, name;

-- Impossible states are rejected by the tables themselves, even for a
-- superuser writing directly.  (Terse: the failing rows carry timestamps.)
\set VERBOSITY terse
INSERT INTO decoupled.catalog_meta (singleton, schema_version, catalog_version)
    VALUES (true, 1, 1);
INSERT INTO decoupled.catalog_deployments (name, state, promoted_at)
    VALUES ('second', 'active', now());
INSERT INTO decoupled.catalog_deployments (name, state) VALUES ('odd', 'retired');
INSERT INTO decoupled.catalog_clusters (name, managed, replication_factor) VALUES ('x', true, NULL);
INSERT INTO decoupled.catalog_clusters (name, managed, replication_factor) VALUES ('', true, 1);
INSERT INTO decoupled.catalog_replicas (cluster, name) VALUES ('no_such_cluster', 'r1');
INSERT INTO decoupled.catalog_objects (name, kind, created_in_version)
    VALUES ('s', 'source', 1);
INSERT INTO decoupled.catalog_objects (name, kind, cluster, created_in_version)
    VALUES ('t', 'table', 'default', 1);
INSERT INTO decoupled.catalog_objects (name, kind, cluster, created_in_version)
    VALUES ('m', 'materialized view', 'default', 1);
INSERT INTO decoupled.catalog_objects (name, kind, cluster, created_in_version)
    VALUES ('s', 'river', 'default', 1);
WITH o AS (INSERT INTO decoupled.catalog_objects (name, kind, created_in_version)
           VALUES ('t1', 'table', 1) RETURNING lifetime_id)
INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper)
    SELECT lifetime_id, 10, 5 FROM o;
WITH o AS (INSERT INTO decoupled.catalog_objects (name, kind, created_in_version)
           VALUES ('t2', 'table', 1) RETURNING lifetime_id)
INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
    SELECT lifetime_id, lifetime_id, 0 FROM o;
-- A hold needs a live owner: an incarnation of a declared adapter.
WITH o AS (INSERT INTO decoupled.catalog_objects (name, kind, created_in_version)
           VALUES ('t3', 'table', 1) RETURNING lifetime_id)
INSERT INTO decoupled.catalog_holds (adapter, deployment, incarnation, lifetime_id, frontier)
    SELECT 'default', 'default', 12345, lifetime_id, 0 FROM o;
INSERT INTO decoupled.catalog_adapter_incarnations (adapter, deployment, incarnation)
    VALUES ('ghost', 'default', 900001);
-- Two live incarnations of one adapter cannot coexist.
INSERT INTO decoupled.catalog_adapter_incarnations (adapter, deployment, incarnation)
    VALUES ('default', 'default', 900002), ('default', 'default', 900003);
-- Two live objects cannot share a name; a dropped one frees it.
BEGIN;
INSERT INTO decoupled.catalog_objects (name, kind, created_in_version,
                                       dropped_at, dropped_in_version)
    VALUES ('dup', 'table', 1, now(), 2);
INSERT INTO decoupled.catalog_objects (name, kind, created_in_version) VALUES ('dup', 'table', 3);
INSERT INTO decoupled.catalog_objects (name, kind, created_in_version) VALUES ('dup', 'table', 4);
ROLLBACK;
SELECT count(*) AS objects_left FROM decoupled.catalog_objects;
\set VERBOSITY default

-- The catalog lives in decoupled.database only.
CREATE DATABASE decoupled_elsewhere;
\c decoupled_elsewhere
CREATE EXTENSION pg_decoupled;
\c postgres
DROP DATABASE decoupled_elsewhere;
