-- What pg_dump carries and how a restore is recognised (C15.2): the
-- declaration tables are the extension's configuration and runtime tables
-- are not; relations and owners are named, not numbered; the end-of-restore
-- marker is dumped; a restore into a catalog with declarations of its own
-- is refused.  t/022_dump_restore.pl runs the round trip itself.
\set SHOW_CONTEXT never

-- The configuration pg_dump writes the rows of.
SELECT c::regclass AS dumped
  FROM pg_extension e, unnest(e.extconfig) c
 WHERE e.extname = 'pg_decoupled' ORDER BY c::regclass::text;
-- Runtime state is not among them.
SELECT t AS not_dumped
  FROM unnest(ARRAY['decoupled.catalog_replica_incarnations', 'decoupled.catalog_adapter_incarnations',
                    'decoupled.catalog_holds', 'decoupled.session_records',
                    'decoupled.replica_health', 'decoupled.table_health',
                    'decoupled.status_events', 'decoupled.catalog_bound_queue',
                    'decoupled.capture_progress', 'decoupled.catalog_restore']) t
 WHERE NOT EXISTS (SELECT FROM pg_extension e
                    WHERE e.extname = 'pg_decoupled' AND t::regclass = ANY (e.extconfig))
 ORDER BY 1;

-- A relation and an owner travel by name.
SELECT attname, atttypid::regtype FROM pg_attribute
 WHERE attrelid = 'decoupled.catalog_objects'::regclass AND attname IN ('relation', 'owner')
 ORDER BY 1;
CREATE TABLE dumped_table (id int PRIMARY KEY, v text) WITH (decoupled.registered);
CREATE MATERIALIZED VIEW dumped_view WITH (decoupled.maintained) AS
    SELECT count(*) AS n FROM dumped_table;
SELECT name, relation, owner = current_user::regrole::text AS owned_by_creator
  FROM decoupled.catalog_objects
 WHERE name IN ('dumped_table', 'dumped_view') AND dropped_at IS NULL ORDER BY 1;

-- The marker pg_restore creates last is dumped: no member of the extension.
SELECT e.evtname, e.evtevent, e.evtfoid::regproc,
       EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_event_trigger'::regclass
                  AND d.objid = e.oid AND d.deptype = 'e') AS member
  FROM pg_event_trigger e WHERE e.evtname = 'decoupled_restored';

-- No restore is in progress: nothing to finish.
SELECT count(*) AS restoring FROM decoupled.restore;
SELECT decoupled.finish_restore() AS finished;

-- Rows of a dump are loaded with COPY; into this catalog, which has
-- declarations of its own, they are refused, and nothing changes.
SELECT count(*) AS clusters_before FROM decoupled.clusters;
\set VERBOSITY terse
COPY decoupled.catalog_clusters (name, managed, replication_factor) FROM stdin;
restored	t	1
\.
COPY decoupled.catalog_objects (lifetime_id, name, kind, created_in_version) FROM stdin;
999999	restored	table	1
\.
SELECT count(*) AS clusters_after FROM decoupled.clusters;
SELECT count(*) AS restoring FROM decoupled.restore;
-- An ordinary insert by a superuser is not a restore: the tables' own
-- constraints answer it.
INSERT INTO decoupled.catalog_clusters (name, managed, replication_factor) VALUES ('x', true, NULL);
-- Nor is a COPY whose query declares something: it writes the catalog
-- outside any COPY into it.
COPY (SELECT count(*) AS declared FROM decoupled.declare_adapter('copied')) TO STDOUT;
COPY (SELECT count(*) FROM decoupled.adapters WHERE name = 'copied') TO STDOUT;
SELECT count(*) AS restoring FROM decoupled.restore;
SELECT count(*) AS dropped FROM decoupled.drop_adapter('copied');
\set VERBOSITY default

-- Clean up.
DROP MATERIALIZED VIEW dumped_view;
ALTER TABLE dumped_table RESET (decoupled.registered);
-- The view's written plan reads the table until the drop is finalized.
SELECT regress_finalize() >= 0 AS finalized;
DROP TABLE dumped_table;
