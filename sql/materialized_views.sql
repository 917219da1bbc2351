-- Materialized views (C1.6, C3.3, C3.4, C5.3): the written plan, logical
-- inputs and their requirements, maintenance by the default cluster's
-- replica, verify(), drop semantics, and every bad input.  The suite ticks
-- tables itself (decoupled.table_tick_interval = 0) and waits with
-- wait_for_upper, never with sleeps.
\set SHOW_CONTEXT never
CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, amount int NOT NULL);
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO customers VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
INSERT INTO orders SELECT i, i % 3 + 1, i * 10 FROM generate_series(1, 30) i;
SELECT decoupled.register_table('orders') > 0 AS registered,
       decoupled.register_table('customers') > 0 AS registered;
-- One tick brings every registered table to the same upper.
SELECT decoupled.tick_tables() AS ticked;

-- Wait until `name` has caught up with every registered table's latest tick.
CREATE FUNCTION caught_up(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT decoupled.wait_for_upper(name, (SELECT max(upper) - 1 FROM decoupled.frontiers f
                                             JOIN decoupled.objects o USING (name)
                                            WHERE o.kind = 'table'), '60s') > 0
$$;

-- A view over a table: maintained from the table's history.
SELECT decoupled.create_materialized_view('per_customer',
    'SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer') > 0
    AS created;
SELECT name, kind, cluster FROM decoupled.objects WHERE name = 'per_customer';
-- Its written plan is the analyzed query tree, and its requirement starts at
-- its first computation time, which is its since.
SELECT written_plan LIKE '({QUERY %' AS written_plan_is_a_query_tree
  FROM decoupled.catalog_objects WHERE name = 'per_customer';
SELECT r.collection, r.frontier = f.since AS at_first_computation
  FROM decoupled.requirements r JOIN decoupled.frontiers f ON f.name = r.required_by
 WHERE r.required_by = 'per_customer';
SELECT caught_up('per_customer');
SELECT * FROM per_customer ORDER BY customer;
SELECT decoupled.verify('per_customer');

-- Changes at one tick become one difference at that time.
UPDATE orders SET amount = amount + 1 WHERE customer = 1;
DELETE FROM orders WHERE id = 3;
INSERT INTO orders VALUES (31, 4, 1000);
SELECT decoupled.tick_tables() AS ticked;
SELECT caught_up('per_customer');
SELECT * FROM per_customer ORDER BY customer;
SELECT decoupled.verify('per_customer');
-- The previous state stays readable at the previous time.
SELECT since AS before_changes FROM decoupled.frontiers WHERE name = 'per_customer' \gset
SET decoupled.as_of = :before_changes;
SELECT * FROM per_customer ORDER BY customer;
-- In parallel plans too: the history gates then run in parallel workers.
SET force_parallel_mode = on;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT count(*), sum(amount) FROM orders;
RESET force_parallel_mode;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET decoupled.as_of;
SELECT decoupled.verify('per_customer', :before_changes);
-- The requirement follows the view's durable progress.
SELECT r.frontier = f.upper - 1 AS follows_progress
  FROM decoupled.requirements r JOIN decoupled.frontiers f ON f.name = r.required_by
 WHERE r.required_by = 'per_customer';

-- A view over a view over a table, and a join whose input the planner may
-- eliminate: every logical input is required.
CREATE VIEW big_orders AS SELECT id, customer, amount FROM orders WHERE amount >= 200;
SELECT decoupled.create_materialized_view('big_count',
    'SELECT count(*) AS n FROM big_orders') > 0 AS created;
SELECT decoupled.create_materialized_view('order_amounts',
    'SELECT o.id, o.amount FROM orders o LEFT JOIN customers c ON c.id = o.customer') > 0
    AS created;
SELECT collection, required_by FROM decoupled.requirements
 WHERE required_by IN ('big_count', 'order_amounts') ORDER BY 2, 1;
-- On plain tables PostgreSQL removes that join: customers is never read.
CREATE TABLE plain_o (id int, customer int, amount int);
CREATE TABLE plain_c (id int PRIMARY KEY);
EXPLAIN (COSTS OFF)
SELECT o.id, o.amount FROM plain_o o LEFT JOIN plain_c c ON c.id = o.customer;
SELECT caught_up('big_count') AND caught_up('order_amounts') AS caught_up;
SELECT n FROM big_count;
SELECT count(*), sum(amount) FROM order_amounts;
SELECT decoupled.verify('big_count') AND decoupled.verify('order_amounts') AS verified;

-- A view over a view, and two views created in one transaction, the second
-- over the first.
SELECT decoupled.create_materialized_view('grand_total',
    'SELECT sum(total) AS total, sum(n) AS n FROM per_customer') > 0 AS created;
BEGIN;
SELECT decoupled.create_materialized_view('rich',
    'SELECT customer FROM per_customer WHERE total > 1000') > 0 AS created;
SELECT decoupled.create_materialized_view('rich_named',
    'SELECT c.name FROM rich r JOIN customers c ON c.id = r.customer') > 0 AS created;
COMMIT;
INSERT INTO orders VALUES (32, 2, 5000);
SELECT decoupled.tick_tables() AS ticked;
SELECT caught_up('grand_total') AND caught_up('rich_named') AS caught_up;
SELECT * FROM grand_total;
SELECT * FROM rich_named ORDER BY name;
SELECT decoupled.verify('grand_total') AND decoupled.verify('rich') AND
       decoupled.verify('rich_named') AS verified;
SELECT collection, required_by FROM decoupled.requirements
 WHERE required_by IN ('grand_total', 'rich', 'rich_named') ORDER BY 2, 1;

-- A view over a source: every computation reads the source AS OF one time.
SELECT decoupled.create_source('ticks', 'counter', options => '{"tick": "20ms"}') > 0 AS created;
SELECT decoupled.create_materialized_view('tick_stats',
    'SELECT count(*) AS n, max(n) AS top, count(*) = max(n) AS gapless FROM ticks') > 0
    AS created;
SELECT since AS t0 FROM decoupled.frontiers WHERE name = 'tick_stats' \gset
SELECT decoupled.wait_for_upper('tick_stats', :t0 + 200, '60s') > 0 AS advanced;
SELECT gapless, n > 0 AS counted FROM tick_stats;
SELECT decoupled.verify('tick_stats') AND decoupled.verify('tick_stats', :t0 + 100) AS verified;

-- The view's name is a relation in the current schema, readable by its
-- creator only (who may grant it on); a drop needs `cascade` when things
-- are built on it.
SELECT relname, relkind FROM pg_class WHERE relname = 'per_customer';
CREATE ROLE mv_reader;
SET ROLE mv_reader;
SELECT regress_try('SELECT * FROM per_customer') AS outcome;
SELECT regress_try($$SELECT decoupled.verify('per_customer')$$) AS outcome;
RESET ROLE;
SELECT regress_try($$SELECT decoupled.drop('per_customer')$$) AS outcome;
SELECT regress_try($$SELECT decoupled.unregister_table('orders')$$) AS outcome;
SELECT regexp_replace(regress_try('DROP TABLE customers'), ' \(.*', '') AS outcome;

-- Bad input: each is refused and changes nothing.
SELECT decoupled.catalog_version() AS version_before \gset
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad', 'SELEC 1')$$) AS syntax;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad', 'SELECT 1; SELECT 2')$$)
    AS two_statements;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'DELETE FROM orders RETURNING *')$$) AS not_a_select;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT * INTO x FROM orders')$$) AS select_into;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id, random() FROM orders')$$) AS volatile;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id FROM orders WHERE amount > extract(epoch FROM now())')$$) AS now;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id, current_timestamp FROM orders')$$) AS current_timestamp;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id FROM orders LIMIT 3')$$) AS limit_without_order;
-- Names of catalog objects (a rename changes them) and privileges (GRANT
-- changes them) are not the inputs' to decide.
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id, 10::oid::regrole::text FROM orders')$$) AS role_name;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id, (''orders_'' || id)::regclass::oid FROM orders')$$) AS relation_by_name;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id FROM orders WHERE has_table_privilege(''orders'', ''SELECT'')')$$) AS privilege;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT * FROM plain_o')$$) AS not_a_collection;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT * FROM no_such_table')$$) AS unknown_relation;
-- The parser's detail and hint travel with the error, and an error
-- without them prints none (no empty lines).
SELECT decoupled.create_materialized_view('bad', 'SELECT amout FROM orders');
SELECT decoupled.create_materialized_view('bad', 'SELECT * FROM no_such_table');
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT id AS mz_ts FROM orders')$$) AS reserved_column;
SELECT regress_try($$SELECT decoupled.create_materialized_view('per_customer',
    'SELECT 1')$$) AS duplicate;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad', 'SELECT 1',
    cluster => 'nowhere')$$) AS unknown_cluster;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad', 'SELECT 1',
    retain_history => '-1 s')$$) AS negative_retention;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad', NULL)$$) AS null_query;
SELECT regress_try($$SELECT decoupled.verify('orders')$$) AS verify_a_table;
SELECT regress_try($$SELECT decoupled.verify('nothing')$$) AS verify_unknown;
-- History is written with the extension's rights: no domain whose checks
-- an ordinary role wrote, no column named like the storage's own.
CREATE ROLE dom_owner;
CREATE DOMAIN positive AS int CHECK (VALUE > 0);
ALTER DOMAIN positive OWNER TO dom_owner;
CREATE TABLE dom_t (p positive);
CREATE TABLE mz_t (mz_ts int);
SELECT regress_try($$SELECT decoupled.register_table('dom_t')$$) AS untrusted_domain;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad',
    'SELECT 1::positive AS p')$$) AS untrusted_domain_in_view;
SELECT regress_try($$SELECT decoupled.register_table('mz_t')$$) AS reserved_in_table;
DROP TABLE dom_t, mz_t;
DROP DOMAIN positive;
DROP ROLE dom_owner;
SET ROLE mv_reader;
SELECT regress_try($$SELECT decoupled.create_materialized_view('bad', 'SELECT 1')$$)
    AS unprivileged;
RESET ROLE;
SELECT decoupled.catalog_version() = :version_before AS catalog_unchanged,
       NOT EXISTS (SELECT FROM decoupled.objects WHERE name = 'bad') AS nothing_created,
       to_regclass('bad') IS NULL AS no_relation;

-- An explicit as_of must be admitted for every input: below an input's
-- compaction bound it is refused; at it, the view starts there.
SELECT decoupled.publish_bounds() >= 0 AS published, decoupled.apply_compaction() >= 0 AS applied;
SELECT compaction_bound AS bound FROM decoupled.frontiers WHERE name = 'orders' \gset
SELECT regress_try(format($$SELECT decoupled.create_materialized_view('early',
    'SELECT count(*) FROM orders', as_of => %s)$$, :bound - 1)) AS below_bound;
SELECT regress_try($$SELECT decoupled.create_materialized_view('early',
    'SELECT count(*) FROM orders', as_of => -1)$$) AS negative;
SELECT decoupled.create_materialized_view('early', 'SELECT count(*) AS n FROM orders',
                                          as_of => :bound) > 0 AS created;
SELECT since = :bound AS starts_at_as_of FROM decoupled.frontiers WHERE name = 'early';
SELECT caught_up('early');
SELECT decoupled.verify('early', :bound) AS verified_at_as_of;

-- Dry run reports what a view would create, or why it is refused.
SELECT action, kind, name FROM decoupled.dry_run(
    $$SELECT decoupled.create_materialized_view('dry', 'SELECT count(*) FROM customers')$$);
SELECT action, regexp_replace(detail, '\d{10,}', 'T', 'g') AS detail FROM decoupled.dry_run(
    $$SELECT decoupled.create_materialized_view('dry', 'SELECT random()')$$);

-- A view far behind catches up without stepping over a changed time, however
-- many rows each time changed: its cluster has no replica while four ticks
-- of twenty changed rows each go by.
SELECT decoupled.create_cluster('later', replicas => 0);
CREATE TABLE bulk (k int, v int);
SELECT decoupled.register_table('bulk', retain_history => '1 hour') > 0 AS registered;
SELECT decoupled.tick_tables() AS ticked;
SELECT decoupled.create_materialized_view('bulk_sums',
    'SELECT k, sum(v) AS v, count(*) AS n FROM bulk GROUP BY k', cluster => 'later',
    retain_history => '1 hour') > 0 AS created;
INSERT INTO bulk SELECT g % 3, g FROM generate_series(1, 20) g;
SELECT decoupled.tick_tables() AS ticked;
UPDATE bulk SET v = v + 1;
SELECT decoupled.tick_tables() AS ticked;
DELETE FROM bulk WHERE v % 2 = 0;
SELECT decoupled.tick_tables() AS ticked;
INSERT INTO bulk SELECT g % 5, g FROM generate_series(1, 20) g;
SELECT decoupled.tick_tables() AS ticked;
SELECT decoupled.alter_cluster('later', 1);
SELECT caught_up('bulk_sums');
SELECT count(*) AS changed_times, bool_and(decoupled.verify('bulk_sums', t)) AS verified_at_each
  FROM decoupled.frontiers f,
       unnest(decoupled._change_times(ARRAY(SELECT lifetime_id FROM decoupled.objects
                                             WHERE name = 'bulk'), f.since, f.upper, 100)) t
 WHERE f.name = 'bulk_sums';
-- _change_times skips through the time indexes: it finds what a scan of
-- every row finds, for every window and limit, insertions, retractions and
-- rows both inserted and retracted in the window included.
CREATE FUNCTION pg_temp.scanned_times(id bigint, lo bigint, hi bigint, n integer)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE r bigint[];
BEGIN
    EXECUTE format('SELECT coalesce(array_agg(t ORDER BY t), ''{}'') FROM (SELECT t FROM ('
                   '  SELECT mz_ts FROM %1$s WHERE mz_ts >= $1 AND mz_ts < $2 '
                   '  UNION SELECT valid_to FROM %2$s WHERE valid_to >= $1 AND valid_to < $2 '
                   '  UNION SELECT valid_from FROM %2$s '
                   '         WHERE valid_to >= $1 AND valid_from >= $1 AND valid_from < $2'
                   ') x(t) ORDER BY t LIMIT $3) y',
                   decoupled._storage(id, 'cur'), decoupled._storage(id, 'dead'))
        INTO r USING lo, hi, n;
    RETURN r;
END $$;
WITH b AS (SELECT lifetime_id AS id FROM decoupled.objects WHERE name = 'bulk'),
     f AS (SELECT since, upper FROM decoupled.frontiers WHERE name = 'bulk'),
     times AS (SELECT unnest(decoupled._change_times(ARRAY[b.id], f.since, f.upper, 100)) AS t
                 FROM b, f),
     lows AS (SELECT t AS lo FROM times UNION SELECT since FROM f UNION SELECT 0),
     highs AS (SELECT t + 1 AS hi FROM times UNION SELECT t FROM times UNION SELECT upper FROM f)
-- How many windows there are depends on the ticks' timing (the
-- controller may tick the table again before this runs): at least the two
-- lowest lows with every high, for each limit.
SELECT count(*) >= 40 AS windows,
       bool_and(decoupled._change_times(ARRAY[b.id], lo, hi, n)
                = pg_temp.scanned_times(b.id, lo, hi, n)) AS same_times,
       (SELECT count(*) FROM times) AS change_times
  FROM b, lows, highs, (VALUES (1), (2), (3), (100)) l(n)
 WHERE lo <= hi;
SELECT decoupled._change_times('{}', 0, 100, 16) AS no_inputs;
SELECT decoupled.drop('bulk', cascade => true);
SELECT decoupled.drop_cluster('later');
DROP TABLE bulk;

-- Drop with cascade removes the dependents and releases exactly their
-- requirements; the inputs' other requirements stay.
SELECT decoupled.drop('rich', cascade => true);
SELECT name FROM decoupled.objects WHERE name LIKE 'rich%';
SELECT collection, required_by FROM decoupled.requirements
 WHERE collection = 'customers' ORDER BY 2;
SELECT decoupled.drop('per_customer', cascade => true);
SELECT collection, required_by FROM decoupled.requirements ORDER BY 1, 2;
SELECT to_regclass('per_customer') IS NULL AS name_freed;
-- DROP TABLE ... CASCADE reaches the written plans that read the table, so
-- the views built on it go too.
SET client_min_messages = warning;
DROP TABLE customers CASCADE;
RESET client_min_messages;
SELECT name FROM decoupled.objects ORDER BY name;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
SELECT decoupled.drop('tick_stats');
SELECT decoupled.drop('ticks');
SELECT decoupled.drop('big_count');
SELECT decoupled.drop('early');
-- An ordinary view reads its history (it embeds the history views).
SELECT regress_try($$SELECT decoupled.drop('orders')$$);
SET client_min_messages = warning;
DROP VIEW big_orders CASCADE;
RESET client_min_messages;
SELECT decoupled.drop('orders');
DROP TABLE orders, plain_o, plain_c;

-- A view computes with the TimeZone and DateStyle order of the session
-- that created it, on every replica and in verify(), whatever the
-- reader's: a day of a timestamptz and a date written month first are the
-- creator's, as the plain query gives them in that session.
SET TimeZone = 'America/New_York';
SET DateStyle = 'ISO, MDY';
CREATE TABLE mv_ev (id int PRIMARY KEY, at timestamptz NOT NULL, s text NOT NULL);
SELECT decoupled.register_table('mv_ev') > 0 AS registered;
INSERT INTO mv_ev VALUES (1, '2026-01-01 23:30-05', '03/04/2026'),
                         (2, '2026-01-02 10:00-05', '12/31/2026'),
                         (3, '2026-01-01 02:00-05', '01/02/2026');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('mv_ev_daily',
    'SELECT at::date AS day, date_trunc(''day'', at) AS d0, count(*) AS n FROM mv_ev GROUP BY 1, 2')
    > 0 AS created;
SELECT decoupled.create_materialized_view('mv_ev_dates', 'SELECT id, s::date AS d FROM mv_ev')
    > 0 AS created;
RESET TimeZone;
RESET DateStyle;
SELECT caught_up('mv_ev_daily') AND caught_up('mv_ev_dates') AS caught_up;
SELECT decoupled.verify('mv_ev_daily') AS verified, decoupled.verify('mv_ev_dates') AS verified;
SET TimeZone = 'America/New_York';
SELECT * FROM mv_ev_daily ORDER BY day;
SELECT count(*) AS differences FROM (
    (SELECT * FROM mv_ev_daily EXCEPT ALL
     SELECT at::date, date_trunc('day', at), count(*) FROM mv_ev GROUP BY 1, 2)
    UNION ALL
    (SELECT at::date, date_trunc('day', at), count(*) FROM mv_ev GROUP BY 1, 2 EXCEPT ALL
     SELECT * FROM mv_ev_daily)) x;
RESET TimeZone;
SELECT * FROM mv_ev_dates ORDER BY id;
-- So does its text search configuration (to_tsvector(text) reads it).
SET default_text_search_config = 'pg_catalog.simple';
SELECT decoupled.create_materialized_view('mv_ev_words',
    'SELECT id, to_tsvector(s || '' running dogs'')::text AS words FROM mv_ev') > 0 AS created;
RESET default_text_search_config;
SELECT caught_up('mv_ev_words') AS caught_up;
SELECT decoupled.verify('mv_ev_words') AS verified;
SELECT words FROM mv_ev_words WHERE id = 1;
SELECT decoupled.drop('mv_ev_words');
-- Its rows' keys are printed as history prints them (in UTC): views made
-- in New York that output a timestamptz retract and replace their rows.
SET TimeZone = 'America/New_York';
SELECT decoupled.create_materialized_view('mv_ev_at', 'SELECT id, at FROM mv_ev') > 0 AS created;
SELECT decoupled.create_materialized_view('mv_ev_at_left',
    'SELECT e.id, e.at, f.id AS next FROM mv_ev e LEFT JOIN mv_ev f ON f.id = e.id + 1')
    > 0 AS created;
RESET TimeZone;
SELECT caught_up('mv_ev_at') AND caught_up('mv_ev_at_left') AS caught_up;
DELETE FROM mv_ev WHERE id = 1;
UPDATE mv_ev SET at = at + interval '5 hours' WHERE id = 2;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT caught_up('mv_ev_at') AND caught_up('mv_ev_at_left') AS caught_up;
SELECT name, status FROM decoupled.object_statuses
 WHERE name IN ('mv_ev_at', 'mv_ev_at_left') ORDER BY name;
SELECT decoupled.verify('mv_ev_at') AS verified, decoupled.verify('mv_ev_at_left') AS verified;
SELECT id, at FROM mv_ev_at ORDER BY id;
SELECT id, next FROM mv_ev_at_left ORDER BY id;
SELECT decoupled.drop('mv_ev_at'), decoupled.drop('mv_ev_at_left');
SELECT decoupled.drop('mv_ev_daily'), decoupled.drop('mv_ev_dates'),
       decoupled.unregister_table('mv_ev');
DROP TABLE mv_ev;

-- An ordinary view parsed before its table was registered reads the table
-- itself, whatever time it is read at: a materialized view through it is
-- refused until it is made again (registration warned about it).
CREATE TABLE mv_ov (id int PRIMARY KEY, v int NOT NULL);
CREATE VIEW mv_ov_plain AS SELECT id, v FROM mv_ov WHERE v > 5;
CREATE VIEW mv_ov_outer AS SELECT count(*) AS n FROM mv_ov_plain;
SELECT decoupled.register_table('mv_ov') > 0 AS registered;
SELECT decoupled.create_materialized_view('mv_ov_mv', 'SELECT n FROM mv_ov_outer');
CREATE OR REPLACE VIEW mv_ov_plain AS SELECT id, v FROM mv_ov WHERE v > 5;
SELECT decoupled.create_materialized_view('mv_ov_mv', 'SELECT n FROM mv_ov_outer') > 0 AS created;
SELECT decoupled.drop('mv_ov_mv');
DROP VIEW mv_ov_outer, mv_ov_plain;
SELECT decoupled.unregister_table('mv_ov');
DROP TABLE mv_ov;
DROP ROLE mv_reader;
DROP FUNCTION caught_up(text);
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
SELECT count(*) AS storage_left FROM pg_class
 WHERE relnamespace = 'decoupled_storage'::regnamespace;
