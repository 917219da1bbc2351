#!/usr/bin/env bash
# Replica benchmarks (issue 4), one throwaway server:
#   1. ticks per second one replica sustains for 1, 10 and 100 counter
#      sources ticking every 10 ms (the target is 100 ticks/s per source);
#   2. recovery time from SIGTERM of a replica worker to its successor's
#      first new append (median of RUNS);
#   3. append-to-visible latency of a 100 ms counter: from a tick's time to
#      the moment a polling client (1 ms) sees it readable (median, p99).
#
#   bash bench/replicas.sh     (RUNS=5, SECONDS_PER_RUN=10)
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}

echo "== ticks per second, one replica, sources ticking every 10 ms"
printf '%-8s %12s %12s %8s %14s\n' sources "ticks/s" "target" ratio "max lag (ms)"
for n in 1 10 100; do
    bench_psql >/dev/null -c "
        SELECT decoupled.create_source('s' || g, 'counter', options => '{\"tick\": \"10ms\"}')
          FROM generate_series(1, $n) g"
    # Let the replica install them and catch up, then count.
    bench_psql >/dev/null -c "SELECT decoupled.wait_for_upper('s' || g, decoupled.oracle_now() + 500, '60s')
                                FROM generate_series(1, $n) g"
    start=$(bench_psql -c "SELECT sum(upper) FROM decoupled.frontiers WHERE name LIKE 's%'")
    sleep "$SECONDS_PER_RUN"
    end=$(bench_psql -c "SELECT sum(upper) FROM decoupled.frontiers WHERE name LIKE 's%'")
    lag=$(bench_psql -c "SELECT max(lag_ms) FROM decoupled.frontiers WHERE name LIKE 's%'")
    rate=$(echo "($end - $start) / 10 / $SECONDS_PER_RUN" | bc -l)
    printf '%-8s %12.0f %12d %8.2f %14s\n' "$n" "$rate" "$((n * 100))" \
        "$(echo "$rate / ($n * 100)" | bc -l)" "$lag"
    bench_psql >/dev/null -c "SELECT decoupled.drop('s' || g) FROM generate_series(1, $n) g" \
        -c "SELECT decoupled.finalize_dropped()"
done

echo "== recovery time: SIGTERM of the replica worker to its successor's first append"
bench_psql >/dev/null -c "SELECT decoupled.create_source('r', 'counter', options => '{\"tick\": \"10ms\"}')"
bench_psql >/dev/null -c "SELECT decoupled.wait_for_upper('r', decoupled.oracle_now() + 500, '60s')"
recovery=$(for _ in $(seq "$RUNS"); do
    pid=$(bench_psql -c "SELECT pid FROM decoupled.supervised WHERE kind = 'replica' AND pid IS NOT NULL")
    before=$(bench_psql -c "SELECT decoupled.oracle_now()")
    kill -TERM "$pid"
    # The first append after the kill advances the upper beyond `before`.
    bench_psql -c "SELECT decoupled.wait_for_upper('r', $before + 10, '60s') IS NULL" >/dev/null
    after=$(bench_psql -c "SELECT decoupled.oracle_now()")
    echo "$((after - before))"
    bench_psql >/dev/null -c "SELECT decoupled.wait_for_upper('r', decoupled.oracle_now() + 300, '60s')"
done | median)
printf 'median recovery: %s ms (runs: %s)\n' "$recovery" "$RUNS"

echo "== append-to-visible latency, 100 ms counter, client polling every 1 ms"
bench_psql >/dev/null -c "SELECT decoupled.create_source('l', 'counter', options => '{\"tick\": \"100ms\"}')"
bench_psql >/dev/null -c "SELECT decoupled.wait_for_upper('l', decoupled.oracle_now() + 300, '60s')"
bench_psql <<SQL
CREATE TEMP TABLE samples (latency_ms bigint);
DO \$\$
DECLARE
    seen  bigint := (SELECT upper FROM decoupled.frontiers WHERE name = 'l');
    now_u bigint;
    stop  timestamptz := clock_timestamp() + interval '$SECONDS_PER_RUN seconds';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        SELECT upper INTO now_u FROM decoupled.frontiers WHERE name = 'l';
        IF now_u > seen THEN
            -- The newest tick is at now_u - 1: its latency is how late we see it.
            INSERT INTO samples VALUES (decoupled.oracle_now() - (now_u - 1));
            seen := now_u;
        END IF;
        PERFORM pg_sleep(0.001);
    END LOOP;
END
\$\$;
SELECT format('samples %s, median %s ms, p99 %s ms', count(*),
              percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms),
              percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms))
  FROM samples;
SQL
