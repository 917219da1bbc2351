-- DDL for declarations: one catalog transaction each, bumping the catalog
-- version; bad input gets a fitting SQLSTATE and changes nothing.
\set SHOW_CONTEXT never

-- Runs a statement and reports its SQLSTATE and message instead of failing.
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

SELECT decoupled.catalog_version() AS v0 \gset

-- Happy paths, each bumping the version by exactly one.
SELECT decoupled.create_cluster('analytics', 3);
SELECT decoupled.catalog_version() - :v0 AS bumps;
SELECT cluster, replica FROM decoupled.cluster_replicas WHERE cluster = 'analytics' ORDER BY replica;
SELECT decoupled.alter_cluster('analytics', 1);
SELECT cluster, replica FROM decoupled.cluster_replicas WHERE cluster = 'analytics' ORDER BY replica;
SELECT decoupled.alter_cluster('analytics', 0);
SELECT name, replication_factor, replicas FROM decoupled.clusters WHERE name = 'analytics';
SELECT decoupled.alter_cluster('analytics', 2);
SELECT cluster, replica FROM decoupled.cluster_replicas WHERE cluster = 'analytics' ORDER BY replica;
SELECT decoupled.create_cluster('empty', replicas => 0);
SELECT decoupled.create_cluster('single');
SELECT name, replication_factor, replicas FROM decoupled.clusters ORDER BY name;
SELECT decoupled.declare_adapter('reporting');
SELECT name, deployment FROM decoupled.adapters ORDER BY name;
SELECT decoupled.drop_adapter('reporting');
SELECT decoupled.drop_cluster('empty');
SELECT decoupled.drop_cluster('single');
SELECT decoupled.catalog_version() - :v0 AS bumps;

-- The controller follows each new version and plans accordingly.
SELECT decoupled.wait_for_controller(decoupled.catalog_version()) = decoupled.catalog_version()
    AS followed;
-- (Workers of dropped replicas may still be stopping.)
SELECT kind, name, cluster FROM decoupled.supervised WHERE action <> 'stopping'
 ORDER BY kind, cluster, name;

-- Bad input: SQLSTATE and message; the catalog version does not move.
SELECT decoupled.catalog_version() AS v1 \gset
SELECT s AS statement, pg_temp.try(s) AS outcome FROM (VALUES
    ($$SELECT decoupled.create_cluster('analytics')$$),
    ($$SELECT decoupled.create_cluster('neg', -1)$$),
    ($$SELECT decoupled.create_cluster('nul', NULL)$$),
    ($$SELECT decoupled.create_cluster(NULL)$$),
    ($$SELECT decoupled.create_cluster('')$$),
    ($$SELECT decoupled.create_cluster(repeat('x', 64))$$),
    ($$SELECT decoupled.create_cluster(E'tab\there')$$),
    ($$SELECT decoupled.alter_cluster('nope', 1)$$),
    ($$SELECT decoupled.alter_cluster('analytics', -2)$$),
    ($$SELECT decoupled.alter_cluster('analytics', NULL)$$),
    ($$SELECT decoupled.drop_cluster('nope')$$),
    ($$SELECT decoupled.drop_cluster(NULL)$$),
    ($$SELECT decoupled.declare_adapter('default')$$),
    ($$SELECT decoupled.declare_adapter('')$$),
    ($$SELECT decoupled.drop_adapter('nope')$$),
    ($$SELECT decoupled.wait_for_controller(1, '-1s')$$)
) AS t(s);
SELECT decoupled.catalog_version() - :v1 AS bumps_after_errors;

-- Messages carry detail and hints where they help.
SELECT decoupled.create_cluster('neg', -1);
SELECT decoupled.create_cluster('');

-- A cluster with objects on it cannot be dropped; it stays, unchanged.
INSERT INTO decoupled.catalog_objects (name, kind, cluster, created_in_version)
    VALUES ('bids', 'source', 'analytics', decoupled.catalog_version());
SELECT decoupled.drop_cluster('analytics');
SELECT name, replicas FROM decoupled.clusters WHERE name = 'analytics';

-- Pausing a cluster writes `paused` history once, in the DDL transaction.
SELECT decoupled.alter_cluster('analytics', 0);
SELECT name, replica, status, error FROM decoupled.status_history WHERE name = 'bids';
SELECT name, replica, status, hint FROM decoupled.source_statuses WHERE name = 'bids';
SELECT decoupled.alter_cluster('analytics', 0);
SELECT count(*) AS paused_rows FROM decoupled.status_history WHERE name = 'bids';
DELETE FROM decoupled.catalog_objects WHERE name = 'bids';
SELECT decoupled.drop_cluster('analytics');

-- A failed statement inside a transaction leaves the whole transaction's
-- catalog changes unapplied.
BEGIN;
SELECT decoupled.create_cluster('half');
SELECT decoupled.create_cluster('half');
ROLLBACK;
SELECT count(*) AS half_clusters FROM decoupled.clusters WHERE name = 'half';

-- A timed-out wait names what it waited for.
SELECT decoupled.wait_for_controller(decoupled.catalog_version()) > 0 AS caught_up;
SELECT decoupled.wait_for_controller(decoupled.catalog_version() + 100, '50ms');
