#!/usr/bin/env bash
# Deployments (brief C10, issue 14 item 7), in one throwaway server
# (bench/lib.sh): ten views over a ROWS-row registered table
# w(id, k, v) — SELECT k % n AS bucket, count(*), sum(v) FROM w GROUP BY 1,
# n = 10, 20, ..., 100 — while pgbench inserts single rows at CLIENTS
# clients.  Each of RUNS rounds:
#
#   hydration  create_deployment('gN'), then the time until every view is
#              hydrated on its replica (decoupled.deployments.unhydrated = 0)
#   baseline   the longest time any view's upper stood still during WINDOW
#              seconds of the same load, with no promotion
#   handover   the same during WINDOW seconds in which promote('gN') runs
#              (1 s into the window); also how long promote() itself took
#
# The uppers are sampled every SAMPLE_MS by a procedure in the server; a
# gap is the time between two samples at which a view's upper moved.
# Medians of RUNS; every round promotes the deployment the previous one
# created, so each handover is a real one.
#
#   bash bench/handover.sh
#   (ROWS=1000000 NGROUPS=1000 RUNS=5 CLIENTS=2 WINDOW=6 SAMPLE_MS=10
#    TICK_INTERVAL=100ms)
CMDLINE=("$0" "$@")
ROWS=${ROWS:-1000000}
NGROUPS=${NGROUPS:-1000}
RUNS=${RUNS:-5}
CLIENTS=${CLIENTS:-2}
WINDOW=${WINDOW:-6}
SAMPLE_MS=${SAMPLE_MS:-10}
TICK_INTERVAL=${TICK_INTERVAL:-100ms}
BENCH_CONF="wal_level = logical
decoupled.table_tick_interval = '$TICK_INTERVAL'"
source "$(dirname "$0")/lib.sh"

echo "== pg_decoupled handover: ten views over $ROWS rows, pgbench INSERT at $CLIENTS clients"
echo "   $(nproc) cores; $(date -u +%FT%TZ); command: ${CMDLINE[*]}"

bench_psql >/dev/null <<SQL
CREATE SEQUENCE w_id START $((ROWS + 1));
CREATE TABLE w (id bigint PRIMARY KEY DEFAULT nextval('w_id'), k int NOT NULL, v int NOT NULL);
INSERT INTO w SELECT g, g % $NGROUPS, g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE w;
SELECT decoupled.register_table('w', retain_history => '1 second');
$(for i in $(seq 10); do
    echo "SELECT decoupled.create_materialized_view('w_view$i',
    'SELECT k % $((i * 10)) AS bucket, count(*) AS n, sum(v) AS s FROM w GROUP BY 1');"
done)
CREATE TABLE samples (round int, at timestamptz, name text, upper bigint);
CREATE PROCEDURE sample_uppers(r int, seconds float8) LANGUAGE plpgsql AS \$\$
DECLARE
    stop timestamptz := clock_timestamp() + seconds * interval '1 s';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        INSERT INTO samples SELECT r, clock_timestamp(), name, upper
          FROM decoupled.frontiers WHERE name LIKE 'w\\_view%';
        COMMIT;
        PERFORM pg_sleep($SAMPLE_MS / 1000.0);
    END LOOP;
END
\$\$;
-- The longest stall of any view's upper in a round, in ms.
CREATE FUNCTION longest_gap(r int) RETURNS bigint LANGUAGE sql AS \$\$
    WITH moves AS (
        SELECT name, at FROM (SELECT name, at, upper,
                                     lag(upper) OVER (PARTITION BY name ORDER BY at) AS prev
                                FROM samples WHERE round = r) s
         WHERE upper IS DISTINCT FROM prev)
    SELECT round(max(extract(epoch FROM d) * 1000))::bigint
      FROM (SELECT at - lag(at) OVER (PARTITION BY name ORDER BY at) AS d FROM moves) g
\$\$;
SQL
bench_psql -c "SELECT decoupled.wait_for_upper('w_view' || i, (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'w'), '600s') FROM generate_series(1, 10) i" >/dev/null
echo "INSERT INTO w (k, v) VALUES ((random() * $NGROUPS)::int, 1);" >"$BENCH_DIR/reg.sql"
chown "$RUN_USER" "$BENCH_DIR/reg.sql"

# One window of load with the uppers sampled; $2: SQL run 1 s into it.
window() {
    local round=$1 sql=${2:-}
    bench_pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$WINDOW" -f "$BENCH_DIR/reg.sql" >/dev/null 2>&1 &
    local pgbench=$!
    bench_psql -c "CALL sample_uppers($round, $WINDOW)" &
    local sampler=$!
    if [ -n "$sql" ]; then
        sleep 1
        bench_psql -c "$sql"
    fi
    wait "$sampler" "$pgbench"
}

printf '%-6s %14s %14s %14s %12s\n' round hydration_ms baseline_gap handover_gap promote_ms
hyd=() base=() hand=() prom=()
for r in $(seq "$RUNS"); do
    h=$(bench_psql <<SQL | tail -1
SELECT clock_timestamp() AS c0 \gset
SELECT decoupled.create_deployment('g$r');
DO \$\$
BEGIN
    FOR i IN 1 .. 6000 LOOP
        EXIT WHEN (SELECT unhydrated = 0 FROM decoupled.deployments WHERE name = 'g$r');
        PERFORM pg_sleep(0.01);
    END LOOP;
END
\$\$;
SELECT round(extract(epoch FROM clock_timestamp() - :'c0'::timestamptz) * 1000);
SQL
)
    window "$((r * 2 - 1))"
    b=$(bench_psql -c "SELECT longest_gap($((r * 2 - 1)))")
    p=$(window "$((r * 2))" "SELECT round(extract(epoch FROM clock_timestamp() - c0) * 1000)
                             FROM (SELECT clock_timestamp() AS c0, decoupled.promote('g$r')) x" | tail -1)
    g=$(bench_psql -c "SELECT longest_gap($((r * 2)))")
    printf '%-6s %14s %14s %14s %12s\n' "$r" "$h" "$b" "$g" "$p"
    hyd+=("$h"); base+=("$b"); hand+=("$g"); prom+=("$p")
done
printf '%-6s %14s %14s %14s %12s\n' median \
    "$(printf '%s\n' "${hyd[@]}" | median)" "$(printf '%s\n' "${base[@]}" | median)" \
    "$(printf '%s\n' "${hand[@]}" | median)" "$(printf '%s\n' "${prom[@]}" | median)"
bench_psql -c "SELECT string_agg(name || ':' || state, ' ' ORDER BY created_at) FROM decoupled.deployments"
