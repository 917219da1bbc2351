-- Collections (C2): registered tables captured on write and ticked into
-- history, compare-and-append, AS OF reads, reads outside [since, upper).
\set SHOW_CONTEXT never
-- A table with duplicate rows: collections are multisets.
CREATE TABLE bids (auction int, amount numeric(8,2), bidder text);
INSERT INTO bids VALUES (1, 10.00, 'ann'), (1, 10.00, 'ann'), (2, 5.50, 'bob');
SELECT decoupled.register_table('bids', retain_history => '1 hour') > 0 AS registered;
-- This server captures from the WAL: once the capture worker adopted the
-- table, its writes reach history without triggers.
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT name, kind, cluster, retain_history FROM decoupled.objects;
SELECT since AS t0, upper AS u0 FROM decoupled.frontiers WHERE name = 'bids' \gset
SELECT :u0 = :t0 + 1 AS snapshot_at_t0, compaction_bound = :t0 AS bound_at_t0
  FROM decoupled.frontiers WHERE name = 'bids';

-- Changes are captured on write and become history only when ticked.
INSERT INTO bids VALUES (3, 7.25, 'cy');
UPDATE bids SET amount = 11.00 WHERE auction = 1;   -- both copies
SELECT decoupled.tick_tables();
SELECT upper - 1 AS t1 FROM decoupled.frontiers WHERE name = 'bids' \gset
DELETE FROM bids WHERE bidder = 'bob';
INSERT INTO bids VALUES (1, 11.00, 'ann');           -- a third copy
SELECT decoupled.tick_tables();
SELECT upper - 1 AS t2 FROM decoupled.frontiers WHERE name = 'bids' \gset
-- (ctid is physical: a query using it reads the table itself)
DELETE FROM bids WHERE auction = 1 AND ctid IN (SELECT ctid FROM bids WHERE auction = 1 LIMIT 2);
SELECT decoupled.tick_tables();
SELECT upper - 1 AS t3 FROM decoupled.frontiers WHERE name = 'bids' \gset
SELECT :t0 < :t1 AND :t1 < :t2 AND :t2 < :t3 AS times_increase;

-- The latest state is the table itself.
SELECT * FROM bids ORDER BY auction, amount, bidder;

-- AS OF each tick, and between ticks (the state holds until the next one).
SET decoupled.as_of = :t0;
SELECT * FROM bids ORDER BY auction, amount, bidder;
SET decoupled.as_of = :t1;
SELECT * FROM bids ORDER BY auction, amount, bidder;
SELECT :t1 + 1 AS between \gset
SET decoupled.as_of = :between;
SELECT count(*) AS rows_between_t1_t2 FROM bids;
SET decoupled.as_of = :t2;
SELECT * FROM bids ORDER BY auction, amount, bidder;
SET decoupled.as_of = :t3;
SELECT * FROM bids ORDER BY auction, amount, bidder;
-- Aggregates, filters and joins all read at the same time.
SET decoupled.as_of = :t2;
SELECT auction, count(*), sum(amount) FROM bids WHERE amount > 6 GROUP BY auction ORDER BY 1;
RESET decoupled.as_of;

-- Cursors (psql's FETCH_COUNT uses them), EXPLAIN and CREATE TABLE AS read
-- at as_of too.
BEGIN;
SET LOCAL decoupled.as_of = :t0;
DECLARE at_t0 CURSOR FOR SELECT count(*) AS bids_at_t0 FROM bids;
FETCH at_t0;
COMMIT;
SET decoupled.as_of = :t0;
CREATE TEMP TABLE bids_at_t0 AS SELECT * FROM bids;
RESET decoupled.as_of;
SELECT count(*) AS copied_at_t0 FROM bids_at_t0;
-- A sub-select inside a FROM function's arguments too.
SET decoupled.as_of = :t0;
SELECT count(*) AS unnested_at_t0 FROM unnest(ARRAY(SELECT auction FROM bids));
RESET decoupled.as_of;

-- The extension reads its catalog as a superuser: a caller's search_path
-- must not slip in its own functions or operators.
CREATE SCHEMA trap;
CREATE FUNCTION trap.quote_ident(name) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'trap.quote_ident ran as %', current_user;
END
$$;
CREATE FUNCTION trap.int8eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'trap.= ran as %', current_user;
END
$$;
CREATE OPERATOR trap.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = trap.int8eq);
SET search_path = trap, pg_catalog, public;
-- A catalog change makes the next read reload the rewrite cache.
SELECT decoupled.create_cluster('trap_check', 0);
SELECT count(*) AS bids_now FROM bids;
SELECT set_config('decoupled.as_of', :'t1', false) IS NOT NULL AS set;
SELECT count(*) AS bids_at_t1 FROM bids;
RESET decoupled.as_of;
RESET search_path;
DROP SCHEMA trap CASCADE;
SELECT decoupled.drop_cluster('trap_check');

-- Reads outside [since, upper) are refused, each with its own SQLSTATE.
SELECT :t0 - 1 AS before_since, :t3 + 1 AS at_upper \gset
SELECT regress_try(format('SET decoupled.as_of = %s; SELECT count(*) FROM bids', :before_since));
RESET decoupled.as_of;
SELECT regress_try(format('SET decoupled.as_of = %s; SELECT count(*) FROM bids', :at_upper));
RESET decoupled.as_of;
SELECT regress_try($$SET decoupled.as_of = 'yesterday'$$);
SELECT regress_try($$SET decoupled.as_of = -5$$);
RESET decoupled.as_of;

-- Two collections read in one statement see one time.
CREATE TABLE auctions (id int, item text);
INSERT INTO auctions VALUES (1, 'lamp'), (2, 'desk'), (3, 'vase');
SELECT decoupled.register_table('auctions', '1 hour') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables();
SELECT upper - 1 AS j1 FROM decoupled.frontiers WHERE name = 'auctions' \gset
DELETE FROM auctions WHERE id = 3;
INSERT INTO bids VALUES (3, 9.00, 'dee');
SELECT decoupled.tick_tables();
SET decoupled.as_of = :j1;
SELECT a.item, count(b.*) AS bids FROM auctions a LEFT JOIN bids b ON b.auction = a.id
 GROUP BY a.item ORDER BY a.item;
RESET decoupled.as_of;
SELECT a.item, count(b.*) AS bids FROM auctions a LEFT JOIN bids b ON b.auction = a.id
 GROUP BY a.item ORDER BY a.item;

-- Writes and FOR UPDATE always act on the table itself.
BEGIN;
SET LOCAL decoupled.as_of = :j1;
SELECT count(*) AS locked FROM (SELECT * FROM auctions FOR UPDATE) x;
UPDATE auctions SET item = 'chair' WHERE id = 2;
ROLLBACK;

-- Compare-and-append: the only write path; a failed append changes nothing.
SELECT upper AS a0 FROM decoupled.frontiers WHERE name = 'auctions' \gset
SELECT decoupled.append('auctions',
    format('[{"mz_timestamp": %s, "mz_diff": 2, "data": {"id": 9, "item": "kite"}}]', :a0)::jsonb,
    :a0, :a0 + 10) - :a0 AS advanced_by;
SELECT case_name, regress_try(s) AS outcome FROM (VALUES
    ('stale expected upper',
     format($$SELECT decoupled.append('auctions', '[]', %s, %s)$$, :a0, :a0 + 20)),
    ('empty interval',
     format($$SELECT decoupled.append('auctions', '[]', %s, %s)$$, :a0 + 10, :a0 + 10)),
    ('time outside interval',
     format($$SELECT decoupled.append('auctions', '[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 1}}]', %s, %s)$$, :a0 + 20, :a0 + 10, :a0 + 20)),
    ('negative multiplicity',
     format($$SELECT decoupled.append('auctions', '[{"mz_timestamp": %s, "mz_diff": -3, "data": {"id": 9, "item": "kite"}}]', %s, %s)$$, :a0 + 10, :a0 + 10, :a0 + 20)),
    ('not an array',
     format($$SELECT decoupled.append('auctions', '{"not": "an array"}', %s, %s)$$, :a0 + 10, :a0 + 20)),
    ('update without data',
     format($$SELECT decoupled.append('auctions', '[{"mz_diff": 1}]', %s, %s)$$, :a0 + 10, :a0 + 20)),
    ('unknown collection',
     format($$SELECT decoupled.append('nowhere', '[]', %s, %s)$$, :a0 + 10, :a0 + 20)),
    ('null upper',
     format($$SELECT decoupled.append('auctions', '[]', NULL, %s)$$, :a0 + 20)),
    ('unknown deployment',
     format($$SELECT decoupled.append('auctions', '[]', %s, %s, deployment => 'nope')$$, :a0 + 10, :a0 + 20)),
    ('fenced incarnation',
     format($$SELECT decoupled.append('auctions', '[]', %s, %s, incarnation => 424242)$$, :a0 + 10, :a0 + 20))
) AS t(case_name, s);
SELECT upper - :a0 AS still_advanced_by FROM decoupled.frontiers WHERE name = 'auctions';
-- Retracting copies that exist works, oldest first.
SELECT decoupled.append('auctions',
    format('[{"mz_timestamp": %s, "mz_diff": -1, "data": {"id": 9, "item": "kite"}}]', :a0 + 15)::jsonb,
    :a0 + 10, :a0 + 20) - :a0 AS advanced_by;
SELECT :a0 + 12 AS a12, :a0 + 17 AS a17 \gset
SET decoupled.as_of = :a12;
SELECT item, count(*) FROM auctions WHERE id = 9 GROUP BY item;
SET decoupled.as_of = :a17;
SELECT item, count(*) FROM auctions WHERE id = 9 GROUP BY item;
RESET decoupled.as_of;

-- A deployment without write authority cannot append.
INSERT INTO decoupled.catalog_deployments (name, state) VALUES ('green', 'prewarming');
SELECT regress_try(format($$SELECT decoupled.append('auctions', '[]', %s, %s, deployment => 'green')$$, :a0 + 20, :a0 + 30));
DELETE FROM decoupled.catalog_deployments WHERE name = 'green';

-- Registration: bad input.
CREATE TEMP TABLE scratch (x int);
CREATE UNLOGGED TABLE fleeting (x int);
CREATE VIEW bid_view AS SELECT * FROM bids;
CREATE TABLE reshaped (a int, b int, c int);
ALTER TABLE reshaped DROP COLUMN b;
CREATE SCHEMA other;
CREATE TABLE other.bids (x int);
CREATE TABLE guarded (x int);
ALTER TABLE guarded ENABLE ROW LEVEL SECURITY;
CREATE TABLE parted (x int) PARTITION BY RANGE (x);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10);
CREATE TABLE parent (x int);
CREATE TABLE child () INHERITS (parent);
CREATE ROLE decoupled_other_admin IN ROLE decoupled_admin;
CREATE TABLE not_mine (x int);
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$SELECT decoupled.register_table('bids')$$),
    ($$SELECT decoupled.register_table('other.bids')$$),
    ($$SELECT decoupled.register_table('scratch')$$),
    ($$SELECT decoupled.register_table('fleeting')$$),
    ($$SELECT decoupled.register_table('bid_view')$$),
    ($$SELECT decoupled.register_table('reshaped')$$),
    ($$SELECT decoupled.register_table('no_such_table')$$),
    ($$SELECT decoupled.register_table('auctions', '-1 second')$$),
    ($$SELECT decoupled.register_table(NULL)$$),
    ($$SELECT decoupled.unregister_table(NULL)$$),
    ($$SELECT decoupled.unregister_table('fleeting')$$),
    ($$ALTER TABLE bids ADD COLUMN note text$$),
    ($$ALTER TABLE bids RENAME TO bids2$$),
    ($$SELECT decoupled.register_table('guarded')$$),
    ($$SELECT decoupled.register_table('parted')$$),
    ($$SELECT decoupled.register_table('parted_1')$$),
    ($$SELECT decoupled.register_table('parent')$$),
    ($$SELECT decoupled.register_table('child')$$),
    ($$CREATE TABLE bids_child () INHERITS (bids)$$),
    ($$DROP TRIGGER decoupled_capture_insert ON bids$$),
    ($$SET ROLE decoupled_other_admin; SELECT decoupled.register_table('not_mine')$$)
) AS t(s);
RESET ROLE;
DROP TABLE guarded, parted, parent, child, not_mine;
DROP ROLE decoupled_other_admin;

-- TRUNCATE is captured from the current rows, whatever as_of says.  From
-- the WAL at any isolation level (trigger capture needs READ COMMITTED:
-- t/020_wal_capture.pl).
CREATE TABLE cleared (x int);
INSERT INTO cleared SELECT generate_series(1, 5);
SELECT decoupled.register_table('cleared', '1 hour') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT since AS c0, upper - 1 AS before_truncate FROM decoupled.frontiers WHERE name = 'cleared' \gset
INSERT INTO cleared VALUES (6);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT regress_try('TRUNCATE cleared');
COMMIT;
BEGIN;
SET LOCAL decoupled.as_of = :c0;
TRUNCATE cleared;
COMMIT;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper - 1 AS after_truncate FROM decoupled.frontiers WHERE name = 'cleared' \gset
SET decoupled.as_of = :before_truncate;
SELECT count(*) AS rows_before_truncate FROM cleared;
SET decoupled.as_of = :after_truncate;
SELECT count(*) AS rows_after_truncate FROM cleared;
RESET decoupled.as_of;
DROP TABLE cleared;

-- A view over a registered table reads it at as_of too.
CREATE VIEW big_bids AS SELECT * FROM bids WHERE amount >= 10;
SET decoupled.as_of = :t0;
SELECT count(*) AS big_bids_at_t0 FROM big_bids;
RESET decoupled.as_of;
SELECT count(*) AS big_bids_now FROM big_bids;
DROP VIEW big_bids;

-- Unregister and DROP TABLE drop the collection at once; the table stays
-- (unregister) and its storage goes at finalization.
SELECT decoupled.catalog_version() AS v \gset
SELECT decoupled.unregister_table('auctions');
SELECT count(*) AS auctions_rows FROM auctions;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'auctions'::regclass;
DROP VIEW bid_view;
DROP TABLE bids;
SELECT decoupled.catalog_version() - :v AS bumps;
SELECT name FROM decoupled.objects;
SELECT name, status FROM decoupled.status_history WHERE name IN ('auctions', 'bids') ORDER BY name;
SELECT regress_finalize() AS finalized;
SELECT decoupled.finalize_dropped() AS finalized_again;
SELECT count(*) AS storage_left FROM pg_class
 WHERE relnamespace = 'decoupled_storage'::regnamespace;
-- Names are free again; the new collection is a new lifetime.
CREATE TABLE bids (x int);
SELECT decoupled.register_table('bids') > 0 AS registered;
SELECT count(DISTINCT lifetime_id) AS lifetimes FROM decoupled.catalog_objects WHERE name = 'bids';
DROP TABLE bids, auctions, scratch, fleeting, reshaped, other.bids;
DROP SCHEMA other;
SELECT regress_finalize() AS finalized;

-- What was parsed before a table's registration reads the table itself
-- (the read rewrite applies at parse analysis), so its latest state
-- whatever decoupled.as_of says: registration names such views and
-- SQL-body functions in a WARNING.  Made again, a view reads the history.
CREATE TABLE pre_reg (k int PRIMARY KEY, v int, w int GENERATED ALWAYS AS (v * 10) STORED);
INSERT INTO pre_reg VALUES (1, 1);
CREATE VIEW pre_reg_view AS SELECT k, v FROM pre_reg;
CREATE FUNCTION pre_reg_sum() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT sum(v) FROM pre_reg; END;
SELECT decoupled.register_table('pre_reg', retain_history => '1 hour') > 0 AS registered;
CREATE OR REPLACE VIEW pre_reg_view AS SELECT k, v FROM pre_reg;
SELECT decoupled._readers_without_history('pre_reg') AS still_reading_latest;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper - 1 AS pre_reg_t FROM decoupled.frontiers WHERE name = 'pre_reg' \gset
UPDATE pre_reg SET v = 2;
SELECT decoupled.tick_tables() > 0 AS ticked;
SET decoupled.as_of = :pre_reg_t;
SELECT v AS view_as_of FROM pre_reg_view;
SELECT pre_reg_sum() AS function_latest;
-- COPY of the table reads it at decoupled.as_of too, as a query would,
-- with the columns COPY writes (not the generated one), and refuses what
-- COPY refuses.
COPY pre_reg TO STDOUT;
COPY pre_reg (v) TO STDOUT;
COPY pre_reg (v, v) TO STDOUT;
COPY pre_reg (w) TO STDOUT;
RESET decoupled.as_of;
COPY pre_reg TO STDOUT;
DROP VIEW pre_reg_view;
DROP FUNCTION pre_reg_sum();
DROP TABLE pre_reg;
SELECT regress_finalize() AS finalized;
