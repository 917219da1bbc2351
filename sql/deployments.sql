-- Deployments (C10): create, drop and promote with every bad input; write
-- authority enforced at append (C2.1, C10.3); hydration per deployment; the
-- configuration the controller reconciles (C11.1) and what it leaves out
-- (C11.2).  Runs last: it promotes a new deployment.
\set SHOW_CONTEXT never

-- Polls `sql` (a boolean query) until it is true, up to two minutes.
CREATE FUNCTION regress_wait(sql text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    ok boolean;
BEGIN
    FOR attempt IN 1 .. 1200 LOOP
        EXECUTE sql INTO ok;
        IF ok THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END
$$;

-- Bad inputs change nothing.
SELECT regress_try($$SELECT decoupled.create_deployment(NULL)$$);
SELECT regress_try($$SELECT decoupled.create_deployment('')$$);
SELECT regress_try($$SELECT decoupled.create_deployment(repeat('x', 64))$$);
SELECT regress_try($$SELECT decoupled.create_deployment('default')$$);
SELECT regress_try($$SELECT decoupled.promote(NULL)$$);
SELECT regress_try($$SELECT decoupled.promote('')$$);
SELECT regress_try($$SELECT decoupled.promote('nope')$$);
SELECT regress_try($$SELECT decoupled.promote('default')$$);
SELECT regress_try($$SELECT decoupled.promote('default', NULL)$$);
SELECT regress_try($$SELECT decoupled.promote('default', '-1 s')$$);
SELECT regress_try($$SELECT decoupled.drop_deployment(NULL)$$);
SELECT regress_try($$SELECT decoupled.drop_deployment('nope')$$);
SELECT regress_try($$SELECT decoupled.drop_deployment('default')$$);
SELECT name, state, writes_enabled FROM decoupled.deployments;
SELECT * FROM decoupled.dry_run($$SELECT decoupled.create_deployment('green')$$);
SELECT * FROM decoupled.dry_run($$SELECT decoupled.drop_deployment('default')$$);

-- Only superusers and decoupled_admin change deployments.
CREATE ROLE regress_deployer;
SET ROLE regress_deployer;
SELECT regress_try($$SELECT decoupled.create_deployment('mine')$$);
SELECT regress_try($$SELECT decoupled.promote('default')$$);
SELECT regress_try($$SELECT decoupled.drop_deployment('default')$$);
SELECT regress_try($$SELECT decoupled.reconcile_configuration()$$);
SELECT regress_try($$SELECT decoupled.replica_prewarm(1, 1)$$);
-- ... but everyone sees them.
SELECT name, state FROM decoupled.deployments;
SELECT count(*) > 0 AS visible FROM decoupled.configuration;
RESET ROLE;
DROP ROLE regress_deployer;

-- What runs: a registered table and a view over it.
CREATE TABLE dep_t (k int PRIMARY KEY, v int);
INSERT INTO dep_t SELECT g, g % 3 FROM generate_series(1, 30) g;
SELECT decoupled.register_table('dep_t') > 0 AS registered;
SELECT decoupled.tick_tables() >= 0 AS ticked;
SELECT decoupled.create_materialized_view('dep_v',
    'SELECT v, count(*) AS n FROM dep_t GROUP BY v') > 0 AS created;
SELECT decoupled.wait_for_upper('dep_v', (SELECT upper - 1 FROM decoupled.frontiers
                                           WHERE name = 'dep_t'), '60s') > 0 AS computed;

-- A prewarming deployment: its replicas run beside the active ones and
-- serve the same adapters.
SELECT decoupled.create_deployment('green');
SELECT regress_try($$SELECT decoupled.create_deployment('green')$$);
SELECT name, state, writes_enabled FROM decoupled.deployments ORDER BY created_at;
SELECT name, deployment FROM decoupled.adapters ORDER BY deployment, name;
SELECT regress_wait($$SELECT count(*) = 1 FROM decoupled.cluster_replicas
                       WHERE deployment = 'green' AND status = 'running'$$) AS green_running;
SELECT regress_wait($$SELECT unhydrated = 0 FROM decoupled.deployments
                       WHERE name = 'green'$$) AS green_hydrated;
SELECT name, replica, hydrated, deployment FROM decoupled.hydration
 WHERE name IN ('dep_t', 'dep_v') ORDER BY deployment, name;
-- The active deployment's health is what decoupled.object_statuses shows.
SELECT name, replica, status FROM decoupled.object_statuses WHERE name = 'dep_v';

-- Write authority is checked at append, whoever calls: a prewarming
-- deployment's appends are refused, and nothing changes.
SELECT upper AS dep_upper FROM decoupled.frontiers WHERE name = 'dep_t' \gset
SELECT regress_try(format($$SELECT decoupled.append('dep_t', '[]', %s, %s, 'green')$$,
                          :dep_upper, :dep_upper + 1));
SELECT incarnation AS green_incarnation FROM decoupled.cluster_replicas
 WHERE deployment = 'green' \gset
SELECT regress_try(format($$SELECT decoupled.replica_append(%s, %s, '[]', %s, %s)$$,
                          :green_incarnation,
                          (SELECT lifetime_id FROM decoupled.objects WHERE name = 'dep_t'),
                          :dep_upper, :dep_upper + 1));
SELECT regress_try(format($$SELECT decoupled.replica_maintain(%s, %s, %s)$$,
                          :green_incarnation,
                          (SELECT lifetime_id FROM decoupled.objects WHERE name = 'dep_v'),
                          (SELECT upper FROM decoupled.frontiers WHERE name = 'dep_v')));
SELECT upper = :dep_upper AS unchanged FROM decoupled.frontiers WHERE name = 'dep_t';

-- Configuration (C11.1): the controller recorded its settings; a
-- prewarming deployment never overwrites them, and the same settings
-- written again are no new version.
SELECT written_by LIKE 'pg_decoupled controller (pid %)' AS by_controller, deployment,
       settings->>'decoupled.poll_interval' AS poll_interval
  FROM decoupled.configuration;
SELECT config_version AS config_before FROM decoupled.configuration \gset
SELECT decoupled.reconcile_configuration('green') IS NULL AS green_refused;
SELECT decoupled.reconcile_configuration() = :config_before AS same_version;
SELECT regress_try($$SELECT decoupled.reconcile_configuration('nope')$$);
-- Credentials stay in the processes (C11.2): no setting that may carry one
-- is recorded, and no catalog column holds one.
SELECT settings ? 'decoupled.replica_conninfo' AS has_conninfo FROM decoupled.configuration;
SELECT count(*) AS credential_columns FROM information_schema.columns
 WHERE table_schema = 'decoupled' AND column_name ~ '(password|passwd|secret|conninfo|credential)';

-- A deployment that cannot hydrate (its only replica is external and not
-- running) makes promotion wait, then fail with what is missing; nothing
-- changes.
SELECT decoupled.create_cluster('cold', replicas => 0, managed => false);
SELECT decoupled.create_replica('cold', 'x', external => true);
SELECT decoupled.create_source('dep_cold', 'counter', cluster => 'cold') > 0 AS created;
SELECT regress_try($$SELECT decoupled.promote('green', '300 ms')$$);
SELECT name, state FROM decoupled.deployments ORDER BY created_at;
SELECT decoupled.drop('dep_cold');
SELECT decoupled.drop_cluster('cold');

-- Dropping a prewarming deployment stops its workers; the name is free
-- again.
SELECT decoupled.drop_deployment('green');
SELECT name, state FROM decoupled.deployments ORDER BY created_at;
SELECT count(*) AS green_adapters FROM decoupled.catalog_adapters WHERE deployment = 'green';
SELECT regress_wait($$SELECT count(*) = 0 FROM decoupled.supervised
                       WHERE deployment = 'green'$$) AS green_stopped;

-- Promotion: wait for hydration, then hand over in one transaction.
SELECT decoupled.create_deployment('blue');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT regress_try($$SELECT decoupled.promote('blue')$$);
ROLLBACK;
SELECT decoupled.promote('blue', '120 s');
SELECT name, state, writes_enabled, promoted_at IS NOT NULL AS promoted,
       retired_at IS NOT NULL AS retired
  FROM decoupled.deployments ORDER BY created_at;
-- The retired deployment's incarnations are gone from the live views and
-- its writes are refused; a fenced incarnation for good.
SELECT deployment, count(*) FROM decoupled.cluster_replicas GROUP BY 1;
SELECT regress_try(format($$SELECT decoupled.append('dep_t', '[]', %s, %s, 'default')$$,
                          upper, upper + 1)) FROM decoupled.frontiers WHERE name = 'dep_t';
-- The new deployment writes: the view follows new changes.
INSERT INTO dep_t VALUES (31, 1), (32, 5);
SELECT decoupled.tick_tables() >= 0 AS ticked;
SELECT decoupled.wait_for_upper('dep_v', (SELECT upper - 1 FROM decoupled.frontiers
                                           WHERE name = 'dep_t'), '60s') > 0 AS followed;
SELECT decoupled.verify('dep_v');
SELECT * FROM dep_v ORDER BY v;
-- Retired and active deployments cannot be promoted or dropped; a retired
-- name is never reused.
SELECT regress_try($$SELECT decoupled.promote('default')$$);
SELECT regress_try($$SELECT decoupled.promote('blue')$$);
SELECT regress_try($$SELECT decoupled.drop_deployment('default')$$);
SELECT regress_try($$SELECT decoupled.drop_deployment('blue')$$);
SELECT regress_try($$SELECT decoupled.create_deployment('default')$$);
-- New adapters are declared in the active deployment.
SELECT decoupled.declare_adapter('after_handover');
SELECT name, deployment FROM decoupled.adapters ORDER BY deployment, name;
SELECT decoupled.drop_adapter('after_handover');
