#!/usr/bin/env bash
# Append throughput (rows/s) for batches of 1, 100 and 10,000 rows through
# decoupled.append(), one writer (compare-and-append serializes writers of
# one collection).  Median of RUNS pgbench runs per batch size.
#
#   bash bench/append_throughput.sh        (RUNS=5, SECONDS_PER_RUN=10)
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}

bench_psql >/dev/null <<'SQL'
CREATE TABLE appended (k bigint, v text);
SELECT decoupled.register_table('appended', retain_history => '0');
SQL

printf '%-8s %14s %14s\n' batch "appends/s" "rows/s"
for batch in 1 100 10000; do
    cat > "$BENCH_DIR/append.sql" <<SQL
SELECT decoupled.append('appended',
    (SELECT jsonb_agg(jsonb_build_object('mz_timestamp', f.upper, 'mz_diff', 1,
                                         'data', jsonb_build_object('k', g, 'v', 'row ' || g)))
       FROM generate_series(1, $batch) g),
    f.upper, f.upper + 1)
  FROM decoupled.frontiers f WHERE f.name = 'appended';
SQL
    chown "$RUN_USER" "$BENCH_DIR/append.sql"
    tps=$(for _ in $(seq "$RUNS"); do
        bench_pgbench -n -c 1 -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/append.sql" 2>/dev/null |
            sed -nE 's/^tps = ([0-9.]+).*/\1/p'
    done | median)
    printf '%-8s %14.1f %14.0f\n' "$batch" "$tps" "$(echo "$tps * $batch" | bc -l)"
done
