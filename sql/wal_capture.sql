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

DROP TABLE wc_owned, wc_values, wc_calls;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
DROP DOMAIN wc_checked;
DROP FUNCTION wc_check(int), wc_digest();
DROP TYPE wc_pair, wc_mood;
DROP ROLE wc_owner;
