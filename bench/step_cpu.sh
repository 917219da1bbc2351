#!/usr/bin/env bash
# The CPU a view step costs the replica: the replica backend's user + system
# time (/proc/<pid>/stat) over STEPS steps, divided by STEPS, for a view over
# a registered table of ROWS rows in 1,000 groups, after CHANGES random
# updated rows each.  Wall time from the tick's commit to wait_for_upper is
# printed too (median).  Unlike bench/incremental.sh, which subtracts the
# median of idle steps from wall times, this counts CPU: what ten views
# under writers compete for.  Three cases, one view at a time:
#
#   group: SELECT k, count(*), sum(v) FROM t GROUP BY k          (sums)
#   join:  SELECT d.name, count(*), sum(t.v) FROM t JOIN d ... GROUP BY d.name
#   dim:   the join view again, after CHANGES random rows of d (the 1,000-
#          row dimension) changed instead: each touches 1,000 rows of t
#
#   bash bench/step_cpu.sh                # ROWS=1000000 STEPS=100 CHANGES="1 1000"
#   PG_CONFIG=/other/pg_config bash bench/step_cpu.sh   (another build)
ROWS=${ROWS:-1000000}
STEPS=${STEPS:-100}
CHANGES=${CHANGES:-1 1000}
BENCH_CONF=$'wal_level = logical\nsynchronous_commit = off\ndecoupled.table_tick_interval = 0'
source "$(dirname "$0")/lib.sh"
print_run_header "ROWS=$ROWS STEPS=$STEPS CHANGES=\"$CHANGES\" bash bench/step_cpu.sh"

bench_psql <<SQL >/dev/null
CREATE TABLE t(id bigint PRIMARY KEY, k int NOT NULL, v bigint NOT NULL);
INSERT INTO t SELECT i, i % 1000, (i::bigint * 7919) % 10007 FROM generate_series(1, $ROWS) i;
CREATE TABLE d(g int PRIMARY KEY, name text NOT NULL);
INSERT INTO d SELECT g, 'g' || g FROM generate_series(0, 999) g;
ANALYZE t; ANALYZE d;
SELECT decoupled.register_table('t', retain_history => '1 second');
SELECT decoupled.register_table('d', retain_history => '1 second');
SELECT decoupled.tick_tables();
SQL

STEP_SQL="$BENCH_DIR/step.sql"
cat > "$STEP_SQL" <<'SQL'
\if :dim
UPDATE d SET name = name || 'x'
 WHERE g IN (SELECT g FROM d ORDER BY random() LIMIT :n);
\else
UPDATE t SET v = v + (random() * 100)::int - 50
 WHERE id IN (SELECT (random() * (:rows - 1))::bigint + 1 FROM generate_series(1, :n));
\endif
SELECT decoupled.wait_for_capture() IS NOT NULL AS c \gset
SELECT decoupled.tick_tables() IS NOT NULL AS ticked \gset
SELECT upper - 1 AS u FROM decoupled.frontiers WHERE name = :'changed' \gset
SELECT clock_timestamp() AS t0 \gset
SELECT decoupled.wait_for_upper(:'view', :u, '60s') IS NOT NULL AS done \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0') * 1000, 1);
SQL
chown "$RUN_USER" "$STEP_SQL"

replica_cpu_ticks() {
    local pid
    pid=$(bench_psql -c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'pg_decoupled replica %'" | head -1)
    awk '{print $14 + $15}' "/proc/$pid/stat"
}

printf '%-6s %8s %22s %16s\n' view changed "replica CPU ms/step" "wall median ms"
for view in group join dim; do
    dim=false changed=t
    case $view in
        group) q='SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k' ;;
        join) q='SELECT d.name, count(*) AS n, sum(t.v) AS s FROM t JOIN d ON d.g = t.k GROUP BY d.name' ;;
        dim) q='SELECT d.name, count(*) AS n, sum(t.v) AS s FROM t JOIN d ON d.g = t.k GROUP BY d.name'
             dim=true changed=d ;;
    esac
    bench_psql >/dev/null -c "SELECT decoupled.create_materialized_view('$view', \$q\$$q\$q\$)" \
        -c "SELECT decoupled.wait_for_upper('$view', (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 't'), '300s')"
    for n in $CHANGES; do
        for _ in 1 2 3; do bench_psql -v rows="$ROWS" -v n="$n" -v view="$view" -v dim="$dim" -v changed="$changed" -f "$STEP_SQL" >/dev/null; done
        c0=$(replica_cpu_ticks)
        wall=$(for _ in $(seq 1 "$STEPS"); do
                   bench_psql -v rows="$ROWS" -v n="$n" -v view="$view" -v dim="$dim" -v changed="$changed" -f "$STEP_SQL"
               done | median)
        c1=$(replica_cpu_ticks)
        # clock ticks of 10 ms
        printf '%-6s %8s %22s %16s\n' "$view" "$n" \
            "$(awk -v c="$((c1 - c0))" -v s="$STEPS" 'BEGIN { printf "%.1f", c * 10 / s }')" "$wall"
    done
    [ "$(bench_psql -c "SELECT decoupled.verify('$view')")" = t ] || { echo "$view does not verify" >&2; exit 1; }
    bench_psql >/dev/null -c "SELECT decoupled.drop('$view')"
done
