-- Compaction permission (C3) and holds (C4): bounds, requirements and
-- holds are separate records, validated on each transaction's final state
-- at commit.  Sessions keep their holds in shared memory; their adapter
-- incarnation's durable hold sits at or below them, is written only when a
-- hold is new or stronger, and weakens at the next hold publication.
\set SHOW_CONTEXT never
-- Masks timestamps relative to :base so that outputs are stable.
CREATE FUNCTION pg_temp.rel(t bigint, base bigint) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN t IS NULL THEN NULL WHEN t = base THEN 'base'
                WHEN t > base THEN 'base+' || (t - base) ELSE 'base-' || (base - t) END
$$;

CREATE TABLE events (id int, note text);
INSERT INTO events SELECT g, 'e' || g FROM generate_series(1, 5) g;
-- retain_history 0: the proposal follows upper exactly.
SELECT decoupled.register_table('events', retain_history => '0') > 0 AS registered;
SELECT since AS base FROM decoupled.frontiers WHERE name = 'events' \gset
SELECT decoupled.append('events', '[]', upper, upper + 100) > 0 AS advanced
  FROM decoupled.frontiers WHERE name = 'events';

-- A hold caps publication; releasing it lets the bound catch up once the
-- release is published.
SELECT decoupled.acquire_hold('events', :base + 40) AS h1 \gset
SELECT decoupled.acquire_hold('events', :base + 60) AS h2 \gset
SELECT collection, pg_temp.rel(frontier, :base) AS frontier, session_pid = pg_backend_pid() AS mine
  FROM decoupled.session_holds ORDER BY frontier;
-- One durable hold for the owner incarnation, at the lowest of them.
SELECT collection, adapter, deployment, pg_temp.rel(frontier, :base) AS frontier
  FROM decoupled.holds ORDER BY frontier;
SELECT decoupled.publish_bounds() AS advanced;
SELECT pg_temp.rel(compaction_bound, :base) AS bound FROM decoupled.frontiers;
SELECT decoupled.release_hold(:h1);
-- Releasing writes nothing durable; the weakening is published lazily.
SELECT pg_temp.rel(frontier, :base) AS durable FROM decoupled.holds;
SELECT decoupled.publish_holds() AS weakened;
SELECT pg_temp.rel(frontier, :base) AS durable FROM decoupled.holds;
SELECT decoupled.publish_bounds() AS advanced;
SELECT pg_temp.rel(compaction_bound, :base) AS bound FROM decoupled.frontiers;
-- Publication is incremental: nothing changed, nothing to do.
SELECT decoupled.publish_bounds() AS advanced;

-- Physical compaction moves since to the bound, idempotently.
SELECT decoupled.apply_compaction() AS compacted;
SELECT decoupled.apply_compaction() AS compacted_again;
SELECT pg_temp.rel(since, :base) AS since, pg_temp.rel(upper, :base) AS upper,
       pg_temp.rel(compaction_bound, :base) AS bound
  FROM decoupled.frontiers;
-- The remaining hold still protects its reads.
SELECT :base + 60 AS held_time \gset
SET decoupled.as_of = :held_time;
SELECT count(*) AS readable_at_hold FROM events;
RESET decoupled.as_of;

-- Admission: a hold below the bound is refused, early and at commit.
SELECT regress_try(format($$SELECT decoupled.acquire_hold('events', %s)$$, :base + 10));
-- Rejections at COMMIT show their SQLSTATE here (their messages carry
-- timestamps); the same checks run early with SET CONSTRAINTS ALL IMMEDIATE
-- show the messages.
\set VERBOSITY sqlstate
BEGIN;
UPDATE decoupled.catalog_holds SET frontier = :base + 10;
COMMIT;
SELECT count(*) AS holds FROM decoupled.holds;

-- A bound may not move backwards ...
BEGIN;
UPDATE decoupled.catalog_bounds SET bound = bound - 5;
COMMIT;
-- ... nor pass a hold ...
BEGIN;
UPDATE decoupled.catalog_bounds SET bound = :base + 80;
COMMIT;
SELECT pg_temp.rel(compaction_bound, :base) AS bound FROM decoupled.frontiers;
\set VERBOSITY default
SELECT case_name, regress_try(s || '; SET CONSTRAINTS ALL IMMEDIATE') AS outcome FROM (VALUES
    ('hold below bound', format('UPDATE decoupled.catalog_holds SET frontier = %s', :base + 10)),
    ('bound regression', 'UPDATE decoupled.catalog_bounds SET bound = bound - 5'),
    ('bound beyond hold', format('UPDATE decoupled.catalog_bounds SET bound = %s', :base + 80))
) AS t(case_name, s);
-- A check made early covers what was written before it, not after: a
-- bound moved past the hold after SET CONSTRAINTS ALL IMMEDIATE checked the
-- same collection is checked again at commit.
\set VERBOSITY sqlstate
BEGIN;
UPDATE decoupled.catalog_bounds SET bound = bound;
SET CONSTRAINTS ALL IMMEDIATE;
SET CONSTRAINTS ALL DEFERRED;
UPDATE decoupled.catalog_bounds SET bound = :base + 80;
COMMIT;
\set VERBOSITY default
SELECT pg_temp.rel(compaction_bound, :base) AS bound_after_late_change FROM decoupled.frontiers;
-- ... nor a requirement, and a requirement may not start below the bound.
\set VERBOSITY sqlstate
CREATE TABLE readers (x int);
SELECT decoupled.register_table('readers') > 0 AS registered;
BEGIN;
INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
SELECT e.lifetime_id, r.lifetime_id, :base + 1
  FROM decoupled.objects e, decoupled.objects r WHERE e.name = 'events' AND r.name = 'readers';
COMMIT;
INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
SELECT e.lifetime_id, r.lifetime_id, :base + 70
  FROM decoupled.objects e, decoupled.objects r WHERE e.name = 'events' AND r.name = 'readers';
SELECT collection, required_by, pg_temp.rel(frontier, :base) AS frontier FROM decoupled.requirements;
BEGIN;
UPDATE decoupled.catalog_bounds b SET bound = :base + 75
  FROM decoupled.objects o WHERE o.lifetime_id = b.lifetime_id AND o.name = 'events';
COMMIT;
\set VERBOSITY default
SELECT regress_try(format('UPDATE decoupled.catalog_bounds b SET bound = %s FROM decoupled.objects o '
                          'WHERE o.lifetime_id = b.lifetime_id AND o.name = ''events''; '
                          'SET CONSTRAINTS ALL IMMEDIATE', :base + 75)) AS outcome;

-- Order inside a transaction does not matter, only its final state: the
-- bound passes the hold first and the hold's release is published
-- afterwards.
BEGIN;
UPDATE decoupled.catalog_bounds b SET bound = :base + 65
  FROM decoupled.objects o WHERE o.lifetime_id = b.lifetime_id AND o.name = 'events';
SELECT decoupled.release_hold(:h2);
SELECT decoupled.publish_holds() AS weakened;
COMMIT;
SELECT pg_temp.rel(compaction_bound, :base) AS bound FROM decoupled.frontiers WHERE name = 'events';
-- And a regression undone within the transaction is no regression.
BEGIN;
UPDATE decoupled.catalog_bounds SET bound = bound - 50;
UPDATE decoupled.catalog_bounds SET bound = bound + 50;
COMMIT;

-- The requirement now caps publication.
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.publish_bounds() AS advanced;
SELECT pg_temp.rel(compaction_bound, :base) AS bound FROM decoupled.frontiers WHERE name = 'events';

-- Holds: bad input.
SELECT s AS statement, regress_try(s) AS outcome FROM (VALUES
    ($$SELECT decoupled.acquire_hold('nowhere')$$),
    ($$SELECT decoupled.acquire_hold(NULL)$$),
    ($$SELECT decoupled.acquire_hold('events', -1)$$),
    ($$SELECT decoupled.release_hold(987654)$$),
    ($$SELECT decoupled.release_hold(NULL)$$),
    ($$SET decoupled.adapter = 'ghost'; SELECT decoupled.acquire_hold('events')$$)
) AS t(s);
RESET decoupled.adapter;

-- A hold without as_of protects the latest readable time.
SELECT decoupled.acquire_hold('events') AS h3 \gset
SELECT h.frontier = f.upper - 1 AS at_latest FROM decoupled.session_holds h
  JOIN decoupled.frontiers f ON f.name = h.collection WHERE h.hold_id = :h3;
-- A second hold at or above the durable one writes nothing durable.
SELECT acquired_at AS durable_since FROM decoupled.holds \gset
SELECT decoupled.acquire_hold('events') > :h3 AS held_again;
SELECT acquired_at = :'durable_since' AS no_durable_write, count(*) AS durable_holds
  FROM decoupled.holds GROUP BY acquired_at;

-- The session is attached to its adapter's live incarnation.
SELECT s.adapter, s.incarnation = a.incarnation AS live_incarnation, s.role
  FROM decoupled.sessions s JOIN decoupled.adapters a ON a.name = s.adapter
 WHERE s.session_pid = pg_backend_pid();

-- Releasing twice is an error.  (That holds end with their session, and
-- belong to it, is shown by t/011_adapters.pl with several sessions.)
SELECT decoupled.release_hold(:h3);
SELECT regress_try(format('SELECT decoupled.release_hold(%s)', :h3)) AS outcome;
CREATE ROLE decoupled_stranger;
SET ROLE decoupled_stranger;
SELECT regress_try($$SELECT decoupled.acquire_hold('events')$$);
RESET ROLE;

-- An unprivileged reader reads, holds and reads as of, but only what it may
-- SELECT.
GRANT SELECT ON events TO decoupled_stranger;
SELECT upper - 1 AS latest FROM decoupled.frontiers WHERE name = 'events' \gset
SET ROLE decoupled_stranger;
SELECT count(*) AS events_now FROM events;
SELECT decoupled.acquire_hold('events') > 0 AS held;
SET decoupled.as_of = :latest;
SELECT count(*) AS events_then FROM events;
SELECT count(*) FROM readers;
RESET decoupled.as_of;
RESET ROLE;

-- Dry run: what a call would do, or its admission error; never an effect.
SELECT decoupled.catalog_version() AS v \gset
SELECT * FROM decoupled.dry_run($$SELECT decoupled.create_cluster('analytics', 2)$$);
CREATE TABLE spare (x int);
SELECT * FROM decoupled.dry_run($$SELECT decoupled.register_table('spare')$$);
SELECT * FROM decoupled.dry_run($$SELECT decoupled.register_table('readers')$$);
SELECT * FROM decoupled.dry_run($$SELECT decoupled.unregister_table('readers')$$);
SELECT action, kind, regexp_replace(detail, '\d{10,}', 'T', 'g') AS detail
  FROM decoupled.dry_run(format($$SELECT decoupled.acquire_hold('events', %s)$$, :base));
SELECT * FROM decoupled.dry_run($$SELECT decoupled.drop_cluster('nope')$$);
SELECT action, kind, regexp_replace(name, '\d{10,}', 'T', 'g') AS name
  FROM decoupled.dry_run($$SELECT decoupled.acquire_hold('events')$$);
SELECT * FROM decoupled.dry_run($$DROP TABLE events$$);
SELECT * FROM decoupled.dry_run($$SELECT decoupled.drop_adapter('default'); SELECT 1$$);
SELECT decoupled.catalog_version() - :v AS bumps, count(*) AS clusters FROM decoupled.clusters;
SELECT count(*) AS registered_spares FROM decoupled.objects WHERE name = 'spare';
DROP TABLE spare;
-- A release takes effect at once, and no rollback undoes it: dry_run()
-- refuses to try one (it released the hold for good, and said nothing).
SELECT decoupled.acquire_hold('events') AS h4 \gset
SELECT * FROM decoupled.dry_run(format('SELECT decoupled.release_hold(%s)', :h4));
SELECT count(*) AS still_held FROM decoupled.session_holds WHERE hold_id = :h4;
SELECT decoupled.release_hold(:h4);

-- Dropping a collection releases exactly its holds and requirements.
SELECT collection, count(*) FROM decoupled.holds GROUP BY collection ORDER BY 1;
DROP TABLE readers;
SELECT count(*) AS requirements FROM decoupled.requirements;
DROP TABLE events;
SELECT count(*) AS holds FROM decoupled.catalog_holds;
SELECT regress_try($$SELECT decoupled.acquire_hold('events')$$);
SELECT regress_finalize() AS finalized;
DROP ROLE decoupled_stranger;

-- With no history retained the bound reaches the upper: a hold at the
-- latest time (no as_of) then holds the upper itself, readable from the
-- next tick on, instead of refusing a time compaction passed.
CREATE TABLE ev0 (id int PRIMARY KEY);
INSERT INTO ev0 VALUES (1);
SELECT decoupled.register_table('ev0', retain_history => '0') > 0 AS registered;
INSERT INTO ev0 VALUES (2);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.publish_bounds() >= 0 AS published;
SELECT compaction_bound = upper AS bound_at_upper FROM decoupled.frontiers WHERE name = 'ev0';
SELECT decoupled.acquire_hold('ev0') AS h0 \gset
SELECT h.frontier = f.upper AS held_at_upper
  FROM decoupled.session_holds h, decoupled.frontiers f
 WHERE h.hold_id = :h0 AND f.name = 'ev0';
SELECT decoupled.release_hold(:h0);
SELECT decoupled.unregister_table('ev0');
DROP TABLE ev0;
