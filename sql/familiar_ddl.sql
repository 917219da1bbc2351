-- PostgreSQL's own statements on the extension's objects (C15.1):
-- CREATE MATERIALIZED VIEW ... WITH (decoupled.maintained), CREATE / ALTER
-- TABLE ... (decoupled.registered), DROP, REFRESH, COMMENT ON and ALTER on
-- maintained views, psql's view of them, and every bad input.  The suite
-- ticks tables itself and waits with wait_for_upper, never with sleeps.
\set SHOW_CONTEXT never

-- A registered table, made by CREATE TABLE.
CREATE TABLE sales (id int PRIMARY KEY, region int NOT NULL, amount int NOT NULL)
    WITH (decoupled.registered = true, decoupled.retain_history = '1 hour');
SELECT name, kind, retain_history FROM decoupled.objects WHERE name = 'sales';
-- PostgreSQL stores no storage parameter for it.
SELECT reloptions FROM pg_class WHERE oid = 'sales'::regclass;
CREATE TABLE regions (id int PRIMARY KEY, name text NOT NULL);
ALTER TABLE regions SET (decoupled.registered = true);
-- Saying it again changes nothing.
ALTER TABLE regions SET (decoupled.registered);
INSERT INTO regions VALUES (1, 'north'), (2, 'south'), (3, 'east');
INSERT INTO sales SELECT i, i % 3 + 1, i * 10 FROM generate_series(1, 30) i;
SELECT decoupled.tick_tables() >= 0 AS ticked;

CREATE FUNCTION caught_up(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT decoupled.wait_for_upper(name, (SELECT max(upper) - 1 FROM decoupled.frontiers f
                                             JOIN decoupled.objects o USING (name)
                                            WHERE o.kind = 'table'), '60s') > 0
$$;

-- A maintained view: the query is what follows AS, kept as written
-- (comments, quoting and a trailing WITH DATA as the parser reads them).
CREATE MATERIALIZED VIEW per_region WITH (decoupled.maintained = true) AS
    SELECT r.name AS "AS", count(*) AS n, sum(s.amount) AS total  -- AS in a comment
      FROM sales s JOIN regions r ON r.id = s.region
     GROUP BY r.name
WITH DATA;
SELECT name, kind, cluster, retain_history FROM decoupled.objects WHERE name = 'per_region';
SELECT definition->>'query' AS query FROM decoupled.catalog_objects
 WHERE name = 'per_region' AND dropped_at IS NULL;
SELECT caught_up('per_region');
SELECT * FROM per_region ORDER BY 1;
SELECT decoupled.verify('per_region');
-- It keeps up with its inputs.
UPDATE sales SET amount = amount + 1 WHERE region = 1;
SELECT decoupled.tick_tables() >= 0 AS ticked;
SELECT caught_up('per_region');
SELECT * FROM per_region ORDER BY 1;
SELECT decoupled.verify('per_region');

-- The options: a schema-qualified name, a cluster, a retention; a bare
-- decoupled.maintained means true.
CREATE SCHEMA reports;
SELECT decoupled.create_cluster('reporting', 1);
CREATE MATERIALIZED VIEW reports.big_sales
    WITH (decoupled.maintained, decoupled.cluster = 'reporting', decoupled.retain_history = '10 min')
    AS SELECT id, amount FROM sales WHERE amount > 200;
SELECT o.name, o.cluster, o.retain_history, c.relnamespace::regnamespace AS schema
  FROM decoupled.objects o JOIN pg_class c ON c.oid = 'reports.big_sales'::regclass
 WHERE o.name = 'big_sales';
SELECT caught_up('big_sales');
SELECT count(*) FROM reports.big_sales;
-- IF NOT EXISTS of an existing relation changes nothing.
CREATE MATERIALIZED VIEW IF NOT EXISTS per_region WITH (decoupled.maintained) AS SELECT 1 AS one;
SELECT definition->>'query' LIKE 'SELECT r.name%' AS unchanged FROM decoupled.catalog_objects
 WHERE name = 'per_region' AND dropped_at IS NULL;

-- Without decoupled.maintained (or with false), PostgreSQL's own.
CREATE MATERIALIZED VIEW plain_mv AS SELECT region, count(*) FROM sales GROUP BY region;
CREATE MATERIALIZED VIEW plain_mv2 WITH (decoupled.maintained = false) AS SELECT 1 AS one;
SELECT relname, relkind FROM pg_class WHERE relname IN ('plain_mv', 'plain_mv2') ORDER BY 1;
SELECT count(*) AS plain_in_catalog FROM decoupled.objects WHERE name LIKE 'plain_mv%';
REFRESH MATERIALIZED VIEW plain_mv;

-- psql: \dv lists maintained views, with a description of how they are
-- maintained; \dm lists PostgreSQL's own.
\dv+ per_region
\dm
-- EXPLAIN shows what a read of it reads: the view's own storage (its
-- collection's id masked: it depends on the suites run before).
CREATE FUNCTION plan_of(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        RETURN NEXT regexp_replace(regexp_replace(line, 'c[0-9]+_', 'c<id>_', 'g'),
                                   '''[0-9]+''', '''<id>''', 'g');
    END LOOP;
END
$$;
SELECT plan_of('SELECT * FROM per_region');

-- REFRESH is refused: the replicas keep it fresh.
REFRESH MATERIALIZED VIEW per_region;
REFRESH MATERIALIZED VIEW CONCURRENTLY per_region;
-- COMMENT ON works, as MATERIALIZED VIEW or as VIEW.
COMMENT ON MATERIALIZED VIEW per_region IS 'sales per region';
SELECT obj_description('per_region'::regclass, 'pg_class');
COMMENT ON VIEW per_region IS 'sales by region';
SELECT obj_description('per_region'::regclass, 'pg_class');
-- ALTER is refused with the catalog's error: the relation belongs to the
-- extension while the view lives.
ALTER MATERIALIZED VIEW per_region RENAME TO sales_per_region;
ALTER MATERIALIZED VIEW per_region RENAME COLUMN n TO orders;
ALTER MATERIALIZED VIEW per_region SET SCHEMA reports;
ALTER MATERIALIZED VIEW per_region OWNER TO CURRENT_USER;
ALTER VIEW per_region RENAME TO sales_per_region;
SELECT count(*) FROM per_region;

-- Bad input: each refused, nothing created.
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained, decoupled.colour = 'red') AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained, decoupled.maintained) AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained, fillfactor = 50) AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.cluster = 'reporting') AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained = maybe) AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad (a) WITH (decoupled.maintained) AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained) TABLESPACE pg_default AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained) AS SELECT 1 AS one WITH NO DATA;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained) AS SELECT id, random() AS r FROM sales;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained) AS SELECT * FROM no_such_table;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained, decoupled.cluster = 'nope') AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained, decoupled.retain_history = '-1 hour')
    AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW bad WITH (decoupled.maintained, decoupled.retain_history = 'soon')
    AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW no_such_schema.bad WITH (decoupled.maintained) AS SELECT 1 AS one;
CREATE MATERIALIZED VIEW per_region WITH (decoupled.maintained) AS SELECT 1 AS one;
CREATE TABLE bad WITH (decoupled.maintained) AS SELECT 1 AS one;
CREATE TABLE bad (a int) WITH (decoupled.maintained = true);
CREATE TABLE bad (a int) WITH (decoupled.retain_history = '1 hour');
CREATE TEMP TABLE bad (a int) WITH (decoupled.registered);
CREATE VIEW bad WITH (decoupled.maintained) AS SELECT 1 AS one;
SELECT count(*) AS nothing_created FROM pg_class WHERE relname = 'bad';
SELECT count(*) AS nothing_in_catalog FROM decoupled.objects WHERE name = 'bad';

-- ALTER TABLE: registering and unregistering, and what it refuses.
CREATE TABLE notes (id int PRIMARY KEY, body text);
ALTER TABLE notes SET (decoupled.registered = true), ADD COLUMN extra int;
ALTER TABLE notes SET (decoupled.registered = true, fillfactor = 50);
ALTER TABLE notes SET (decoupled.retain_history = '1 hour');
ALTER TABLE notes SET (decoupled.registered = false, decoupled.retain_history = '1 hour');
ALTER TABLE notes SET (decoupled.registrd = true);
ALTER TABLE IF EXISTS no_such_table SET (decoupled.registered = true);
ALTER TABLE no_such_table SET (decoupled.registered = true);
ALTER VIEW per_region SET (decoupled.registered = true);
SELECT count(*) AS not_registered FROM decoupled.objects WHERE name = 'notes';
ALTER TABLE notes SET (decoupled.registered = true, decoupled.retain_history = '5 min');
SELECT name, kind, retain_history FROM decoupled.objects WHERE name = 'notes';
ALTER TABLE notes SET (decoupled.registered = true, decoupled.retain_history = '1 hour');
ALTER TABLE notes RESET (decoupled.registered);
SELECT count(*) AS unregistered FROM decoupled.objects WHERE name = 'notes';
ALTER TABLE notes SET (decoupled.registered = false);
-- A table with dependents is not unregistered.
ALTER TABLE regions SET (decoupled.registered = false);

-- Privileges: a statement can do what the call it stands for can.
CREATE ROLE ddl_user;
GRANT CREATE ON SCHEMA public TO ddl_user;
SET ROLE ddl_user;
CREATE TABLE user_table (id int PRIMARY KEY) WITH (decoupled.registered);
CREATE MATERIALIZED VIEW user_view WITH (decoupled.maintained) AS SELECT 1 AS one;
COMMENT ON MATERIALIZED VIEW per_region IS 'mine now';
DROP MATERIALIZED VIEW per_region;
RESET ROLE;
SELECT count(*) AS nothing_created FROM pg_class WHERE relname IN ('user_table', 'user_view');
-- A member of decoupled_admin comments on the source and the sink it made
-- (their relations are the extension's), not on another's.
GRANT decoupled_admin TO ddl_user;
GRANT SELECT ON regions TO ddl_user;
SET ROLE ddl_user;
SELECT decoupled.create_source('ddl_counter', 'counter') > 0 AS created;
SELECT decoupled.create_sink('ddl_sink', 'regions', 'ddl_sink_out') > 0 AS created;
COMMENT ON VIEW ddl_counter IS 'counts';
COMMENT ON TABLE ddl_sink_out IS 'regions, exported';
RESET ROLE;
SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c
 WHERE c.relname IN ('ddl_counter', 'ddl_sink_out') ORDER BY 1;
REVOKE decoupled_admin FROM ddl_user;
REVOKE SELECT ON regions FROM ddl_user;
CREATE ROLE ddl_other;
SET ROLE ddl_other;
COMMENT ON VIEW ddl_counter IS 'not mine';
COMMENT ON TABLE ddl_sink_out IS 'not mine';
RESET ROLE;
DROP ROLE ddl_other;
SELECT decoupled.drop('ddl_sink'), decoupled.drop('ddl_counter');

-- DROP: through the catalog, with its dependency rules.
CREATE MATERIALIZED VIEW top_region WITH (decoupled.maintained) AS
    SELECT max(total) AS best FROM per_region;
SELECT caught_up('top_region');
SELECT * FROM top_region;
DROP MATERIALIZED VIEW per_region;
SELECT name FROM decoupled.objects WHERE kind = 'materialized view' ORDER BY name;
-- Several at once, a view before what reads it, plain and maintained mixed.
DROP MATERIALIZED VIEW per_region, plain_mv, top_region;
SELECT name FROM decoupled.objects WHERE kind = 'materialized view' ORDER BY name;
SELECT count(*) AS plain_left FROM pg_class WHERE relname = 'plain_mv';
DROP MATERIALIZED VIEW IF EXISTS no_such_view, plain_mv2;
DROP MATERIALIZED VIEW no_such_view;
-- CASCADE drops dependents.
CREATE MATERIALIZED VIEW per_region WITH (decoupled.maintained) AS
    SELECT region, count(*) AS n FROM sales GROUP BY region;
CREATE MATERIALIZED VIEW busiest WITH (decoupled.maintained) AS SELECT max(n) AS n FROM per_region;
DROP MATERIALIZED VIEW per_region CASCADE;
SELECT name FROM decoupled.objects WHERE kind = 'materialized view' ORDER BY name;
-- DROP VIEW works the same way.
DROP VIEW reports.big_sales;
SELECT count(*) AS views_left FROM decoupled.objects WHERE kind = 'materialized view';
-- A schema whose name needs quoting, and a view named twice in one DROP
-- (dropped once, as PostgreSQL does).
CREATE SCHEMA "Sales Reports";
CREATE MATERIALIZED VIEW "Sales Reports"."By Region" WITH (decoupled.maintained) AS
    SELECT region, count(*) AS n FROM sales GROUP BY region;
SELECT c.relnamespace::regnamespace AS schema, c.relname FROM pg_class c
  JOIN decoupled.catalog_objects o ON o.relation = c.oid
 WHERE o.name = 'By Region' AND o.dropped_at IS NULL;
DROP MATERIALIZED VIEW "Sales Reports"."By Region", "Sales Reports"."By Region";
SELECT count(*) AS views_left FROM decoupled.objects WHERE kind = 'materialized view';
DROP SCHEMA "Sales Reports";

-- Clean up.
ALTER TABLE sales RESET (decoupled.registered);
ALTER TABLE regions RESET (decoupled.registered);
SELECT decoupled.drop_cluster('reporting');
-- Written plans read the tables until the drops are finalized.
SELECT regress_finalize() >= 0 AS finalized;
DROP TABLE sales, regions, notes, ddl_sink_out;
DROP SCHEMA reports;
REVOKE CREATE ON SCHEMA public FROM ddl_user;
DROP ROLE ddl_user;
DROP FUNCTION caught_up(text), plan_of(text);
SELECT regress_finalize() >= 0 AS finalized;
SELECT count(*) AS storage_left FROM pg_class
 WHERE relnamespace = 'decoupled_storage'::regnamespace;
