#!/usr/bin/env bash
# Read cost of a registered table of ROWS rows against a plain table holding
# the same rows, in the same run:
#   latest   SELECT without decoupled.as_of (planned as the table alone)
#   as_of    AS OF the latest readable time, and AS OF the oldest readable
#            time, with HISTORY retracted rows in the history
# Median of RUNS pgbench runs each; the ratio is against the plain table.
# With CPU=1 each figure is instead the backend's CPU time per query (user +
# system, from /proc) over REPS queries with a serial plan, median of RUNS:
# steadier than latency on a machine shared with other work, and it counts
# what the plan costs, not what it waits for.  HISTORIES: the history sizes.
#
# POINT=1 measures single-row reads instead (SELECT v ... WHERE k = :k by
# its index, pgbench's simple protocol: each statement parsed, rewritten
# and planned), throughput at CLIENTS clients, interleaved with the plain
# table; the cost a statement pays for being a registered table's read.
#
#   bash bench/read_cost.sh       (ROWS=1000000, RUNS=5, SECONDS_PER_RUN=10)
#   CPU=1 REPS=20 HISTORIES=0 bash bench/read_cost.sh
#   POINT=1 CLIENTS=2 RUNS=3 bash bench/read_cost.sh
source "$(dirname "$0")/lib.sh"
ROWS=${ROWS:-1000000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CPU=${CPU:-0}
REPS=${REPS:-20}
HISTORIES=${HISTORIES:-0 1000 100000}
POINT=${POINT:-0}
CLIENTS=${CLIENTS:-2}
if [ "$POINT" = 1 ]; then
    echo "POINT=1 ROWS=$ROWS RUNS=$RUNS CLIENTS=$CLIENTS SECONDS_PER_RUN=$SECONDS_PER_RUN bash bench/read_cost.sh"
else
    echo "ROWS=$ROWS RUNS=$RUNS CPU=$CPU$([ "$CPU" = 1 ] && echo " REPS=$REPS" || echo " SECONDS_PER_RUN=$SECONDS_PER_RUN") HISTORIES='$HISTORIES' bash bench/read_cost.sh"
fi

bench_psql >/dev/null <<SQL
CREATE TABLE plain (k bigint, v text);
INSERT INTO plain SELECT g, md5(g::text) FROM generate_series(1, $ROWS) g;
CREATE TABLE tracked (k bigint, v text);
INSERT INTO tracked SELECT * FROM plain;
CREATE INDEX ON plain (k);
CREATE INDEX ON tracked (k);
SELECT decoupled.register_table('tracked', retain_history => '1 day');
VACUUM ANALYZE plain, tracked;
SQL

# The backend's CPU time so far, in clock ticks.
CPU_NOW="SELECT split_part(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ', 12)::bigint
             + split_part(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ', 13)::bigint"
TICK_MS=$(echo "1000 / $(getconf CLK_TCK)" | bc -l)
cpu_query() {  # $1: SQL; prints the median CPU time per query in ms
    for _ in $(seq "$RUNS"); do
        {
            echo "SET max_parallel_workers_per_gather = 0;"
            echo "\\o /dev/null"
            echo "$1;"  # warm
            echo "\\o"
            echo "$CPU_NOW AS before \\gset"
            echo "\\o /dev/null"
            for _ in $(seq "$REPS"); do echo "$1;"; done
            echo "\\o"
            echo "SELECT ($CPU_NOW - :before) * $TICK_MS / $REPS;"
        } | bench_psql | tail -n 1
    done | median
}

time_query() {  # $1: SQL; prints the median latency in ms
    [ "$CPU" = 1 ] && { cpu_query "$1"; return; }
    printf '%s\n' "$1" > "$BENCH_DIR/q.sql"
    chown "$RUN_USER" "$BENCH_DIR/q.sql"
    for _ in $(seq "$RUNS"); do
        bench_pgbench -n -c 1 -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/q.sql" 2>/dev/null |
            sed -nE 's/^latency average = ([0-9.]+) ms/\1/p'
    done | median
}

QUERY='SELECT count(*), sum(k), max(v) FROM %s'

point_tps() {  # table; prints one run's tps
    printf '\\set k random(1, %s)\nSELECT v FROM %s WHERE k = :k;\n' "$ROWS" "$1" > "$BENCH_DIR/point.sql"
    chown "$RUN_USER" "$BENCH_DIR/point.sql"
    bench_pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/point.sql" \
        2>/dev/null | sed -nE 's/^tps = ([0-9.]+) .*/\1/p'
}

if [ "$POINT" = 1 ]; then
    plain=() tracked=()
    for _ in $(seq "$RUNS"); do
        plain+=("$(point_tps plain)")
        tracked+=("$(point_tps tracked)")
    done
    p=$(printf '%s\n' "${plain[@]}" | median)
    t=$(printf '%s\n' "${tracked[@]}" | median)
    echo "-- single-row reads by index, $CLIENTS clients, median of $RUNS x ${SECONDS_PER_RUN}s (runs: plain ${plain[*]}; registered ${tracked[*]})"
    printf '%-44s %10.0f tps %8.2fx\n' "plain table" "$p" 1
    printf '%-44s %10.0f tps %8.2fx\n' "registered table, latest" "$t" "$(echo "$t / $p" | bc -l)"
    exit 0
fi
report() {  # label, ms, baseline ms
    printf '%-44s %10.2f ms %8.2fx\n' "$1" "$2" "$(echo "$2 / $3" | bc -l)"
}

for history in $HISTORIES; do
    if [ "$history" -gt 0 ]; then
        # Retract and re-insert `history` rows: the dead set grows by that much.
        bench_psql >/dev/null -c "UPDATE tracked SET v = v || 'x' WHERE k <= $history" \
            -c "SELECT decoupled.tick_tables()" -c "VACUUM ANALYZE tracked"
        bench_psql >/dev/null -c "SELECT decoupled.tick_tables()"
    fi
    since=$(bench_psql -c "SELECT since FROM decoupled.frontiers WHERE name = 'tracked'")
    latest=$(bench_psql -c "SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'tracked'")
    plain=$(time_query "$(printf "$QUERY" plain)")
    echo "-- $ROWS rows, history of $history retracted rows"
    report "plain table" "$plain" "$plain"
    report "registered table, latest" "$(time_query "$(printf "$QUERY" tracked)")" "$plain"
    report "registered table, AS OF latest readable" \
        "$(time_query "SET decoupled.as_of = $latest; $(printf "$QUERY" tracked)")" "$plain"
    report "registered table, AS OF oldest readable" \
        "$(time_query "SET decoupled.as_of = $since; $(printf "$QUERY" tracked)")" "$plain"
done
