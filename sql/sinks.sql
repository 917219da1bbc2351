-- Sinks (C5.4, C12): a collection's changes written into a table exactly
-- once, with durable output progress; snapshot or not; requirements; drop;
-- every bad input.
\set SHOW_CONTEXT never
CREATE TABLE events (id int, kind text);
INSERT INTO events VALUES (1, 'a'), (2, 'b'), (2, 'b');
SELECT decoupled.register_table('events') > 0 AS registered;

SELECT decoupled.create_sink('event_log', 'events', 'event_changes') > 0 AS created;
-- A second sink, made by an administrator who is not a superuser.
CREATE ROLE sink_maker IN ROLE decoupled_admin;
GRANT CREATE ON SCHEMA public TO sink_maker;
GRANT SELECT ON events TO sink_maker;
SET ROLE sink_maker;
SELECT decoupled.create_sink('event_tail', 'events', 'public.event_tail',
                             snapshot => false) > 0 AS created;
RESET ROLE;
SELECT name, kind, cluster FROM decoupled.objects WHERE kind = 'sink' ORDER BY name;
-- A sink's upper is its output progress; it has no since.
SELECT name, since IS NULL AS no_since, compaction_bound IS NULL AS no_bound
  FROM decoupled.frontiers WHERE name LIKE 'event_%' ORDER BY name;
SELECT collection, required_by FROM decoupled.requirements ORDER BY 2;

UPDATE events SET kind = 'c' WHERE id = 1;
DELETE FROM events WHERE id = 2;
INSERT INTO events VALUES (3, 'd');
SELECT decoupled.tick_tables() AS ticked;
INSERT INTO events VALUES (4, 'e'), (4, 'e');
SELECT decoupled.tick_tables() AS ticked;
SELECT upper - 1 AS last FROM decoupled.frontiers WHERE name = 'events' \gset
SELECT decoupled.wait_for_upper('event_log', :last, '60s') > :last AS written,
       decoupled.wait_for_upper('event_tail', :last, '60s') > :last AS written;

-- The snapshot (identical rows consolidated), then each tick's changes.
SELECT dense_rank() OVER (ORDER BY mz_timestamp) AS tick, mz_diff, id, kind
  FROM event_changes ORDER BY mz_timestamp, id, kind, mz_diff;
-- Without a snapshot: only what changed after the sink's start.
SELECT dense_rank() OVER (ORDER BY mz_timestamp) AS tick, mz_diff, id, kind
  FROM event_tail ORDER BY mz_timestamp, id, kind, mz_diff;
-- Summed up, the snapshot sink's changes are the collection's state.
SELECT id, kind, sum(mz_diff) AS n FROM event_changes GROUP BY id, kind HAVING sum(mz_diff) <> 0
EXCEPT ALL SELECT id, kind, count(*) FROM events GROUP BY id, kind;
-- The sink's requirement follows its progress: history it has written may go.
SELECT r.frontier = f.upper - 1 AS follows_progress
  FROM decoupled.requirements r JOIN decoupled.frontiers f ON f.name = r.required_by
 WHERE r.required_by = 'event_log';
SELECT name, replica, status FROM decoupled.sink_statuses ORDER BY name;
SELECT name, hydrated FROM decoupled.hydration WHERE name LIKE 'event_%' ORDER BY name;

-- Bad input: each is refused and changes nothing.
SELECT decoupled.catalog_version() AS version_before \gset
SELECT regress_try($$SELECT decoupled.create_sink('s', 'nothing', 'x')$$) AS unknown_collection;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'event_log', 'x')$$) AS from_a_sink;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'events', 'events')$$) AS existing_table;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'events', 'a.b.c')$$) AS bad_name;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'events', 'nowhere.x')$$) AS no_schema;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'events', 'x', cluster => 'nowhere')$$)
    AS unknown_cluster;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'events', 'x', snapshot => NULL)$$)
    AS null_snapshot;
SELECT regress_try($$SELECT decoupled.create_sink('event_log', 'events', 'x')$$) AS duplicate;
SELECT regress_try($$SELECT decoupled.acquire_hold('event_log')$$) AS hold_on_a_sink;
CREATE ROLE sink_reader;
SET ROLE sink_reader;
SELECT regress_try($$SELECT decoupled.create_sink('s', 'events', 'x')$$) AS unprivileged;
SELECT regress_try('SELECT count(*) FROM event_changes') AS read_unprivileged;
RESET ROLE;
SELECT decoupled.catalog_version() = :version_before AS catalog_unchanged,
       to_regclass('x') IS NULL AS no_table;
-- Nobody can hang a trigger on a sink's table while the sink writes it.
SELECT c.relowner = e.extowner AS owned_by_the_extension,
       has_table_privilege('sink_maker', c.oid, 'SELECT') AS creator_reads,
       NOT has_table_privilege('sink_maker', c.oid, 'TRIGGER') AS creator_cannot_add_triggers
  FROM pg_class c, pg_extension e
 WHERE c.oid = 'event_tail'::regclass AND e.extname = 'pg_decoupled';

-- A drop releases exactly the sink's requirement; its table is handed to
-- its creator once finalized.
SELECT decoupled.drop('event_tail');
SELECT collection, required_by FROM decoupled.requirements ORDER BY 2;
SELECT decoupled.finalize_dropped() >= 1 AS finalized;
SELECT pg_get_userbyid(relowner) AS handed_over_to
  FROM pg_class WHERE oid = 'event_tail'::regclass;
SELECT count(*) > 0 AS data_kept FROM event_tail;
-- The input cannot go while a sink reads it, with DROP TABLE either.
SELECT regress_try($$SELECT decoupled.drop('events')$$) AS outcome;
SELECT regress_try('DROP TABLE events') AS outcome;
SELECT decoupled.drop('events', cascade => true);
SELECT name FROM decoupled.objects;
DROP TABLE events, event_changes, event_tail;
REVOKE CREATE ON SCHEMA public FROM sink_maker;
DROP ROLE sink_reader, sink_maker;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;

-- A sink without snapshot over a source that has not ticked yet: the
-- state at its creation was empty, so the first tick's rows are changes it
-- writes, as a snapshot sink writes them as its snapshot.
BEGIN;
SELECT decoupled.create_source('sink_counter', 'counter', options => '{"tick": "100ms"}') > 0
    AS created;
SELECT decoupled.create_sink('counter_tail', 'sink_counter', 'counter_tail', snapshot => false) > 0
    AS created;
SELECT decoupled.create_sink('counter_log', 'sink_counter', 'counter_log') > 0 AS created;
COMMIT;
SELECT upper AS first FROM decoupled.frontiers WHERE name = 'sink_counter' \gset
SELECT decoupled.wait_for_upper('counter_tail', :first + 300, '60s') > 0 AS written,
       decoupled.wait_for_upper('counter_log', :first + 300, '60s') > 0 AS written;
SELECT least(t.upper, l.upper) AS done
  FROM decoupled.frontiers t, decoupled.frontiers l
 WHERE t.name = 'counter_tail' AND l.name = 'counter_log' \gset
SELECT min(n) AS first_value, count(*) >= 3 AS ticks
  FROM counter_tail WHERE mz_timestamp < :done;
SELECT count(*) AS differences FROM (
    (SELECT mz_timestamp, mz_diff, n FROM counter_tail WHERE mz_timestamp < :done
     EXCEPT ALL SELECT mz_timestamp, mz_diff, n FROM counter_log WHERE mz_timestamp < :done)
    UNION ALL
    (SELECT mz_timestamp, mz_diff, n FROM counter_log WHERE mz_timestamp < :done
     EXCEPT ALL SELECT mz_timestamp, mz_diff, n FROM counter_tail WHERE mz_timestamp < :done)) d;
SELECT decoupled.drop('sink_counter', cascade => true);
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
DROP TABLE counter_tail, counter_log;

-- Over a view before its first step, without snapshot: the view's first
-- state is computed from rows its input held before the sink: it is the
-- snapshot, not changes.
CREATE TABLE sink_old (n int);
INSERT INTO sink_old SELECT generate_series(1, 4);
SELECT decoupled.register_table('sink_old') > 0 AS registered;
BEGIN;
SELECT decoupled.create_materialized_view('sink_old_v', 'SELECT n FROM sink_old WHERE n < 10') > 0
    AS created;
SELECT decoupled.create_sink('sink_old_tail', 'sink_old_v', 'sink_old_tail', snapshot => false) > 0
    AS created;
COMMIT;
INSERT INTO sink_old VALUES (5);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.wait_for_upper('sink_old_tail', (SELECT upper - 1 FROM decoupled.frontiers
                                                   WHERE name = 'sink_old'), '60s') > 0 AS written;
SELECT mz_diff, n FROM sink_old_tail ORDER BY n;
SELECT decoupled.drop('sink_old', cascade => true);
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
DROP TABLE sink_old, sink_old_tail;
