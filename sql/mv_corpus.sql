-- The differential corpus (C5.3, C13): materialized views of many query
-- shapes over three registered tables, maintained over a seeded random
-- workload and compared with decoupled.verify() -- a recomputation from the
-- inputs -- after every step.  Whatever strategy maintains a view, its
-- history must equal the recomputation at every time.
--
-- The tables have no keys: NULLs in join and group keys, duplicate rows.
-- Every shape's result is deterministic (ORDER BY covers what an ordered
-- aggregate, DISTINCT ON or LIMIT keeps; float8 values are multiples of
-- 1/4, so their sums are exact in any order); only the workload is random.
--
-- Everything above the line "-- end of corpus setup" is also run by
-- t/012_mv_corpus_seeds.pl, which calls corpus_run() with more seeds.
--
-- Cost: 96 views x 120 steps is 11,520 view steps and as many verify()
-- calls; at today's fixed cost of each (a recomputation step or a verify()
-- takes several milliseconds even over a few dozen rows) this suite takes
-- about 3 to 5 minutes on 2 cores.
\set SHOW_CONTEXT never
CREATE TABLE ca (k int, g int, v int, f float8, s text);
CREATE TABLE cb (k int, w int);
CREATE TABLE cc (g int, name text, lim int);

-- The starting state, the same for every seed: NULL keys, duplicate rows,
-- a cc group (6) no ca row has, a cb key (NULL) that makes NOT IN empty.
CREATE FUNCTION corpus_fill() RETURNS void LANGUAGE sql AS $$
    DELETE FROM ca;
    DELETE FROM cb;
    DELETE FROM cc;
    INSERT INTO ca
    SELECT CASE WHEN i % 7 = 0 THEN NULL ELSE i % 8 + 1 END,
           CASE WHEN i % 9 = 0 THEN NULL ELSE i % 5 + 1 END,
           CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 37) % 100 END,
           ((i * 13) % 80) / 4.0,
           CASE WHEN i % 6 = 0 THEN NULL ELSE chr(97 + i % 4) END
      FROM generate_series(1, 24) i, generate_series(1, CASE WHEN i <= 4 THEN 2 ELSE 1 END);
    INSERT INTO cb
    SELECT CASE WHEN i % 5 = 0 THEN NULL ELSE i % 8 + 1 END, (i * 7) % 31
      FROM generate_series(1, 12) i, generate_series(1, CASE WHEN i <= 2 THEN 2 ELSE 1 END);
    INSERT INTO cc SELECT g, 'n' || g, (g * 17) % 90 FROM generate_series(1, 6) g;
    INSERT INTO cc VALUES (NULL, 'nobody', 50);
$$;
SELECT corpus_fill();
SELECT decoupled.register_table('ca') > 0 AS registered,
       decoupled.register_table('cb') > 0 AS registered,
       decoupled.register_table('cc') > 0 AS registered;
SELECT decoupled.tick_tables() > 0 AS ticked;

-- Ordinary views, for a materialized view over views over views.
CREATE VIEW corpus_big AS SELECT k, g, v FROM ca WHERE v >= 30;
CREATE VIEW corpus_big_named AS
    SELECT b.k, b.v, c.name FROM corpus_big b JOIN cc c ON c.g = b.g;

-- The shapes, created in name order (views over views after their inputs).
-- `recompute`: the shape uses a construct C13.2 does not list as
-- incremental (so expect recomputation); the rest should be incremental.
CREATE TABLE corpus_shapes (name text PRIMARY KEY, recompute boolean NOT NULL DEFAULT false,
                            query text NOT NULL);
INSERT INTO corpus_shapes (name, query) VALUES
-- selection, projection, deterministic expressions
('mv01_select', 'SELECT k, g, v FROM ca WHERE v >= 50'),
('mv02_project_dups', 'SELECT g, s FROM ca'),
('mv03_expressions', 'SELECT k, v * 2 + coalesce(g, -1) AS e, upper(s) AS us,
    CASE WHEN f >= 10 THEN ''hi'' ELSE ''lo'' END AS band, f * 4 AS f4
  FROM ca WHERE s IS DISTINCT FROM ''d'''),
('mv04_null_keys', 'SELECT k, g, s FROM ca WHERE k IS NULL OR g IS NULL'),
('mv05_numeric_expr', 'SELECT k, round(f::numeric / 3, 3) AS r, v::numeric / 7 AS q,
    greatest(v, 20) AS gr FROM ca WHERE v % 2 = 0'),
('mv06_identity', 'SELECT * FROM cb'),
-- inner joins
('mv07_join', 'SELECT a.k, a.v, b.w FROM ca a JOIN cb b ON b.k = a.k'),
('mv08_join3', 'SELECT a.k, a.g, b.w, c.name FROM ca a JOIN cb b ON b.k = a.k JOIN cc c ON c.g = a.g'),
('mv09_self_join', 'SELECT a.g, a.k AS k1, b.k AS k2, a.v + b.v AS vv
  FROM ca a JOIN ca b ON a.g = b.g AND a.k < b.k'),
('mv10_theta_join', 'SELECT a.k, a.v, c.name FROM ca a JOIN cc c ON a.v BETWEEN c.lim AND c.lim + 20'),
('mv11_join_using', 'SELECT * FROM ca JOIN cb USING (k) WHERE w > 5'),
('mv12_self_join3', 'SELECT x.k, x.w AS w1, y.w AS w2, z.w AS w3
  FROM cb x JOIN cb y ON y.k = x.k JOIN cb z ON z.k = y.k AND z.w > x.w'),
('mv13_null_matching_join', 'SELECT a.k, a.v, b.w FROM ca a JOIN cb b ON a.k IS NOT DISTINCT FROM b.k'),
-- outer joins
('mv14_left', 'SELECT a.k, a.v, b.w FROM ca a LEFT JOIN cb b ON b.k = a.k'),
('mv15_right', 'SELECT a.v, b.k, b.w FROM ca a RIGHT JOIN cb b ON b.k = a.k'),
('mv16_full', 'SELECT a.k AS ak, a.v, b.k AS bk, b.w FROM ca a FULL JOIN cb b ON b.k = a.k'),
('mv17_left_on_filter', 'SELECT c.g, c.name, a.v FROM cc c LEFT JOIN ca a ON a.g = c.g AND a.v >= 60'),
('mv18_left_anti', 'SELECT c.g, c.name FROM cc c LEFT JOIN ca a ON a.g = c.g WHERE a.g IS NULL'),
('mv19_full_grouped', 'SELECT coalesce(a.k, b.k) AS k, count(a.v) AS na, count(b.w) AS nb, count(*) AS n
  FROM ca a FULL JOIN cb b ON a.k = b.k GROUP BY 1'),
('mv20_left_chain', 'SELECT a.k, a.g, b.w, c.name
  FROM ca a LEFT JOIN cb b ON b.k = a.k LEFT JOIN cc c ON c.g = a.g'),
('mv21_inner_then_left', 'SELECT c.name, a.v, b.w
  FROM cc c JOIN ca a ON a.g = c.g LEFT JOIN cb b ON b.k = a.k AND b.w < a.v'),
('mv22_full_over_left', 'SELECT b.k AS bk, b.w, a.k AS ak, a.v, c.name
  FROM cb b FULL JOIN (ca a LEFT JOIN cc c ON c.g = a.g) ON b.k = a.k'),
-- GROUP BY and aggregates
('mv23_group_basic', 'SELECT g, count(*) AS n, count(v) AS nv, sum(v) AS sv, avg(v) AS av
  FROM ca GROUP BY g'),
('mv24_group_two_keys', 'SELECT g, k, count(*) AS n, sum(v) AS sv FROM ca GROUP BY g, k'),
('mv25_min_max', 'SELECT g, min(v) AS lo, max(v) AS hi, min(s) AS smin, max(s) AS smax, max(f) AS fmax
  FROM ca GROUP BY g'),
('mv26_float_sum_avg', 'SELECT k, sum(f) AS sf, avg(f) AS af FROM ca GROUP BY k'),
('mv27_count_distinct', 'SELECT g, count(DISTINCT v) AS dv, count(DISTINCT s) AS ds, sum(DISTINCT v) AS sdv
  FROM ca GROUP BY g'),
('mv28_bool_agg', 'SELECT g, bool_and(v >= 20) AS all_big, bool_or(s IS NULL) AS any_null,
    every(k IS NOT NULL) AS all_keyed FROM ca GROUP BY g'),
('mv29_string_agg', 'SELECT g, string_agg(s, '','' ORDER BY s) AS ss,
    string_agg(DISTINCT s, '''' ORDER BY s) AS ds FROM ca GROUP BY g'),
('mv30_array_agg', 'SELECT k, array_agg(v ORDER BY v DESC NULLS LAST) AS vs,
    array_agg(DISTINCT g ORDER BY g) AS gs FROM ca GROUP BY k'),
('mv31_global_agg', 'SELECT count(*) AS n, sum(v) AS sv, min(f) AS fmin, max(f) AS fmax, avg(v) AS av FROM ca'),
('mv32_global_agg_often_empty', 'SELECT count(*) AS n, sum(w) AS sw, max(w) AS mw FROM cb WHERE w > 25'),
('mv33_having_count', 'SELECT g, count(*) AS n FROM ca GROUP BY g HAVING count(*) >= 6'),
('mv34_having_sum_min', 'SELECT k, sum(v) AS sv, min(v) AS lo FROM ca GROUP BY k
  HAVING sum(v) > 150 AND min(v) < 40'),
('mv35_group_expressions', 'SELECT v % 3 AS r, f >= 10 AS big, count(*) AS n, sum(f) AS sf
  FROM ca GROUP BY 1, 2'),
('mv36_join_group', 'SELECT c.name, count(*) AS n, sum(a.v) AS sv, max(b.w) AS mw
  FROM ca a JOIN cc c ON c.g = a.g JOIN cb b ON b.k = a.k GROUP BY c.name'),
('mv37_left_join_group', 'SELECT c.g, count(a.k) AS n, coalesce(sum(a.v), 0) AS sv
  FROM cc c LEFT JOIN ca a ON a.g = c.g GROUP BY c.g'),
('mv38_rollup', 'SELECT g, k, grouping(g, k) AS level, count(*) AS n, sum(v) AS sv
  FROM ca GROUP BY ROLLUP (g, k)'),
('mv39_filter_agg', 'SELECT g, count(*) FILTER (WHERE v > 50) AS n_big,
    sum(v) FILTER (WHERE s IS NULL) AS sv_unnamed FROM ca GROUP BY g'),
('mv40_numeric_stats', 'SELECT g, var_samp(v) AS var, stddev_pop(v) AS sd FROM ca GROUP BY g'),
-- DISTINCT
('mv41_distinct', 'SELECT DISTINCT g, k FROM ca'),
('mv42_distinct_nulls', 'SELECT DISTINCT s FROM ca'),
('mv43_distinct_on', 'SELECT DISTINCT ON (g) g, v FROM ca ORDER BY g, v DESC NULLS LAST'),
('mv44_count_of_distinct', 'SELECT count(*) AS keys, count(k) AS non_null FROM (SELECT DISTINCT k FROM cb) d'),
-- set operations
('mv45_union_all', 'SELECT k, ''a'' AS src FROM ca UNION ALL SELECT k, ''b'' FROM cb'),
('mv46_union', 'SELECT k, g AS x FROM ca UNION SELECT k, w FROM cb'),
('mv47_except_all', 'SELECT k FROM ca EXCEPT ALL SELECT k FROM cb'),
('mv48_intersect', 'SELECT k FROM ca INTERSECT SELECT k FROM cb'),
('mv49_union_all_grouped', 'SELECT k, count(*) AS n
  FROM (SELECT k FROM ca UNION ALL SELECT k FROM cb) u GROUP BY k'),
-- subqueries in FROM
('mv50_subquery_from', 'SELECT g, total FROM (SELECT g, sum(v) AS total FROM ca GROUP BY g) s
  WHERE total > 100'),
('mv51_aggregate_of_aggregate', 'SELECT max(n) AS most, min(n) AS least, count(*) AS groups
  FROM (SELECT k, count(*) AS n FROM ca GROUP BY k) s'),
('mv52_join_of_subqueries', 'SELECT a.k, a.n, b.sw
  FROM (SELECT k, count(*) AS n FROM ca GROUP BY k) a
  JOIN (SELECT k, sum(w) AS sw FROM cb GROUP BY k) b ON b.k = a.k'),
-- EXISTS / IN / NOT EXISTS / NOT IN and other sublinks
('mv53_exists', 'SELECT k, v FROM ca WHERE EXISTS (SELECT 1 FROM cb WHERE cb.k = ca.k)'),
('mv54_not_exists', 'SELECT k, g, v FROM ca
  WHERE NOT EXISTS (SELECT 1 FROM cb WHERE cb.k = ca.k AND cb.w > 10)'),
('mv55_in', 'SELECT k, v FROM ca WHERE k IN (SELECT k FROM cb WHERE w >= 10)'),
('mv56_not_in_with_nulls', 'SELECT k, v FROM ca WHERE k NOT IN (SELECT k FROM cb)'),
('mv57_not_in', 'SELECT g, name FROM cc
  WHERE g NOT IN (SELECT g FROM ca WHERE g IS NOT NULL AND v > 40)'),
('mv58_scalar_subquery', 'SELECT k, v, (SELECT count(*) FROM cb WHERE cb.k = ca.k) AS nb FROM ca'),
('mv59_scalar_in_where', 'SELECT k, v FROM ca WHERE v > (SELECT avg(v) FROM ca)'),
('mv60_all', 'SELECT k, v FROM ca WHERE v > ALL (SELECT w FROM cb WHERE cb.k = ca.k)'),
-- non-recursive CTEs
('mv61_cte', 'WITH t AS (SELECT g, sum(v) AS sv FROM ca GROUP BY g)
  SELECT t.g, t.sv, c.name FROM t LEFT JOIN cc c ON c.g = t.g'),
('mv62_cte_twice', 'WITH t AS (SELECT k, count(*) AS n FROM cb GROUP BY k)
  SELECT a.k AS k1, b.k AS k2, a.n FROM t a JOIN t b ON a.n = b.n AND a.k < b.k'),
('mv63_cte_materialized', 'WITH t AS MATERIALIZED (SELECT k, v FROM ca WHERE v < 50)
  SELECT k, count(*) AS n, max(v) AS top FROM t GROUP BY k'),
-- views over views: ordinary views, and materialized views over materialized views
('mv64_over_views', 'SELECT name, count(*) AS n, sum(v) AS sv FROM corpus_big_named GROUP BY name'),
('mv65_over_mv', 'SELECT sum(n) AS n, sum(sv) AS sv, count(*) AS groups FROM mv23_group_basic'),
('mv66_mv_full_join_table', 'SELECT m.g, m.n, c.name FROM mv23_group_basic m FULL JOIN cc c ON c.g = m.g'),
('mv67_over_outer_join_mv', 'SELECT k, count(*) AS n, count(w) AS matched FROM mv14_left GROUP BY k'),
('mv68_mv_over_mv_over_mv', 'SELECT n * 2 AS n2, groups FROM mv65_over_mv WHERE n > 0'),
('mv69_distinct_over_mv', 'SELECT DISTINCT k FROM mv07_join'),
('mv70_exists_over_mv', 'SELECT c.g, c.name FROM cc c
  WHERE EXISTS (SELECT 1 FROM mv33_having_count h WHERE h.g = c.g)'),
-- linear subqueries and CTEs, and more outer joins and subqueries
('mv79_subquery_join', 'SELECT s.k, s.vv, b.w FROM (SELECT k, v * 2 AS vv FROM ca WHERE v > 20) s
  JOIN cb b ON b.k = s.k'),
('mv80_ctes_joined', 'WITH big AS (SELECT k, g, v FROM ca WHERE v >= 40), named AS (SELECT g, name FROM cc)
  SELECT big.k, big.v, named.name FROM big JOIN named ON named.g = big.g'),
('mv81_grouped_subquery_join', 'SELECT s.g, count(*) AS n, sum(s.v) AS sv, max(s.w) AS mw
  FROM (SELECT a.g, a.v, b.w FROM ca a JOIN cb b ON b.k = a.k) s GROUP BY s.g'),
('mv82_nested_subqueries', 'SELECT x.k, x.w FROM (SELECT t.k, t.w FROM (SELECT k, w FROM cb WHERE w > 3) t
  WHERE t.k IS NOT NULL ORDER BY t.w) x'),
('mv83_left_and_not_exists', 'SELECT a.k, a.v, b.w FROM ca a LEFT JOIN cb b ON b.k = a.k
  WHERE NOT EXISTS (SELECT 1 FROM cb c WHERE c.k = a.k AND c.w > 25)'),
('mv84_self_left_join', 'SELECT a.k, a.v, b.v AS v2 FROM ca a LEFT JOIN ca b ON b.k = a.k AND b.v > a.v + 30'),
('mv85_distinct_over_left', 'SELECT DISTINCT a.k, b.w FROM ca a LEFT JOIN cb b ON b.k = a.k'),
('mv86_cte_in', 'WITH wide AS (SELECT k FROM cb WHERE w >= 10)
  SELECT g, v FROM ca WHERE k IN (SELECT k FROM wide) AND v < 70'),
-- stars: every input joins one root input, each on its own key
('mv87_star_exists', 'SELECT a.k, a.v, c.name FROM ca a LEFT JOIN cc c ON c.g = a.g
  WHERE EXISTS (SELECT 1 FROM cb WHERE cb.k = a.k AND cb.w > 5)'),
('mv88_star_right_left', 'SELECT c.name, a.v, b.w FROM cb b RIGHT JOIN ca a ON b.k = a.k
  LEFT JOIN cc c ON c.g = a.g AND c.lim > a.v'),
('mv89_star_comma', 'SELECT a.k, a.v, b.w, c.name FROM ca a, cb b, cc c
  WHERE b.k = a.k AND c.g = a.g AND NOT EXISTS (SELECT 1 FROM cb d WHERE d.k = a.g)'),
('mv90_selection_over_grouped_cte', 'WITH totals AS (SELECT k, count(*) AS n, sum(v) AS sv FROM ca GROUP BY k)
  SELECT k, n, sv * 2 AS sv2 FROM totals WHERE n > 1'),
-- kept sums over a keyed outer join: null-extended rows coming and going
('mv91_right_grouped_extremes', 'SELECT b.k, count(a.v) AS n, min(a.v) AS lo, max(a.v) AS hi
  FROM ca a RIGHT JOIN cb b ON b.k = a.k GROUP BY b.k'),
('mv92_left_by_nullable_key', 'SELECT a.g, count(*) AS n, sum(c.lim) AS sl
  FROM cc c LEFT JOIN ca a ON a.g = c.g GROUP BY a.g'),
('mv93_self_left', 'SELECT a.k, count(b.v) AS n, sum(b.v) AS s
  FROM ca a LEFT JOIN ca b ON b.g = a.k GROUP BY a.k'),
('mv94_left_where_nullable', 'SELECT c.g, count(*) AS n, max(a.s) AS top
  FROM cc c LEFT JOIN ca a ON a.g = c.g WHERE a.v IS NULL OR a.v > 50 GROUP BY c.g'),
('mv95_full_having', 'SELECT coalesce(a.k, b.k) AS k, sum(a.v) AS sv, sum(b.w) AS sw
  FROM ca a FULL JOIN cb b ON a.k = b.k GROUP BY 1 HAVING count(*) > 1'),
('mv96_selection_over_left_group', 'SELECT g, n FROM (SELECT c.g, count(a.k) AS n, sum(a.v) AS sv
  FROM cc c LEFT JOIN ca a ON a.g = c.g GROUP BY c.g) s WHERE n <> 1 OR sv IS NULL'),
-- WITH queries read by the branches of a set operation
('mv97_cte_union_all', 'WITH c AS (SELECT k, v FROM ca WHERE v > 30)
  SELECT k, v FROM c UNION ALL SELECT k, w FROM cb WHERE w < 10'),
('mv98_cte_union_both', 'WITH c AS (SELECT k, g FROM ca)
  SELECT k FROM c WHERE g = 1 UNION SELECT k FROM c WHERE g = 2');
-- what stays recomputation
INSERT INTO corpus_shapes (name, recompute, query) VALUES
('mv71_window_rank', true, 'SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v) AS rk FROM ca'),
('mv72_window_running_sum', true, 'SELECT k, v, sum(v) OVER (PARTITION BY k ORDER BY v) AS running,
    count(*) OVER (PARTITION BY k) AS n FROM ca'),
('mv73_top_n', true, 'SELECT k, v FROM ca ORDER BY v DESC NULLS LAST, k NULLS LAST LIMIT 5'),
('mv74_top_groups_offset', true, 'SELECT g, sum(v) AS sv FROM ca GROUP BY g
  ORDER BY 2 DESC NULLS LAST, 1 NULLS LAST LIMIT 3 OFFSET 1'),
('mv75_recursive_cte', true, 'WITH RECURSIVE r(x) AS (SELECT 1 UNION SELECT b.w % 8 + 1 FROM r JOIN cb b ON b.k = r.x)
  SELECT x FROM r'),
('mv76_lateral_top_n', true, 'SELECT c.g, t.v FROM cc c,
    LATERAL (SELECT a.v FROM ca a WHERE a.g = c.g ORDER BY a.v DESC NULLS LAST LIMIT 2) t'),
('mv77_set_returning_function', true, 'SELECT k, x FROM cb, generate_series(1, least(w, 3)) x'),
('mv78_values_left_join', true, 'SELECT v.label, count(a.k) AS n
  FROM (VALUES (1, ''one''), (2, ''two''), (7, ''seven'')) v(g, label)
  LEFT JOIN ca a ON a.g = v.g GROUP BY v.label');

-- Unlisted constructs among the shapes above: grouping sets, DISTINCT ON,
-- scalar and ALL sublinks.
UPDATE corpus_shapes SET recompute = true
 WHERE name IN ('mv38_rollup', 'mv43_distinct_on',
                'mv58_scalar_subquery', 'mv59_scalar_in_where', 'mv60_all');
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT name, query FROM corpus_shapes ORDER BY name LOOP
        PERFORM decoupled.create_materialized_view(r.name, r.query);
    END LOOP;
END
$$;

-- One step of the workload: one to four random statements.  Updates move
-- rows between groups and join partners, deletes empty groups, inserts add
-- duplicates and NULL keys; a statement that nets to nothing happens too.
-- The tables stay small: past a size, inserts turn into deletes.
CREATE FUNCTION corpus_key(n int, null_share float8) RETURNS int LANGUAGE sql AS $$
    SELECT CASE WHEN random() < null_share THEN NULL ELSE 1 + floor(random() * n)::int END
$$;
CREATE FUNCTION corpus_step() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r  float8;
    d  int;     -- a change of a value
    m  int;     -- a residue selecting some rows
    k1 int;     -- keys drawn once per statement (NULL now and then)
    k2 int;
    g1 int;
    g2 int;
BEGIN
    FOR i IN 1 .. 1 + floor(random() * 4)::int LOOP
        r := random();
        d := floor(random() * 41)::int - 20;
        m := floor(random() * 7)::int;
        k1 := corpus_key(8, 0.1);
        k2 := corpus_key(8, 0.2);
        g1 := corpus_key(5, 0.1);
        g2 := corpus_key(7, 0.15);
        IF r < 0.22 THEN
            IF (SELECT count(*) FROM ca) > 32 THEN
                DELETE FROM ca WHERE k IS NOT DISTINCT FROM k1;
            ELSE
                INSERT INTO ca
                SELECT corpus_key(8, 0.1), corpus_key(5, 0.1),
                       CASE WHEN random() < 0.05 THEN NULL ELSE floor(random() * 100)::int END,
                       floor(random() * 80) / 4,
                       CASE WHEN random() < 0.15 THEN NULL ELSE chr(97 + floor(random() * 5)::int) END
                  FROM generate_series(1, 1 + m % 3);
            END IF;
        ELSIF r < 0.28 THEN   -- duplicates of existing rows
            INSERT INTO ca SELECT * FROM ca WHERE k IS NOT DISTINCT FROM k1 AND v < 50;
        ELSIF r < 0.40 THEN   -- rows move between groups (to and from NULL)
            UPDATE ca SET g = g2 % 6 WHERE k IS NOT DISTINCT FROM k1;
        ELSIF r < 0.50 THEN
            UPDATE ca SET v = v + d, f = f + d / 4.0 WHERE g IS NOT DISTINCT FROM g1;
        ELSIF r < 0.56 THEN   -- rows move between join partners
            UPDATE ca SET k = k2, s = nullif(s, 'a') WHERE v % 7 = m;
        ELSIF r < 0.62 THEN
            DELETE FROM ca WHERE k IS NOT DISTINCT FROM k1 AND v >= 15 * m;
        ELSIF r < 0.65 THEN   -- a group empties
            DELETE FROM ca WHERE g IS NOT DISTINCT FROM g1;
        ELSIF r < 0.75 THEN
            IF (SELECT count(*) FROM cb) > 18 THEN
                DELETE FROM cb WHERE k IS NOT DISTINCT FROM k2;
            ELSE
                INSERT INTO cb SELECT corpus_key(8, 0.12), floor(random() * 31)::int
                  FROM generate_series(1, 1 + m % 2);
            END IF;
        ELSIF r < 0.82 THEN
            UPDATE cb SET k = k2, w = w + d WHERE w % 5 = m % 5;
        ELSIF r < 0.87 THEN
            DELETE FROM cb WHERE k IS NOT DISTINCT FROM k2;
        ELSIF r < 0.91 THEN
            UPDATE cc SET g = g2, lim = lim + d WHERE name = 'n' || (m % 6 + 1);
        ELSIF r < 0.94 THEN
            IF (SELECT count(*) FROM cc) > 10 THEN
                DELETE FROM cc WHERE g IS NOT DISTINCT FROM g2;
            ELSE
                INSERT INTO cc VALUES (g2, 'n' || (m % 6 + 1), 50 + d);
            END IF;
        ELSIF r < 0.97 THEN   -- changes that net to nothing
            UPDATE ca SET v = v WHERE g IS NOT DISTINCT FROM g1;
        ELSE                  -- many changes at one time
            UPDATE ca SET g = CASE WHEN g IS NULL THEN 1 ELSE g % 5 + 1 END, v = v + d;
        END IF;
    END LOOP;
END
$$;

-- Failures: a view that differs from its recomputation after a step (error
-- NULL), or that raised or did not catch up (error set).
CREATE TABLE corpus_failures (seed bigint, step int, view text, error text);
-- Per step, how many views verified.
CREATE TABLE corpus_steps (seed bigint, step int, verified int);

-- Reset the tables to corpus_fill()'s state, then run `steps` random steps
-- for `seed`; after the reset and after each step: tick, commit, wait until
-- every view caught up with the tick, verify every view.  A view that does
-- not catch up within 60 s is not waited for again (but still counted).
CREATE PROCEDURE corpus_run(seed bigint, steps int) LANGUAGE plpgsql AS $$
DECLARE
    v_ts    bigint;
    v_view  text;
    v_phase text;
    v_stuck text[] := '{}';
    v_ok    int;
BEGIN
    PERFORM setseed((seed % 1999999 - 999999) / 1000000.0);
    FOR step IN 0 .. steps LOOP
        IF step = 0 THEN
            PERFORM corpus_fill();
        ELSE
            PERFORM corpus_step();
        END IF;
        PERFORM decoupled.tick_tables();
        COMMIT;
        -- Now and then compaction follows the views' progress: reads of
        -- history stay small, and views keep verifying across it.
        IF step % 10 = 0 THEN
            PERFORM decoupled.publish_bounds();
            PERFORM decoupled.apply_compaction();
            COMMIT;
        END IF;
        SELECT max(upper) - 1 INTO v_ts FROM decoupled.frontiers WHERE name IN ('ca', 'cb', 'cc');
        v_ok := 0;
        FOR v_view IN SELECT name FROM corpus_shapes ORDER BY name LOOP
            BEGIN
                v_phase := 'wait';
                IF v_view = ANY (v_stuck) THEN
                    RAISE EXCEPTION 'did not catch up at an earlier step';
                END IF;
                PERFORM decoupled.wait_for_upper(v_view, v_ts, '60s');
                v_phase := 'verify';
                IF decoupled.verify(v_view) THEN
                    v_ok := v_ok + 1;
                ELSE
                    INSERT INTO corpus_failures VALUES (seed, step, v_view, NULL);
                END IF;
            EXCEPTION WHEN OTHERS THEN
                INSERT INTO corpus_failures VALUES (seed, step, v_view, SQLERRM);
                IF v_phase = 'wait' AND NOT v_view = ANY (v_stuck) THEN
                    v_stuck := v_stuck || v_view;
                END IF;
            END;
        END LOOP;
        INSERT INTO corpus_steps VALUES (seed, step, v_ok);
        COMMIT;
    END LOOP;
END
$$;
-- end of corpus setup

-- The corpus (other suites' views, if any are left, are not listed).
SELECT name FROM decoupled.objects
 WHERE kind = 'materialized view' AND name IN (SELECT name FROM corpus_shapes) ORDER BY 1;
SELECT count(*) AS shapes, count(*) FILTER (WHERE recompute) AS left_to_recompute
  FROM corpus_shapes;
-- How each shape is maintained, and why not incrementally.
SELECT s.name, m.method, m.reason
  FROM corpus_shapes s JOIN decoupled.view_maintenance m USING (name) ORDER BY 1;

-- 120 steps for one fixed seed (t/012 runs more seeds and steps on demand).
CALL corpus_run(20261201, 120);
SELECT count(*) FILTER (WHERE step > 0) AS steps, min(verified) AS fewest_views_verified,
       max(verified) AS most_views_verified
  FROM corpus_steps;
-- Every view verified after every step: no failures.
SELECT view, count(*) AS failed_steps, min(step) AS first_step, min(error) AS error
  FROM corpus_failures GROUP BY view ORDER BY view;
SELECT count(*) AS verify_failures FROM corpus_failures;

DO $$ BEGIN
    PERFORM decoupled.drop(t, cascade => true) FROM unnest(ARRAY['ca', 'cb', 'cc']) t;
END $$;
DROP VIEW corpus_big_named, corpus_big;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
DROP TABLE ca, cb, cc, corpus_shapes, corpus_failures, corpus_steps;
DROP PROCEDURE corpus_run(bigint, int);
DROP FUNCTION corpus_step(), corpus_key(int, float8), corpus_fill();
