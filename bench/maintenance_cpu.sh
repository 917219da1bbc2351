#!/usr/bin/env bash
# What maintaining ten views costs the machine at a fixed write rate: the
# CPU of the replica's backend, of the capture worker, of the controller
# and of the whole machine (writers included), while pgbench inserts RATE
# rows/s (single-row INSERT, CLIENTS clients) for DURATION s, first into a
# plain table (the views idle: every tick still moves their uppers, and
# capture decodes that WAL too), then into the registered table they read.
# At a fixed rate both builds do the same work, so the CPU compares where
# throughput (bench/incremental.sh writers) is lost in a disk's noise.
#
# Setup as bench/incremental.sh writers: a ROWS-row table w(id, k, v),
# registered, and ten views SELECT k % n, count(*), sum(v) FROM w GROUP BY 1
# (n = 10, 20, ..., 100), ticks every 100 ms, synchronous_commit = on.
#
#   bash bench/maintenance_cpu.sh   (ROWS=1000000 RATE=800 CLIENTS=2 DURATION=20)
#   PG_CONFIG=/other/pg_config bash bench/maintenance_cpu.sh   (another build)
#   PERF_OUT=/tmp/replica.perf bash bench/maintenance_cpu.sh   (also records
#       a perf profile of the replica backend during the registered run;
#       needs perf, Debian package linux-perf; call graphs by frame
#       pointers, which PostgreSQL and the extension keep — PERF_CALL_GRAPH
#       =dwarf for another build, at a hundred times the file size)
#   FUNCTIONS=1 bash bench/maintenance_cpu.sh   (also prints, for every
#       function of the extension called at least once a second during the
#       registered run, its calls and mean total and self time per call,
#       from pg_stat_user_functions: track_functions = all, which costs a
#       clock reading per call)
ROWS=${ROWS:-1000000}
RATE=${RATE:-800}
CLIENTS=${CLIENTS:-2}
SECONDS_PER_RUN=${DURATION:-20}
BENCH_CONF=$'wal_level = logical\ndecoupled.table_tick_interval = \'100ms\''
if [ "${FUNCTIONS:-0}" = 1 ]; then BENCH_CONF+=$'\ntrack_functions = all'; fi
source "$(dirname "$0")/lib.sh"
print_run_header "ROWS=$ROWS RATE=$RATE CLIENTS=$CLIENTS DURATION=$SECONDS_PER_RUN bash bench/maintenance_cpu.sh"

bench_psql <<SQL >/dev/null
CREATE SEQUENCE plain_w_id START $((ROWS + 1));
CREATE TABLE plain_w (id bigint PRIMARY KEY DEFAULT nextval('plain_w_id'), k int NOT NULL, v int NOT NULL);
INSERT INTO plain_w SELECT g, g % 1000, g FROM generate_series(1, $ROWS) g;
CREATE SEQUENCE w_id START $((ROWS + 1));
CREATE TABLE w (id bigint PRIMARY KEY DEFAULT nextval('w_id'), k int NOT NULL, v int NOT NULL);
INSERT INTO w SELECT * FROM plain_w;
VACUUM ANALYZE plain_w, w;
SELECT decoupled.register_table('w', retain_history => '1 second');
$(for i in $(seq 10); do
    echo "SELECT decoupled.create_materialized_view('w_view$i',
        'SELECT k % $((i * 10)) AS bucket, count(*) AS n, sum(v) AS s FROM w GROUP BY 1');"
done)
SQL
for table in plain_w w; do
    echo "INSERT INTO $table (k, v) VALUES ((random() * 999)::int, 1);" >"$BENCH_DIR/$table.sql"
done
chown "$RUN_USER" "$BENCH_DIR"/*.sql
bench_psql -c "SELECT decoupled.wait_for_upper('w_view10', (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'w'), '120s') IS NOT NULL" >/dev/null

pid_of() { bench_psql -c "SELECT pid FROM pg_stat_activity WHERE $1 LIMIT 1"; }
replica=$(pid_of "application_name LIKE 'pg_decoupled replica %'")
capture=$(bench_psql -c "SELECT worker_pid FROM decoupled.capture")
controller=$(pid_of "application_name = 'pg_decoupled controller'")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
machine() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
hz=$(getconf CLK_TCK)
pct() { awk -v d="$1" -v hz="$hz" -v s="$SECONDS_PER_RUN" 'BEGIN {printf "%.0f%%", d * 100 / hz / s}'; }

printf '%-32s %8s %16s %15s %11s %14s\n' "writers into" "tps" "replica backend" "capture worker" "controller" "whole machine"
for table in plain_w w; do
    if [ "$table" = w ] && [ "${FUNCTIONS:-0}" = 1 ]; then
        bench_psql -c "SELECT pg_stat_reset()" >/dev/null
    fi
    r0=$(ticks "$replica"); c0=$(ticks "$capture"); o0=$(ticks "$controller"); m0=$(machine)
    perf_pid=
    if [ "$table" = w ] && [ -n "${PERF_OUT:-}" ]; then
        perf record -q --call-graph "${PERF_CALL_GRAPH:-fp}" -p "$replica" -o "$PERF_OUT" -- sleep "$SECONDS_PER_RUN" >/dev/null 2>&1 &
        perf_pid=$!
    fi
    tps=$(bench_pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" -R "$RATE" \
        -f "$BENCH_DIR/$table.sql" 2>/dev/null | sed -nE 's/^tps = ([0-9.]+) .*/\1/p')
    r1=$(ticks "$replica"); c1=$(ticks "$capture"); o1=$(ticks "$controller"); m1=$(machine)
    if [ -n "$perf_pid" ]; then wait "$perf_pid" || echo "# perf record failed (is linux-perf installed?)"; fi
    label=$([ "$table" = w ] && echo "registered table, 10 views" || echo "plain table (views idle)")
    printf '%-32s %8.0f %16s %15s %11s %14s\n' "$label" "$tps" "$(pct $((r1 - r0)))" \
        "$(pct $((c1 - c0)))" "$(pct $((o1 - o0)))" "$(pct $((m1 - m0)))"
done
echo "# CPU in % of one core over ${SECONDS_PER_RUN}s (the whole machine's includes the writers)"
if [ "${FUNCTIONS:-0}" = 1 ]; then
    sleep 1  # the replica reports its function counts at its next transaction's end
    echo "# the functions during the registered run: calls, mean ms per call, mean self ms per call"
    # Every function of the extension called at least once per second, by
    # total time (a nested function's time counts in its caller's too).
    bench_psql -F ' ' -c "SELECT funcname, calls, round((total_time / calls)::numeric, 3),
                                 round(self_time::numeric / calls, 3) AS self_ms
                            FROM pg_stat_user_functions
                           WHERE schemaname = 'decoupled' AND calls >= $SECONDS_PER_RUN
                           ORDER BY total_time DESC" | sed 's/^/#   /'
fi
