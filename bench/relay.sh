#!/usr/bin/env bash
# Freshness through the relay (brief C8, issue 15 item 5), in one throwaway
# server (bench/lib.sh): the time from the commit of a change (an INSERT
# into a registered table, ticked into history) until a view over it has
# caught up (decoupled.wait_for_upper returns), for
#
#   inside   a view maintained by the in-server replica of cluster default
#   outside  the same view maintained by pg_decoupled_replicad (an external
#            replica, polling every POLL_MS)
#
# with each relay mode, restarting the server between them:
#   in_process  the relay worker's NOTIFY (the default)
#   external    pg_decoupled_relayd's shared-memory segment
#   none        decoupled.relay = external with no daemon running: polling
#
# SAMPLES changes per view and mode, each after a random pause of up to
# 200 ms (so changes fall anywhere in a poll interval); median and p99.
#
#   bash bench/relay.sh      (SAMPLES=60 POLL_MS=1000)
CMDLINE=("$0" "$@")
SAMPLES=${SAMPLES:-60}
POLL_MS=${POLL_MS:-1000}
BENCH_CONF="decoupled.table_tick_interval = 0
decoupled.bound_publication_interval = 0
decoupled.poll_interval = '${POLL_MS}ms'"
source "$(dirname "$0")/lib.sh"
SEGMENT="pg_decoupled_bench_$$"

echo "== pg_decoupled freshness through the relay: $SAMPLES changes per view and mode"
echo "   $(nproc) cores; $(date -u +%FT%TZ); poll interval ${POLL_MS} ms; command: ${CMDLINE[*]}"

bench_psql >/dev/null <<'SQL'
CREATE TABLE t (id bigserial PRIMARY KEY, v int NOT NULL);
SELECT decoupled.register_table('t');
SELECT decoupled.create_cluster('outside', replicas => 0, managed => false);
SELECT decoupled.create_replica('outside', 'x', external => true);
SELECT decoupled.create_materialized_view('inside_v', 'SELECT count(*) AS n, sum(v) AS s FROM t');
SELECT decoupled.create_materialized_view('outside_v', 'SELECT count(*) AS n, sum(v) AS s FROM t',
                                          cluster => 'outside');
CREATE TABLE results (mode text, view text, ms float8);
CREATE PROCEDURE freshness(p_mode text, p_view text, n int) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    u  bigint;
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM pg_sleep(random() * 0.2);
        INSERT INTO t (v) VALUES (i);
        COMMIT;
        PERFORM decoupled.tick_tables();
        COMMIT;
        t0 := clock_timestamp();
        SELECT upper - 1 INTO u FROM decoupled.frontiers WHERE name = 't';
        PERFORM decoupled.wait_for_upper(p_view, u, '60s');
        INSERT INTO results VALUES (p_mode, p_view,
                                    extract(epoch FROM clock_timestamp() - t0) * 1000);
        COMMIT;
    END LOOP;
END
$$;
SQL

restart() {
    as_runner pg_ctl -D "$BENCH_DIR/data" -m fast -w restart >/dev/null
}
replicad_pid=""
start_replicad() {
    as_runner pg_decoupled_replicad --conninfo "host=$BENCH_DIR port=$BENCH_PORT dbname=postgres" \
        --cluster outside --replica x --poll-ms "$POLL_MS" >>"$BENCH_DIR/replicad.log" 2>&1 &
    replicad_pid=$!
}
stop_replicad() {
    if [ -n "$replicad_pid" ]; then
        kill "$replicad_pid" 2>/dev/null || true
        wait "$replicad_pid" 2>/dev/null || true
    fi
    replicad_pid=""
}
relayd_pid=""
# Everything stops on exit, the server last (no step may end the trap early).
cleanup() {
    stop_replicad
    if [ -n "$relayd_pid" ]; then kill "$relayd_pid" 2>/dev/null || true; fi
    as_runner pg_decoupled_relayd --name "$SEGMENT" --remove >/dev/null 2>&1 || true
    stop_bench_server
}
trap cleanup EXIT

measure() {
    local mode=$1
    start_replicad
    # Both views caught up before measuring.
    bench_psql -c "SELECT decoupled.wait_for_upper(v, (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 't'), '60s') FROM unnest(ARRAY['inside_v', 'outside_v']) v" >/dev/null
    bench_psql -c "CALL freshness('$mode', 'inside_v', $SAMPLES)" -c "CALL freshness('$mode', 'outside_v', $SAMPLES)"
    stop_replicad
}

measure in_process
bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.relay = 'external'" \
    -c "ALTER SYSTEM SET decoupled.relay_name = '$SEGMENT'"
restart
as_runner pg_decoupled_relayd --name "$SEGMENT" >>"$BENCH_DIR/relayd.log" 2>&1 &
relayd_pid=$!
sleep 1
measure external
kill "$relayd_pid"; wait "$relayd_pid" 2>/dev/null || true; relayd_pid=""
as_runner pg_decoupled_relayd --name "$SEGMENT" --remove >/dev/null
restart
measure none

printf '%-11s %-8s %10s %10s %10s\n' relay view median_ms p99_ms vs_inside
bench_psql -F ' ' <<'SQL' | while read -r mode view med p99 ratio; do printf '%-11s %-8s %10s %10s %10s\n' "$mode" "$view" "$med" "$p99" "$ratio"; done
WITH s AS (
    SELECT mode, replace(view, '_v', '') AS view,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS med,
           percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) AS p99
      FROM results GROUP BY 1, 2)
SELECT s.mode, s.view, round(s.med::numeric, 1), round(s.p99::numeric, 1),
       round((s.med / i.med)::numeric, 2) || 'x'
  FROM s JOIN s i ON i.mode = s.mode AND i.view = 'inside'
 ORDER BY array_position(ARRAY['in_process', 'external', 'none'], s.mode), s.view;
SQL
