-- Sources and replicas (C5, C6): load generators maintained by the default
-- cluster's replica, replica declarations, health, drop; every bad input.
\set SHOW_CONTEXT never
-- A counter ticking every 20 ms, maintained by replica r1 of cluster default.
SELECT decoupled.create_source('ticks', 'counter', options => '{"tick": "20ms"}') > 0 AS created;
SELECT name, kind, cluster FROM decoupled.objects ORDER BY name;
SELECT since AS epoch FROM decoupled.frontiers WHERE name = 'ticks' \gset
SELECT decoupled.wait_for_upper('ticks', :epoch + 200, '60s') > :epoch + 200 AS advanced;
-- One row per tick: no gap, no duplicate, at any readable time.
SELECT upper - 1 AS latest FROM decoupled.frontiers WHERE name = 'ticks' \gset
SET decoupled.as_of = :latest;
SELECT count(*) = max(n) AS one_row_per_tick, count(*) = (:latest - :epoch) / 20 + 1 AS every_tick
  FROM ticks;
RESET decoupled.as_of;

-- An auction source: two subsources whose bids go to open auctions.
SELECT decoupled.create_source('market', 'auction', options => '{"tick": "20ms"}') > 0 AS created;
SELECT name FROM decoupled.objects WHERE name LIKE 'market%' ORDER BY name;
SELECT since AS m0 FROM decoupled.frontiers WHERE name = 'market_bids' \gset
SELECT decoupled.wait_for_upper('market_bids', :m0 + 400, '60s') > 0 AS advanced;
SELECT decoupled.wait_for_upper('market_auctions', :m0 + 400, '60s') > 0 AS advanced;
SELECT upper - 1 AS m1 FROM decoupled.frontiers WHERE name = 'market_bids' \gset
SET decoupled.as_of = :m1;
SELECT count(*) > 10 AS some_bids,
       bool_and(a.id IS NOT NULL) AS every_bid_has_its_auction,
       bool_and(b.bid_time < a.end_time) AS bids_only_while_open,
       bool_and(a.id <= b.id) AS auctions_before_their_bids
  FROM market_bids b LEFT JOIN market_auctions a ON a.id = b.auction_id;
RESET decoupled.as_of;

-- A cluster without replicas pauses what runs on it, by placement.
SELECT decoupled.create_cluster('idle', replicas => 0);
SELECT decoupled.create_source('sleepy', 'counter', cluster => 'idle') > 0 AS created;
SELECT name, replica, status, hint FROM decoupled.source_statuses WHERE name = 'sleepy';
-- Its upper does not move: waiting for it to pass its current upper times out.
SELECT regress_try(format($$SELECT decoupled.wait_for_upper('sleepy', %s, '300ms')$$, upper))
    AS outcome
  FROM decoupled.frontiers WHERE name = 'sleepy';
-- Before its first tick a source has no readable time; a read AS OF
-- before it says so (nothing was compacted).
SELECT decoupled.create_source('hourly', 'counter', options => '{"tick": "1 hour"}') > 0 AS created;
SELECT since = upper AS nothing_readable, since > decoupled.oracle_now() AS begins_later
  FROM decoupled.frontiers WHERE name = 'hourly';
SELECT regress_try(format('SET decoupled.as_of = %s; SELECT count(*) FROM hourly',
                          decoupled.oracle_now()));
RESET decoupled.as_of;
SELECT decoupled.drop('hourly');

-- Unmanaged clusters take replicas one by one; external ones are left to
-- pg_decoupled_replicad.
SELECT decoupled.create_cluster('hand', replicas => 0, managed => false);
SELECT decoupled.create_replica('hand', 'a');
SELECT decoupled.create_replica('hand', 'b', external => true);
SELECT name, managed, replication_factor, replicas FROM decoupled.clusters WHERE name = 'hand';
SELECT decoupled.wait_for_controller(decoupled.catalog_version()) > 0 AS followed;
SELECT name FROM decoupled.supervised WHERE cluster = 'hand' ORDER BY name;
SELECT decoupled.drop_replica('hand', 'b');
SELECT replica FROM decoupled.cluster_replicas WHERE cluster = 'hand';

-- Bad input: SQLSTATE and message; nothing changes.
SELECT decoupled.create_source('clash_bids', 'counter', cluster => 'idle') > 0 AS created;
SELECT decoupled.catalog_version() AS v \gset
SELECT case_name, regress_try(s) AS outcome FROM (VALUES
    ('unknown generator', $$SELECT decoupled.create_source('x', 'tpch')$$),
    ('null generator', $$SELECT decoupled.create_source('x', NULL)$$),
    ('unknown cluster', $$SELECT decoupled.create_source('x', 'counter', cluster => 'nope')$$),
    ('tick not an interval', $$SELECT decoupled.create_source('x', 'counter', options => '{"tick": "soon"}')$$),
    ('tick too small', $$SELECT decoupled.create_source('x', 'counter', options => '{"tick": "1ms"}')$$),
    ('unknown option', $$SELECT decoupled.create_source('x', 'counter', options => '{"speed": 3}')$$),
    ('options not an object', $$SELECT decoupled.create_source('x', 'counter', options => '[1]')$$),
    ('negative retain_history', $$SELECT decoupled.create_source('x', 'counter', retain_history => '-1s')$$),
    ('duplicate name', $$SELECT decoupled.create_source('ticks', 'counter')$$),
    ('subsource name taken', $$SELECT decoupled.create_source('clash', 'auction')$$),
    ('relation exists', $$CREATE TABLE busy (x int); SELECT decoupled.create_source('busy', 'counter')$$),
    ('invalid name', $$SELECT decoupled.create_source('', 'counter')$$),
    ('replica on managed cluster', $$SELECT decoupled.create_replica('default', 'r9')$$),
    ('replica on unknown cluster', $$SELECT decoupled.create_replica('nope', 'r1')$$),
    ('duplicate replica', $$SELECT decoupled.create_replica('hand', 'a')$$),
    ('drop unknown replica', $$SELECT decoupled.drop_replica('hand', 'zz')$$),
    ('drop replica of managed', $$SELECT decoupled.drop_replica('default', 'r1')$$),
    ('drop unknown', $$SELECT decoupled.drop('nope')$$),
    ('drop a subsource', $$SELECT decoupled.drop('market_bids')$$),
    ('wait for unknown', $$SELECT decoupled.wait_for_upper('nope', 0)$$),
    ('wait negative timeout', $$SELECT decoupled.wait_for_upper('ticks', 0, '-1s')$$),
    ('drop cluster in use', $$SELECT decoupled.drop_cluster('idle')$$)
) AS t(case_name, s);
SELECT decoupled.catalog_version() - :v AS bumps_after_errors;

-- Dropping a source drops its subsources too, writes `dropped` history once
-- per collection in the dropping transaction, and frees the names.
SELECT decoupled.drop('market');
SELECT decoupled.drop('sleepy');
SELECT decoupled.drop('clash_bids');
SELECT name, status, count(*) FROM decoupled.status_history
 WHERE status = 'dropped' AND (name LIKE 'market%' OR name = 'sleepy')
 GROUP BY name, status ORDER BY name;
SELECT count(*) AS market_relations FROM pg_class WHERE relname LIKE 'market%';
SELECT regress_try($$SELECT count(*) FROM market_bids$$);
SELECT decoupled.drop_cluster('idle');
SELECT decoupled.drop_cluster('hand');
SELECT decoupled.drop('ticks');
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
SELECT count(*) AS live_objects FROM decoupled.objects;

-- Status history is kept for decoupled.status_history_retention; the
-- controller prunes older rows.
UPDATE decoupled.status_events SET occurred_at = now() - interval '8 days'
 WHERE lifetime_id IN (SELECT lifetime_id FROM decoupled.catalog_objects WHERE name = 'sleepy');
SELECT decoupled.prune_status_history(interval '7 days') AS pruned;
SELECT count(*) AS sleepy_history FROM decoupled.status_history WHERE name = 'sleepy';
