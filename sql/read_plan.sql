-- The plan of a read of a registered table (C2.2, issue 12): EXPLAIN shows
-- the plan that runs, whatever the path the statement takes: the read
-- rewrite applies once, also where a tree holding it is analysed again
-- (EXPLAIN runs the parse-analysis hook on its inner query once more, and
-- SQL deparsed from a view over the table is parsed again).  Each path also
-- reads the right rows, with and without decoupled.as_of.
\set SHOW_CONTEXT never
SET max_parallel_workers_per_gather = 0;
CREATE TABLE rp (k int, v int);
INSERT INTO rp SELECT g, g * 10 FROM generate_series(1, 5) g;
SELECT decoupled.register_table('rp', retain_history => '1 hour') > 0 AS registered;
SELECT upper - 1 AS t0 FROM decoupled.frontiers WHERE name = 'rp' \gset
UPDATE rp SET v = v + 1 WHERE k <= 2;
DELETE FROM rp WHERE k = 5;
INSERT INTO rp VALUES (6, 60);
SELECT decoupled.tick_tables() > 0 AS ticked;
-- Latest: 5 rows summing to 162; AS OF t0: 5 rows summing to 150.
SELECT count(*) AS n, sum(v) AS total FROM rp;

-- The lines an EXPLAIN statement prints.
CREATE FUNCTION plan_lines(explain text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE explain;
END
$$;
-- The shape of the plan an EXPLAIN statement prints: how many Append
-- nodes, and how many scans of the table and of each part of its history.
-- One union is one Append over the table, cur and dead; the union applied
-- twice nests a second Append over cur and dead.
CREATE FUNCTION plan_shape(explain text, OUT appends int, OUT table_scans int,
                           OUT cur_scans int, OUT dead_scans int)
LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    appends := 0; table_scans := 0; cur_scans := 0; dead_scans := 0;
    FOR line IN SELECT plan_lines(explain) LOOP
        appends := appends + (line ~ '\mAppend\M')::int;
        table_scans := table_scans + (line ~ ' on rp\M' AND line !~ 'Subquery Scan')::int;
        cur_scans := cur_scans + (line ~ ' on c[0-9]+_cur\M')::int;
        dead_scans := dead_scans + (line ~ ' on c[0-9]+_dead\M')::int;
    END LOOP;
END
$$;

-- A view, a prepared statement and PL/pgSQL functions over the table.
CREATE VIEW rp_v AS SELECT * FROM rp;
PREPARE rp_p AS SELECT count(*) AS n, sum(v) AS total FROM rp;
CREATE FUNCTION rp_total(OUT n bigint, OUT total bigint) LANGUAGE plpgsql AS $$
BEGIN
    SELECT count(*), sum(v) INTO n, total FROM rp;
END
$$;
-- One cached plan read at each time in turn (NULL: the latest state).
CREATE FUNCTION rp_totals_at(times bigint[])
RETURNS TABLE (latest boolean, n bigint, total bigint) LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
BEGIN
    FOREACH t IN ARRAY times LOOP
        PERFORM set_config('decoupled.as_of', coalesce(t::text, ''), true);
        latest := t IS NULL;
        SELECT count(*), sum(v) INTO n, total FROM rp;
        RETURN NEXT;
    END LOOP;
    PERFORM set_config('decoupled.as_of', '', true);
END
$$;

-- The plan of each path a read can take.
CREATE FUNCTION rp_shapes()
RETURNS TABLE (path text, appends int, table_scans int, cur_scans int, dead_scans int)
LANGUAGE plpgsql AS $$
DECLARE
    e constant text := 'EXPLAIN (COSTS OFF) ';
    q constant text := 'SELECT count(*), sum(v) FROM rp';
BEGIN
    RETURN QUERY
    SELECT x.path, s.* FROM (VALUES
        ('EXPLAIN', e || q),
        ('EXPLAIN ANALYZE',
         'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q),
        ('EXPLAIN EXECUTE', e || 'EXECUTE rp_p'),
        ('EXPLAIN of a view', e || 'SELECT count(*), sum(v) FROM rp_v'),
        ('EXPLAIN CREATE TABLE AS', e || 'CREATE TABLE rp_never AS ' || q),
        ('EXPLAIN DECLARE CURSOR', e || 'DECLARE rp_never CURSOR FOR ' || q),
        ('EXPLAIN of a sub-select', e || 'SELECT (SELECT sum(v) FROM rp)'),
        ('EXPLAIN of a CTE', e || 'WITH w AS (SELECT * FROM rp) SELECT count(*) FROM w'),
        ('EXPLAIN of a deparsed view', e || rtrim(pg_get_viewdef('rp_v'), ';'))
    ) x(path, explain), LATERAL plan_shape(x.explain) s;
END
$$;

-- What each path reads.
CREATE FUNCTION rp_paths() RETURNS TABLE (path text, n bigint, total bigint)
LANGUAGE plpgsql AS $$
BEGIN
    path := 'SELECT';
    SELECT count(*), sum(v) INTO n, total FROM rp;
    RETURN NEXT;
    path := 'EXECUTE';
    EXECUTE 'EXECUTE rp_p' INTO n, total;
    RETURN NEXT;
    path := 'PL/pgSQL';
    SELECT * INTO n, total FROM rp_total();
    RETURN NEXT;
    path := 'view';
    SELECT count(*), sum(v) INTO n, total FROM rp_v;
    RETURN NEXT;
    path := 'deparsed view';
    EXECUTE 'SELECT count(*), sum(v) FROM (' || rtrim(pg_get_viewdef('rp_v'), ';') || ') d'
        INTO n, total;
    RETURN NEXT;
    path := 'CREATE TABLE AS';
    CREATE TEMP TABLE rp_copy AS SELECT * FROM rp;
    SELECT count(*), sum(v) INTO n, total FROM rp_copy;
    DROP TABLE rp_copy;
    RETURN NEXT;
    path := 'DECLARE CURSOR';
    EXECUTE 'DECLARE rp_c CURSOR FOR SELECT count(*), sum(v) FROM rp';
    EXECUTE 'FETCH rp_c' INTO n, total;
    EXECUTE 'CLOSE rp_c';
    RETURN NEXT;
    path := 'EXPLAIN ANALYZE';  -- the rows its scans returned
    SELECT sum((regexp_match(line, 'actual rows=([0-9]+)'))[1]::bigint), NULL INTO n, total
      FROM plan_lines('EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) '
                      'SELECT count(*), sum(v) FROM rp') line
     WHERE line ~ ' on (rp|c[0-9]+_cur|c[0-9]+_dead)\M';
    RETURN NEXT;
END
$$;

-- Every path, without and then with decoupled.as_of: the rewrite applies
-- once; its gates choose the branch at execution.
SELECT * FROM rp_shapes();
SELECT * FROM rp_paths();
SET decoupled.as_of = :t0;
SELECT * FROM rp_shapes();
SELECT * FROM rp_paths();
RESET decoupled.as_of;

-- A cached plan stays right as decoupled.as_of changes around it.
SELECT * FROM rp_totals_at(ARRAY[NULL, :t0, NULL, :t0]::bigint[]);
EXECUTE rp_p;
SET decoupled.as_of = :t0;
EXECUTE rp_p;
RESET decoupled.as_of;
SET plan_cache_mode = force_generic_plan;
PREPARE rp_g AS SELECT count(*) AS n, sum(v) AS total FROM rp;
EXECUTE rp_g;
SET decoupled.as_of = :t0;
EXECUTE rp_g;
SELECT * FROM plan_shape('EXPLAIN (COSTS OFF) EXECUTE rp_g');
RESET decoupled.as_of;
EXECUTE rp_g;
RESET plan_cache_mode;

-- A branch of the rewrite on its own is no rewrite: an explicit ONLY read
-- is rewritten like any other, and reads at as_of.
SET decoupled.as_of = :t0;
SELECT count(*) AS n, sum(v) AS total FROM ONLY rp;
SELECT count(*) AS n, sum(v) AS total
  FROM (SELECT k, v FROM ONLY rp WHERE k > 0 UNION ALL SELECT k, v FROM rp WHERE k > 4) s;
RESET decoupled.as_of;

DEALLOCATE rp_p;
DEALLOCATE rp_g;
DROP FUNCTION rp_total(), rp_totals_at(bigint[]), rp_shapes(), rp_paths(), plan_shape(text),
    plan_lines(text);
DROP VIEW rp_v;
SELECT decoupled.unregister_table('rp');
DROP TABLE rp;
RESET max_parallel_workers_per_gather;
