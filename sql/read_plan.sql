-- The plan of a read of a registered table (C2.2, issue 12).  EXPLAIN shows
-- the plan that runs, whatever the path the statement takes: the read
-- rewrite applies once, also where a tree holding it is analysed again
-- (EXPLAIN runs the parse-analysis hook on its inner query once more, and
-- SQL deparsed from a view over the table is parsed again).  While
-- decoupled.as_of is unset the planner reads the table alone, as a plain
-- table; while it is set, the gated union.  Cached plans follow the setting
-- (prepared statements, generic plans, PL/pgSQL); a plan kept outside the
-- plan cache across a change is refused.  Each path reads the right rows,
-- with and without decoupled.as_of.
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

-- Every path, without and then with decoupled.as_of.  Without it the plan
-- reads the table alone — but a cursor's, which keeps the union: its gates
-- choose at the first fetch (as_of may change after DECLARE).  With it the
-- plan is the union, once.
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM rp;
SELECT * FROM rp_shapes();
SELECT * FROM rp_paths();
SET decoupled.as_of = :t0;
SELECT * FROM rp_shapes();
SELECT * FROM rp_paths();
RESET decoupled.as_of;

-- A cached plan follows decoupled.as_of: setting or resetting it plans
-- again the plans made for the other state (PL/pgSQL, prepared and generic).
SELECT * FROM rp_totals_at(ARRAY[NULL, :t0, NULL, :t0]::bigint[]);
SELECT * FROM rp_totals_at(ARRAY[:t0, NULL, :t0, NULL]::bigint[]);
EXECUTE rp_p;
SET decoupled.as_of = :t0;
EXECUTE rp_p;
RESET decoupled.as_of;
SET plan_cache_mode = force_generic_plan;
PREPARE rp_g AS SELECT count(*) AS n, sum(v) AS total FROM rp;
EXECUTE rp_g;
SELECT * FROM plan_shape('EXPLAIN (COSTS OFF) EXECUTE rp_g');
SET decoupled.as_of = :t0;
EXECUTE rp_g;
SELECT * FROM plan_shape('EXPLAIN (COSTS OFF) EXECUTE rp_g');
RESET decoupled.as_of;
EXECUTE rp_g;
SELECT * FROM plan_shape('EXPLAIN (COSTS OFF) EXECUTE rp_g');
RESET plan_cache_mode;

-- A cursor declared without as_of and first fetched with it reads at as_of.
BEGIN;
DECLARE rp_late CURSOR FOR SELECT count(*) AS n, sum(v) AS total FROM rp;
SET LOCAL decoupled.as_of = :t0;
FETCH rp_late;
COMMIT;

-- A SQL-language function plans all its statements when it is first called
-- in a transaction, outside the plan cache.  Called by statements of their
-- own, it is planned for each one's setting; a plan made for the latest
-- state that would run after as_of was set is refused rather than read the
-- table.
CREATE FUNCTION rp_sql_total() RETURNS bigint LANGUAGE sql AS 'SELECT sum(v) FROM rp';
CREATE FUNCTION rp_sql_total_at(t bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT set_config('decoupled.as_of', t::text, true);
    SELECT sum(v) FROM rp
$$;
SELECT rp_sql_total() AS latest;
SET decoupled.as_of = :t0;
SELECT rp_sql_total() AS at_t0;
RESET decoupled.as_of;
-- One call site across a change, in one transaction: refused.
CREATE FUNCTION rp_sql_totals_at(times text[]) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    t text;
    total bigint;
BEGIN
    FOREACH t IN ARRAY times LOOP
        PERFORM set_config('decoupled.as_of', t, true);
        total := rp_sql_total();
        RETURN NEXT total;
    END LOOP;
END
$$;
SELECT rp_sql_totals_at(ARRAY[:'t0', '']) AS totals;
SELECT rp_sql_totals_at(ARRAY['', :'t0']) AS totals;
SHOW decoupled.as_of;
-- Setting as_of inside the function, after it was planned: refused.
SELECT rp_sql_total_at(:t0);
-- Set before the function runs, as the hint says: read at as_of.
BEGIN;
SET LOCAL decoupled.as_of = :t0;
SELECT rp_sql_total_at(:t0) AS at_t0;
COMMIT;

-- A branch of the rewrite on its own is no rewrite: an explicit ONLY read
-- is rewritten like any other, and reads at as_of.
SET decoupled.as_of = :t0;
SELECT count(*) AS n, sum(v) AS total FROM ONLY rp;
SELECT count(*) AS n, sum(v) AS total
  FROM (SELECT k, v FROM ONLY rp WHERE k > 0 UNION ALL SELECT k, v FROM rp WHERE k > 4) s;
RESET decoupled.as_of;

-- The analysed replacement is kept per backend and shared by every role
-- this session takes: privileges are still the reader's, at each read.
CREATE ROLE rp_reader;
SELECT count(*) AS n FROM rp;
SET ROLE rp_reader;
SELECT count(*) AS n FROM rp;  -- refused
RESET ROLE;
GRANT SELECT ON rp TO rp_reader;
SET ROLE rp_reader;
SELECT count(*) AS n FROM rp;
SET decoupled.as_of = :t0;
SELECT count(*) AS n FROM rp;
RESET decoupled.as_of;
RESET ROLE;
REVOKE SELECT ON rp FROM rp_reader;
SET ROLE rp_reader;
SELECT count(*) AS n FROM rp;  -- refused again
RESET ROLE;
DROP ROLE rp_reader;

-- Decided at plan time (extension/read_rewrite.cpp): a SELECT the session
-- runs itself keeps its reads of the table as they are, and its plan reads
-- the table alone while as_of is unset — the plain table's plan, its
-- aliases and all, and no trace of the mark the analysis left — or the
-- gated union while it is set.
EXPLAIN (COSTS OFF, VERBOSE) SELECT x.v FROM rp x WHERE x.k = 3;
SELECT x.v FROM rp x WHERE x.k IN (1, 5) ORDER BY 1;
SET decoupled.as_of = :t0;
SELECT * FROM plan_shape('EXPLAIN (COSTS OFF) SELECT x.v FROM rp x WHERE x.k = 3');
SELECT x.v FROM rp x WHERE x.k IN (1, 5) ORDER BY 1;
RESET decoupled.as_of;
-- A PL/pgSQL cursor opened without as_of and first fetched with it reads at
-- as_of, as a declared one does: its plan keeps the union.
CREATE FUNCTION rp_cursor_total(t bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c CURSOR FOR SELECT sum(v) FROM rp;
    total bigint;
BEGIN
    OPEN c;
    PERFORM set_config('decoupled.as_of', t::text, true);
    FETCH c INTO total;
    CLOSE c;
    PERFORM set_config('decoupled.as_of', '', true);
    RETURN total;
END
$$;
SELECT rp_cursor_total(:t0) AS at_t0;
-- A SQL function inlined into the statement that calls it.
CREATE FUNCTION rp_rows() RETURNS SETOF rp LANGUAGE sql STABLE AS 'SELECT * FROM rp';
SELECT sum(v) AS latest FROM rp_rows();
SET decoupled.as_of = :t0;
SELECT sum(v) AS at_t0 FROM rp_rows();
RESET decoupled.as_of;
-- Generic plans of PL/pgSQL statements across changes of as_of.
SET plan_cache_mode = force_generic_plan;
SELECT * FROM rp_totals_at(ARRAY[NULL, :t0, NULL, :t0]::bigint[]);
RESET plan_cache_mode;
-- Statements that write read at as_of through the union made at analysis.
CREATE TEMP TABLE rp_sink (k int, v int);
SET decoupled.as_of = :t0;
INSERT INTO rp_sink SELECT * FROM rp;
RESET decoupled.as_of;
SELECT count(*) AS n, sum(v) AS total FROM rp_sink;
-- The mark written by hand is no mark: a top-level statement gets the
-- analysis's own after it, ...
SET decoupled.as_of = :t0;
SELECT sum(v) AS at_t0 FROM rp WHERE decoupled._reads_at_plan_time();
RESET decoupled.as_of;
SELECT sum(v) AS latest FROM rp WHERE decoupled._reads_at_plan_time();
-- ... and a view whose definition holds it reads at as_of like any view.
CREATE VIEW rp_marked AS SELECT * FROM rp WHERE decoupled._reads_at_plan_time();
SET decoupled.as_of = :t0;
SELECT sum(v) AS at_t0 FROM rp_marked;
RESET decoupled.as_of;
SELECT sum(v) AS latest FROM rp_marked;
DROP VIEW rp_marked;

-- BEGIN ATOMIC and RETURN bodies, created after registration (analysed
-- without the analysis hook, rewritten once the function exists): scalar,
-- inlined set-returning, a procedure, and one replaced by CREATE OR REPLACE.
CREATE FUNCTION rp_atomic_total() RETURNS bigint LANGUAGE sql
BEGIN ATOMIC SELECT sum(v) FROM rp; END;
CREATE FUNCTION rp_return_total() RETURNS bigint LANGUAGE sql
RETURN (SELECT sum(v) FROM rp);
CREATE FUNCTION rp_atomic_rows() RETURNS SETOF rp LANGUAGE sql STABLE
BEGIN ATOMIC SELECT * FROM rp; END;
CREATE PROCEDURE rp_atomic_proc(INOUT total bigint) LANGUAGE sql
BEGIN ATOMIC SELECT sum(v) FROM rp; END;
CREATE FUNCTION rp_replaced() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT 0::bigint; END;
CREATE OR REPLACE FUNCTION rp_replaced() RETURNS bigint LANGUAGE sql
BEGIN ATOMIC SELECT sum(v) FROM rp; END;
SELECT rp_atomic_total() AS atomic, rp_return_total() AS return_body,
       (SELECT sum(v) FROM rp_atomic_rows()) AS inlined, rp_replaced() AS replaced;
CALL rp_atomic_proc(NULL);
SET decoupled.as_of = :t0;
SELECT rp_atomic_total() AS atomic, rp_return_total() AS return_body,
       (SELECT sum(v) FROM rp_atomic_rows()) AS inlined, rp_replaced() AS replaced;
CALL rp_atomic_proc(NULL);
RESET decoupled.as_of;
-- The stored body holds the union, as a view's query does (and dumps so).
SELECT pg_get_functiondef('rp_atomic_total'::regproc) LIKE '%decoupled.as_of() IS NULL%'
       AS body_holds_union;
DROP FUNCTION rp_atomic_total(), rp_return_total(), rp_atomic_rows(), rp_replaced();
DROP PROCEDURE rp_atomic_proc(bigint);

-- pg_dump --inserts reads a table through a cursor, with non-system views
-- refused (restrict_nonsystem_relation_kind): there a cursor reads the
-- latest state as a statement does, the table alone; AS OF it needs the
-- history views and is refused (55000, as PostgreSQL refuses them), saying
-- how to dump the latest state (COPY too: pg_dump by a role whose settings
-- set decoupled.as_of).
SELECT upper - 1 AS rp_t FROM decoupled.frontiers WHERE name = 'rp' \gset
SELECT count(*), sum(v) FROM rp;
SET restrict_nonsystem_relation_kind = 'view, foreign-table';
BEGIN;
DECLARE rp_dump CURSOR FOR SELECT count(*), sum(v) FROM ONLY public.rp;
FETCH ALL FROM rp_dump;
COMMIT;
SET decoupled.as_of = :rp_t;
BEGIN;
DECLARE rp_dump CURSOR FOR SELECT count(*), sum(v) FROM ONLY public.rp;
ROLLBACK;
COPY public.rp (v) TO stdout;
\set VERBOSITY sqlstate
COPY public.rp (v) TO stdout;
\set VERBOSITY default
SET decoupled.as_of = '';  -- what the hint's PGOPTIONS does
BEGIN;
DECLARE rp_dump CURSOR FOR SELECT count(*), sum(v) FROM ONLY public.rp;
FETCH ALL FROM rp_dump;
COMMIT;
RESET decoupled.as_of;
RESET restrict_nonsystem_relation_kind;

DEALLOCATE rp_p;
DEALLOCATE rp_g;
DROP FUNCTION rp_total(), rp_totals_at(bigint[]), rp_shapes(), rp_paths(), plan_shape(text),
    plan_lines(text), rp_sql_total(), rp_sql_total_at(bigint), rp_sql_totals_at(text[]),
    rp_cursor_total(bigint), rp_rows();
DROP VIEW rp_v;
SELECT decoupled.unregister_table('rp');
DROP TABLE rp;
RESET max_parallel_workers_per_gather;
