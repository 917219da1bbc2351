-- Incremental maintenance (C13): which views step incrementally and why the
-- others do not, steps of each kind counted, arrangements created, shared
-- and dropped with their last view, the lookup at a time an index probe,
-- and every step equal to the recomputation (verify) — through NULL keys,
-- duplicates, groups emptied and rows moving between groups.
\set SHOW_CONTEXT never
CREATE TABLE inc_t (k int, g int, v int, s text);
CREATE TABLE inc_u (k int, w int);
INSERT INTO inc_t SELECT i, i % 7, i, 's' || (i % 3) FROM generate_series(1, 200) i;
INSERT INTO inc_t VALUES (NULL, NULL, 1, NULL), (1, 1, 1, 's1'), (1, 1, 1, 's1');
INSERT INTO inc_u SELECT i, i FROM generate_series(1, 20) i;
SELECT decoupled.register_table('inc_t') > 0 AS registered,
       decoupled.register_table('inc_u') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;

CREATE FUNCTION inc_caught_up(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT decoupled.wait_for_upper(name, (SELECT max(upper) - 1 FROM decoupled.frontiers f
                                             JOIN decoupled.objects o USING (name)
                                            WHERE o.kind = 'table'), '60s') > 0
$$;

-- Linear: selection, projection, expressions.
SELECT decoupled.create_materialized_view('inc_lin',
    'SELECT k, v * 2 AS v2, upper(s) AS s FROM inc_t WHERE v % 2 = 0') > 0 AS created;
-- Groups: any aggregate, HAVING, keys that are expressions (min and max:
-- the touched groups are computed again; counts and averages: kept).
SELECT decoupled.create_materialized_view('inc_grp',
    'SELECT g, count(*) AS n, sum(v) AS total, min(v) AS lo, max(s) AS hi FROM inc_t GROUP BY g')
    > 0 AS created;
SELECT decoupled.create_materialized_view('inc_expr',
    'SELECT v % 5 AS b, s, count(*) AS n, avg(v) AS mean FROM inc_t GROUP BY v % 5, s '
    'HAVING count(*) > 1') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_minmax',
    'SELECT v % 5 AS b, s, min(k) AS lo, max(k) AS hi FROM inc_t GROUP BY v % 5, s '
    'HAVING count(*) > 1') > 0 AS created;
-- Counts and sums of integers are kept: NULL sums, avg, sum(bigint).
SELECT decoupled.create_materialized_view('inc_sums',
    'SELECT g, count(*) AS n, sum(v) AS total, sum(k::bigint) AS big, count(s) AS ns, '
    '       avg(k) AS mean, sum(v) * 2 + count(*) AS mixed FROM inc_t GROUP BY g') > 0 AS created;
-- The same keys again: the arrangement is shared.
SELECT decoupled.create_materialized_view('inc_grp2',
    'SELECT g, string_agg(s, '','' ORDER BY s, k) AS ss FROM inc_t GROUP BY g') > 0 AS created;
-- Kept sums over two keys named as SQL would not name them: the step
-- reads its touched groups from its aggregated changes (no key is NULL).
SELECT decoupled.create_materialized_view('inc_keys',
    'SELECT g AS d, k % 3 AS "Select", count(*) AS n, sum(v) AS total FROM inc_t '
    'WHERE g IS NOT NULL AND k IS NOT NULL GROUP BY 1, 2') > 0 AS created;
-- A view over an incremental view steps incrementally too.
SELECT decoupled.create_materialized_view('inc_over',
    'SELECT n, count(*) AS groups FROM inc_grp GROUP BY n') > 0 AS created;
-- Inner joins of any arity, self-joins too: the sum over inputs of the
-- query with that input's changes, the inputs before it at t and after it
-- at t - 1; with kept sums or touched groups over them.
SELECT decoupled.create_materialized_view('inc_join',
    'SELECT t.k, u.w FROM inc_t t JOIN inc_u u ON u.k = t.k') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_join3',
    'SELECT a.k, a.v, b.g AS bg, u.w FROM inc_t a, inc_t b, inc_u u '
    'WHERE b.k = a.k + 1 AND u.k = a.k AND a.v < 150') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_join_sums',
    'SELECT u.w % 3 AS bucket, count(*) AS n, sum(t.v) AS total FROM inc_t t '
    'JOIN inc_u u ON u.k = t.g GROUP BY u.w % 3') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_join_groups',
    'SELECT t.g, max(u.w) AS top, min(t.s) AS first FROM inc_t t '
    'JOIN inc_u u ON u.k = t.k GROUP BY t.g') > 0 AS created;
-- DISTINCT: each distinct row is a group, its touched rows computed again.
SELECT decoupled.create_materialized_view('inc_distinct',
    'SELECT DISTINCT g, s FROM inc_t') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_distinct_join',
    'SELECT DISTINCT t.g, u.w % 4 AS w4 FROM inc_t t JOIN inc_u u ON u.k = t.k') > 0 AS created;
-- UNION ALL of linear branches: the changes of each branch.
SELECT decoupled.create_materialized_view('inc_union',
    'SELECT k, v FROM inc_t WHERE v > 50 UNION ALL SELECT k, w FROM inc_u '
    'UNION ALL SELECT t.k, u.w FROM inc_t t JOIN inc_u u ON u.k = t.g') > 0 AS created;
-- An outer join on one key: the touched key partitions at t and before t.
SELECT decoupled.create_materialized_view('inc_outer',
    'SELECT t.k, u.w FROM inc_t t LEFT JOIN inc_u u ON u.k = t.k') > 0 AS created;
-- UNION: each distinct row a group, touched by either branch's changes.
SELECT decoupled.create_materialized_view('inc_union_distinct',
    'SELECT k FROM inc_t UNION SELECT k FROM inc_u') > 0 AS created;
-- A linear subquery in FROM: its input is the view's.
SELECT decoupled.create_materialized_view('inc_sub',
    'SELECT k FROM (SELECT k, v FROM inc_t WHERE v > 10) x') > 0 AS created;
-- Recomputed, with the reason.
SELECT decoupled.create_materialized_view('inc_distinct_on',
    'SELECT DISTINCT ON (g) g, k FROM inc_t ORDER BY g, k') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_series',
    'SELECT t.k, x FROM inc_t t, generate_series(1, 2) x') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_total',
    'SELECT count(*) AS n FROM inc_t') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_hidden_key',
    'SELECT count(*) AS n FROM inc_t GROUP BY g') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_top',
    'SELECT k, v FROM inc_t ORDER BY v DESC, k LIMIT 3') > 0 AS created;
-- A NOT IN over a row of two columns: the reason names that construct.
SELECT decoupled.create_materialized_view('inc_row_not_in',
    'SELECT k FROM inc_t WHERE (k, g) NOT IN (SELECT k, g FROM inc_t WHERE v > 5)') > 0
    AS created;
SELECT name, strategy, method, reason FROM decoupled.view_maintenance ORDER BY name;
SELECT decoupled.drop('inc_row_not_in');

-- Arrangements: the GROUP BY keys of a one-input 'groups' view and the
-- join keys of every input, each an index on the input's cur and dead,
-- one per distinct key set.
SELECT v.name, i.name AS input, a.expression, a.index_name ~ '^c[0-9]+_a[0-9a-f]{12}$' AS named
  FROM decoupled.catalog_arrangements a JOIN decoupled.objects v ON v.lifetime_id = a.view_id
  JOIN decoupled.objects i ON i.lifetime_id = a.input
 ORDER BY 1, 2, 3;
SELECT a.index_name AS g_arrangement FROM decoupled.catalog_arrangements a
  JOIN decoupled.objects v ON v.lifetime_id = a.view_id WHERE v.name = 'inc_grp' \gset
SELECT count(*) AS g_indexes FROM pg_indexes
 WHERE schemaname = 'decoupled_storage' AND indexname LIKE :'g_arrangement' || '\_%';
SELECT inc_caught_up(name) FROM decoupled.objects WHERE kind = 'materialized view' ORDER BY name;

-- A seeded workload: inserts, duplicates, NULL keys, updates moving rows
-- between groups, deletes emptying a group; every view verified at every
-- step, against the recomputation.
CREATE TABLE inc_failures (step int, name text);
CREATE FUNCTION inc_verify_all(step int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
BEGIN
    FOR v_name IN SELECT name FROM decoupled.objects
                   WHERE kind = 'materialized view' ORDER BY name LOOP
        PERFORM inc_caught_up(v_name);
        IF NOT decoupled.verify(v_name) THEN
            INSERT INTO inc_failures VALUES (step, v_name);
        END IF;
    END LOOP;
END
$$;
CREATE PROCEDURE inc_workload(steps int) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM setseed(0.42);
    FOR step IN 1 .. steps LOOP
        CASE step % 5
            WHEN 0 THEN INSERT INTO inc_t SELECT (random() * 50)::int, (random() * 8)::int,
                                                 (random() * 100)::int, 's' || (random() * 3)::int
                          FROM generate_series(1, 3);
            WHEN 1 THEN UPDATE inc_t SET g = (g + 1) % 9 WHERE k = (random() * 50)::int;
            WHEN 2 THEN DELETE FROM inc_t WHERE ctid IN (SELECT ctid FROM inc_t
                                                          WHERE g = (random() * 8)::int LIMIT 5);
            WHEN 3 THEN INSERT INTO inc_t VALUES (NULL, NULL, step, NULL), (7, 7, 7, 's7'),
                                                 (7, 7, 7, 's7');
            ELSE UPDATE inc_t SET v = v + 1, s = NULL WHERE k % 11 = step % 11;
        END CASE;
        IF step % 17 = 0 THEN
            DELETE FROM inc_t WHERE g = 3;  -- a group emptied
        END IF;
        IF step % 3 = 0 THEN  -- both sides of the joins change at one time
            UPDATE inc_u SET w = w + 1 WHERE k = step % 20;
            INSERT INTO inc_u VALUES (step % 25, step);
        END IF;
        -- Committed first: a tick moves what committed before it.
        COMMIT;
        PERFORM decoupled.tick_tables();
        COMMIT;
        IF step % 4 = 0 THEN  -- a time at which only inc_u changes: a join
            UPDATE inc_u SET w = w - 1 WHERE k = step % 20;  -- step leaves
            COMMIT;                                          -- inc_t's term out
            PERFORM decoupled.tick_tables();
            COMMIT;
        END IF;
        PERFORM inc_verify_all(step);
        COMMIT;
    END LOOP;
END
$$;
CALL inc_workload(40);
SELECT * FROM inc_failures ORDER BY step, name;

-- The incremental views stepped incrementally (after their first
-- computation); the others recomputed.
SELECT name, incremental_steps > 0 AS stepped_incrementally, recompute_steps >= 1 AS recomputed
  FROM decoupled.view_maintenance ORDER BY name;

-- A view whose steps replace its rows of the touched groups (or all of
-- them) reads them where they are (_replace_staged): its cur has no index
-- on the row hash, which only the linear and partitions steps look their
-- retractions up by.
SELECT m.name, m.strategy, m.method,
       EXISTS (SELECT FROM pg_indexes i
                WHERE i.schemaname = 'decoupled_storage'
                  AND i.tablename = 'c' || o.lifetime_id || '_cur'
                  AND i.indexdef LIKE '%(mz_hash)') AS row_hash_index
  FROM decoupled.view_maintenance m JOIN decoupled.objects o USING (name)
 ORDER BY m.name;

-- A touched group whose row comes out the same is neither retracted nor
-- written again: its row keeps its time, and only the changed group's old
-- row is in the view's dead.
CREATE TABLE inc_same (id int PRIMARY KEY, b int, v int);
INSERT INTO inc_same SELECT i, i % 2, i FROM generate_series(1, 10) i;
SELECT decoupled.register_table('inc_same') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_same_n',
    'SELECT b, count(*) AS n, sum(v) AS total FROM inc_same GROUP BY b') > 0 AS created;
SELECT inc_caught_up('inc_same_n');
SELECT 'decoupled_storage.c' || lifetime_id || '_cur' AS same_cur,
       'decoupled_storage.c' || lifetime_id || '_dead' AS same_dead
  FROM decoupled.objects WHERE name = 'inc_same_n' \gset
CREATE TEMP TABLE inc_same_before AS SELECT b, mz_ts FROM :same_cur;
-- Group 0 touched, its count and sum unchanged; group 1 changed.
UPDATE inc_same SET v = CASE id WHEN 2 THEN 4 WHEN 4 THEN 2 ELSE v END WHERE id IN (2, 4);
UPDATE inc_same SET v = v + 1 WHERE id = 1;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('inc_same_n');
SELECT c.b, c.mz_ts = x.mz_ts AS kept_its_time FROM :same_cur c JOIN inc_same_before x USING (b)
 ORDER BY c.b;
SELECT b, n, total FROM :same_dead ORDER BY b;
SELECT decoupled.verify('inc_same_n') AS verified;
SELECT decoupled.drop('inc_same_n'), decoupled.unregister_table('inc_same');
DROP TABLE inc_same, inc_same_before;

-- A lookup at a time is an index probe on the arrangement.
SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'inc_t' \gset
SELECT 'decoupled_storage.c' || lifetime_id || '_plan' AS plan FROM decoupled.objects
 WHERE name = 'inc_grp' \gset
SELECT 'decoupled_storage.c' || lifetime_id || '_cur' AS cur,
       'decoupled_storage.c' || lifetime_id || '_dead' AS dead
  FROM decoupled.objects WHERE name = 'inc_t' \gset
ANALYZE :cur, :dead;
SET decoupled.as_of = :t;
SET enable_seqscan = off;
CREATE FUNCTION inc_explain(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        RETURN NEXT regexp_replace(regexp_replace(regexp_replace(line,
            'c[0-9]+_', 'cN_', 'g'), '''[0-9]+''::bigint', 'N', 'g'), '_a[0-9a-f]{12}_', '_aX_', 'g');
    END LOOP;
END
$$;
SELECT * FROM inc_explain('SELECT * FROM ' || :'plan' || ' WHERE g OPERATOR(pg_catalog.=) ANY (ARRAY[1])');
-- A partitions step (inc_outer) reads each input at t and just before t
-- for the touched join keys: index scans, the latest rows through the join
-- key's arrangement.
SELECT * FROM inc_explain('SELECT * FROM ' || replace(:'cur', '_cur', '_history')
                          || ' WHERE (k) OPERATOR(pg_catalog.=) ANY (ARRAY[1]) OR (k) IS NULL');
SELECT * FROM inc_explain('SELECT * FROM ' || replace(:'cur', '_cur', '_before')
                          || ' WHERE (k) OPERATOR(pg_catalog.=) ANY (ARRAY[1])');
RESET enable_seqscan;
RESET decoupled.as_of;

-- Dropped with the last view that uses it (inc_grp, inc_grp2 and
-- inc_join_sums share the arrangement on inc_t's g).
SELECT decoupled.drop('inc_grp2');
SELECT count(*) AS g_indexes FROM pg_indexes
 WHERE schemaname = 'decoupled_storage' AND indexname LIKE :'g_arrangement' || '\_%';
SELECT decoupled.drop('inc_over'), decoupled.drop('inc_grp');
SELECT count(*) AS g_indexes FROM pg_indexes
 WHERE schemaname = 'decoupled_storage' AND indexname LIKE :'g_arrangement' || '\_%';
SELECT decoupled.drop('inc_join_sums');
SELECT count(*) AS g_indexes FROM pg_indexes
 WHERE schemaname = 'decoupled_storage' AND indexname LIKE :'g_arrangement' || '\_%';

SELECT decoupled.drop(name) FROM decoupled.objects WHERE kind = 'materialized view' ORDER BY name;

-- A star: a large fact table joined to a small dimension.  A step's term
-- for the changed dimension reads the fact table for the changed rows'
-- join keys only (C13.4: the arrangement on the key, not a scan); a term
-- for the changed fact rows reads the small dimension whole; a term whose
-- input did not change is left out.  Every step equals the recomputation:
-- keys gained and lost, NULL keys, both sides changing at one time.
CREATE TABLE inc_fact (id int PRIMARY KEY, k int, v int, ks int[]);
CREATE TABLE inc_dim (k int, w int, ks int[]);
INSERT INTO inc_fact SELECT i, CASE WHEN i % 101 = 0 THEN NULL ELSE i % 100 END, i,
                            ARRAY[i % 100, i % 3]
  FROM generate_series(1, 30000) i;
INSERT INTO inc_dim SELECT k, k % 7, ARRAY[k, k % 3] FROM generate_series(0, 99) k;
SELECT decoupled.register_table('inc_fact') > 0 AS registered,
       decoupled.register_table('inc_dim') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_star_sums',
    'SELECT d.w, count(*) AS n, sum(f.v) AS total FROM inc_fact f JOIN inc_dim d ON d.k = f.k '
    'GROUP BY d.w') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_star_lin',
    'SELECT f.id, d.w FROM inc_fact f, inc_dim d WHERE f.k = d.k AND f.v % 50 = 0') > 0 AS created;
-- Arrays as join keys: read whole, never through ANY (an array of arrays).
SELECT decoupled.create_materialized_view('inc_star_arrays',
    'SELECT f.id, d.w FROM inc_fact f JOIN inc_dim d ON d.ks = f.ks WHERE f.v % 50 = 0')
    > 0 AS created;
SELECT decoupled.create_materialized_view('inc_star_self',
    'SELECT a.k, count(*) AS n FROM inc_dim a JOIN inc_dim b ON a.w = b.w GROUP BY a.k')
    > 0 AS created;
CREATE PROCEDURE inc_star_workload(steps int) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM setseed(0.17);
    FOR step IN 1 .. steps LOOP
        CASE step % 6
            WHEN 0 THEN UPDATE inc_dim SET w = w + 1 WHERE k = (random() * 99)::int;
            WHEN 1 THEN UPDATE inc_fact SET v = v + 1, k = (random() * 120)::int
                         WHERE id = (random() * 29999)::int + 1;
            WHEN 2 THEN INSERT INTO inc_dim VALUES ((random() * 130)::int, step, ARRAY[step % 100, 1]),
                                                   (NULL, step, NULL);
            WHEN 3 THEN DELETE FROM inc_dim WHERE k = (random() * 130)::int;
            WHEN 4 THEN UPDATE inc_dim SET k = k + 100 WHERE k = (random() * 99)::int;
            ELSE UPDATE inc_dim SET w = w - 1 WHERE k % 10 = step % 10;
                 UPDATE inc_fact SET k = k + 1 WHERE id % 1000 = step;
        END CASE;
        COMMIT;
        PERFORM decoupled.tick_tables();
        COMMIT;
        PERFORM inc_verify_all(step);
        COMMIT;
    END LOOP;
END
$$;
CALL inc_star_workload(36);
SELECT * FROM inc_failures ORDER BY step, name;
-- The restriction a dimension's term puts on the fact table is answered
-- from the arrangement on the join key in both branches of its history.
SELECT 'decoupled_storage.c' || lifetime_id || '_history' AS fact_history
  FROM decoupled.objects WHERE name = 'inc_fact' \gset
SELECT 'decoupled_storage.c' || lifetime_id || '_delta' AS dim_delta
  FROM decoupled.objects WHERE name = 'inc_dim' \gset
SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'inc_fact' \gset
SET decoupled.as_of = :t;
SET enable_seqscan = off;
SELECT * FROM inc_explain('SELECT * FROM ' || :'fact_history' || ' WHERE k OPERATOR(pg_catalog.=) '
                          || 'ANY (ARRAY(SELECT k FROM ' || :'dim_delta' || '))');
RESET enable_seqscan;
RESET decoupled.as_of;
SELECT name, strategy, incremental_steps >= 20 AS stepped_incrementally
  FROM decoupled.view_maintenance ORDER BY name;
SELECT decoupled.drop(name) FROM decoupled.objects WHERE kind = 'materialized view' ORDER BY name;
SELECT decoupled.unregister_table('inc_fact'), decoupled.unregister_table('inc_dim');
DROP TABLE inc_fact, inc_dim;
DROP PROCEDURE inc_star_workload(int);

-- A step that touches most groups recomputes the view (C13.3), weighing
-- them against the view's rows even before its storage was first analyzed
-- (pg_class.reltuples is -1 then).
CREATE TABLE inc_many (g int, v int);
INSERT INTO inc_many SELECT i % 1000, i FROM generate_series(1, 3000) i;
SELECT decoupled.register_table('inc_many') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_many_min',
    'SELECT g, min(v) AS lo, count(DISTINCT v) AS n FROM inc_many GROUP BY g') > 0 AS created;
SELECT inc_caught_up('inc_many_min');
UPDATE inc_many SET v = v - 1 WHERE v % 3 = 0;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('inc_many_min'), decoupled.verify('inc_many_min');
SELECT strategy, incremental_steps, recompute_steps FROM decoupled.view_maintenance
 WHERE name = 'inc_many_min';
SELECT decoupled.drop('inc_many_min'), decoupled.unregister_table('inc_many');
DROP TABLE inc_many;

-- Kept min/max (C13.2): a view of counts, integer sums and min/max of
-- built-in types keeps them per group.  An insert moves an extreme by
-- comparison alone; a retraction that reaches a group's extreme leaves it
-- unknown, and those groups alone are computed again at the step's time
-- (through the arrangement on the group key); when most groups are, all
-- are.  Each step equals the recomputation.
CREATE TYPE inc_level AS ENUM ('low', 'mid', 'high');
CREATE TABLE inc_ext (g int, v int, s text, f float8, d date, lvl inc_level);
INSERT INTO inc_ext SELECT i % 100, i, 'x' || i, i / 7.0, date '2026-01-01' + i,
                           (enum_range(NULL::inc_level))[i % 3 + 1]
  FROM generate_series(1, 3000) i;
SELECT decoupled.register_table('inc_ext') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_ext_mm',
    'SELECT g, count(*) AS n, sum(v) AS total, min(v) AS lo, max(v) AS hi, '
    '       min(s COLLATE "C") AS s_lo, max(s) AS s_hi, max(d) - min(d) AS span '
    '  FROM inc_ext GROUP BY g HAVING min(v) < 2950') > 0 AS created;
-- Not kept: min/max of a type that is not built in (an enum here) — the
-- extension compares kept extremes with built-in comparisons only — or
-- whose equal values may differ (a float's 0 and -0, a numeric's 3.0 and
-- 3.00: the kept one would show where the recomputation shows another);
-- such a view recomputes its touched groups.
SELECT decoupled.create_materialized_view('inc_ext_enum',
    'SELECT g, max(lvl) AS top, max(f) AS f_hi, min(v) AS lo FROM inc_ext GROUP BY g') > 0
    AS created;
-- One min/max argument: a group whose extreme a retraction reached finds
-- its new one as the first row of each part of the input's history (cur,
-- dead) in that value's order within the group — an ordered probe of the
-- view's arrangement, on its key and then the value.  Its count and sums
-- come from the state.
SELECT decoupled.create_materialized_view('inc_ext_lohi',
    'SELECT g, count(*) AS n, sum(v) AS total, min(v) AS lo, max(v) AS hi '
    '  FROM inc_ext WHERE v <> 13 GROUP BY g') > 0 AS created;
SELECT name, method FROM decoupled.view_maintenance WHERE name LIKE 'inc_ext%' ORDER BY name;
SELECT v.name, a.expression FROM decoupled.catalog_arrangements a
  JOIN decoupled.objects v ON v.lifetime_id = a.view_id
 WHERE v.name LIKE 'inc_ext%' ORDER BY 1, 2;
SELECT 'decoupled_storage.c' || lifetime_id AS ext,
       'decoupled_storage.c' || lifetime_id || '_history' AS ext_history,
       'decoupled_storage.c' || lifetime_id || '_history_cur' AS ext_in_cur,
       'decoupled_storage.c' || lifetime_id || '_history_dead' AS ext_in_dead
  FROM decoupled.objects WHERE name = 'inc_ext' \gset
SELECT upper - 1 AS ext_t FROM decoupled.frontiers WHERE name = 'inc_ext' \gset
SET decoupled.as_of = :ext_t;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT * FROM inc_explain('SELECT v FROM ' || :'ext' || '_history_cur '
                          || 'WHERE g OPERATOR(pg_catalog.=) 3 AND v IS NOT NULL ORDER BY v LIMIT 1');
SELECT * FROM inc_explain('SELECT v FROM ' || :'ext' || '_history_dead '
                          || 'WHERE g OPERATOR(pg_catalog.=) 3 AND v IS NOT NULL ORDER BY v DESC LIMIT 1');
RESET enable_bitmapscan;
RESET enable_seqscan;
RESET decoupled.as_of;
SELECT 'decoupled_storage.c' || lifetime_id || '_state' AS ext_state FROM decoupled.objects
 WHERE name = 'inc_ext_mm' \gset
SELECT attname, format_type(atttypid, atttypmod) AS type, collname
  FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation AND c.collname <> 'default'
 WHERE attrelid = :'ext_state'::regclass AND attnum > 0 ORDER BY attnum;
-- Its only index is the unique one on the keys: an index on any other
-- column would make every update of a group's count a non-HOT update
-- (_merge_sums deletes emptied groups by the ctids its statement returns).
SELECT regexp_replace(pg_get_indexdef(i.indexrelid), 'c[0-9]+_', 'cN_', 'g') AS state_index
  FROM pg_index i WHERE i.indrelid = :'ext_state'::regclass;
CREATE FUNCTION inc_ext_verified() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM inc_caught_up('inc_ext_mm');
    PERFORM inc_caught_up('inc_ext_enum');
    PERFORM inc_caught_up('inc_ext_lohi');
    RETURN decoupled.verify('inc_ext_mm') AND decoupled.verify('inc_ext_enum')
       AND decoupled.verify('inc_ext_lohi');
END
$$;
-- Inserts: some beat their group's extremes, some do not.
INSERT INTO inc_ext VALUES (1, 0, 'a', 1e9, '1999-01-01', 'high'),
                           (2, 1500, 'x5', 3, '2026-05-05', 'low'),
                           (NULL, 7, NULL, NULL, NULL, NULL);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_ext_verified() AS verified;
-- Retractions of extremes: group 3's minimum, group 4's maximum moved
-- down, values inside the range elsewhere.
BEGIN;
DELETE FROM inc_ext WHERE v = 3;
UPDATE inc_ext SET v = 5, s = 'zz', f = -1 WHERE v = 2904;
UPDATE inc_ext SET v = v + 1 WHERE v IN (1005, 2006);
COMMIT;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_ext_verified() AS verified;
-- The history's parts add up to it, here at a time before those
-- retractions (their rows are in dead now), and are empty without as_of.
SET decoupled.as_of = :ext_t;
SELECT (SELECT count(*) FROM (TABLE :ext_history EXCEPT ALL
                              (TABLE :ext_in_cur UNION ALL TABLE :ext_in_dead)) x) AS missing,
       (SELECT count(*) FROM ((TABLE :ext_in_cur UNION ALL TABLE :ext_in_dead) EXCEPT ALL
                              TABLE :ext_history) x) AS extra,
       (SELECT count(*) FROM :ext_in_dead) AS in_dead;
RESET decoupled.as_of;
SELECT (SELECT count(*) FROM :ext_in_cur) + (SELECT count(*) FROM :ext_in_dead) AS without_as_of;
-- Every s of group 7 gone (its min and max NULL), group 8 emptied, group
-- 9 out of HAVING and back.
BEGIN;
UPDATE inc_ext SET s = NULL WHERE g = 7;
DELETE FROM inc_ext WHERE g = 8;
UPDATE inc_ext SET v = v + 3000 WHERE v = 9;
COMMIT;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_ext_verified() AS verified;
UPDATE inc_ext SET v = v - 3000 WHERE v = 3009;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_ext_verified() AS verified;
-- Every group's extremes retracted at once: all groups computed again.
UPDATE inc_ext SET v = v + 1, s = s || '.', f = f + 1, d = d + 1, lvl = 'mid';
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_ext_verified() AS verified;
DELETE FROM inc_ext WHERE g % 2 = 0;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_ext_verified() AS verified;
-- (How many of the enum view's steps recompute in full depends on when the
-- statistics count its rows: only their sum is shown.)
SELECT name, method, incremental_steps + recompute_steps AS steps,
       CASE method WHEN 'sums' THEN recompute_steps END AS sums_recomputed
  FROM decoupled.view_maintenance WHERE name LIKE 'inc_ext%' ORDER BY name;
SELECT decoupled.drop('inc_ext_mm'), decoupled.drop('inc_ext_enum'), decoupled.drop('inc_ext_lohi'),
       decoupled.unregister_table('inc_ext');
DROP TABLE inc_ext;
DROP FUNCTION inc_ext_verified();

-- Group keys whose equal values may differ (C13.1): a numeric group kept
-- under 3.0 would still show 3.0 once its only row is 3.00's, a float one
-- 0 once it is -0's.  Such views recompute their touched groups, and show
-- what the recomputation shows.
CREATE TABLE inc_nk (id int, x numeric, f float8, v int);
INSERT INTO inc_nk VALUES (1, 3.0, 0.0, 10);
SELECT decoupled.register_table('inc_nk') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_nk_x',
    'SELECT x, count(*) AS n, sum(v) AS s FROM inc_nk GROUP BY x') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_nk_f',
    'SELECT f, count(*) AS n FROM inc_nk GROUP BY f') > 0 AS created;
SELECT name, method FROM decoupled.view_maintenance WHERE name LIKE 'inc_nk%' ORDER BY name;
INSERT INTO inc_nk VALUES (2, 3.00, '-0', 5);
SELECT decoupled.tick_tables() > 0 AS ticked;
DELETE FROM inc_nk WHERE id = 1;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('inc_nk_x') AND inc_caught_up('inc_nk_f') AS caught_up;
SELECT decoupled.verify('inc_nk_x') AS x_verified, decoupled.verify('inc_nk_f') AS f_verified;
SELECT * FROM inc_nk_x;
SELECT * FROM inc_nk_f;
SELECT decoupled.drop('inc_nk_x'), decoupled.drop('inc_nk_f'), decoupled.unregister_table('inc_nk');
DROP TABLE inc_nk;

-- Many groups' extremes retracted, over an input with hundreds of rows a
-- group: ordered probes still find them group by group (a pass over the
-- input is chosen only past one group per 256 of its rows), and each step
-- equals the recomputation — every group's minimum and maximum moved, then
-- most groups' minimum deleted, NULLs among the values.
CREATE TABLE inc_wide (id int PRIMARY KEY, g int NOT NULL, v int);
INSERT INTO inc_wide SELECT i, i % 80, CASE WHEN i % 97 = 0 THEN NULL ELSE i END
  FROM generate_series(1, 40000) i;
SELECT decoupled.register_table('inc_wide') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_wide_mm',
    'SELECT g, min(v) AS lo, max(v) AS hi, count(*) AS n FROM inc_wide GROUP BY g') > 0 AS created;
-- Its key and extremes named as SQL would not name them: the probe's
-- statement quotes the key once.
SELECT decoupled.create_materialized_view('inc_wide_q',
    'SELECT g AS "Key", max(v) AS "order" FROM inc_wide GROUP BY g') > 0 AS created;
SELECT inc_caught_up('inc_wide_mm') AND decoupled.verify('inc_wide_mm') AS verified;
UPDATE inc_wide SET v = v + 7 WHERE v < 100 OR v > 39900;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('inc_wide_mm') AND decoupled.verify('inc_wide_mm') AS verified;
DELETE FROM inc_wide WHERE id IN (SELECT min(id) FILTER (WHERE v IS NOT NULL) FROM inc_wide
                                   WHERE g < 75 GROUP BY g);
UPDATE inc_wide SET v = NULL WHERE id IN (SELECT max(id) FROM inc_wide GROUP BY g);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('inc_wide_mm') AND decoupled.verify('inc_wide_mm') AS verified;
SELECT inc_caught_up('inc_wide_q') AND decoupled.verify('inc_wide_q') AS verified;
SELECT status FROM decoupled.object_statuses WHERE name = 'inc_wide_q';
SELECT name, method, recompute_steps FROM decoupled.view_maintenance
 WHERE name IN ('inc_wide_mm', 'inc_wide_q') ORDER BY name;
SELECT decoupled.drop('inc_wide_mm'), decoupled.drop('inc_wide_q'),
       decoupled.unregister_table('inc_wide');
DROP TABLE inc_wide;

-- Kept sums over a keyed outer join (C13.2): one LEFT, RIGHT or FULL join
-- of two inputs whose ON is one equality of a column of each.  Its changes
-- are its inner join's plus those of its null-extended rows — for the keys
-- the changes touch, the preserved rows without a partner at t less those
-- without one just before t — so a step reads no partition again.  Every
-- step equals the recomputation: partners arriving and leaving, NULL keys
-- on both sides, rows moving between keys, duplicates.
CREATE TABLE inc_dim (g int, name text, ks int[]);
CREATE TABLE inc_fact (id int, k int, tag text, v int, ks int[]);
INSERT INTO inc_dim SELECT i, 'd' || i, ARRAY[i % 3] FROM generate_series(1, 8) i;
INSERT INTO inc_fact SELECT i, i % 5, 'd' || (i % 6), i, ARRAY[i % 4] FROM generate_series(1, 40) i;
SELECT decoupled.register_table('inc_dim') > 0 AND decoupled.register_table('inc_fact') > 0
    AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('inc_oj_left',
    'SELECT d.g, count(f.id) AS n, sum(f.v) AS total, max(f.v) AS hi, count(*) AS rows_
       FROM inc_dim d LEFT JOIN inc_fact f ON f.k = d.g GROUP BY d.g') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_oj_full',
    'SELECT coalesce(d.g, f.k) AS k, count(*) AS n, count(d.name) AS named, sum(f.v) AS total
       FROM inc_dim d FULL JOIN inc_fact f ON f.k = d.g GROUP BY 1 HAVING count(*) > 1') > 0
    AS created;
SELECT decoupled.create_materialized_view('inc_oj_right_text',
    'SELECT d.name, count(f.id) AS n, min(f.v) AS lo
       FROM inc_fact f RIGHT JOIN inc_dim d ON d.name = f.tag GROUP BY d.name') > 0 AS created;
-- Owned by a role that is no superuser: the step reads the inputs' storage
-- with that role's rights (the probes go through the storage views).
CREATE ROLE inc_oj_owner IN ROLE decoupled_admin;
GRANT SELECT ON inc_dim, inc_fact TO inc_oj_owner;
GRANT CREATE ON SCHEMA public TO inc_oj_owner;
SET ROLE inc_oj_owner;
SELECT decoupled.create_materialized_view('inc_oj_owned',
    'SELECT f.k, count(*) AS n, count(d.g) AS matched
       FROM inc_fact f LEFT JOIN inc_dim d ON d.g = f.k GROUP BY f.k') > 0 AS created;
RESET ROLE;
-- Not keyed (the ON has a second condition; the key is an array): as
-- before.
SELECT decoupled.create_materialized_view('inc_oj_on_filter',
    'SELECT d.g, count(f.id) AS n FROM inc_dim d LEFT JOIN inc_fact f
         ON f.k = d.g AND f.v > 10 GROUP BY d.g') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_oj_arrays',
    'SELECT d.ks, count(f.id) AS n FROM inc_dim d LEFT JOIN inc_fact f ON f.ks = d.ks
      GROUP BY d.ks') > 0 AS created;
SELECT name, method FROM decoupled.view_maintenance WHERE name LIKE 'inc_oj%' ORDER BY name;
CREATE FUNCTION inc_oj_verified() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    ok boolean := true;
    v text;
BEGIN
    FOREACH v IN ARRAY ARRAY['inc_oj_left', 'inc_oj_full', 'inc_oj_right_text', 'inc_oj_on_filter',
                             'inc_oj_arrays', 'inc_oj_owned'] LOOP
        PERFORM inc_caught_up(v);
        ok := ok AND decoupled.verify(v);
    END LOOP;
    RETURN ok;
END
$$;
SELECT inc_oj_verified() AS verified;
-- Dimensions 5 to 8 have no facts yet (null-extended): facts arrive for 5
-- and 6 (twice the same row), NULL keys on both sides.
INSERT INTO inc_fact VALUES (100, 5, 'd7', 1), (101, 6, 'd8', 2), (101, 6, 'd8', 2),
                            (102, NULL, NULL, 3);
INSERT INTO inc_dim VALUES (NULL, NULL), (9, 'd9');
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
-- Every fact of key 1 goes (its dimension null-extended again), facts move
-- from key 2 to key 7 (which had none), a dimension with facts goes.
BEGIN;
DELETE FROM inc_fact WHERE k = 1;
UPDATE inc_fact SET k = 7, tag = 'd9', ks = ARRAY[2] WHERE k = 2;
DELETE FROM inc_dim WHERE g = 3;
COMMIT;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
-- The dimension comes back with another name, and a duplicate of it; one of
-- the duplicated facts goes.
INSERT INTO inc_dim VALUES (3, 'd3b'), (3, 'd3b');
DELETE FROM inc_fact WHERE ctid = (SELECT min(ctid) FROM inc_fact WHERE id = 101);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
-- Both sides emptied at one time, then filled again.
BEGIN;
DELETE FROM inc_fact;
DELETE FROM inc_dim WHERE g > 4 OR g IS NULL;
COMMIT;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
INSERT INTO inc_fact SELECT i, i % 7, 'd' || (i % 4), -i, ARRAY[i % 2] FROM generate_series(1, 30) i;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
-- An input changed by 10,000 rows and more at one time (past the count
-- of changes a step takes for partner probes): the step equals the
-- recomputation too, on the way in and out.
INSERT INTO inc_fact SELECT i, i % 9, 'd' || (i % 5), i, ARRAY[i % 3]
  FROM generate_series(1000, 11500) i;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
DELETE FROM inc_fact WHERE id >= 1000;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_oj_verified() AS verified;
SELECT name, method, incremental_steps > 0 AS stepped_incrementally
  FROM decoupled.view_maintenance WHERE name LIKE 'inc_oj%' ORDER BY name;
SELECT * FROM inc_oj_left ORDER BY g;
SELECT decoupled.drop('inc_oj_left'), decoupled.drop('inc_oj_full'),
       decoupled.drop('inc_oj_right_text'), decoupled.drop('inc_oj_on_filter'),
       decoupled.drop('inc_oj_arrays'), decoupled.drop('inc_oj_owned'),
       decoupled.unregister_table('inc_dim'), decoupled.unregister_table('inc_fact');
DROP TABLE inc_dim, inc_fact;
DROP FUNCTION inc_oj_verified();
DROP OWNED BY inc_oj_owner;
DROP ROLE inc_oj_owner;

-- Kept sums over joins aggregate each term's changes before joining them
-- (extension/preaggregate.cpp): per value of the columns the term reads
-- outside its own aggregated expressions.  Every step equals the
-- recomputation: joins through USING (a join alias), a LEFT JOIN,
-- expressions over both inputs or over the partner only, a condition on a
-- column that is not joined on, a self-join, count(*) alone; rows moving
-- between keys, values changing within a key (net count 0, sums not),
-- NULL values and NULL keys, duplicates, both inputs changing at one time.
-- (A NOT NULL domain no view reads: the subquery's columns it no longer
-- needs are NULL of the domain's base type.)
CREATE DOMAIN pa_label AS text NOT NULL;
CREATE TABLE pa_fact (id int, k int, v int, w int, label pa_label DEFAULT 'x');
CREATE TABLE pa_dim (k int, name text, x int);
INSERT INTO pa_fact SELECT i, i % 6, i, CASE WHEN i % 4 = 0 THEN NULL ELSE i % 5 END
  FROM generate_series(1, 60) i;
INSERT INTO pa_fact VALUES (61, NULL, 3, 3), (62, 2, 5, 1), (62, 2, 5, 1);
INSERT INTO pa_dim SELECT g, 'n' || (g % 3), g * 10 FROM generate_series(0, 7) g;
INSERT INTO pa_dim VALUES (NULL, 'n0', 1), (2, 'n2', NULL);
SELECT decoupled.register_table('pa_fact') > 0 AS registered,
       decoupled.register_table('pa_dim') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.create_materialized_view('pa_left',
    'SELECT d.k, count(f.id) AS n, sum(f.v) AS sv FROM pa_dim d LEFT JOIN pa_fact f ON f.k = d.k '
    'GROUP BY d.k') > 0 AS created;
-- The null-extended rows read the nullable side's changes as the inner
-- join's term aggregated them (one statement-wide WITH): both sides of a
-- FULL JOIN, and a RIGHT JOIN.
SELECT decoupled.create_materialized_view('pa_full',
    'SELECT d.k AS dk, f.k AS fk, count(f.id) AS n, count(d.x) AS nx, sum(f.v) AS sv, '
    '       sum(d.x) AS sx FROM pa_dim d FULL JOIN pa_fact f ON f.k = d.k '
    'GROUP BY d.k, f.k') > 0 AS created;
SELECT decoupled.create_materialized_view('pa_right',
    'SELECT f.k, count(d.x) AS nx, sum(f.v) AS sv FROM pa_dim d RIGHT JOIN pa_fact f '
    'ON f.k = d.k GROUP BY f.k') > 0 AS created;
SELECT decoupled.create_materialized_view('pa_using',
    'SELECT k, count(*) AS n, sum(v) AS sv, sum(x) AS sx FROM pa_fact JOIN pa_dim USING (k) '
    'GROUP BY k') > 0 AS created;
SELECT decoupled.create_materialized_view('pa_mixed',
    'SELECT d.name, count(*) AS n, sum(f.v * d.x) AS mixed, sum(d.x) AS sx, count(f.w) AS nw, '
    '       avg(f.v) AS mean FROM pa_fact f JOIN pa_dim d ON d.k = f.k GROUP BY d.name')
    > 0 AS created;
SELECT decoupled.create_materialized_view('pa_where',
    'SELECT d.name, f.k, sum(f.v) AS sv FROM pa_fact f JOIN pa_dim d ON d.k = f.k '
    'WHERE f.w > 1 GROUP BY d.name, f.k') > 0 AS created;
SELECT decoupled.create_materialized_view('pa_self',
    'SELECT a.k, count(*) AS n, sum(b.v) AS sv FROM pa_fact a JOIN pa_fact b ON b.k = a.k '
    'GROUP BY a.k') > 0 AS created;
SELECT decoupled.create_materialized_view('pa_count',
    'SELECT d.name, count(*) AS n FROM pa_fact f JOIN pa_dim d ON d.k = f.k GROUP BY d.name')
    > 0 AS created;
SELECT name, strategy, method FROM decoupled.view_maintenance WHERE name LIKE 'pa\_%' ORDER BY name;
CREATE PROCEDURE pa_workload(steps int) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM setseed(0.17);
    FOR step IN 1 .. steps LOOP
        CASE step % 4
            WHEN 0 THEN UPDATE pa_fact SET v = v + 1 WHERE id % 7 = step % 7;  -- within keys
            WHEN 1 THEN UPDATE pa_fact SET k = (k + 1) % 8 WHERE id % 5 = step % 5;  -- across
            WHEN 2 THEN INSERT INTO pa_fact VALUES (100 + step, (random() * 8)::int, step, NULL),
                                                   (100 + step, (random() * 8)::int, step, NULL);
            ELSE DELETE FROM pa_fact WHERE ctid IN (SELECT ctid FROM pa_fact
                                                     WHERE k = (random() * 7)::int LIMIT 3);
        END CASE;
        IF step % 3 = 0 THEN  -- the partner changes too, at the same time
            UPDATE pa_dim SET x = x + 1, name = 'n' || ((k + step) % 3) WHERE k = step % 8;
        END IF;
        IF step % 10 = 0 THEN
            UPDATE pa_fact SET w = NULL WHERE k = 1;
            DELETE FROM pa_dim WHERE k = 5;
            INSERT INTO pa_dim VALUES (5, 'n2', 50);
        END IF;
        COMMIT;
        PERFORM decoupled.tick_tables();
        COMMIT;
        PERFORM inc_verify_all(1000 + step);
        COMMIT;
    END LOOP;
END
$$;
CALL pa_workload(24);
SELECT * FROM inc_failures WHERE step > 1000 ORDER BY step, name;
SELECT name, incremental_steps > 0 AS stepped_incrementally, recompute_steps
  FROM decoupled.view_maintenance WHERE name LIKE 'pa\_%' ORDER BY name;
SELECT * FROM pa_left ORDER BY k;
-- Changes are summed per value only of columns whose equal values are the
-- same value: 1.0 and 1.00 are equal numerics that their text tells apart,
-- so a term reading a numeric is not aggregated first.
CREATE TABLE pa_num (id int, k int, n numeric);
SELECT decoupled.register_table('pa_num') > 0 AS registered;
SELECT decoupled.create_materialized_view('pa_scale',
    'SELECT f.n::text AS nt, count(*) AS c FROM pa_num f JOIN pa_dim d ON d.k = f.k '
    'GROUP BY 1') > 0 AS created;
INSERT INTO pa_num VALUES (1, 1, 1.0), (2, 1, 1.00), (3, 1, 2.00), (4, 2, 1.00);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('pa_scale') AS caught_up, decoupled.verify('pa_scale') AS verified;
INSERT INTO pa_num VALUES (5, 1, 1.0), (6, 1, 1.00), (7, 3, 3.00), (8, 3, 3.0);
UPDATE pa_num SET n = CASE WHEN n::text = '1.0' THEN 1.00 ELSE 1.0 END WHERE id IN (1, 2);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('pa_scale') AS caught_up, decoupled.verify('pa_scale') AS verified;
SELECT * FROM pa_scale ORDER BY nt;
-- An expression that can fail on a value (v / w) is summed after the join,
-- as the recomputation does: a change without a partner never meets it.
CREATE TABLE pa_div (id int, k int, v int, w int);
SELECT decoupled.register_table('pa_div') > 0 AS registered;
SELECT decoupled.create_materialized_view('pa_ratio',
    'SELECT d.name, count(*) AS n, sum(f.v / f.w) AS q FROM pa_div f '
    'JOIN pa_dim d ON d.k = f.k GROUP BY d.name') > 0 AS created;
INSERT INTO pa_div VALUES (1, 1, 10, 2), (2, 99, 5, 0), (3, 4, 9, 3);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('pa_ratio') AS caught_up, decoupled.verify('pa_ratio') AS verified;
SELECT * FROM pa_ratio ORDER BY name;
SELECT decoupled.drop(name) FROM decoupled.objects WHERE name LIKE 'pa\_%'
   AND kind = 'materialized view' ORDER BY name DESC;
SELECT decoupled.unregister_table('pa_fact'), decoupled.unregister_table('pa_dim'),
       decoupled.unregister_table('pa_num'), decoupled.unregister_table('pa_div');
DROP TABLE pa_fact, pa_dim, pa_num, pa_div;
DROP PROCEDURE pa_workload(int);
-- Rows replaced in place: a view whose steps replace rows keeps no time
-- index on its rows until something reads its changes by time, so that a
-- step rewrites a group's row where it is.  A view over it and a sink
-- from it make the index; a view whose input has lost it still steps (it
-- scans the input's rows), equal to the recomputation.
CREATE TABLE tix_t (id int PRIMARY KEY, k int, v int);
INSERT INTO tix_t SELECT i, i % 10, i FROM generate_series(1, 500) i;
SELECT decoupled.register_table('tix_t') > 0 AS registered;
SELECT decoupled.create_materialized_view('tix_g',
    'SELECT k, count(*) AS n, sum(v) AS total FROM tix_t GROUP BY k') > 0 AS created;
SELECT decoupled.create_materialized_view('tix_lin',
    'SELECT id, v FROM tix_t WHERE v % 3 = 0') > 0 AS created;
SELECT decoupled.create_materialized_view('tix_g2',
    'SELECT v % 4 AS b, count(*) AS n FROM tix_t GROUP BY v % 4') > 0 AS created;
CREATE FUNCTION tix_time_index(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT to_regclass(format('decoupled_storage.c%s_cur_mz_ts_idx', o.lifetime_id)) IS NOT NULL
      FROM decoupled.objects o WHERE o.name = tix_time_index.name
$$;
SELECT tix_time_index('tix_t') AS table_has, tix_time_index('tix_lin') AS linear_has,
       tix_time_index('tix_g') AS grouped_has, tix_time_index('tix_g2') AS grouped2_has;
UPDATE tix_t SET v = v + 1 WHERE id % 7 = 0;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('tix_g') AND inc_caught_up('tix_g2') AS caught_up,
       decoupled.verify('tix_g') AS verified, decoupled.verify('tix_g2') AS verified2;
-- A view over it makes it, with the view, and both step as recomputed.
SELECT decoupled.create_materialized_view('tix_over',
    'SELECT n, count(*) AS groups FROM tix_g GROUP BY n') > 0 AS created;
SELECT tix_time_index('tix_g') AS grouped_has;
UPDATE tix_t SET k = k + 1 WHERE id % 11 = 0;
DELETE FROM tix_t WHERE id % 13 = 0;
INSERT INTO tix_t SELECT i, 42, i FROM generate_series(501, 520) i;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('tix_over') AS caught_up, decoupled.verify('tix_g') AS grouped_verified,
       decoupled.verify('tix_over') AS over_verified;
SELECT * FROM tix_over ORDER BY n;
-- So does a sink from it.
SELECT decoupled.create_sink('tix_sink', 'tix_g2', 'tix_sink_rows') > 0 AS created;
SELECT tix_time_index('tix_g2') AS grouped2_has;
-- Its input's time index gone, a view over a view still steps.
SELECT format('DROP INDEX decoupled_storage.c%s_cur_mz_ts_idx', lifetime_id) AS drop_index
  FROM decoupled.objects WHERE name = 'tix_g' \gset
:drop_index;
UPDATE tix_t SET v = v * 2 WHERE id % 5 = 0;
UPDATE tix_t SET k = 3 WHERE id % 17 = 0;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT inc_caught_up('tix_over') AS caught_up, decoupled.verify('tix_over') AS over_verified;
SELECT decoupled.drop('tix_sink');
DROP TABLE tix_sink_rows;
SELECT decoupled.drop(name) FROM decoupled.objects WHERE name LIKE 'tix\_%'
   AND kind = 'materialized view' ORDER BY lifetime_id DESC;
SELECT decoupled.unregister_table('tix_t');
DROP TABLE tix_t;
DROP FUNCTION tix_time_index(text);
-- A step reads its input's changes at t through the input's delta view,
-- whose rows inserted at t and retracted since are found by a range on
-- dead's valid_to index, closed on both sides: for a dead whose statistics
-- say it is empty (analysed between two compactions) while it holds many
-- pages, `valid_to > as_of()` alone was a third of its rows to the planner,
-- which scanned all of dead at every step of every view over the table.
CREATE TABLE dq_t (id int PRIMARY KEY, v int);
INSERT INTO dq_t SELECT i, i FROM generate_series(1, 20000) i;
SELECT decoupled.register_table('dq_t', retain_history => '1 hour') > 0 AS registered;
SELECT format('decoupled_storage.c%s_', lifetime_id) AS dq FROM decoupled.objects
 WHERE name = 'dq_t' \gset
SELECT format('ALTER TABLE %sdead SET (autovacuum_enabled = off)', :'dq') AS dq_off \gset
:dq_off;
SELECT format('ANALYZE %sdead', :'dq') AS dq_analyze \gset
:dq_analyze;
UPDATE dq_t SET v = v + 1;
SELECT decoupled.tick_tables() > 0 AS ticked;
UPDATE dq_t SET v = v + 1;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT c.reltuples <= 0 AS analysed_empty, pg_relation_size(c.oid) > 100 * 8192 AS holds_pages
  FROM pg_class c WHERE c.oid = (:'dq' || 'dead')::regclass;
SELECT upper - 1 AS dq_t FROM decoupled.frontiers WHERE name = 'dq_t' \gset
BEGIN;
SELECT set_config('decoupled.as_of', :'dq_t', true) IS NOT NULL AS at_last_change;
SELECT line AS delta_plan FROM inc_explain('SELECT * FROM ' || :'dq' || 'delta') AS line
 WHERE line ~ '_dead|valid_to';
SELECT format('SELECT count(*) AS changes, sum(mz_diff) AS net FROM %sdelta', :'dq') AS dq_count \gset
:dq_count;
ROLLBACK;
-- So do a sink's and a subscription's reads of its changes.
SELECT format('PREPARE dq_changes(bigint, bigint, bigint) AS %s',
              decoupled._changes_sql(lifetime_id, false)) AS dq_prepare
  FROM decoupled.objects WHERE name = 'dq_t' \gset
:dq_prepare;
SELECT line AS changes_plan
  FROM inc_explain(format('EXECUTE dq_changes(%s, %s, 0)', :dq_t, :dq_t + 1)) AS line
 WHERE line ~ '_dead|valid_to';
DEALLOCATE dq_changes;
SELECT decoupled.unregister_table('dq_t');
DROP TABLE dq_t;
-- Steps sort and hash with their own work_mem: decoupled.step_work_mem
-- (a reload changes it; -1 leaves work_mem).
SELECT setting, unit, context, min_val FROM pg_settings WHERE name = 'decoupled.step_work_mem';
-- Below work_mem's own minimum it is refused (a step could not set it).
ALTER SYSTEM SET decoupled.step_work_mem = '32kB';


-- A view created in the transaction that registers its input reads that
-- input as a collection, as it would after the commit: incremental.
BEGIN;
CREATE TABLE inc_tx (k int, v int);
SELECT decoupled.register_table('inc_tx') IS NOT NULL AS registered;
SELECT decoupled.create_materialized_view('inc_tx_v',
    'SELECT k, min(v) AS lo, count(*) AS n FROM inc_tx GROUP BY k') IS NOT NULL AS created;
COMMIT;
-- One that reads its input only in a subquery in an expression, or
-- through a recursive CTE, says so (neither reads a collection in FROM).
SELECT decoupled.create_materialized_view('inc_tx_n',
    'SELECT (SELECT count(*) FROM inc_tx) AS n') IS NOT NULL AS created;
SELECT decoupled.create_materialized_view('inc_tx_r',
    'WITH RECURSIVE r(k) AS (SELECT min(k) FROM inc_tx
                             UNION SELECT s.k FROM r JOIN inc_tx s ON s.k = r.k + 1)
     SELECT k FROM r') IS NOT NULL AS created;
-- WITH RECURSIVE without a recursive CTE is WITH.
SELECT decoupled.create_materialized_view('inc_tx_w',
    'WITH RECURSIVE c AS (SELECT k, v FROM inc_tx WHERE v > 0) SELECT k, v FROM c')
       IS NOT NULL AS created;
SELECT name, strategy, reason FROM decoupled.view_maintenance WHERE name LIKE 'inc\_tx\_%'
 ORDER BY name;
-- Each is maintained as the full query would be.
INSERT INTO inc_tx SELECT g % 3, g FROM generate_series(1, 12) g;
SELECT decoupled.tick_tables() > 0 AS ticked;
DELETE FROM inc_tx WHERE v % 4 = 0;
UPDATE inc_tx SET k = k + 1 WHERE v % 5 = 0;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT o.name, inc_caught_up(o.name) AND decoupled.verify(o.name) AS verified
  FROM decoupled.objects o WHERE o.name LIKE 'inc\_tx\_%' ORDER BY o.name;
-- A registration rolled back to a savepoint leaves the table an ordinary one.
BEGIN;
CREATE TABLE inc_undone (k int);
SAVEPOINT s;
SELECT decoupled.register_table('inc_undone') IS NOT NULL AS registered;
SELECT count(*) FROM inc_undone;
ROLLBACK TO s;
SELECT count(*) FROM inc_undone;
INSERT INTO inc_undone VALUES (1);
SELECT k FROM inc_undone;
COMMIT;
SELECT count(*) AS registered FROM decoupled.objects WHERE name = 'inc_undone';
DROP TABLE inc_undone;
SELECT decoupled.drop('inc_tx', cascade => true) IS NOT NULL AS dropped;
DROP TABLE inc_tx;

-- The NULL group's extreme, found again by an ordered probe when a
-- retraction reached it and no other group's was (an equality never
-- matches the NULL key: it came back NULL, and HAVING dropped the group).
CREATE TABLE inc_nk (g int, v int, w int);
INSERT INTO inc_nk VALUES (NULL, 50, 0), (NULL, 60, 0), (1, 50, 0), (1, 70, 0);
SELECT decoupled.register_table('inc_nk') IS NOT NULL AS registered;
SELECT decoupled.create_materialized_view('inc_nk_max', 'SELECT g, max(v) AS hi FROM inc_nk GROUP BY g')
       IS NOT NULL AS created;
SELECT decoupled.create_materialized_view('inc_nk_having',
    'SELECT g, min(v) AS lo, max(v) AS hi, count(*) AS n FROM inc_nk GROUP BY g HAVING max(v) > 40')
       IS NOT NULL AS created;
SELECT name, strategy, method FROM decoupled.view_maintenance
 WHERE name LIKE 'inc\_nk\_%' ORDER BY name;
DELETE FROM inc_nk WHERE v = 60;                  -- the NULL group's max retracted
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT inc_caught_up('inc_nk_max') AND inc_caught_up('inc_nk_having') AS caught_up;
SELECT * FROM inc_nk_max ORDER BY g NULLS FIRST;
SELECT * FROM inc_nk_having ORDER BY g NULLS FIRST;
UPDATE inc_nk SET w = w + 1 WHERE g IS NULL;      -- its top row rewritten, same value
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT inc_caught_up('inc_nk_max') AND inc_caught_up('inc_nk_having') AS caught_up;
SELECT decoupled.verify('inc_nk_max') AS max_verified, decoupled.verify('inc_nk_having') AS having_verified;
SELECT * FROM inc_nk_having ORDER BY g NULLS FIRST;
SELECT decoupled.drop('inc_nk', cascade => true) IS NOT NULL AS dropped;
DROP TABLE inc_nk;

-- Join keys of any width: an arrangement of a variable-length key is a hash
-- index (a btree entry holds about 2.7 kB), so a 4 kB incompressible text
-- written into the input never stops its ticks, and the join view over it
-- stays right; a mixed key keeps a btree on its fixed-length columns.
CREATE TABLE inc_wa (id int PRIMARY KEY, s text, v int);
CREATE TABLE inc_wb (s text, k int, w int);
SELECT decoupled.register_table('inc_wa') > 0 AS registered, decoupled.register_table('inc_wb') > 0 AS registered;
INSERT INTO inc_wa VALUES (1, 'x', 1);
INSERT INTO inc_wb VALUES ('x', 1, 5);
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT decoupled.create_materialized_view('inc_wide',
    'SELECT a.id, a.v * b.w AS p FROM inc_wa a JOIN inc_wb b ON a.s = b.s') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_wide_mixed',
    'SELECT a.id, b.w FROM inc_wa a JOIN inc_wb b ON a.s = b.s AND a.id = b.k') > 0 AS created;
-- A view grouped by a wide key finds its groups' rows through a hash
-- index too (one that keeps counts and sums keeps its groups in a btree:
-- a group key wider than 2.7 kB stalls it, and only it).
SELECT decoupled.create_materialized_view('inc_wide_groups',
    'SELECT s, count(DISTINCT v) AS n FROM inc_wa GROUP BY s') > 0 AS created;
SELECT strategy, method FROM decoupled.view_maintenance WHERE name = 'inc_wide_groups';
SELECT regexp_replace(pg_get_indexdef(x.indexrelid), '^CREATE INDEX \S+ ON decoupled_storage\.c[0-9]+_', '')
           AS arrangement
  FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
 WHERE c.relname ~ ('^c(' || (SELECT string_agg(lifetime_id::text, '|') FROM decoupled.objects
                               WHERE name IN ('inc_wa', 'inc_wb')) || ')_a')
 ORDER BY 1;
INSERT INTO inc_wa SELECT 2, string_agg(md5(g::text), ''), 2 FROM generate_series(1, 130) g;
INSERT INTO inc_wb SELECT string_agg(md5(g::text), ''), 2, 3 FROM generate_series(1, 130) g;
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT name, status FROM decoupled.object_statuses WHERE name IN ('inc_wa', 'inc_wb') ORDER BY name;
SELECT inc_caught_up('inc_wide') AND inc_caught_up('inc_wide_mixed')
       AND inc_caught_up('inc_wide_groups') AS caught_up;
SELECT decoupled.verify('inc_wide') AS verified, decoupled.verify('inc_wide_mixed') AS verified,
       decoupled.verify('inc_wide_groups') AS verified;
SELECT length(s), n FROM inc_wide_groups ORDER BY 1;
SELECT * FROM inc_wide ORDER BY id;
SELECT decoupled.drop('inc_wa', cascade => true) IS NOT NULL AS dropped,
       decoupled.drop('inc_wb') IS NOT NULL AS dropped;
DROP TABLE inc_wa, inc_wb;

-- Only of types whose values all hash: a key of a composite holding money
-- (no hash function) gets no hash index — on the input's storage it would
-- fail the input's first write of such a value, stopping its ticks for its
-- owner whoever made the view — and the views still follow.
CREATE TYPE inc_pricey AS (x int, m money);
CREATE TABLE inc_pc (id int PRIMARY KEY, c inc_pricey);
SELECT decoupled.register_table('inc_pc') > 0 AS registered;
SELECT decoupled.create_materialized_view('inc_pc_groups',
    'SELECT c, count(*) AS n FROM inc_pc GROUP BY c') > 0 AS created;
SELECT decoupled.create_materialized_view('inc_pc_pairs',
    'SELECT a.id, b.id AS other FROM inc_pc a JOIN inc_pc b ON a.c = b.c') > 0 AS created;
SELECT count(*) AS hash_indexes
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam
  JOIN pg_class t ON t.oid = x.indrelid
 WHERE am.amname = 'hash' AND t.relname ~ ('^c(' || (SELECT string_agg(lifetime_id::text, '|')
          FROM decoupled.objects WHERE name IN ('inc_pc', 'inc_pc_groups', 'inc_pc_pairs')) || ')_');
INSERT INTO inc_pc VALUES (1, ROW(1, 5)::inc_pricey), (2, ROW(1, 5)::inc_pricey), (3, NULL);
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT name, status FROM decoupled.object_statuses WHERE name = 'inc_pc';
SELECT inc_caught_up('inc_pc_groups') AND inc_caught_up('inc_pc_pairs') AS caught_up;
SELECT decoupled.verify('inc_pc_groups') AS verified, decoupled.verify('inc_pc_pairs') AS verified;
SELECT * FROM inc_pc_groups ORDER BY n;
SELECT decoupled.drop('inc_pc', cascade => true) IS NOT NULL AS dropped;
DROP TABLE inc_pc;

-- A key column whose name holds a single quote: the step's filter over its
-- touched groups reads them from the view's kept state (no literal), and
-- the quote inside the quoted name is not taken for one.
CREATE TABLE inc_quote (id int PRIMARY KEY, "a'b" text, z int);
INSERT INTO inc_quote SELECT i, 'x' || (i % 3), i FROM generate_series(1, 30) i;
SELECT decoupled.register_table('inc_quote') > 0 AS registered;
SELECT decoupled.create_materialized_view('inc_quote_sums',
    'SELECT "a''b", count(*) AS n, sum(z) AS total FROM inc_quote GROUP BY 1') > 0 AS created;
SELECT strategy FROM decoupled.view_maintenance WHERE name = 'inc_quote_sums';
UPDATE inc_quote SET z = z + 1 WHERE id <= 10;
DELETE FROM inc_quote WHERE id % 3 = 0;
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT inc_caught_up('inc_quote_sums') AND decoupled.verify('inc_quote_sums') AS verified;
SELECT name, status FROM decoupled.object_statuses WHERE name = 'inc_quote_sums';
SELECT * FROM inc_quote_sums ORDER BY 1;
SELECT decoupled.drop('inc_quote', cascade => true) IS NOT NULL AS dropped;
DROP TABLE inc_quote;

SELECT decoupled.unregister_table('inc_t'), decoupled.unregister_table('inc_u');
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
DROP TABLE inc_t, inc_u, inc_failures;
-- Once the unregistered table's history is gone; verify()'s scratch table
-- of this session still has a column of the type.
SET client_min_messages = warning;
DROP TYPE inc_level CASCADE;
DROP TYPE inc_pricey CASCADE;
DROP DOMAIN pa_label CASCADE;
RESET client_min_messages;
DROP PROCEDURE inc_workload(int);
DROP FUNCTION inc_verify_all(int);
DROP FUNCTION inc_caught_up(text);
DROP FUNCTION inc_explain(text);
