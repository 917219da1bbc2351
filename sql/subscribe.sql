-- SUBSCRIBE (C7.2, C7.3): a collection's state at as_of, then every change
-- in time order; bounded by up_to, or streaming inside a cursor; listed in
-- decoupled.subscriptions and held at its frontier; a dropped collection
-- ends it with 42704; every bad input.
\set SHOW_CONTEXT never
CREATE TABLE items (id int, label text);
INSERT INTO items VALUES (1, 'a'), (2, 'b'), (2, 'b');
SELECT decoupled.register_table('items', retain_history => '1 hour') > 0 AS registered;
SELECT upper - 1 AS t0 FROM decoupled.frontiers WHERE name = 'items' \gset
UPDATE items SET label = 'c' WHERE id = 1;
SELECT decoupled.tick_tables() AS ticked;
DELETE FROM items WHERE id = 2;
INSERT INTO items VALUES (3, 'd');
SELECT decoupled.tick_tables() AS ticked;
SELECT upper AS u FROM decoupled.frontiers WHERE name = 'items' \gset

-- The snapshot at as_of (identical rows consolidated), then each change.
SELECT dense_rank() OVER (ORDER BY mz_timestamp) AS tick, mz_diff, data
  FROM decoupled.subscribe('items', :t0, :u) ORDER BY mz_timestamp, data;
-- up_to bounds it: only the snapshot here.
SELECT mz_timestamp = :t0 AS at_as_of, mz_diff, data
  FROM decoupled.subscribe('items', :t0, :t0 + 1) ORDER BY data;
-- Without as_of it starts at the latest readable time.
SELECT mz_timestamp = :u - 1 AS at_latest, mz_diff, data
  FROM decoupled.subscribe('items', up_to => :u) ORDER BY data;

-- Unbounded, it streams from the select list of a cursor, row by row, and
-- holds its collection at its frontier while it runs.
BEGIN;
DECLARE feed CURSOR FOR
    SELECT (s).mz_timestamp > :t0 AS later, (s).mz_diff, (s).data
      FROM (SELECT decoupled.subscribe('items', :t0) AS s) x;
FETCH 2 FROM feed;
SELECT collection, frontier >= :t0 AS held, session_pid = pg_backend_pid() AS mine
  FROM decoupled.subscriptions;
SELECT h.frontier <= s.frontier AS durable_hold_covers_it
  FROM decoupled.holds h JOIN decoupled.subscriptions s USING (collection);
FETCH 3 FROM feed;
CLOSE feed;
SELECT count(*) AS subscriptions_after_close FROM decoupled.subscriptions;
COMMIT;

-- Not from a WITH HOLD cursor, which commit would run to an end an
-- unbounded subscription never reaches; a bounded one is fine.
BEGIN;
DECLARE held CURSOR WITH HOLD FOR
    SELECT (s).mz_diff FROM (SELECT decoupled.subscribe('items', :t0) AS s) x;
FETCH 1 FROM held;
ROLLBACK;
BEGIN;
DECLARE held CURSOR WITH HOLD FOR
    SELECT (s).mz_diff FROM (SELECT decoupled.subscribe('items', :t0, :t0 + 1) AS s) x;
COMMIT;
FETCH ALL FROM held;
CLOSE held;

-- A dropped collection ends a running subscription.
BEGIN;
DECLARE feed CURSOR FOR
    SELECT (s).mz_timestamp > :t0 AS later, (s).mz_diff, (s).data
      FROM (SELECT decoupled.subscribe('items', :t0) AS s) x;
FETCH 1 FROM feed;
SELECT decoupled.drop('items');
SELECT regress_try('FETCH 10 FROM feed') AS outcome;
ROLLBACK;

-- A view whose steps replace rows has no time index until something reads
-- its changes by time: a running subscription gets it from the view's
-- replica (within its next heartbeat: the subscriber's own transaction
-- must not take the lock an index needs), and reads the same changes.
CREATE TABLE sv_t (k int, v int);
INSERT INTO sv_t VALUES (1, 1), (2, 2), (2, 3);
SELECT decoupled.register_table('sv_t', retain_history => '1 hour') > 0 AS registered;
SELECT decoupled.create_materialized_view('sv_sum', 'SELECT k, sum(v) AS s FROM sv_t GROUP BY k',
                                          retain_history => '1 hour') > 0 AS created;
SELECT decoupled.wait_for_upper('sv_sum',
    (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'sv_t'), '60s') > 0 AS caught_up;
-- Whether the view has its time index, waiting up to `patience` for it.
CREATE FUNCTION sv_time_index(patience interval) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_name text := (SELECT format('c%s_cur_mz_ts_idx', lifetime_id)
                      FROM decoupled.objects WHERE name = 'sv_sum');
    v_until timestamptz := clock_timestamp() + patience;
BEGIN
    LOOP
        -- pg_class itself, read with a new snapshot: the relation cache of
        -- this transaction may not have heard of the index yet.
        IF EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.relname = v_name
                      AND c.relnamespace = 'decoupled_storage'::regnamespace) THEN
            RETURN true;
        END IF;
        IF clock_timestamp() >= v_until THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.02);
    END LOOP;
END
$$;
SELECT sv_time_index('0') AS before_subscribing;
SELECT upper - 1 AS sv0 FROM decoupled.frontiers WHERE name = 'sv_sum' \gset
BEGIN;
DECLARE feed CURSOR FOR
    SELECT (s).mz_timestamp = :sv0 AS at_as_of, (s).mz_diff, (s).data
      FROM (SELECT decoupled.subscribe('sv_sum', :sv0) AS s) x;
FETCH 2 FROM feed;
SELECT sv_time_index('60s') AS while_subscribed;
CLOSE feed;
COMMIT;
UPDATE sv_t SET v = v + 10 WHERE k = 2;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper AS sv1 FROM decoupled.frontiers WHERE name = 'sv_t' \gset
SELECT decoupled.wait_for_upper('sv_sum', :sv1 - 1, '60s') > 0 AS caught_up;
SELECT mz_timestamp > :sv0 AS later, mz_diff, data
  FROM decoupled.subscribe('sv_sum', :sv0, :sv1) ORDER BY mz_timestamp, mz_diff, data::text;
SELECT decoupled.drop('sv_sum');
SELECT decoupled.drop('sv_t');
DROP TABLE sv_t;
DROP FUNCTION sv_time_index(interval);

-- Bad input.
CREATE TABLE sink_source (x int);
SELECT decoupled.register_table('sink_source') > 0 AS registered;
SELECT decoupled.create_sink('a_sink', 'sink_source', 'a_sink_table') > 0 AS created;
SELECT s AS statement, regexp_replace(regress_try(s), '\d{10,}', 'T', 'g') AS outcome FROM (VALUES
    ($$SELECT * FROM decoupled.subscribe('nothing', up_to => 1)$$),
    ($$SELECT * FROM decoupled.subscribe(NULL, up_to => 1)$$),
    ($$SELECT * FROM decoupled.subscribe('items', -1, 5)$$),
    ($$SELECT * FROM decoupled.subscribe('items', 1, 5)$$),
    ($$SELECT * FROM decoupled.subscribe('a_sink', up_to => 1)$$),
    ($$SELECT * FROM decoupled.subscribe('items')$$)
) AS t(s);
SELECT regexp_replace(regress_try(format($$SELECT * FROM decoupled.subscribe('items', %s, %s)$$,
                                         :t0 + 5, :t0 + 5)), '\d{10,}', 'T', 'g') AS empty_range;
-- Rows become JSON with the extension's rights: user-defined column types
-- (whose owners could add casts) are refused.
CREATE TYPE mood AS ENUM ('ok', 'meh');
CREATE TABLE moods (m mood);
SELECT decoupled.register_table('moods') > 0 AS registered;
SELECT regress_try($$SELECT * FROM decoupled.subscribe('moods', up_to => 1)$$) AS user_type;
SELECT decoupled.drop('moods');
DROP TABLE moods;
SELECT decoupled.finalize_dropped() >= 1 AS finalized;
DROP TYPE mood;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT regress_try($$SELECT decoupled.subscribe('items')$$) AS repeatable_read;
ROLLBACK;
CREATE ROLE sub_stranger;
SET ROLE sub_stranger;
SELECT regress_try($$SELECT * FROM decoupled.subscribe('items', up_to => 1)$$) AS unprivileged;
RESET ROLE;
-- Each row as a JSON object whatever its columns are named (a column
-- named c, a jsonb column holding the keys mz_ts and mz_diff).
CREATE TABLE sub_named (id int PRIMARY KEY, c int, j jsonb);
SELECT decoupled.register_table('sub_named', retain_history => '1 hour') > 0 AS registered;
INSERT INTO sub_named VALUES (1, 10, '{"x": 1, "mz_ts": 5}'), (2, 20, '{"x": 1, "mz_diff": 6}');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT mz_diff, data FROM decoupled.subscribe('sub_named', up_to => (SELECT upper FROM decoupled.frontiers
                                                                     WHERE name = 'sub_named'))
 ORDER BY data->>'id';
SELECT decoupled.unregister_table('sub_named');
DROP TABLE sub_named;

SELECT decoupled.stop_adapter('default');
-- (up_to an hour past the latest time: beyond as_of however long this took)
SELECT regress_try(format($$SELECT * FROM decoupled.subscribe('items', up_to => %s)$$,
                          (SELECT upper + 3600000 FROM decoupled.frontiers WHERE name = 'items')))
    AS stopped_adapter;
SELECT decoupled.start_adapter('default');
-- The session stays attached to the incarnation it first used, also after
-- it used another adapter (C7.4): its next hold through 'default' fails
-- instead of moving to the successor.
SELECT decoupled.declare_adapter('sub_other');
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN (SELECT status = 'running' FROM decoupled.adapters WHERE name = 'sub_other');
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SET decoupled.adapter = 'sub_other';
SELECT decoupled.acquire_hold('items') > 0 AS held_through_other;
RESET decoupled.adapter;
SELECT regexp_replace(regress_try($$SELECT decoupled.acquire_hold('items')$$), ' \(.*', '')
    AS first_adapter_retired;
BEGIN;
SET LOCAL decoupled.adapter = 'sub_other';
SELECT decoupled.acquire_hold('items') > 0 AS held_in_rolled_back;
ROLLBACK;
SELECT regexp_replace(regress_try($$SELECT decoupled.acquire_hold('items')$$), ' \(.*', '')
    AS still_retired;
SELECT decoupled.drop_adapter('sub_other');
DROP ROLE sub_stranger;


SELECT decoupled.drop('items');
SELECT decoupled.drop('sink_source', cascade => true);
DROP TABLE items, sink_source, a_sink_table;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
