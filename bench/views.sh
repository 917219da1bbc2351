#!/usr/bin/env bash
# Materialized views, three measurements in one throwaway server:
#
#   freshness  input append (a table tick committing) to the view having
#              caught up with it: median and p99 over SAMPLES appends
#   step       per-step cost of maintaining
#                  SELECT k, count(*), sum(v) FROM t GROUP BY k
#              over ROWS rows when 1, 1k, 100k rows change, against
#              REFRESH MATERIALIZED VIEW CONCURRENTLY of the same query on a
#              plain copy of the same data, changed the same way, in the
#              same run (median of RUNS each)
#   writers    pgbench single-row INSERT throughput into a registered table
#              feeding 0, 1 and 10 views, as a ratio to a plain table
#              (median of RUNS runs of SECONDS_PER_RUN s, CLIENTS clients)
#
#   bash bench/views.sh [freshness|step|writers ...]
#   (ROWS=1000000 NGROUPS=1000 SAMPLES=200 RUNS=5 SECONDS_PER_RUN=10 CLIENTS=2)
source "$(dirname "$0")/lib.sh"
export PGOPTIONS="-c client_min_messages=warning"
ROWS=${ROWS:-1000000}
NGROUPS=${NGROUPS:-1000}
SAMPLES=${SAMPLES:-200}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-2}
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(freshness step writers)

# The benchmark decides when tables tick; compaction runs as in production.
bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.table_tick_interval = 0" \
    -c "SELECT pg_reload_conf()"

freshness() {
    bench_psql >/dev/null <<SQL
CREATE TABLE fresh (k int, v int);
INSERT INTO fresh SELECT g % 100, g FROM generate_series(1, 10000) g;
SELECT decoupled.register_table('fresh');
SELECT decoupled.tick_tables();
SELECT decoupled.create_materialized_view('fresh_sums',
    'SELECT k, count(*), sum(v) FROM fresh GROUP BY k');
SELECT decoupled.wait_for_upper('fresh_sums',
    (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'fresh'), '60s');
CREATE TABLE fresh_latency (ms float8);
SQL
    bench_psql >/dev/null <<SQL
DO \$\$
DECLARE
    t0 timestamptz;
    u  bigint;
BEGIN
    FOR i IN 1 .. $SAMPLES LOOP
        INSERT INTO fresh VALUES (i % 100, i);
        COMMIT;
        PERFORM decoupled.tick_tables();
        COMMIT;
        t0 := clock_timestamp();
        SELECT upper - 1 INTO u FROM decoupled.frontiers WHERE name = 'fresh';
        PERFORM decoupled.wait_for_upper('fresh_sums', u, '60s');
        INSERT INTO fresh_latency VALUES (extract(epoch FROM clock_timestamp() - t0) * 1000);
        COMMIT;
    END LOOP;
END
\$\$;
SQL
    local all
    all=$(bench_psql -c "SELECT ms FROM fresh_latency")
    echo "-- freshness: table tick committed -> view caught up ($SAMPLES appends, 10k-row table)"
    printf 'median %8.2f ms   p99 %8.2f ms\n' "$(echo "$all" | median)" \
        "$(echo "$all" | percentile 0.99)"
}

step() {
    bench_psql >/dev/null <<SQL
CREATE TABLE plain_t (id int PRIMARY KEY, k int, v int);
INSERT INTO plain_t SELECT g, g % $NGROUPS, g FROM generate_series(1, $ROWS) g;
CREATE TABLE t (id int PRIMARY KEY, k int, v int);
INSERT INTO t SELECT * FROM plain_t;
VACUUM ANALYZE plain_t, t;
CREATE MATERIALIZED VIEW plain_mv AS SELECT k, count(*), sum(v) FROM plain_t GROUP BY k;
CREATE UNIQUE INDEX ON plain_mv (k);
SELECT decoupled.register_table('t', retain_history => '1 second');
SELECT decoupled.tick_tables();
SELECT decoupled.create_materialized_view('t_sums', 'SELECT k, count(*), sum(v) FROM t GROUP BY k');
SELECT decoupled.wait_for_upper('t_sums',
    (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 't'), '300s');
SQL
    echo "-- per-step cost, GROUP BY over $ROWS rows into $NGROUPS groups (median of $RUNS)"
    printf '%-12s %22s %22s %8s\n' "changed" "REFRESH CONCURRENTLY" "pg_decoupled step" "ratio"
    for changed in 1 1000 100000; do
        local refresh=() maintain=()
        for run in $(seq "$RUNS"); do
            refresh+=("$(bench_psql <<SQL | tail -1
UPDATE plain_t SET v = v + 1 WHERE id <= $changed;
SELECT clock_timestamp() AS t0 \gset
REFRESH MATERIALIZED VIEW CONCURRENTLY plain_mv;
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;
SQL
)")
            # The step: the tick commits the change; the replica computes
            # the view at that time and appends the difference.
            maintain+=("$(bench_psql <<SQL | tail -1
UPDATE t SET v = v + 1 WHERE id <= $changed;
SELECT decoupled.tick_tables() IS NOT NULL AS ticked \gset
SELECT clock_timestamp() AS t0, upper - 1 AS u FROM decoupled.frontiers WHERE name = 't' \gset
SELECT decoupled.wait_for_upper('t_sums', :u, '300s') IS NOT NULL AS done \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;
SQL
)")
        done
        local r m
        r=$(printf '%s\n' "${refresh[@]}" | median)
        m=$(printf '%s\n' "${maintain[@]}" | median)
        printf '%-12s %19.1f ms %19.1f ms %7.2fx\n' "$changed" "$r" "$m" "$(echo "$m / $r" | bc -l)"
    done
    bench_psql >/dev/null -c "SELECT decoupled.drop('t_sums')" -c "SELECT decoupled.drop('t')" \
        -c "DROP TABLE t, plain_t CASCADE"
}

writers() {
    echo "INSERT INTO w (k, v) VALUES (random() * 1000, 1);" > "$BENCH_DIR/insert.sql"
    chown "$RUN_USER" "$BENCH_DIR/insert.sql"
    # Controller ticks every second, as by default.
    bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.table_tick_interval = '1s'" \
        -c "SELECT pg_reload_conf()"
    run_inserts() {  # median tps
        for _ in $(seq "$RUNS"); do
            bench_pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" \
                -f "$BENCH_DIR/insert.sql" 2>/dev/null |
                sed -nE 's/^tps = ([0-9.]+) .*/\1/p'
        done | median
    }
    fresh_table() {
        bench_psql >/dev/null -c "DROP TABLE IF EXISTS w CASCADE" \
            -c "CREATE TABLE w (k int, v int)"
    }
    fresh_table
    local plain
    plain=$(run_inserts)
    echo "-- writer throughput, pgbench single-row INSERT, $CLIENTS clients (median of $RUNS x ${SECONDS_PER_RUN}s)"
    printf '%-36s %10.0f tps %7.2fx\n' "plain table" "$plain" 1
    for views in 0 1 10; do
        fresh_table
        bench_psql >/dev/null -c "SELECT decoupled.register_table('w', retain_history => '1 second')"
        for i in $(seq "$views"); do
            bench_psql >/dev/null -c "SELECT decoupled.create_materialized_view('w_view$i',
                'SELECT k % $((i * 10)) AS bucket, count(*), sum(v) FROM w GROUP BY 1')"
        done
        local tps
        tps=$(run_inserts)
        printf '%-36s %10.0f tps %7.2fx\n' "registered table, $views views" "$tps" \
            "$(echo "$tps / $plain" | bc -l)"
        for i in $(seq "$views"); do
            bench_psql >/dev/null -c "SELECT decoupled.drop('w_view$i')"
        done
        bench_psql >/dev/null -c "SELECT decoupled.drop('w')"
    done
}

for part in "${PARTS[@]}"; do
    "$part"
done
