#!/usr/bin/env bash
# Holds and SUBSCRIBE, in one throwaway server:
#
#   holds      acquire_hold + release_hold per transaction, pgbench, CLIENTS
#              clients: under established protection (the adapter's durable
#              hold already covers it: no durable write) against the same
#              in REPEATABLE READ, where a session cannot trust the durable
#              row it reads and waits for adapterd to commit protection (one
#              durable write per acquisition).  Median of RUNS runs.
#   subscribe  latency from the append (a tick, from its start) to the row
#              being delivered to a subscriber FETCHing from a streaming
#              cursor: median and p99 over SAMPLES appends
#
#   bash bench/adapters.sh [holds|subscribe ...]
#   (RUNS=5 SECONDS_PER_RUN=10 CLIENTS=2 SAMPLES=200)
source "$(dirname "$0")/lib.sh"
export PGOPTIONS="-c client_min_messages=warning"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-2}
SAMPLES=${SAMPLES:-200}
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(holds subscribe)

bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.table_tick_interval = 0" \
    -c "SELECT pg_reload_conf()"

holds() {
    bench_psql >/dev/null <<SQL
CREATE TABLE held (k int);
SELECT decoupled.register_table('held', retain_history => '1 hour');
SELECT decoupled.tick_tables();
-- The adapter's durable hold, at the earliest time: later holds are covered.
SELECT decoupled.acquire_hold('held', (SELECT since FROM decoupled.frontiers WHERE name = 'held'));
SQL
    printf '%s\n' "SELECT decoupled.release_hold(decoupled.acquire_hold('held'));" \
        > "$BENCH_DIR/established.sql"
    printf '%s\n' "BEGIN ISOLATION LEVEL REPEATABLE READ;" \
        "SELECT decoupled.release_hold(decoupled.acquire_hold('held'));" "COMMIT;" \
        > "$BENCH_DIR/durable.sql"
    chown "$RUN_USER" "$BENCH_DIR"/*.sql
    run() {
        for _ in $(seq "$RUNS"); do
            bench_pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/$1" \
                2>/dev/null | sed -nE 's/^tps = ([0-9.]+) .*/\1/p'
        done | median
    }
    local established durable
    established=$(run established.sql)
    durable=$(run durable.sql)
    echo "-- hold acquisitions (acquire + release), $CLIENTS clients, median of $RUNS x ${SECONDS_PER_RUN}s"
    printf '%-44s %10.0f /s\n' "under established protection" "$established"
    printf '%-44s %10.0f /s   (%.1fx fewer)\n' "with a durable write each (adapterd commit)" \
        "$durable" "$(echo "$established / $durable" | bc -l)"
}

subscribe() {
    bench_psql >/dev/null <<SQL
CREATE TABLE feed (v int);
SELECT decoupled.register_table('feed', retain_history => '1 hour');
SELECT decoupled.tick_tables();
CREATE TABLE sent (v int, at timestamptz);
CREATE TABLE received (v int, at timestamptz);
SQL
    # The subscriber: one row per FETCH, stamped when it arrives.
    bench_psql >/dev/null <<SQL &
DO \$\$
DECLARE
    c refcursor := 'feed_cursor';
    r record;
    n integer := 0;
BEGIN
    OPEN c FOR SELECT (s).mz_diff, (s).data
                 FROM (SELECT decoupled.subscribe('feed') AS s) x;
    LOOP
        FETCH c INTO r;
        INSERT INTO received VALUES ((r.data->>'v')::int, clock_timestamp());
        n := n + 1;
        EXIT WHEN n >= $SAMPLES;
    END LOOP;
END
\$\$;
SQL
    local subscriber=$!
    until [ "$(bench_psql -c 'SELECT count(*) FROM decoupled.subscriptions')" = 1 ]; do
        sleep 0.05  # the subscriber is opening its cursor
    done
    bench_psql >/dev/null <<SQL
DO \$\$
DECLARE
    t0 timestamptz;
BEGIN
    FOR i IN 1 .. $SAMPLES LOOP
        INSERT INTO feed VALUES (i);
        COMMIT;
        t0 := clock_timestamp();
        PERFORM decoupled.tick_tables();
        COMMIT;
        INSERT INTO sent VALUES (i, t0);
        COMMIT;
        PERFORM pg_sleep(0.02);
    END LOOP;
END
\$\$;
SQL
    wait "$subscriber"
    local all
    all=$(bench_psql -c "SELECT extract(epoch FROM r.at - s.at) * 1000
                           FROM sent s JOIN received r USING (v)")
    echo "-- SUBSCRIBE: append (tick start) -> row delivered to a streaming cursor ($SAMPLES appends)"
    printf 'median %8.2f ms   p99 %8.2f ms\n' "$(echo "$all" | median)" \
        "$(echo "$all" | percentile 0.99)"
}

for part in "${PARTS[@]}"; do
    "$part"
done
