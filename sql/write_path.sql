-- The write path with kept plans (C2.1, C14.3; extension/append_core.cpp):
-- every statement of an append and a tick is prepared once per backend and
-- collection and reused.  This suite runs in one backend, so what it
-- writes after DDL goes through plans kept from before it:
--   1. plans survive DDL on storage (an index, as an arrangement adds);
--   2. a table unregistered, changed and registered again, and one dropped
--      and re-created with the same name and other columns, are new
--      collections with plans of their own;
--   3. each way of writing agrees with the history it should make: inserts
--      only (straight into cur), mixed signs at one time (one statement,
--      retracted rows by index probes or, when many, by one hash join),
--      several times in one append (the general pairing), and a tick's
--      insert and delete of one row cancelling out;
--   4. more busy collections in one tick than plans are kept for (128 plans,
--      two or three a table here);
--   5. a burst's pending relation, emptied by a tick, gets a new file (a
--      small one keeps its page);
--   6. a table with a primary key has no row hash index on cur: ticks and
--      appends pair its retractions by the key;
--   7. ticks run in C (index_tick.cpp), not as a statement, finding a
--      row's copies by the key or, without one, by the row hash: the same
--      history, the same mz_hash, the same refusal.
\set SHOW_CONTEXT never

-- Table `tbl` as text rows in order: its history as of its latest tick
-- (as_of => true) or the table itself.
CREATE FUNCTION wp_rows(tbl text, as_of boolean) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    v_rows text[];
BEGIN
    IF as_of THEN
        PERFORM set_config('decoupled.as_of', (f.upper - 1)::text, true)
           FROM decoupled.frontiers f WHERE f.name = tbl;
    END IF;
    EXECUTE format('SELECT ARRAY(SELECT t::text FROM %I t ORDER BY 1)', tbl) INTO v_rows;
    PERFORM set_config('decoupled.as_of', '', true);
    RETURN v_rows;
END
$$;
CREATE FUNCTION wp_latest(tbl text) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT unnest(wp_rows(tbl, true))
$$;
-- Whether history at the latest tick equals the table.
CREATE FUNCTION wp_agrees(tbl text) RETURNS boolean LANGUAGE sql AS $$
    SELECT wp_rows(tbl, true) = wp_rows(tbl, false)
$$;
-- Where collection `name` keeps its rows.
CREATE FUNCTION wp_storage(name text, part text) RETURNS text LANGUAGE sql AS $$
    SELECT format('decoupled_storage.c%s_%s', o.lifetime_id, part)
      FROM decoupled.objects o WHERE o.name = wp_storage.name
$$;
CREATE FUNCTION wp_count(name text, part text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s', wp_storage(name, part)) INTO n;
    RETURN n;
END
$$;

------------------------------------------------------------------------------
-- 1. Plans survive DDL on storage
------------------------------------------------------------------------------
CREATE TABLE wp (k int, v text);
SELECT decoupled.register_table('wp', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wp SELECT g, 'v' || g FROM generate_series(1, 5) g;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wp SET v = v || '!' WHERE k <= 2;
DELETE FROM wp WHERE k = 5;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wp') AS agrees;
-- An index on cur and dead, as a view's arrangement adds: kept plans are
-- planned again, the next tick and append write through the index too.
DO $$
BEGIN
    EXECUTE format('CREATE INDEX wp_cur_k ON %s (k)', wp_storage('wp', 'cur'));
    EXECUTE format('CREATE INDEX wp_dead_k ON %s (k)', wp_storage('wp', 'dead'));
END
$$;
UPDATE wp SET v = v || '?' WHERE k = 3;
INSERT INTO wp VALUES (6, 'v6');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wp') AS agrees;
SELECT decoupled.append('wp', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"k": 7}}]',
                                     upper)::jsonb, upper, upper + 1) > 0 AS appended
  FROM decoupled.frontiers WHERE name = 'wp';
SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'wp' \gset
SET decoupled.as_of = :t;
SELECT count(*) AS sevens FROM wp WHERE k = 7;
RESET decoupled.as_of;
DROP INDEX decoupled_storage.wp_cur_k, decoupled_storage.wp_dead_k;

------------------------------------------------------------------------------
-- 2. New collections under old names get plans of their own
------------------------------------------------------------------------------
SELECT lifetime_id AS old_id FROM decoupled.catalog_objects
 WHERE name = 'wp' AND dropped_at IS NULL \gset
DELETE FROM wp WHERE k = 7;   -- the appended row is history only
SELECT decoupled.unregister_table('wp');
ALTER TABLE wp ADD COLUMN w numeric;
UPDATE wp SET w = k * 1.5;
SELECT decoupled.register_table('wp', retain_history => '1 hour') > 0 AS registered;
SELECT lifetime_id > :old_id AS new_collection FROM decoupled.catalog_objects
 WHERE name = 'wp' AND dropped_at IS NULL;
UPDATE wp SET w = w + 1 WHERE k = 1;
INSERT INTO wp VALUES (8, 'v8', 0.5);
DELETE FROM wp WHERE k = 2;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wp') AS agrees;
SELECT * FROM wp_latest('wp');
SELECT decoupled.append('wp', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"k": 9, "w": 2.25}}]',
                                     upper)::jsonb, upper, upper + 1) > 0 AS appended
  FROM decoupled.frontiers WHERE name = 'wp';
-- The old shape is refused by the new collection.
SELECT decoupled.append('wp', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"q": 1}}]',
                                     upper)::jsonb, upper, upper + 1)
  FROM decoupled.frontiers WHERE name = 'wp';

-- Dropped and re-created with the same name and other column types.
SELECT decoupled.unregister_table('wp');
DROP TABLE wp;
CREATE TABLE wp (k text, v int[], w boolean);
INSERT INTO wp VALUES ('a', '{1,2}', true), ('b', NULL, false);
SELECT decoupled.register_table('wp', retain_history => '1 hour') > 0 AS registered;
UPDATE wp SET v = '{3}' WHERE k = 'b';
INSERT INTO wp VALUES ('c', '{}', NULL);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT * FROM wp_latest('wp');
SELECT decoupled.append('wp', format('[{"mz_timestamp": %s, "mz_diff": 2, "data": {"k": "d", "v": [4]}}]',
                                     upper)::jsonb, upper, upper + 1) > 0 AS appended
  FROM decoupled.frontiers WHERE name = 'wp';
SELECT decoupled.append('wp', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"v": "x"}}]',
                                     upper)::jsonb, upper, upper + 1)
  FROM decoupled.frontiers WHERE name = 'wp';
SELECT wp_count('wp', 'cur') AS cur_rows, wp_count('wp', 'dead') AS dead_rows;

------------------------------------------------------------------------------
-- 3. Each way of writing
------------------------------------------------------------------------------
-- A tick in which a row is inserted and deleted again: nothing to write.
CREATE TABLE wq (k int, v text);
SELECT decoupled.register_table('wq', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wq VALUES (1, 'once');
DELETE FROM wq WHERE k = 1;
INSERT INTO wq VALUES (2, 'twice'), (2, 'twice');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_count('wq', 'cur') AS cur_rows, wp_count('wq', 'dead') AS dead_rows;
SELECT wp_agrees('wq') AS agrees;

-- Many retractions at one tick (the statement's fallback, by one hash join
-- over cur, is in 7), then a few.
INSERT INTO wq SELECT g, 'r' || g FROM generate_series(3, 12002) g;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wq SET v = v || '+' WHERE k > 2;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wq') AS agrees;
SELECT wp_count('wq', 'cur') AS cur_rows, wp_count('wq', 'dead') AS dead_rows;
-- ... and a few.
DELETE FROM wq WHERE k BETWEEN 3 AND 12;
UPDATE wq SET v = 'changed' WHERE k = 2;   -- both copies
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wq') AS agrees;
SELECT wp_count('wq', 'cur') AS cur_rows, wp_count('wq', 'dead') AS dead_rows;

-- An append into a table with a primary key may not give a key a second
-- current row: captured updates and deletes find rows by key, and the
-- table's ticks would stop.  A correction that retracts the current row
-- with the key in the same append goes through, and so does a new key.
CREATE TABLE wk (id int, k text, v text, PRIMARY KEY (k, id));
SELECT decoupled.register_table('wk', retain_history => '1 hour') > 0 AS registered;
-- Captured from the WAL (by key) from here on: adopted.
SELECT decoupled.wait_for_capture('60s') AS adopted;
INSERT INTO wk VALUES (1, 'a', 'x'), (2, 'b', 'y');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wk' \gset
SELECT decoupled.append('wk', jsonb_build_array(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', 1, 'data', '{"id": 1, "k": "a", "v": "z"}'::jsonb)),
       :u, :u + 1);
SELECT decoupled.append('wk', jsonb_build_array(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', 2, 'data', '{"id": 3, "k": "c", "v": "z"}'::jsonb)),
       :u, :u + 1);
SELECT decoupled.append('wk', jsonb_build_array(
           jsonb_build_object('mz_timestamp', :u, 'mz_diff', -1,
                              'data', '{"id": 1, "k": "a", "v": "x"}'::jsonb),
           jsonb_build_object('mz_timestamp', :u, 'mz_diff', 1,
                              'data', '{"id": 1, "k": "a", "v": "z"}'::jsonb),
           jsonb_build_object('mz_timestamp', :u, 'mz_diff', 1,
                              'data', '{"id": 3, "k": "c", "v": "z"}'::jsonb)),
       :u, :u + 1) = :u + 1 AS corrected;
UPDATE wk SET v = 'q';
DELETE FROM wk WHERE id = 2;
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status FROM decoupled.object_statuses WHERE name = 'wk';
SELECT id, k, v FROM wk ORDER BY id;
SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'wk' \gset
SET decoupled.as_of = :t;
SELECT id, k, v FROM wk ORDER BY id;  -- the history: key 3 appended, not in the table
RESET decoupled.as_of;
-- A key the table got and capture took in, not ticked yet, counts as
-- current: its tick would make it the key's second current row.
INSERT INTO wk VALUES (7, 'g', 'table');
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wk' \gset
SELECT decoupled.append('wk', jsonb_build_array(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', 1, 'data', '{"id": 7, "k": "g", "v": "appended"}'::jsonb)),
       :u, :u + 1);
DELETE FROM wk WHERE id = 7;
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status FROM decoupled.object_statuses WHERE name = 'wk';
-- A row without a key is refused too (a primary key is never NULL).
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wk' \gset
SELECT decoupled.append('wk', jsonb_build_array(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', 1, 'data', '{"id": 9, "v": "no k"}'::jsonb)),
       :u, :u + 1);
-- History and table differ by what was appended, and the table's own
-- changes still tick: a key appended before the table got it (two current
-- rows for it then: an update takes the table's, the newest), a row an
-- append retracted while the table still holds it (its delete then
-- retracts nothing).
SELECT decoupled.append('wk', jsonb_build_array(
           jsonb_build_object('mz_timestamp', :u, 'mz_diff', 1,
                              'data', '{"id": 5, "k": "e", "v": "backfill"}'::jsonb),
           jsonb_build_object('mz_timestamp', :u, 'mz_diff', -1,
                              'data', '{"id": 1, "k": "a", "v": "q"}'::jsonb)),
       :u, :u + 1) = :u + 1 AS appended;
INSERT INTO wk VALUES (5, 'e', 'real');
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wk SET v = 'real2' WHERE id = 5;
DELETE FROM wk WHERE id = 1;
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status FROM decoupled.object_statuses WHERE name = 'wk';
SELECT id, k, v FROM wk ORDER BY id;
SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'wk' \gset
SET decoupled.as_of = :t;
SELECT id, k, v FROM wk ORDER BY id, v;
RESET decoupled.as_of;
DROP TABLE wk;

-- JSON appends: inserts only, mixed signs at one time (probe and scan),
-- and several times with retractions.
CREATE TABLE wj (k int, v text);
SELECT decoupled.register_table('wj', retain_history => '1 hour') > 0 AS registered;
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wj' \gset
SELECT decoupled.append('wj', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', 1, 'data', jsonb_build_object('k', g, 'v', 'j')))
         FROM generate_series(1, 12000) g), :u, :u + 1) = :u + 1 AS appended;
SELECT decoupled.append('wj', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u + 1, 'mz_diff', d, 'data', jsonb_build_object('k', g, 'v', v)))
         FROM generate_series(1, 11000) g, (VALUES (-1, 'j'), (1, 'k')) x(d, v)),
       :u + 1, :u + 2) = :u + 2 AS appended;
SELECT wp_count('wj', 'cur') AS cur_rows, wp_count('wj', 'dead') AS dead_rows;
SELECT decoupled.append('wj', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u + 2, 'mz_diff', d, 'data', jsonb_build_object('k', 1, 'v', v)))
         FROM (VALUES (-1, 'k'), (3, 'l')) x(d, v)), :u + 2, :u + 3) = :u + 3 AS appended;
-- Inserted at one time and retracted at a later one, in one append; a
-- retraction pairs with a copy older than it, the oldest first.
SELECT decoupled.append('wj', jsonb_build_array(
           jsonb_build_object('mz_timestamp', :u + 3, 'mz_diff', 1,
                              'data', jsonb_build_object('k', 0, 'v', 'new')),
           jsonb_build_object('mz_timestamp', :u + 4, 'mz_diff', -1,
                              'data', jsonb_build_object('k', 0, 'v', 'new')),
           jsonb_build_object('mz_timestamp', :u + 4, 'mz_diff', -2,
                              'data', jsonb_build_object('k', 1, 'v', 'l'))),
       :u + 3, :u + 5) = :u + 5 AS appended;
SET decoupled.as_of = :u;
SELECT count(*), count(*) FILTER (WHERE v = 'j') AS j FROM wj;
SELECT :u + 1 AS t \gset
SET decoupled.as_of = :t;
SELECT v, count(*) FROM wj GROUP BY v ORDER BY v;
SELECT :u + 3 AS t \gset
SET decoupled.as_of = :t;
SELECT v, count(*) FROM wj WHERE k <= 1 GROUP BY k, v ORDER BY k, v;
SELECT :u + 4 AS t \gset
SET decoupled.as_of = :t;
SELECT v, count(*) FROM wj WHERE k <= 1 GROUP BY k, v ORDER BY k, v;
RESET decoupled.as_of;
-- Two retractions of a row with one copy: the second has none to pair with.
SELECT decoupled.append('wj', jsonb_build_array(
           jsonb_build_object('mz_timestamp', :u + 5, 'mz_diff', 1,
                              'data', jsonb_build_object('k', -1, 'v', 'x')),
           jsonb_build_object('mz_timestamp', :u + 6, 'mz_diff', -2,
                              'data', jsonb_build_object('k', -1, 'v', 'x'))),
       :u + 5, :u + 7);

-- The stage is scratch in memory (extension/scratch.hpp): no row of an
-- append reaches its table.  A stage larger than work_mem spills to a file
-- that outlives the subtransaction its rows were converted in; a rolled-
-- back savepoint takes the rows an append staged in it, and the next
-- append in the transaction stages afresh.
SET work_mem = '64kB';
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wj' \gset
BEGIN;
SAVEPOINT before_bad;
SELECT decoupled.append('wj', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', d, 'data', jsonb_build_object('k', g, 'v', v)))
         FROM generate_series(1, 3000) g, (VALUES (-1, 'no such row'), (1, 'm')) x(d, v)),
       :u, :u + 1);
ROLLBACK TO SAVEPOINT before_bad;
SELECT decoupled.append('wj', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', d, 'data', jsonb_build_object('k', g, 'v', v)))
         FROM generate_series(2, 11000) g, (VALUES (-1, 'k'), (1, 'm')) x(d, v)),
       :u, :u + 1) = :u + 1 AS appended;
COMMIT;
RESET work_mem;
SET decoupled.as_of = :u;
SELECT v, count(*) FROM wj GROUP BY v ORDER BY v;
RESET decoupled.as_of;
SELECT pg_relation_size(wp_storage('wj', 'stage')) AS stage_table_bytes;

------------------------------------------------------------------------------
-- 4. More busy collections than plans are kept for, in one tick
------------------------------------------------------------------------------
DO $$
BEGIN
    FOR g IN 1..260 LOOP
        EXECUTE format('CREATE TABLE wp_many_%s (k int, v text)', g);
        PERFORM decoupled.register_table(format('wp_many_%s', g)::regclass, '1 hour');
        EXECUTE format('INSERT INTO wp_many_%1$s VALUES (%1$s, ''a''), (%1$s, ''b'')', g);
        COMMIT;  -- a registration's locks are many: one transaction each
    END LOOP;
END
$$;
SELECT decoupled.tick_tables() >= 260 AS ticked;
DO $$
BEGIN
    FOR g IN 1..260 LOOP
        EXECUTE format('UPDATE wp_many_%s SET v = v || ''!'' WHERE v = ''a''', g);
    END LOOP;
END
$$;
SELECT decoupled.tick_tables() >= 260 AS ticked;
SELECT count(*) FILTER (WHERE wp_agrees(format('wp_many_%s', g))) AS agreeing
  FROM generate_series(1, 260) g;
SELECT count(*) AS stalled FROM decoupled.table_health h
  JOIN decoupled.catalog_objects o USING (lifetime_id)
 WHERE h.status = 'stalled' AND o.name LIKE 'wp\_many\_%';
DO $$
BEGIN
    FOR g IN 1..260 LOOP
        EXECUTE format('DROP TABLE wp_many_%s', g);
        COMMIT;
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- 5. A burst's pending relation gets a new file once a tick empties it
------------------------------------------------------------------------------
-- Pending is a queue that every tick empties; kept, the pages a burst grew
-- it to would be read by every later tick.
CREATE TABLE wb (k int PRIMARY KEY, v text);
SELECT decoupled.register_table('wb', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wb SELECT g, 'v' || g FROM generate_series(1, 30000) g;
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT pg_relation_size(wp_storage('wb', 'pending')) >= 128 * 8192 AS burst_grew_pending;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT pg_relation_size(wp_storage('wb', 'pending')) AS pending_bytes;
SELECT wp_agrees('wb') AS agrees, wp_count('wb', 'cur') AS cur_rows;
-- Captured and ticked into the new file as before.
UPDATE wb SET v = v || '!' WHERE k <= 10;
DELETE FROM wb WHERE k BETWEEN 11 AND 15;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wb') AS agrees, wp_count('wb', 'cur') AS cur_rows,
       wp_count('wb', 'dead') AS dead_rows;
-- A small pending keeps its page: no new file at every tick.
INSERT INTO wb VALUES (30001, 'x');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT pg_relation_size(wp_storage('wb', 'pending')) > 0 AS small_pending_kept;
SELECT wp_agrees('wb') AS agrees;
DROP TABLE wb;

------------------------------------------------------------------------------
-- 6. A table with a primary key pairs retractions by its key
------------------------------------------------------------------------------
-- Its cur has no index on the row hash (the key's index finds a retracted
-- row's copies); a table without a key keeps it.
CREATE TABLE wk (k int PRIMARY KEY, v text);
SELECT decoupled.register_table('wk', retain_history => '1 hour') > 0 AS registered;
SELECT string_agg(a.attname, ', ' ORDER BY a.attname) AS wk_cur_indexes
  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
 WHERE i.indrelid = wp_storage('wk', 'cur')::regclass;
SELECT string_agg(a.attname, ', ' ORDER BY a.attname) AS wq_cur_indexes
  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
 WHERE i.indrelid = wp_storage('wq', 'cur')::regclass;
-- Ticks: many retractions, then a few, an update that changes the key, and
-- a row deleted and inserted again with the same key and value in one tick.
INSERT INTO wk SELECT g, 'k' || g FROM generate_series(1, 12000) g;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wk SET v = v || '+';
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wk') AS agrees;
DELETE FROM wk WHERE k BETWEEN 1 AND 10;
UPDATE wk SET k = -k WHERE k BETWEEN 11 AND 12;
DELETE FROM wk WHERE k = 13;
INSERT INTO wk VALUES (13, 'k13+');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wk') AS agrees;
SELECT wp_count('wk', 'cur') AS cur_rows, wp_count('wk', 'dead') AS dead_rows;
-- Appends to it: mixed signs at one time (probes, then one hash join) and
-- retractions at several times (the general pairing), by key too; a
-- retraction of a row the key's rows do not hold is refused as before.
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wk' \gset
SELECT decoupled.append('wk', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', d, 'data', jsonb_build_object('k', g, 'v', v)))
         FROM generate_series(20, 25) g, (VALUES (-1, 'k0'), (1, 'a')) x(d, v)),
       :u, :u + 1);
SELECT decoupled.append('wk', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u, 'mz_diff', d, 'data', jsonb_build_object('k', g, 'v', v)))
         FROM generate_series(20, 25) g, LATERAL (VALUES (-1, 'k' || g || '+'), (1, 'a')) x(d, v)),
       :u, :u + 1) = :u + 1 AS appended;
SELECT decoupled.append('wk', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', :u + 1, 'mz_diff', d, 'data', jsonb_build_object('k', g, 'v', v)))
         FROM generate_series(100, 11100) g, LATERAL (VALUES (-1, 'k' || g || '+'), (1, 'b')) x(d, v)),
       :u + 1, :u + 2) = :u + 2 AS appended;
SELECT decoupled.append('wk', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', t, 'mz_diff', d, 'data', jsonb_build_object('k', 20, 'v', v)))
         FROM (VALUES (:u + 2, -1, 'a'), (:u + 2, 1, 'c'), (:u + 3, -1, 'c')) x(t, d, v)),
       :u + 2, :u + 4) = :u + 4 AS appended;
SET decoupled.as_of = :u;
SELECT count(*), count(*) FILTER (WHERE v = 'a') AS a, count(*) FILTER (WHERE v = 'b') AS b FROM wk;
SELECT :u + 1 AS t \gset
SET decoupled.as_of = :t;
SELECT count(*), count(*) FILTER (WHERE v = 'a') AS a, count(*) FILTER (WHERE v = 'b') AS b FROM wk;
SELECT :u + 3 AS t \gset
SET decoupled.as_of = :t;
SELECT k, v FROM wk WHERE k BETWEEN 20 AND 21 ORDER BY k;
RESET decoupled.as_of;
SELECT wp_count('wk', 'cur') AS cur_rows;
DROP TABLE wk;
-- A key of two columns, one of them text.
CREATE TABLE wk2 (a int, b text, v int, PRIMARY KEY (a, b));
SELECT decoupled.register_table('wk2', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wk2 SELECT g % 5, 'b' || g, g FROM generate_series(1, 40) g;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wk2 SET v = -v WHERE a = 1;
UPDATE wk2 SET b = upper(b) WHERE a = 2;
DELETE FROM wk2 WHERE a = 3;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wk2') AS agrees, wp_count('wk2', 'cur') AS cur_rows,
       wp_count('wk2', 'dead') AS dead_rows;
DROP TABLE wk2;
-- A key whose columns are named as the statements' own: n, k, r, c.
CREATE TABLE wk3 (n int, k int, r text, c int, PRIMARY KEY (n, k));
SELECT decoupled.register_table('wk3', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wk3 SELECT g, g % 3, 'r' || g, g FROM generate_series(1, 12000) g;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wk3 SET c = -c;
SELECT decoupled.tick_tables() > 0 AS ticked;
DELETE FROM wk3 WHERE n <= 5;
UPDATE wk3 SET r = 'x' WHERE n BETWEEN 6 AND 8;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_agrees('wk3') AS agrees;
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'wk3' \gset
SELECT decoupled.append('wk3', (SELECT jsonb_agg(jsonb_build_object(
           'mz_timestamp', t, 'mz_diff', d,
           'data', jsonb_build_object('n', 9, 'k', 0, 'r', v, 'c', -9)))
         FROM (VALUES (:u, -1, 'r9'), (:u, 1, 'y'), (:u + 1, -1, 'y')) x(t, d, v)),
       :u, :u + 2) = :u + 2 AS appended;
SELECT wp_count('wk3', 'cur') AS cur_rows;
DROP TABLE wk3;

------------------------------------------------------------------------------
-- 7. A table's tick in C (extension/index_tick.cpp)
------------------------------------------------------------------------------
-- Captured rows consolidated by their binary image, retractions found
-- through the key's index, written with every index and constraint: a key
-- whose columns come in another order than the table's, NULLs, a value
-- stored compressed, numerics and floats whose changes only their text
-- shows (0.25 and 0.250, 0 and -0), a row changed twice in one tick, a
-- key changed, deletes; history at both ticks, and each row's mz_hash the
-- hash of its text as every other write stores it.
CREATE TABLE wc (v text, b int, a text, n numeric, f float8, j jsonb, arr int[],
                 PRIMARY KEY (a, b));
SELECT decoupled.register_table('wc', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wc SELECT CASE WHEN g % 7 <> 0 THEN 'v' || g END, g % 10, 'a' || (g / 10), g / 4.0,
                      CASE WHEN g % 2 = 0 THEN 0.0 ELSE 1.5 END, jsonb_build_object('g', g),
                      ARRAY[g, NULL]
                 FROM generate_series(1, 2000) g;
INSERT INTO wc VALUES (repeat('long', 100000), 0, 'long', 1, 1, '{}', '{}');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper - 1 AS wc_first FROM decoupled.frontiers WHERE name = 'wc' \gset
CREATE TEMP TABLE wc_first AS SELECT unnest(wp_rows('wc', false)) AS r;
SELECT pg_column_compression(v) IS NOT NULL AS stored_compressed FROM wc WHERE a = 'long';
UPDATE wc SET n = n * 1.0 WHERE b = 1;
UPDATE wc SET f = -f WHERE b = 2 AND f = 0;
UPDATE wc SET v = NULL WHERE b = 3;
UPDATE wc SET v = v || '!' WHERE a = 'long';
UPDATE wc SET v = 'x' WHERE b = 4;
UPDATE wc SET v = 'y' WHERE b = 4;
UPDATE wc SET b = b + 100 WHERE b = 5;
DELETE FROM wc WHERE b = 6;
SELECT count(*) AS first_changes FROM (SELECT unnest(wp_rows('wc', false))
                                       EXCEPT ALL SELECT r FROM wc_first) x;
SELECT decoupled.wait_for_capture('60s') AS captured;
SET client_min_messages = debug1;  -- the tick says it took this path
SELECT decoupled.tick_tables() > 0 AS ticked;
RESET client_min_messages;
SELECT wp_agrees('wc') AS agrees, wp_count('wc', 'cur') AS cur_rows,
       wp_count('wc', 'dead') AS dead_rows;
SET decoupled.as_of = :wc_first;
SELECT ARRAY(SELECT t::text FROM wc t ORDER BY 1) = ARRAY(SELECT r FROM wc_first ORDER BY 1)
       AS first_tick_kept;
RESET decoupled.as_of;
DO $$
DECLARE
    wrong bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s c '
                   ' WHERE c.mz_hash <> hashtext(ROW(c.v, c.b, c.a, c.n, c.f, c.j, c.arr)::text)',
                   wp_storage('wc', 'cur')) INTO wrong;
    RAISE NOTICE 'rows of cur whose mz_hash is not their text''s: %', wrong;
END
$$;
-- A retraction with no copy in history (written into pending by hand: no
-- capture writes one) stalls that table's tick, which says why and keeps
-- its captured rows; once it is gone, the next tick moves them.
INSERT INTO wc VALUES ('new', 7, 'zz', 1, 1, '{}', '{}');
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT wp_storage('wc', 'pending') AS wc_pending \gset
INSERT INTO :wc_pending (mz_diff, v, b, a, n, f, j, arr)
VALUES (-1, 'nothing', 9, 'nope', 0, 0, '{}', '{}');
SELECT decoupled.tick_tables() >= 0 AS ticked;
SELECT h.status, h.error FROM decoupled.table_health h
  JOIN decoupled.catalog_objects o USING (lifetime_id) WHERE o.name = 'wc';
SELECT count(*) AS still_pending FROM :wc_pending;
DELETE FROM :wc_pending WHERE mz_diff < 0;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT h.status FROM decoupled.table_health h
  JOIN decoupled.catalog_objects o USING (lifetime_id) WHERE o.name = 'wc';
SELECT wp_agrees('wc') AS agrees;
DROP TABLE wc;
-- A table without a primary key finds a row's copies through cur's index on
-- the row hash: duplicates (two of three copies retracted, the oldest
-- first), NULLs, an update.
CREATE TABLE wn (a int, b text);
SELECT decoupled.register_table('wn', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wn VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, NULL);
SELECT decoupled.tick_tables() > 0 AS ticked;
INSERT INTO wn VALUES (1, 'x');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper - 1 AS wn_second FROM decoupled.frontiers WHERE name = 'wn' \gset
DELETE FROM wn WHERE ctid IN (SELECT ctid FROM wn WHERE a = 1 LIMIT 2);
UPDATE wn SET b = 'y' WHERE a = 2;
DELETE FROM wn WHERE a IS NULL;
SELECT decoupled.wait_for_capture('60s') AS captured;
SET client_min_messages = debug1;
SELECT decoupled.tick_tables() > 0 AS ticked;
RESET client_min_messages;
SELECT wp_agrees('wn') AS agrees, wp_count('wn', 'cur') AS cur_rows,
       wp_count('wn', 'dead') AS dead_rows;
SELECT wp_storage('wn', 'cur') AS wn_cur \gset
SELECT a, b, mz_ts = :wn_second AS newest_copy_kept,
       mz_hash = hashtext(ROW(a, b)::text) AS hash_of_text
  FROM :wn_cur ORDER BY a;
DROP TABLE wn;
-- Captured rows larger than maintenance_work_mem tick by the statements
-- instead (consolidation in C is in memory): inserts only, then many
-- retractions (one hash join over cur), with and without a key; the same
-- history.  A few then tick in C again.
SET maintenance_work_mem = '1MB';
CREATE TABLE wf (k int PRIMARY KEY, v text);
CREATE TABLE wg (k int, v text);
SELECT decoupled.register_table('wf', retain_history => '1 hour') > 0 AS registered;
SELECT decoupled.register_table('wg', retain_history => '1 hour') > 0 AS registered;
INSERT INTO wf SELECT g, 'f' || g FROM generate_series(1, 30000) g;
INSERT INTO wg SELECT g, 'g' || g FROM generate_series(1, 30000) g;
SELECT decoupled.wait_for_capture('60s') AS captured;
-- (These two ticks say so at DEBUG1, among PostgreSQL's own messages of
-- the large pending relations' new files.)
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wf SET v = v || '+';
UPDATE wg SET v = v || '+';
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE wf SET v = 'few' WHERE k <= 3;
DELETE FROM wg WHERE k <= 3;
SELECT decoupled.wait_for_capture('60s') AS captured;
SET client_min_messages = debug1;
SELECT decoupled.tick_tables() > 0 AS ticked;
RESET client_min_messages;
RESET maintenance_work_mem;
SELECT wp_agrees('wf') AS wf_agrees, wp_agrees('wg') AS wg_agrees,
       wp_count('wf', 'cur') AS wf_cur, wp_count('wf', 'dead') AS wf_dead,
       wp_count('wg', 'cur') AS wg_cur, wp_count('wg', 'dead') AS wg_dead;
DROP TABLE wf, wg;
-- Plans over history are made again when it grows (extension/plan_growth.hpp):
-- a dead that VACUUM recorded empty, a generic plan of its changes made
-- then (a scan of the one page it had), a DELETE of many rows.  The tick
-- that wrote them records dead's size, as VACUUM would, which makes the
-- plan again: it reads dead by its index.
CREATE TABLE wr (id int PRIMARY KEY, v int);
INSERT INTO wr SELECT g, g FROM generate_series(1, 20000) g;
SELECT decoupled.register_table('wr', retain_history => '1 hour') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT format('VACUUM ANALYZE %s', wp_storage('wr', 'dead')) AS vacuum_dead \gset
:vacuum_dead;
SELECT relpages = 0 AND reltuples = 0 AS dead_recorded_empty
  FROM pg_class WHERE oid = wp_storage('wr', 'dead')::regclass;
SET plan_cache_mode = force_generic_plan;
SELECT format('PREPARE wr_changes AS SELECT count(*) FROM decoupled_storage.%I',
              'c' || lifetime_id || '_delta') AS prepare_changes
  FROM decoupled.catalog_objects WHERE name = 'wr' AND dropped_at IS NULL \gset
:prepare_changes;
CREATE FUNCTION wr_scans_dead() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    PERFORM set_config('decoupled.as_of',
                       (SELECT (upper - 1)::text FROM decoupled.frontiers WHERE name = 'wr'), true);
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) EXECUTE wr_changes' LOOP
        IF line ~ 'Seq Scan on c[0-9]+_dead' THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;
SELECT wr_scans_dead() AS empty_dead_scanned;
DELETE FROM wr WHERE id > 100;
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT wp_count('wr', 'dead') AS dead_rows, wr_scans_dead() AS grown_dead_scanned;
SELECT relpages >= 100 AS dead_size_recorded
  FROM pg_class WHERE oid = wp_storage('wr', 'dead')::regclass;
-- The same through compare-and-append: retractions appended, not captured
-- (of rows inserted again; dead emptied by hand, as compaction would, but
-- by TRUNCATE: a VACUUM after a DELETE leaves the pages while any snapshot
-- may still see the rows, and a dead of many pages is read by its index).
INSERT INTO wr SELECT g, g FROM generate_series(101, 20000) g;
SELECT decoupled.wait_for_capture('60s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT format('TRUNCATE %s', wp_storage('wr', 'dead')) AS empty_dead \gset
:empty_dead;
:vacuum_dead;
DEALLOCATE wr_changes;
:prepare_changes;
SELECT wr_scans_dead() AS emptied_dead_scanned;
SELECT upper AS wr_upper FROM decoupled.frontiers WHERE name = 'wr' \gset
SELECT decoupled.append('wr',
           (SELECT jsonb_agg(jsonb_build_object('mz_timestamp', :wr_upper, 'mz_diff', -1,
                                                'data', jsonb_build_object('id', id, 'v', v)))
              FROM wr WHERE id > 100),
           :wr_upper, :wr_upper + 1) = :wr_upper + 1 AS appended;
SELECT wp_count('wr', 'dead') AS dead_rows, wr_scans_dead() AS appended_dead_scanned;
RESET plan_cache_mode;
DEALLOCATE wr_changes;
DROP FUNCTION wr_scans_dead();
DROP TABLE wr;
