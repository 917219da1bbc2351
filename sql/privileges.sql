-- Who may call what: catalog changes need superuser or decoupled_admin;
-- everyone may read the public views; nobody but the catalog functions
-- writes the catalog tables.
\set SHOW_CONTEXT never
CREATE ROLE decoupled_reader;
CREATE ROLE decoupled_operator IN ROLE decoupled_admin;

SET ROLE decoupled_reader;
SELECT decoupled.create_cluster('by_reader');
SELECT decoupled.alter_cluster('default', 2);
SELECT decoupled.drop_cluster('default');
SELECT decoupled.declare_adapter('by_reader');
SELECT decoupled.drop_adapter('default');
SELECT decoupled.create_source('by_reader', 'counter');
SELECT decoupled.replica_start(1, 'default', 1);
-- Private tables stay private, public views are readable.
SELECT count(*) FROM decoupled.catalog_meta;
INSERT INTO decoupled.catalog_clusters (name, managed, replication_factor) VALUES ('x', true, 1);
SELECT name, replicas FROM decoupled.clusters ORDER BY name;
SELECT name, state FROM decoupled.deployments;
SELECT catalog_version > 0 AS has_version FROM decoupled.catalog;
-- Internal helpers are not callable either.
SELECT decoupled._begin_catalog_change();
RESET ROLE;

-- A member of decoupled_admin may change the catalog.
SET ROLE decoupled_operator;
SELECT decoupled.create_cluster('by_operator', 1);
SELECT decoupled.declare_adapter('by_operator');
SELECT decoupled.drop_adapter('by_operator');
SELECT decoupled.drop_cluster('by_operator');
-- Sources are created in the current schema: that needs CREATE there.
SELECT decoupled.create_source('by_operator', 'counter', cluster => 'default') > 0 AS created;
RESET ROLE;
GRANT CREATE ON SCHEMA public TO decoupled_operator;
SET ROLE decoupled_operator;
SELECT decoupled.create_source('by_operator', 'counter', cluster => 'default') > 0 AS created;
SELECT decoupled.drop('by_operator');
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
-- ... but still only through the functions.
DELETE FROM decoupled.catalog_clusters;
RESET ROLE;
SELECT regress_finalize() >= 0 AS finalized;

SELECT name FROM decoupled.clusters ORDER BY name;
REVOKE CREATE ON SCHEMA public FROM decoupled_operator;
DROP ROLE decoupled_reader;
DROP ROLE decoupled_operator;
