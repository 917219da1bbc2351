-- WAL capture (brief C14.1): this server runs with wal_level = logical,
-- so registered tables are captured from the WAL by the capture worker.
-- (The trigger fallback, its NOTICE and the crash behaviour are in
-- t/020_wal_capture.pl; races with drops in specs/capture_vs_drop.spec.)

-- The setting: server-wide, two values.
SHOW decoupled.capture;
SELECT regress_try($$SET decoupled.capture = 'trigger'$$) AS set_in_session;
SELECT enumvals, context FROM pg_settings WHERE name = 'decoupled.capture';
SELECT setting, wal_level FROM decoupled.capture;

-- Bad input to the wait.
SELECT regress_try($$SELECT decoupled.wait_for_capture(NULL)$$) AS null_timeout;
SELECT regress_try($$SELECT decoupled.wait_for_capture('-1 s')$$) AS negative_timeout;

-- Values of many types go through the WAL and back exactly.
CREATE TYPE wc_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE wc_pair AS (a int, b text);
CREATE TABLE wc_values (
    id int PRIMARY KEY, t text, n numeric, f float8, ts timestamptz, i interval, j jsonb,
    b bytea, arr text[], pair wc_pair, mood wc_mood, r int4range,
    doubled int GENERATED ALWAYS AS (id * 2) STORED);
SELECT decoupled.register_table('wc_values') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
-- A timeout longer than an integer of milliseconds holds (24.8 days).
SELECT decoupled.wait_for_capture('1 mon') AS long_timeout;
SELECT wal_tables >= 1 AS from_the_wal, status FROM decoupled.capture;
SELECT count(*) AS capture_triggers FROM pg_trigger
 WHERE tgrelid = 'wc_values'::regclass AND tgname LIKE 'decoupled\_capture\_%';
SELECT relreplident FROM pg_class WHERE oid = 'wc_values'::regclass;
INSERT INTO wc_values VALUES
    (1, '', 0, 'NaN', '2026-12-01 12:00:00+05', '1 day 2 hours', '{"a": [1, "x"]}', '\x00ff',
     ARRAY['a,b', NULL, '"quoted"', ''], ROW(1, 'with space'), 'happy', '[1,5)'),
    (2, NULL, -1.5e-20, '-Infinity', '-infinity', '-3 mons', 'null', '', '{}', ROW(NULL, NULL),
     NULL, 'empty'),
    (3, 'tab	and
newline \ backslash (paren), comma', 1e100, 1.7976931348623157e308, NULL, NULL, '"é"', NULL,
     NULL, NULL, 'sad', NULL),
    (4, repeat('long ', 3000), 3.14159265358979, -0.0, 'epoch', '0', '[]', '\x', ARRAY['x'],
     ROW(-1, ''), 'ok', '(,)');
UPDATE wc_values SET n = n * 2 WHERE id IN (1, 4);  -- id 4 keeps its TOASTed text
DELETE FROM wc_values WHERE id = 2;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'wc_values' \gset
CREATE FUNCTION wc_digest() RETURNS text LANGUAGE sql AS
  $$ SELECT md5(string_agg(v::text, ' ' ORDER BY v.id)) FROM wc_values v $$;
SELECT wc_digest() AS table_now \gset
SET decoupled.as_of = :t;
SELECT wc_digest() = :'table_now' AS history_reads_the_same_values;
RESET decoupled.as_of;

-- Retractions by primary key (C14.2): a table with one keeps REPLICA
-- IDENTITY DEFAULT, so the WAL carries an update's and a delete's old key
-- and the capture worker finds the old row in history (cur, then pending),
-- through indexes on the key.  The key here is (b, a): its columns in the
-- table's order are a, b.
CREATE TABLE wc_keyed (a int, b text, note text, n int, PRIMARY KEY (b, a));
SELECT decoupled.register_table('wc_keyed') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
SELECT relreplident FROM pg_class WHERE oid = 'wc_keyed'::regclass;
SELECT o.definition->'key' AS key, l.key_fields
  FROM decoupled.catalog_objects o, decoupled._capture_key_lookup(o.lifetime_id) l
 WHERE o.name = 'wc_keyed' AND o.dropped_at IS NULL;
SELECT c.relname ~ '_(cur|pending)$' AS storage, pg_get_indexdef(x.indexrelid) ~ '\(a, b\)$' AS on_key
  FROM decoupled.catalog_objects o
  JOIN pg_class c ON c.relname IN ('c' || o.lifetime_id || '_cur', 'c' || o.lifetime_id || '_pending')
  JOIN pg_index x ON x.indrelid = c.oid
 WHERE o.name = 'wc_keyed' AND o.dropped_at IS NULL
   AND pg_get_indexdef(x.indexrelid) ~ '\(a, b\)$'
 ORDER BY c.relname;
-- The lookup of old rows probes both by key, whatever the statistics: its
-- plan is generic and kept for the capture worker's life.
CREATE FUNCTION wc_lookup_plan() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    EXECUTE 'PREPARE wc_lookup(text[], text[]) AS '
            || (SELECT l.statement FROM decoupled.catalog_objects o,
                       decoupled._capture_key_lookup(o.lifetime_id) l
                 WHERE o.name = 'wc_keyed' AND o.dropped_at IS NULL);
    FOR line IN EXECUTE $q$EXPLAIN (COSTS OFF) EXECUTE wc_lookup('{1}', '{k1}')$q$ LOOP
        RETURN NEXT regexp_replace(line, 'c[0-9]+_', 'c<id>_', 'g');
    END LOOP;
    DEALLOCATE wc_lookup;
END
$$;
SET plan_cache_mode = force_generic_plan;
SELECT * FROM wc_lookup_plan() p WHERE p ~ 'Scan';
RESET plan_cache_mode;
DROP FUNCTION wc_lookup_plan();
CREATE FUNCTION wc_keyed_digest() RETURNS text LANGUAGE sql AS
  $$ SELECT md5(coalesce(string_agg(v::text, ' ' ORDER BY v.a, v.b), '')) FROM wc_keyed v $$;
CREATE FUNCTION wc_keyed_history_digest(t bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    PERFORM set_config('decoupled.as_of', t::text, true);
    d := wc_keyed_digest();
    PERFORM set_config('decoupled.as_of', '', true);
    RETURN d;
END
$$;
CREATE TABLE wc_keyed_truth (ts bigint, digest text);
CREATE PROCEDURE wc_keyed_tick() LANGUAGE sql AS $$
    SELECT decoupled.tick_tables();
    INSERT INTO wc_keyed_truth SELECT upper - 1, wc_keyed_digest()
      FROM decoupled.frontiers WHERE name = 'wc_keyed';
$$;
-- Incompressible enough to be stored out of line: updates that leave it
-- alone do not write it to the WAL.
INSERT INTO wc_keyed
SELECT g, 'k' || g, CASE WHEN g % 2 = 0 THEN (SELECT string_agg(md5(g::text || i), '')
                                               FROM generate_series(1, 200) i) END, 0
  FROM generate_series(1, 6) g;
CALL wc_keyed_tick();
-- Old rows in cur: a non-key column, the key, a delete.
UPDATE wc_keyed SET n = n + 1 WHERE a <= 4;
UPDATE wc_keyed SET a = a + 100 WHERE a = 2;
DELETE FROM wc_keyed WHERE a = 3;
SELECT decoupled.wait_for_capture('60 s') AS captured;
-- Old rows still pending (captured, not ticked), and rows of this batch.
UPDATE wc_keyed SET n = n + 10 WHERE a IN (1, 4, 102);
BEGIN;
UPDATE wc_keyed SET n = n + 100 WHERE a = 1;
UPDATE wc_keyed SET n = n + 100 WHERE a = 1;
INSERT INTO wc_keyed VALUES (3, 'k3', 'again', 7);
UPDATE wc_keyed SET b = 'k3b' WHERE a = 3;
DELETE FROM wc_keyed WHERE a = 5;
COMMIT;
CALL wc_keyed_tick();
-- One transaction longer than the worker's batch (10,000 rows of a table):
-- the second update of a row finds the first one's row among what the
-- same capture transaction wrote before.
INSERT INTO wc_keyed SELECT g, 'bulk', NULL, 0 FROM generate_series(1000, 7999) g;
CALL wc_keyed_tick();
BEGIN;
UPDATE wc_keyed SET n = n + 1 WHERE b = 'bulk';
UPDATE wc_keyed SET n = n + 1 WHERE b = 'bulk';
COMMIT;
CALL wc_keyed_tick();
DELETE FROM wc_keyed WHERE b = 'bulk';
-- Rolled back, nothing.
BEGIN;
UPDATE wc_keyed SET n = -1;
ROLLBACK;
TRUNCATE wc_keyed;
INSERT INTO wc_keyed VALUES (1, 'k1', NULL, 1);
UPDATE wc_keyed SET n = 2;
CALL wc_keyed_tick();
SELECT count(*) AS ticks, count(*) FILTER (WHERE digest = wc_keyed_history_digest(ts)) AS matching
  FROM wc_keyed_truth;

-- Without a primary key, with one of a type that is not PostgreSQL's own
-- or with a deferrable one, the old row must be in the WAL: REPLICA
-- IDENTITY FULL, and the table's own identity comes back when it is
-- unregistered.
CREATE DOMAIN wc_code AS int CHECK (VALUE > 0);
CREATE TABLE wc_nokey (a int, b text);
CREATE TABLE wc_domain_key (a wc_code PRIMARY KEY, b text);
CREATE TABLE wc_deferred (a int PRIMARY KEY DEFERRABLE, b text);
CREATE TABLE wc_nothing (a int PRIMARY KEY, b text);
ALTER TABLE wc_nothing REPLICA IDENTITY NOTHING;
SELECT decoupled.register_table(t) > 0 AS registered
  FROM unnest(ARRAY['wc_nokey', 'wc_domain_key', 'wc_deferred', 'wc_nothing']::regclass[]) t;
SELECT relname, relreplident FROM pg_class
 WHERE relname IN ('wc_nokey', 'wc_domain_key', 'wc_deferred', 'wc_nothing') ORDER BY relname;
SELECT decoupled.unregister_table(t)
  FROM unnest(ARRAY['wc_nokey', 'wc_domain_key', 'wc_deferred', 'wc_nothing']::regclass[]) t;
SELECT relname, relreplident FROM pg_class
 WHERE relname IN ('wc_nokey', 'wc_domain_key', 'wc_deferred', 'wc_nothing') ORDER BY relname;
DROP TABLE wc_nokey, wc_domain_key, wc_deferred, wc_nothing;

-- A domain's CHECK runs as the table's owner when capture reads a row,
-- never with the capture worker's rights.
CREATE ROLE wc_owner;
CREATE TABLE wc_calls (who text, superuser boolean);
GRANT INSERT ON wc_calls TO PUBLIC;
CREATE FUNCTION wc_check(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.wc_calls
    SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
    RETURN v >= 0;
END
$$;
CREATE DOMAIN wc_checked AS int CHECK (wc_check(VALUE));
CREATE TABLE wc_owned (k wc_checked);
ALTER TABLE wc_owned OWNER TO wc_owner;
SELECT decoupled.register_table('wc_owned') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
SET ROLE wc_owner;
INSERT INTO wc_owned VALUES (1), (2);
RESET ROLE;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT who, superuser, count(*) > 0 AS called FROM wc_calls GROUP BY 1, 2 ORDER BY 1;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_owned';
SELECT k FROM wc_owned ORDER BY k;
RESET decoupled.as_of;

-- The capture worker does not decode the extension's own row changes
-- (bgworker/capture_skip.cpp): a registered table's changes in the same
-- transaction as such writes are captured all the same.  Here a tick
-- inside the transaction moves another table's captured rows into its
-- history (deletes from pending, inserts into cur, frontier updates)
-- between a TOASTed insert, speculative insertions and an update.
CREATE TABLE wc_mixed (id int PRIMARY KEY, t text);
CREATE TABLE wc_other (id int PRIMARY KEY);
SELECT decoupled.register_table('wc_mixed') > 0 AND decoupled.register_table('wc_other') > 0
    AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
INSERT INTO wc_other VALUES (1), (2);
SELECT decoupled.wait_for_capture('60 s') AS captured;
BEGIN;
INSERT INTO wc_mixed VALUES (1, 'one'), (3, 'three'),
    (2, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i));  -- out of line
SELECT decoupled.tick_tables() > 0 AS ticked_inside;
INSERT INTO wc_mixed VALUES (4, 'four') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t;
INSERT INTO wc_mixed VALUES (1, 'uno') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t;
UPDATE wc_mixed SET t = t || '!' WHERE id = 2;
DELETE FROM wc_mixed WHERE id = 3;
COMMIT;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_mixed';
SELECT id, left(t, 8) AS t, length(t), md5(t) FROM wc_mixed ORDER BY id;
SELECT pg_column_size(t) > 8000 AS incompressible FROM wc_mixed WHERE id = 2;
RESET decoupled.as_of;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_other';
SELECT id FROM wc_other ORDER BY id;
RESET decoupled.as_of;
DROP TABLE wc_mixed, wc_other;

-- Retractions by key: an update's or a delete's old row that nothing
-- pending touches is not read at capture; pending gets a row with mz_diff
-- 0, the key and NULLs, and the tick retracts the copy cur holds for the
-- key (index_tick.cpp; the statements when the captured rows outgrow
-- maintenance_work_mem).  History equals the table after every tick.
CREATE FUNCTION wc_pending(tbl text, OUT by_key bigint, OUT total bigint) LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT count(*) FILTER (WHERE mz_diff = 0), count(*) FROM decoupled_storage.%I',
                   (SELECT 'c' || lifetime_id || '_pending' FROM decoupled.catalog_objects
                     WHERE name = tbl AND dropped_at IS NULL))
       INTO by_key, total;
END
$$;
CREATE FUNCTION wc_dead(tbl text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM decoupled_storage.%I',
                   (SELECT 'c' || lifetime_id || '_dead' FROM decoupled.catalog_objects
                     WHERE name = tbl AND dropped_at IS NULL)) INTO n;
    RETURN n;
END
$$;
-- Ticks, then whether history at the tick equals the table.
CREATE FUNCTION wc_tick_matches(tbl regclass) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    digest CONSTANT text :=
        'SELECT md5(coalesce(string_agg(t::text, '' '' ORDER BY t::text), '''')) FROM %s t';
    latest text;
    held   text;
BEGIN
    PERFORM decoupled.tick_tables();
    EXECUTE format(digest, tbl) INTO latest;
    PERFORM set_config('decoupled.as_of',
                       (SELECT (upper - 1)::text FROM decoupled.frontiers WHERE name = tbl::text), true);
    EXECUTE format(digest, tbl) INTO held;
    PERFORM set_config('decoupled.as_of', '', true);
    RETURN latest = held;
END
$$;
CREATE TABLE wc_marked (id int, tag text, v int, pad text, PRIMARY KEY (tag, id));
SELECT decoupled.register_table('wc_marked') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
INSERT INTO wc_marked SELECT g, 't' || g % 3, g, repeat('x', 20) FROM generate_series(1, 20000) g;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT wc_tick_matches('wc_marked') AS matches;
UPDATE wc_marked SET v = v + 1 WHERE id <= 10;
DELETE FROM wc_marked WHERE id BETWEEN 11 AND 15;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT * FROM wc_pending('wc_marked');  -- 15 by key, 10 new rows
-- Then, before the tick: a second update of a row retracted by key (its
-- live row is pending), one back to the value the tick will find in cur,
-- a deleted key inserted again, and the key of a row changed.
UPDATE wc_marked SET v = v + 1 WHERE id = 1;
UPDATE wc_marked SET v = v - 1 WHERE id = 2;
INSERT INTO wc_marked VALUES (11, 't2', -11, 'again');
UPDATE wc_marked SET id = -3 WHERE id = 3;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT * FROM wc_pending('wc_marked');
SELECT wc_dead('wc_marked') AS dead_before \gset
SELECT wc_tick_matches('wc_marked') AS matches;
-- Row 2 came back to its old value in the same tick: nothing moved for it
-- (rows 1 and 3-10 updated, 3 with a new key, 11-15 deleted: 14 moved).
SELECT wc_dead('wc_marked') - :dead_before AS moved_to_dead;
-- A truncation with retractions by key pending retracts each row once.
UPDATE wc_marked SET v = 0 WHERE id <= 100;
SELECT decoupled.wait_for_capture('60 s') AS captured;
TRUNCATE wc_marked;
INSERT INTO wc_marked VALUES (1, 't1', 1, 'after');
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT wc_tick_matches('wc_marked') AS matches;
-- Ticked by the statements: captured rows larger than maintenance_work_mem.
INSERT INTO wc_marked SELECT g, 't' || g % 3, g, repeat('y', 20) FROM generate_series(2, 20000) g;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT wc_tick_matches('wc_marked') AS matches;
UPDATE wc_marked SET v = v * 2;
UPDATE wc_marked SET v = 7 WHERE id = 5;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT by_key >= 19000 AS by_key FROM wc_pending('wc_marked');
-- Larger than maintenance_work_mem at 1MB: the C tick steps aside.
SELECT pg_relation_size(format('decoupled_storage.%I', 'c' || lifetime_id || '_pending')) > 1024 * 1024
       AS over_1mb
  FROM decoupled.catalog_objects WHERE name = 'wc_marked' AND dropped_at IS NULL;
SET maintenance_work_mem = '1MB';
SELECT wc_tick_matches('wc_marked') AS matches;
RESET maintenance_work_mem;
-- A domain outside the key may refuse NULL: such a table's old rows are
-- read as before, and retracted whole.
CREATE DOMAIN wc_required AS int NOT NULL;
CREATE TABLE wc_strict (id int PRIMARY KEY, v wc_required);
SELECT decoupled.register_table('wc_strict') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
INSERT INTO wc_strict SELECT g, g FROM generate_series(1, 10) g;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT wc_tick_matches('wc_strict') AS matches;
UPDATE wc_strict SET v = v + 1 WHERE id <= 5;
DELETE FROM wc_strict WHERE id = 10;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT * FROM wc_pending('wc_strict');
SELECT wc_tick_matches('wc_strict') AS matches;
-- A batch is full (10,000 lines) right after an update's retraction, and
-- its new row takes its unchanged out-of-line value from the retracted
-- row: the batch is flushed before the retraction, not between the two.
CREATE TABLE wc_split (id int PRIMARY KEY, n int, note text);
ALTER TABLE wc_split ALTER COLUMN note SET STORAGE EXTERNAL;  -- out of line, uncompressed
INSERT INTO wc_split SELECT g, 0, repeat(md5(g::text), 70) FROM generate_series(1, 5200) g;
SELECT decoupled.register_table('wc_split') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
BEGIN;
INSERT INTO wc_split VALUES (0, 0, 'odd');
UPDATE wc_split SET n = 1 WHERE id > 0;
COMMIT;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT wc_tick_matches('wc_split') AS matches;
SELECT count(*) FROM wc_split WHERE n = 1 AND note = repeat(md5(id::text), 70);
DROP TABLE wc_marked, wc_strict, wc_split;
-- Tables nobody registered are not decoded (bgworker/capture_skip.cpp):
-- their row changes reach no plugin, so the slot's decoded bytes hardly
-- move under a 20,000-row load of one.  The worker reads the set of such
-- tables again after it adopts one (wc_first), so wc_quiet and wc_later,
-- created before, are in it.
CREATE TABLE wc_quiet (id int PRIMARY KEY, t text);
CREATE TABLE wc_later (id int PRIMARY KEY, v int);
CREATE TABLE wc_first (id int PRIMARY KEY);
SELECT decoupled.register_table('wc_first') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
SELECT pg_stat_clear_snapshot();
SELECT total_bytes AS decoded_before FROM pg_stat_replication_slots
 WHERE slot_name = 'pg_decoupled' \gset
INSERT INTO wc_quiet SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g;
INSERT INTO wc_later SELECT g, g FROM generate_series(1, 1000) g;
INSERT INTO wc_first VALUES (1);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT pg_stat_clear_snapshot();
SELECT total_bytes - :decoded_before BETWEEN 1 AND 100000 AS only_registered_decoded
  FROM pg_stat_replication_slots WHERE slot_name = 'pg_decoupled';
SELECT wc_tick_matches('wc_first') AS matches;
-- A table skipped until it is registered: its rows from before are its
-- snapshot, its changes from its adoption on are captured, none lost.
SELECT decoupled.register_table('wc_later') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS adopted;
UPDATE wc_later SET v = -v WHERE id <= 10;
DELETE FROM wc_later WHERE id > 990;
INSERT INTO wc_later VALUES (5000, 5000);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT wc_tick_matches('wc_later') AS matches;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_later';
SELECT count(*), sum(v) FROM wc_later;
RESET decoupled.as_of;
DROP TABLE wc_quiet, wc_later, wc_first;
DROP FUNCTION wc_pending(text), wc_dead(text), wc_tick_matches(regclass);

DROP TABLE wc_owned, wc_values, wc_calls, wc_keyed, wc_keyed_truth;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
DROP DOMAIN wc_checked, wc_code, wc_required;
DROP FUNCTION wc_check(int), wc_digest(), wc_keyed_history_digest(bigint), wc_keyed_digest();
DROP PROCEDURE wc_keyed_tick();
DROP TYPE wc_pair, wc_mood;
DROP ROLE wc_owner;

-- A slot of the extension's name that is not its own (made by anyone with
-- REPLICATION, with another plugin) is neither used nor dropped: capture
-- stalls and says why, until it is dropped; then the worker makes its own
-- and takes the captured table again from its contents.  First the
-- worker's own slot goes with the last registered table.
SELECT count(*) >= 0 AS unregistered
  FROM (SELECT decoupled.unregister_table(o.relation::regclass) FROM decoupled.catalog_objects o
         WHERE o.kind = 'table' AND o.dropped_at IS NULL) x;
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = 'pg_decoupled');
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SELECT count(*) AS slots_left FROM pg_replication_slots WHERE slot_name = 'pg_decoupled';
SELECT slot_name FROM pg_create_logical_replication_slot('pg_decoupled', 'test_decoding');
CREATE TABLE wc_foreign (id int PRIMARY KEY, v int);
INSERT INTO wc_foreign VALUES (1, 1);
SELECT decoupled.register_table('wc_foreign') > 0 AS registered;
INSERT INTO wc_foreign VALUES (2, 2);
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN (SELECT status FROM decoupled.capture) = 'stalled';
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SELECT status, last_error LIKE 'replication slot "pg_decoupled" is not pg_decoupled''s: '
                           'it decodes with plugin "test_decoding" for database %' AS says_why
  FROM decoupled.capture;
SELECT status FROM decoupled.object_statuses WHERE name = 'wc_foreign';
SELECT plugin FROM pg_replication_slots WHERE slot_name = 'pg_decoupled';
SELECT pg_drop_replication_slot('pg_decoupled');
INSERT INTO wc_foreign VALUES (3, 3);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT plugin FROM pg_replication_slots WHERE slot_name = 'pg_decoupled';
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_foreign';
SELECT id, v FROM wc_foreign ORDER BY id;
RESET decoupled.as_of;
SELECT status FROM decoupled.capture;
DROP TABLE wc_foreign;

-- TRUNCATEs in a row, read in one pass: what is pending is retracted as a
-- whole, once per distinct row, not row by row (which doubled pending at
-- every TRUNCATE: 25 of them never finished; now each adds at most the
-- rows it retracts).  A keyed table and one
-- without a key (an array column too: a row, not an element, stands for
-- its group).
CREATE TABLE wc_tr_k (id int PRIMARY KEY, v text, tags int[]);
CREATE TABLE wc_tr_n (a int, b text);
ALTER TABLE wc_tr_n REPLICA IDENTITY FULL;
INSERT INTO wc_tr_k SELECT g, 'v' || g, ARRAY[g, g] FROM generate_series(1, 10) g;
INSERT INTO wc_tr_n SELECT g % 3, 'b' FROM generate_series(1, 10) g;
SELECT decoupled.register_table('wc_tr_k') > 0 AS registered,
       decoupled.register_table('wc_tr_n') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
DO $$
BEGIN
    FOR i IN 1 .. 25 LOOP
        TRUNCATE wc_tr_k, wc_tr_n;
        INSERT INTO wc_tr_k SELECT g, 'v' || (g + i), ARRAY[g, i] FROM generate_series(1, 10) g;
        INSERT INTO wc_tr_n SELECT (g + i) % 3, 'b' FROM generate_series(1, 10) g;
        COMMIT;
    END LOOP;
END
$$;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled._storage(lifetime_id, 'pending') AS wc_tr_pending
  FROM decoupled.objects WHERE name = 'wc_tr_k' \gset
SELECT count(*) <= 600 AS pending_bounded FROM :wc_tr_pending;
SELECT decoupled.tick_tables() > 0 AS ticked;
-- History at the latest time is each table.
SELECT set_config('decoupled.as_of', (min(upper) - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name IN ('wc_tr_k', 'wc_tr_n');
SELECT (SELECT string_agg(id || v || tags::text, ',' ORDER BY id) FROM wc_tr_k) AS k_history,
       (SELECT string_agg(a || b, ',' ORDER BY a) FROM wc_tr_n) AS n_history;
RESET decoupled.as_of;
SELECT (SELECT string_agg(id || v || tags::text, ',' ORDER BY id) FROM wc_tr_k) AS k_table,
       (SELECT string_agg(a || b, ',' ORDER BY a) FROM wc_tr_n) AS n_table;
-- TRUNCATEs with nothing between retract what is held once, and a change
-- between them is retracted by the next.
TRUNCATE wc_tr_k;
TRUNCATE wc_tr_k;
INSERT INTO wc_tr_k VALUES (1, 'again', '{1}');
TRUNCATE wc_tr_k;
TRUNCATE wc_tr_k;
INSERT INTO wc_tr_k VALUES (2, 'last', '{2}');
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_tr_k';
SELECT string_agg(id || v || tags::text, ',' ORDER BY id) AS k_history FROM wc_tr_k;
RESET decoupled.as_of;
SELECT decoupled.unregister_table('wc_tr_k'), decoupled.unregister_table('wc_tr_n');
DROP TABLE wc_tr_k, wc_tr_n;

-- A key too wide to stay in its row (TOASTed out of line): an UPDATE that
-- leaves it alone logs the old key and leaves the new row's key out of the
-- WAL, and two such changes of one key in one batch must pair by it.
CREATE TABLE wc_wide (k text PRIMARY KEY, v int);
SELECT decoupled.register_table('wc_wide') > 0 AS registered;
INSERT INTO wc_wide SELECT string_agg(md5((g % 45)::text), ''), 0 FROM generate_series(1, 3000) g;
INSERT INTO wc_wide VALUES ('short', 0);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
BEGIN;
UPDATE wc_wide SET v = 1;
UPDATE wc_wide SET v = 2;
COMMIT;
UPDATE wc_wide SET v = 3 WHERE k <> 'short';
DELETE FROM wc_wide WHERE k = 'short';
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status FROM decoupled.capture;
SELECT status FROM decoupled.object_statuses WHERE name = 'wc_wide';
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_wide';
SELECT length(k), v FROM wc_wide ORDER BY 1;
RESET decoupled.as_of;
SELECT decoupled.unregister_table('wc_wide');
DROP TABLE wc_wide;

-- A key that fits the table's index only compressed by lz4 (pglz gives up
-- on a value whose first kilobyte does not compress): the worker, whose
-- default is pglz, compresses it as small as it can for pending's index on
-- the key, and capture goes on for every table.
SELECT setseed(0.25);
CREATE TEMP TABLE wc_lz4_key AS
SELECT (SELECT string_agg(chr(33 + (random() * 90)::int), '') FROM generate_series(1, 1100))
       || repeat('ab', 1500) AS k;
CREATE TEMP TABLE wc_lz4_pglz (k text COMPRESSION pglz);
INSERT INTO wc_lz4_pglz SELECT k FROM wc_lz4_key;
SELECT pg_column_size(k) > 2704 AS too_wide_under_pglz FROM wc_lz4_pglz;
CREATE TABLE wc_lz4 (k text PRIMARY KEY, v int);
SELECT decoupled.register_table('wc_lz4') > 0 AS registered;
SET default_toast_compression = lz4;
INSERT INTO wc_lz4 SELECT k, 1 FROM wc_lz4_key;
UPDATE wc_lz4 SET v = 2;
RESET default_toast_compression;
INSERT INTO wc_lz4 VALUES ('short', 0);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status, last_error FROM decoupled.capture;
SELECT status FROM decoupled.object_statuses WHERE name = 'wc_lz4';
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_lz4';
SELECT length(k), v FROM wc_lz4 ORDER BY 1;
RESET decoupled.as_of;
SELECT decoupled.unregister_table('wc_lz4');
DROP TABLE wc_lz4;

-- Types whose text may not read back (captured rows travel as text) are
-- refused at registration, inside arrays, composites and domains too: a
-- value naming a relation dropped since, or an aclitem of a role that is
-- gone, stopped capture for every table.
CREATE TYPE wc_named AS (r regclass, n int);
CREATE DOMAIN wc_roles AS aclitem[];
CREATE TABLE wc_reg (id int PRIMARY KEY, r regclass);
CREATE TABLE wc_acl (id int PRIMARY KEY, a wc_roles);
CREATE TABLE wc_comp (id int PRIMARY KEY, c wc_named);
CREATE TABLE wc_tree (id int PRIMARY KEY, t pg_node_tree);
\set SHOW_CONTEXT never
SELECT decoupled.register_table('wc_reg');
SELECT decoupled.register_table('wc_acl');
SELECT decoupled.register_table('wc_comp');
\set VERBOSITY sqlstate
SELECT decoupled.register_table('wc_tree');
ALTER TABLE wc_reg SET (decoupled.registered = true);
\set VERBOSITY default
\set SHOW_CONTEXT errors
SELECT count(*) AS registered FROM decoupled.objects WHERE name IN ('wc_reg', 'wc_acl', 'wc_comp', 'wc_tree');
DROP TABLE wc_reg, wc_acl, wc_comp, wc_tree;
DROP TYPE wc_named;
DROP DOMAIN wc_roles;

-- A change capture cannot write (here an UPDATE that leaves a TOASTed value
-- alone, of a row an append retracted: the WAL leaves that value out and
-- history no longer has it) stops capture of that table only for a moment:
-- after three failed passes the worker sets that table aside (capture of
-- the other tables goes on; ticks leave it alone), says so in its status
-- history, and takes it again from its contents as soon as no writer
-- holds it.  AS OF the next tick both tables read as they are.
CREATE TABLE wc_rs_big (id int PRIMARY KEY, n int, doc text);
CREATE TABLE wc_rs_other (id int PRIMARY KEY, v int);
SELECT decoupled.register_table('wc_rs_big') > 0 AS registered;
SELECT decoupled.register_table('wc_rs_other') > 0 AS registered;
INSERT INTO wc_rs_big SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 3000) g;
INSERT INTO wc_rs_big VALUES (2, 0, 'short');
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper AS rs_u FROM decoupled.frontiers WHERE name = 'wc_rs_big' \gset
SELECT decoupled.append('wc_rs_big',
    (SELECT jsonb_agg(jsonb_build_object('mz_timestamp', :rs_u, 'mz_diff', -1,
                                         'data', to_jsonb(b))) FROM wc_rs_big b WHERE id = 1),
    :rs_u, :rs_u + 1) IS NOT NULL AS appended;
UPDATE wc_rs_big SET n = 1 WHERE id = 1;
INSERT INTO wc_rs_other VALUES (1, 1);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status, last_error FROM decoupled.capture;
SELECT name, status FROM decoupled.object_statuses WHERE name LIKE 'wc_rs_%' ORDER BY 1;
SELECT name, status, error FROM decoupled.status_history
 WHERE name = 'wc_rs_big' AND error LIKE 'capture could not%';
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_rs_big';
SELECT id, n, length(doc) FROM wc_rs_big ORDER BY id;
SELECT * FROM wc_rs_other;
RESET decoupled.as_of;
-- Two tables whose changes capture cannot write, at once: both are set
-- aside (the pass that skips the first fails on the second) and taken
-- again.
CREATE TABLE wc_rs_two (id int PRIMARY KEY, n int, doc text);
SELECT decoupled.register_table('wc_rs_two') > 0 AS registered;
INSERT INTO wc_rs_two SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 3000) g;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.append(o.name,
    (SELECT jsonb_agg(jsonb_build_object('mz_timestamp', f.upper, 'mz_diff', -1,
                                         'data', to_jsonb(b))) FROM wc_rs_big b WHERE id = 1),
    f.upper, f.upper + 1) IS NOT NULL AS appended
  FROM decoupled.objects o JOIN decoupled.frontiers f USING (name) WHERE o.name = 'wc_rs_big';
SELECT decoupled.append(o.name,
    (SELECT jsonb_agg(jsonb_build_object('mz_timestamp', f.upper, 'mz_diff', -1,
                                         'data', to_jsonb(b))) FROM wc_rs_two b WHERE id = 1),
    f.upper, f.upper + 1) IS NOT NULL AS appended
  FROM decoupled.objects o JOIN decoupled.frontiers f USING (name) WHERE o.name = 'wc_rs_two';
UPDATE wc_rs_big SET n = 5 WHERE id = 1;
UPDATE wc_rs_two SET n = 5 WHERE id = 1;
INSERT INTO wc_rs_other VALUES (2, 2);
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT status FROM decoupled.capture;
SELECT name, count(*) AS set_aside FROM decoupled.status_history
 WHERE name LIKE 'wc_rs_%' AND error LIKE 'capture could not%' GROUP BY name ORDER BY name;
SELECT set_config('decoupled.as_of', (min(upper) - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name LIKE 'wc_rs_%';
SELECT (SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM wc_rs_big) AS big,
       (SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM wc_rs_two) AS two,
       (SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM wc_rs_other) AS other;
RESET decoupled.as_of;
SELECT decoupled.unregister_table('wc_rs_two');
DROP TABLE wc_rs_two;
-- Capture goes on for it too.
UPDATE wc_rs_big SET n = 2 WHERE id = 1;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS reading
  FROM decoupled.frontiers WHERE name = 'wc_rs_big';
SELECT id, n, length(doc) FROM wc_rs_big ORDER BY id;
RESET decoupled.as_of;
SELECT decoupled.unregister_table('wc_rs_big'), decoupled.unregister_table('wc_rs_other');
DROP TABLE wc_rs_big, wc_rs_other;
