-- PostgreSQL's own DDL on the extension's objects (issue 10): a registered
-- table's capture cannot be tampered with, a type in history keeps its
-- values' text, one table's failing tick stalls that table only, and every
-- DROP / ALTER statement PostgreSQL accepts on the relation of a source, a
-- materialized view or a sink either goes through the catalog or is
-- refused, so the catalog and the relations always agree.  Tables are
-- ticked here at chosen moments; waits use wait_for_upper, never sleeps.
\set SHOW_CONTEXT never

-- Catalog and relations disagree where a live object has no relation, or
-- where a relation the extension made in the test schemas (public views,
-- sinks' tables) belongs to no live object (a dropped sink's table waits
-- for finalization to hand it to its creator).  Empty when they agree.
CREATE FUNCTION disagreements() RETURNS SETOF text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT format('%s "%s" has no relation', o.kind, o.name)
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation)
    UNION ALL
    SELECT format('relation %s belongs to no live object', c.oid::regclass)
      FROM pg_class c JOIN pg_extension e ON e.extname = 'pg_decoupled'
     WHERE c.relnamespace IN (SELECT oid FROM pg_namespace WHERE nspname LIKE 'ddl\_%')
       AND c.relowner = e.extowner AND c.relkind IN ('r', 'v')
       AND NOT EXISTS (SELECT FROM decoupled.catalog_objects o
                        WHERE o.relation = c.oid
                          AND (o.dropped_at IS NULL
                               OR (o.kind = 'sink' AND o.finalized_at IS NULL)))
$$;
CREATE FUNCTION live() RETURNS TABLE (name text, kind text, relation regclass)
LANGUAGE sql SECURITY DEFINER AS $$
    SELECT o.name::text, o.kind, o.relation::regclass FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL ORDER BY o.lifetime_id
$$;
CREATE FUNCTION catalog_version() RETURNS bigint LANGUAGE sql AS $$
    SELECT catalog_version FROM decoupled.catalog
$$;
-- Has `name` caught up with the latest tick of every registered table?
CREATE FUNCTION caught_up(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT decoupled.wait_for_upper(name, (SELECT max(upper) - 1 FROM decoupled.frontiers f
                                             JOIN decoupled.objects o USING (name)
                                            WHERE o.kind = 'table'), '60s') > 0
$$;

-- Finalizes the dropped objects whose names match `pattern` (a bounded
-- wait: finalization skips what a replica still reads, and retries).
CREATE PROCEDURE finalized(pattern text) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        PERFORM decoupled.finalize_dropped();
        EXIT WHEN NOT EXISTS (SELECT FROM decoupled.catalog_objects
                               WHERE name LIKE pattern AND finalized_at IS NULL);
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;

-- A role that is no superuser owns the schema everything lives in.
CREATE ROLE ddl_owner IN ROLE decoupled_admin;
CREATE SCHEMA ddl_s AUTHORIZATION ddl_owner;
-- Sources run on a cluster without replicas: nothing reads their views
-- while the statements below change them.
SELECT decoupled.create_cluster('idle', 0);
SET ROLE ddl_owner;
SET search_path = ddl_s, public;

------------------------------------------------------------------------------
-- 1. Capture triggers: the table's owner cannot replace, rename or bypass
--    them.
------------------------------------------------------------------------------
CREATE TABLE accounts (id int, state text);
CREATE TABLE ledger (id int, amount int);
INSERT INTO accounts VALUES (1, 'open'), (2, 'open');
INSERT INTO ledger VALUES (1, 10);
SELECT decoupled.register_table('accounts') > 0 AS registered,
       decoupled.register_table('ledger') > 0 AS registered;
-- Captured from the WAL (this server's wal_level): no capture triggers once
-- adopted; t/020_wal_capture.pl runs the trigger statements with triggers.
SELECT decoupled.wait_for_capture('60 s') AS captured;
CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE FUNCTION keep_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TABLE by_state (id int, state text) PARTITION BY LIST (id);
CREATE TABLE plain_parent (id int, state text);
CREATE TABLE plain_child (id int, state text);
SELECT catalog_version() AS version_before \gset
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$CREATE OR REPLACE TRIGGER decoupled_capture_insert AFTER INSERT ON accounts
       FOR EACH STATEMENT EXECUTE FUNCTION noop()$$),
    ($$CREATE TRIGGER decoupled_capture_more AFTER INSERT ON accounts
       FOR EACH STATEMENT EXECUTE FUNCTION noop()$$),
    ($$ALTER TRIGGER decoupled_capture_delete ON accounts RENAME TO was_capture$$),
    ($$DROP TRIGGER decoupled_capture_update ON accounts$$),
    ($$ALTER TABLE accounts DISABLE TRIGGER ALL$$),
    ($$ALTER TABLE by_state ATTACH PARTITION accounts FOR VALUES IN (1, 2, 3)$$),
    ($$ALTER TABLE accounts INHERIT plain_parent$$),
    ($$ALTER TABLE plain_child INHERIT accounts$$),
    ($$CREATE TABLE accounts_child () INHERITS (accounts)$$),
    ($$CREATE TABLE accounts_part PARTITION OF accounts FOR VALUES IN (4)$$)
) AS t(s);
-- The owner's own triggers stay the owner's: they see what capture sees.
CREATE TRIGGER audit BEFORE INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION keep_row();
ALTER TRIGGER audit ON accounts RENAME TO audited;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'accounts'::regclass AND NOT tgisinternal
 ORDER BY tgname;
-- An ALTER TABLE that keeps the table's shape, key and capture goes
-- through, as on any table; one that would change them is refused.
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$ALTER TABLE accounts ALTER COLUMN state SET DEFAULT 'new'$$),
    ($$ALTER TABLE accounts ALTER COLUMN state SET STATISTICS 500$$),
    ($$ALTER TABLE accounts SET (autovacuum_enabled = false, fillfactor = 90)$$),
    ($$ALTER TABLE accounts ADD CONSTRAINT state_known CHECK (state <> 'bogus')$$),
    ($$ALTER TABLE accounts ALTER COLUMN state SET NOT NULL$$),
    ($$ALTER TABLE accounts DISABLE TRIGGER audited$$),
    ($$ALTER TABLE accounts ENABLE TRIGGER audited$$),
    ($$ALTER TABLE accounts DROP CONSTRAINT state_known, ALTER COLUMN state DROP NOT NULL$$),
    ($$ALTER TABLE accounts ADD COLUMN note text$$),
    ($$ALTER TABLE accounts ADD PRIMARY KEY (id)$$),
    ($$ALTER TABLE accounts REPLICA IDENTITY FULL$$),
    ($$ALTER TABLE accounts ALTER COLUMN state TYPE varchar(20)$$),
    ($$ALTER TABLE accounts DISABLE TRIGGER USER$$),
    ($$ALTER TABLE accounts ALTER COLUMN state SET DEFAULT 'x', ADD COLUMN other int$$)
) AS t(s);
-- The guard's event triggers fire whatever session_replication_role says
-- (ENABLE ALWAYS): a superuser's replica role does not let a shape change by.
RESET ROLE;
SET session_replication_role = replica;
SELECT regress_try($$ALTER TABLE accounts ADD COLUMN note text DEFAULT 'x'$$) AS as_replica;
RESET session_replication_role;
SET ROLE ddl_owner;
SELECT evtname, evtenabled FROM pg_event_trigger
 WHERE evtname IN ('decoupled_ddl_end', 'decoupled_sql_drop') ORDER BY evtname;
SELECT catalog_version() = :version_before AS catalog_unchanged,
       NOT EXISTS (SELECT FROM pg_inherits i
                    WHERE 'accounts'::regclass IN (i.inhrelid, i.inhparent)) AS no_inheritance;
-- So every write still reaches history.
INSERT INTO accounts VALUES (3, 'open');
UPDATE accounts SET state = 'closed' WHERE id = 1;
DELETE FROM accounts WHERE id = 2;
SELECT decoupled.tick_tables() AS ticked;
SELECT upper - 1 AS latest FROM decoupled.frontiers WHERE name = 'accounts' \gset
SET decoupled.as_of = :latest;
SELECT * FROM accounts ORDER BY id;
RESET decoupled.as_of;

------------------------------------------------------------------------------
-- 2. A type used by history keeps its values' text: history matches rows
--    by it.  Found through domains, arrays and composite types (renaming
--    an attribute changes no text).  A typed table, whose shape ALTER TYPE
--    ... CASCADE changes, is not registered.
------------------------------------------------------------------------------
CREATE TYPE mood AS ENUM ('calm', 'cross');
CREATE TABLE feelings (who int, m mood);
CREATE TYPE hue AS ENUM ('red', 'blue');
CREATE DOMAIN hue_d AS hue;
CREATE TYPE swatch AS (h hue_d, n int);
CREATE TABLE palettes (id int, s swatch[]);
CREATE TYPE spare AS ENUM ('one');
CREATE TABLE shaped OF swatch;
INSERT INTO feelings VALUES (1, 'calm'), (2, 'cross');
SELECT decoupled.register_table('feelings') > 0 AS registered,
       decoupled.register_table('palettes') > 0 AS registered;
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$ALTER TYPE mood RENAME VALUE 'calm' TO 'serene'$$),
    ($$ALTER TYPE hue RENAME VALUE 'red' TO 'crimson'$$),
    ($$ALTER TYPE swatch ADD ATTRIBUTE note text CASCADE$$),
    ($$ALTER TYPE swatch DROP ATTRIBUTE n CASCADE$$),
    ($$ALTER TYPE swatch RENAME ATTRIBUTE n TO amount CASCADE$$),
    ($$SELECT decoupled.register_table('shaped')$$),
    ($$ALTER TYPE mood ADD VALUE 'glad'$$),
    ($$ALTER TYPE spare RENAME VALUE 'one' TO 'uno'$$),
    ($$ALTER TYPE mood RENAME TO temper$$),
    ($$ALTER TYPE temper RENAME VALUE 'calm' TO 'serene'$$)
) AS t(s);
\set VERBOSITY default
ALTER TYPE temper RENAME VALUE 'cross' TO 'angry';
\set VERBOSITY terse
-- Deletes keep matching what was captured.
DELETE FROM feelings WHERE who = 1;
SELECT decoupled.tick_tables() AS ticked;
SELECT * FROM feelings;
SELECT name, status FROM decoupled.object_statuses WHERE kind = 'table' ORDER BY name;

-- A table's row type is a composite type like any other: ALTER TABLE ...
-- ADD / DROP COLUMN or ALTER COLUMN TYPE of a relation whose row type a
-- collection's column holds changes that column's text as well — also
-- where the change reaches it through inheritance, through ALTER TYPE ...
-- CASCADE (a typed table), or through a replaced view that adds columns.
-- Renames, constraints, a view replaced with the same columns and
-- relations nobody's column holds are left alone.
CREATE TABLE pt (a int, b int);
CREATE TABLE pt_child () INHERITS (pt);
CREATE TYPE ct AS (a int);
CREATE TABLE tt OF ct;
CREATE VIEW pv AS SELECT 1 AS a;
CREATE TABLE pt_free (a int);
CREATE TABLE holders (id int PRIMARY KEY, c pt_child, t tt, v pv);
INSERT INTO holders VALUES (1, ROW(1, 1), ROW(1), ROW(1));
SELECT decoupled.register_table('holders') > 0 AS registered;
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$ALTER TABLE pt ADD COLUMN c int$$),
    ($$ALTER TABLE pt_child ADD COLUMN d int$$),
    ($$ALTER TABLE pt ALTER COLUMN b TYPE bigint$$),
    ($$ALTER TABLE pt DROP COLUMN b$$),
    ($$ALTER TYPE ct ADD ATTRIBUTE z int CASCADE$$),
    ($$CREATE OR REPLACE VIEW pv AS SELECT 1 AS a, 2 AS b$$),
    ($$CREATE OR REPLACE VIEW pv AS SELECT 2 AS a$$),
    ($$ALTER TABLE pt RENAME COLUMN b TO bb$$),
    ($$ALTER TABLE pt ADD CONSTRAINT pt_a CHECK (a > 0)$$),
    ($$ALTER TABLE ONLY pt_free ADD COLUMN b int$$),
    ($$ALTER TABLE pt_free DROP COLUMN b$$)
) AS t(s);
-- A drop that cascades to such a column (DROP TYPE, DROP DOMAIN or DROP
-- COLLATION ... CASCADE) is refused too.
CREATE TYPE ysub AS (p int);
CREATE DOMAIN ydom AS int;
CREATE TYPE yct AS (a int, s ysub, d ydom);
CREATE TYPE yfree AS (a int, s ysub, d ydom);
CREATE TABLE yholders (id int PRIMARY KEY, v yct);
INSERT INTO yholders VALUES (1, ROW(1, ROW(2), 3));
SELECT decoupled.register_table('yholders') > 0 AS registered;
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$DROP TYPE ysub CASCADE$$),
    ($$DROP DOMAIN ydom CASCADE$$),
    ($$ALTER TYPE yfree DROP ATTRIBUTE s$$)
) AS t(s);
SELECT count(*) AS unregistered FROM decoupled.unregister_table('yholders');
\set VERBOSITY default
ALTER TABLE pt ADD COLUMN c int;
\set VERBOSITY terse
UPDATE holders SET c = ROW(2, 2) WHERE id = 1;
SELECT decoupled.tick_tables() AS ticked;
SELECT name, status FROM decoupled.object_statuses WHERE name = 'holders';
SELECT upper - 1 AS latest FROM decoupled.frontiers WHERE name = 'holders' \gset
SET decoupled.as_of = :latest;
SELECT * FROM holders;
RESET decoupled.as_of;
SELECT count(*) AS unregistered FROM decoupled.unregister_table('holders');

------------------------------------------------------------------------------
-- 3. One table's failing tick stalls that table only.  Nothing legitimate
--    makes a tick fail any more, so a superuser breaks ledger's storage: a
--    captured retraction of a row that was never there.
------------------------------------------------------------------------------
RESET ROLE;
DO $$
BEGIN
    EXECUTE format('INSERT INTO decoupled_storage.c%s_pending VALUES (-1, 99, 0)',
                   (SELECT lifetime_id FROM decoupled.objects WHERE name = 'ledger'));
END
$$;
SET ROLE ddl_owner;
SELECT upper AS ledger_upper FROM decoupled.frontiers WHERE name = 'ledger' \gset
SELECT upper AS accounts_upper FROM decoupled.frontiers WHERE name = 'accounts' \gset
INSERT INTO ledger VALUES (2, 20);
INSERT INTO accounts VALUES (4, 'open');
SELECT decoupled.tick_tables() AS ticked;
-- ledger keeps its upper and its pending changes; the others ticked.
SELECT name, upper > :accounts_upper AS ticked FROM decoupled.frontiers
 WHERE name IN ('accounts', 'ledger', 'feelings') ORDER BY name;
SELECT (SELECT upper FROM decoupled.frontiers WHERE name = 'ledger') = :ledger_upper
    AS ledger_upper_kept;
SELECT name, replica, status, error, hint FROM decoupled.object_statuses
 WHERE kind = 'table' ORDER BY name;
SELECT * FROM accounts ORDER BY id;
-- Retried at every tick, reported once.
SELECT decoupled.tick_tables() AS ticked;
-- Repaired, it ticks again, everything it captured meanwhile included.
RESET ROLE;
DO $$
BEGIN
    EXECUTE format('DELETE FROM decoupled_storage.c%s_pending WHERE id = 99',
                   (SELECT lifetime_id FROM decoupled.objects WHERE name = 'ledger'));
END
$$;
SET ROLE ddl_owner;
SELECT decoupled.tick_tables() AS ticked;
SELECT upper - 1 AS latest FROM decoupled.frontiers WHERE name = 'ledger' \gset
SET decoupled.as_of = :latest;
SELECT * FROM ledger ORDER BY id;
RESET decoupled.as_of;
SELECT name, replica, status, error FROM decoupled.object_statuses
 WHERE name = 'ledger';
SELECT status, replica, error IS NOT NULL AS has_error FROM decoupled.status_history
 WHERE name = 'ledger' ORDER BY occurred_at;

------------------------------------------------------------------------------
-- 4. DROP of the relations of sources, materialized views and sinks goes
--    through the catalog, with its dependency rules, and names the user's
--    objects.
------------------------------------------------------------------------------
SELECT decoupled.create_source('cnt', 'counter', cluster => 'idle') > 0 AS created,
       decoupled.create_source('auc', 'auction', cluster => 'idle') > 0 AS created;
SELECT decoupled.create_materialized_view('evens', 'SELECT n FROM cnt WHERE n % 2 = 0',
                                          cluster => 'idle') > 0 AS created;
SELECT decoupled.create_materialized_view('totals',
           'SELECT id, sum(amount) AS total FROM ledger GROUP BY id') > 0 AS created;
SELECT decoupled.create_materialized_view('big', 'SELECT id FROM totals WHERE total > 15') > 0
    AS created;
SELECT decoupled.create_sink('feed', 'totals', 'feed_out') > 0 AS created;
CREATE TABLE notes (id int);
SELECT decoupled.register_table('notes') > 0 AS registered;
SELECT decoupled.create_sink('note_feed', 'notes', 'note_out') > 0 AS created;
SELECT decoupled.tick_tables() AS ticked;
SELECT caught_up('totals') AND caught_up('big') AND caught_up('feed') AND caught_up('note_feed')
    AS caught_up;
SELECT * FROM live();
SELECT catalog_version() AS version_before \gset

-- Refused without CASCADE, naming the dependents, as decoupled.drop() does.
\set VERBOSITY default
DROP VIEW totals;
DROP VIEW auc_bids;
\set VERBOSITY terse
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$DROP VIEW cnt$$),
    ($$DROP VIEW big, totals$$),
    ($$DROP TABLE notes$$),
    ($$DROP TABLE ledger$$),
    ($$DROP VIEW auc_auctions, auc_bids$$),
    ($$DROP MATERIALIZED VIEW totals$$)
) AS t(s);
SELECT catalog_version() = :version_before AS catalog_unchanged;
-- A drop that rolls back changes nothing.
BEGIN;
DROP VIEW big;
SELECT count(*) AS live_big FROM decoupled.objects WHERE name = 'big';
ROLLBACK;
SELECT count(*) AS live_big FROM decoupled.objects WHERE name = 'big';

-- DROP VIEW of a view's relation drops the view: its name is free at once,
-- and the view created again under it runs.
DROP VIEW big;
SELECT name FROM decoupled.objects WHERE name = 'big';
SELECT name FROM decoupled.object_statuses WHERE name = 'big';
SELECT regress_try($$SELECT decoupled.verify('big')$$) AS verify_dropped;
SELECT regress_try($$SELECT * FROM decoupled.subscribe('big', up_to => 1)$$) AS subscribe_dropped;
SELECT decoupled.create_materialized_view('big', 'SELECT id FROM totals WHERE total > 5') > 0
    AS created_again;
SELECT caught_up('big');
SELECT * FROM big ORDER BY id;
SELECT decoupled.verify('big');
-- DROP TABLE of a sink's table drops the sink; its history records it.
DROP TABLE feed_out;
SELECT name FROM decoupled.objects WHERE kind = 'sink';
SELECT status FROM decoupled.status_history WHERE name = 'feed' AND status = 'dropped';
-- CASCADE drops the catalog's dependents too: a sink that PostgreSQL knows
-- nothing about ...
DROP TABLE notes CASCADE;
-- ... and views whose written plans PostgreSQL reached.
SET client_min_messages = warning;
DROP VIEW totals CASCADE;
RESET client_min_messages;
-- A source's relation drops the source, with its subsources.
DROP VIEW auc;
SELECT * FROM live();
SELECT to_regclass('auc_bids') IS NULL AS subsource_view_gone,
       to_regclass('note_out') IS NOT NULL AS note_out_kept;
SELECT * FROM disagreements();
SELECT decoupled.finalize_dropped() >= 0 AS finalized;

------------------------------------------------------------------------------
-- 5. ALTER, RENAME, SET SCHEMA, OWNER TO, CREATE OR REPLACE VIEW, rules
--    and triggers on those relations (a superuser can attempt them) are
--    refused; GRANT, REVOKE and COMMENT ON keep working.
------------------------------------------------------------------------------
SELECT decoupled.create_materialized_view('totals',
           'SELECT id, sum(amount) AS total FROM ledger GROUP BY id') > 0 AS created;
SELECT decoupled.create_sink('feed', 'totals', 'feed_out') > 0 AS created;
SELECT caught_up('totals') AND caught_up('feed') AS caught_up;
RESET ROLE;
SELECT catalog_version() AS version_before \gset
SELECT format('ALTER VIEW %s RENAME TO replaced',
              (definition->>'plan')::oid::regclass) AS alter_plan,
       format('CREATE OR REPLACE VIEW %s AS SELECT 1 AS id, 2::bigint AS total',
              (definition->>'plan')::oid::regclass) AS replace_plan
  FROM decoupled.catalog_objects WHERE name = 'totals' AND dropped_at IS NULL \gset
SELECT regexp_replace(s, 'c\d+_plan', 'c<id>_plan') AS statement, regress_try(s) AS outcome
  FROM (VALUES
    ($$ALTER VIEW totals RENAME TO totals2$$),
    ($$ALTER TABLE totals RENAME TO totals2$$),
    ($$ALTER VIEW totals RENAME COLUMN total TO sum$$),
    ($$ALTER VIEW totals SET SCHEMA public$$),
    ($$ALTER VIEW totals OWNER TO ddl_owner$$),
    ($$ALTER VIEW totals SET (security_barrier = true)$$),
    ($$ALTER VIEW totals ALTER COLUMN id SET DEFAULT 0$$),
    ($$CREATE OR REPLACE VIEW totals AS SELECT 1 AS id, 2::bigint AS total$$),
    ($$CREATE RULE no_insert AS ON INSERT TO totals DO INSTEAD NOTHING$$),
    ($$CREATE TRIGGER ins INSTEAD OF INSERT ON totals FOR EACH ROW EXECUTE FUNCTION noop()$$),
    ($$ALTER MATERIALIZED VIEW totals RENAME TO totals2$$),
    ($$ALTER VIEW cnt RENAME TO counted$$),
    ($$ALTER VIEW cnt OWNER TO ddl_owner$$),
    ($$ALTER TABLE feed_out ADD COLUMN extra int$$),
    ($$ALTER TABLE feed_out DROP COLUMN total$$),
    ($$ALTER TABLE feed_out RENAME COLUMN total TO sum$$),
    ($$ALTER TABLE feed_out RENAME TO feed_out2$$),
    ($$ALTER TABLE feed_out SET SCHEMA public$$),
    ($$ALTER TABLE feed_out OWNER TO ddl_owner$$),
    ($$ALTER TABLE feed_out ENABLE ROW LEVEL SECURITY$$),
    ($$CREATE TRIGGER ins BEFORE INSERT ON feed_out FOR EACH ROW EXECUTE FUNCTION noop()$$),
    ($$CREATE RULE no_insert AS ON INSERT TO feed_out DO INSTEAD NOTHING$$),
    ($$CREATE TABLE feed_child () INHERITS (feed_out)$$),
    ($$ALTER TABLE accounts OWNER TO CURRENT_USER$$),
    (:'alter_plan'),
    (:'replace_plan')
) AS t(s);
SELECT catalog_version() = :version_before AS catalog_unchanged;
GRANT SELECT ON totals, feed_out TO PUBLIC;
COMMENT ON VIEW totals IS 'sum per id';
COMMENT ON TABLE feed_out IS 'changes of totals';
REVOKE SELECT ON totals, feed_out FROM PUBLIC;
SELECT obj_description('ddl_s.totals'::regclass) AS comment;
-- Renaming the schema moves the relations with it; drops still find them.
ALTER SCHEMA ddl_s RENAME TO ddl_moved;
SELECT decoupled.drop('cnt', cascade => true);
SELECT to_regclass('ddl_moved.cnt') IS NULL AS cnt_view_gone;
ALTER SCHEMA ddl_moved RENAME TO ddl_s;
SELECT * FROM disagreements();

------------------------------------------------------------------------------
-- 6. DROP SCHEMA and DROP OWNED reach the relations through the catalog
--    too.
------------------------------------------------------------------------------
CREATE SCHEMA ddl_o AUTHORIZATION ddl_owner;
SET ROLE ddl_owner;
SET search_path = ddl_o, public;
SELECT decoupled.create_source('ticks', 'counter', cluster => 'idle') > 0 AS created;
SELECT decoupled.create_materialized_view('odd', 'SELECT n FROM ticks WHERE n % 2 = 1',
                                          cluster => 'idle') > 0 AS created;
SELECT decoupled.create_sink('odd_feed', 'odd', 'odd_out', cluster => 'idle') > 0 AS created;
SET search_path = ddl_s, public;
-- Without CASCADE PostgreSQL refuses a schema that is not empty.
SELECT regexp_replace(regress_try('DROP SCHEMA ddl_s'), ' \(.*', '') AS outcome;
SET client_min_messages = warning;
DROP SCHEMA ddl_s CASCADE;
RESET client_min_messages;
SELECT * FROM live();
SELECT * FROM disagreements();
RESET ROLE;
SET client_min_messages = warning;
DROP OWNED BY ddl_owner CASCADE;
RESET client_min_messages;
SELECT * FROM live();
SELECT * FROM disagreements();
-- DROP OWNED BY a role drops what it owns in the catalog's terms too: the
-- views and sinks it created (a sink on another role's view outlived it,
-- and DROP ROLE failed), each sink with its table, whenever finalized.
-- Without CASCADE, another role's view built on its table is refused,
-- named (not a view's written plan, which is the extension's).
CREATE ROLE ddl_leaver IN ROLE decoupled_admin;
GRANT CREATE ON SCHEMA public TO ddl_leaver;
CREATE TABLE ddl_other (id int PRIMARY KEY, v int) WITH (decoupled.registered = true);
SELECT decoupled.create_materialized_view('ddl_other_mv', 'SELECT count(*) AS n FROM ddl_other',
                                          cluster => 'idle') > 0 AS created;
GRANT SELECT ON ddl_other_mv TO ddl_leaver;
SET ROLE ddl_leaver;
CREATE TABLE ddl_lt (id int PRIMARY KEY, v int) WITH (decoupled.registered = true);
GRANT SELECT ON ddl_lt TO PUBLIC;
SELECT decoupled.create_materialized_view('ddl_lt_mv', 'SELECT count(*) AS n FROM ddl_lt',
                                          cluster => 'idle') > 0 AS created;
SELECT decoupled.create_sink('ddl_lt_feed', 'ddl_lt', 'ddl_lt_out', cluster => 'idle') > 0
    AS created;
SELECT decoupled.create_sink('ddl_lt_other', 'ddl_other_mv', 'ddl_lt_other_out',
                             cluster => 'idle') > 0 AS created;
RESET ROLE;
SELECT decoupled.create_materialized_view('ddl_lt_theirs', 'SELECT max(id) AS m FROM ddl_lt',
                                          cluster => 'idle') > 0 AS created;
DROP OWNED BY ddl_leaver;
SELECT decoupled.drop('ddl_lt_theirs');
-- Now only its own objects are built on its table.
DROP OWNED BY ddl_leaver;
SELECT name, kind FROM decoupled.objects WHERE name LIKE 'ddl\_lt%' OR name LIKE 'ddl\_other%'
 ORDER BY name;
CALL finalized('ddl\_lt%');
SELECT to_regclass('ddl_lt_out') IS NULL AS sink_table_gone,
       to_regclass('ddl_lt_other_out') IS NULL AS other_sink_table_gone;
REVOKE CREATE ON SCHEMA public FROM ddl_leaver;
DROP ROLE ddl_leaver;
SELECT decoupled.drop('ddl_other', cascade => true);
DROP TABLE ddl_other;

------------------------------------------------------------------------------
-- 7. PostgreSQL objects that read a collection's history — a view over a
--    registered table (it embeds the history views), over a maintained
--    view, a function whose body reads one — refuse a drop or an
--    unregistration without cascade, as PostgreSQL refuses DROP TABLE under
--    a view; finalization would otherwise have taken them with the storage.
------------------------------------------------------------------------------
RESET search_path;
CREATE TABLE ddl_fd (id int PRIMARY KEY, v int) WITH (decoupled.registered = true);
CREATE VIEW ddl_fd_view AS SELECT id FROM ddl_fd WHERE v > 0;
SELECT decoupled.create_materialized_view('ddl_fd_mv', 'SELECT count(*) AS n FROM ddl_fd')
    > 0 AS created;
CREATE VIEW ddl_fd_mv_view AS SELECT n FROM ddl_fd_mv;
CREATE FUNCTION ddl_fd_f() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT n FROM ddl_fd_mv; END;
SELECT regress_try($$SELECT decoupled.drop('ddl_fd_mv')$$);
SELECT regress_try('DROP MATERIALIZED VIEW ddl_fd_mv');
SELECT * FROM live();
DROP VIEW ddl_fd_mv_view;
DROP FUNCTION ddl_fd_f();
SELECT decoupled.drop('ddl_fd_mv');
SELECT regress_try($$SELECT decoupled.unregister_table('ddl_fd')$$);
SELECT regress_try('ALTER TABLE ddl_fd RESET (decoupled.registered)');
-- Dropped first, the view is recreated over the plain table afterwards.
DROP VIEW ddl_fd_view;
SELECT decoupled.unregister_table('ddl_fd');
CREATE VIEW ddl_fd_view AS SELECT id FROM ddl_fd WHERE v > 0;
-- With cascade they go with the history.
SELECT decoupled.register_table('ddl_fd') > 0 AS registered;
CREATE VIEW ddl_fd_view2 AS SELECT id FROM ddl_fd;
SELECT decoupled.drop('ddl_fd', cascade => true);
SET client_min_messages = warning;
CALL finalized('ddl\_fd%');
RESET client_min_messages;
SELECT to_regclass('ddl_fd_view') IS NOT NULL AS plain_view_kept,
       to_regclass('ddl_fd_view2') IS NULL AS history_view_gone;
DROP VIEW ddl_fd_view;
DROP TABLE ddl_fd;
-- DROP ... CASCADE takes a role's view over a maintained view at once, as
-- PostgreSQL does: the name is free for a new view in the same transaction.
CREATE TABLE ddl_fd2 (id int PRIMARY KEY, v int) WITH (decoupled.registered = true);
CREATE MATERIALIZED VIEW ddl_fd2_mv WITH (decoupled.maintained) AS SELECT count(*) AS n FROM ddl_fd2;
CREATE VIEW ddl_fd2_user AS SELECT n FROM ddl_fd2_mv;
BEGIN;
DROP MATERIALIZED VIEW ddl_fd2_mv CASCADE;
CREATE MATERIALIZED VIEW ddl_fd2_mv WITH (decoupled.maintained) AS SELECT sum(v) AS s FROM ddl_fd2;
COMMIT;
SELECT to_regclass('ddl_fd2_user') IS NULL AS user_view_gone,
       (SELECT string_agg(attname, ',') FROM pg_attribute
         WHERE attrelid = 'ddl_fd2_mv'::regclass AND attnum > 0) AS new_columns;
-- The creator of a live view cannot be dropped: the view is computed as
-- it (REASSIGN OWNED moves the relation, not that).
CREATE ROLE ddl_creator;
GRANT decoupled_admin TO ddl_creator;
GRANT SELECT ON ddl_fd2 TO ddl_creator;
GRANT CREATE ON SCHEMA public TO ddl_creator;
SET ROLE ddl_creator;
SELECT decoupled.create_materialized_view('ddl_fd2_by', 'SELECT count(*) AS n FROM ddl_fd2') > 0
    AS created;
RESET ROLE;
REASSIGN OWNED BY ddl_creator TO CURRENT_USER;
SELECT regress_try('DROP ROLE ddl_creator');
SELECT decoupled.drop('ddl_fd2_by');
REVOKE CREATE ON SCHEMA public FROM ddl_creator;
DROP OWNED BY ddl_creator;
DROP ROLE ddl_creator;
SELECT decoupled.drop('ddl_fd2', cascade => true);
DROP TABLE ddl_fd2;
SELECT * FROM disagreements();

RESET search_path;
SELECT decoupled.drop_cluster('idle');
DROP ROLE ddl_owner;
DROP FUNCTION disagreements(), live(), catalog_version(), caught_up(text);
DROP PROCEDURE finalized(text);
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
