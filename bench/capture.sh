#!/usr/bin/env bash
# What capture costs writers (brief C14.1): pgbench single-row INSERT,
# UPDATE and DELETE at 2 and 8 clients into a plain table and into a
# registered table captured by triggers, then from the WAL, in one server
# with wal_level = logical, synchronous_commit = off and the controller
# ticking every second.
#
# Each capture mode is measured beside the plain table, interleaved (plain,
# registered, plain, registered, ...): the ratio is registered / plain of
# the medians, so drift on a shared machine hits both sides alike.  Each
# run starts from a table of ROWS rows.
#
# Beside each registered run's tps: the CPU the extension's workers used
# per transaction (capture, ticks, replicas; /proc), until capture took the
# run's changes in — the cost the ratio measures, without the drift of a
# shared machine's load.
#
# bulk: one UPDATE of 1,000 and of 100,000 rows of a ROWS-row table:
# the statement's time on a plain table and on a registered one, and, with
# WAL capture, the time from its commit until capture took it in
# (wait_for_capture) as rows/s (two captured rows per updated row).
#
# bystanders: pgbench single-row INSERT into a table nobody registered,
# while a registered table is captured from the WAL (the slot decodes the
# whole database) and while none is (no slot): what the extension costs
# the writers of every other table, and its workers' CPU per transaction.
#
# freshness: how long after its commit a change is captured (commit ->
# decoupled.capture.captured_through past it), for PROBES single-row
# INSERTs 0.1 s apart while pgbench adds RATE more a second; asynchronous
# commits, as everywhere here.
#
# pending: WAL-captured writers with the table's pending changes logged
# (decoupled.capture_unticked_wal_limit = 0) against unlogged (the
# default), interleaved: tps, workers' CPU and WAL bytes per transaction.
#
#   bash bench/capture.sh [writers|bulk|bystanders|freshness|pending ...]
#   (ROWS=100000 RUNS=5 SECONDS_PER_RUN=10 CLIENT_COUNTS="2 8" BULK="1000 100000"
#    MODES="trigger wal" STATEMENTS="insert update delete")
# synchronous_commit = off: a WAL flush per commit (several ms on this
# shared disk) would hide what capture costs the writer's CPU.
BENCH_CONF="wal_level = logical
synchronous_commit = off
${BENCH_CONF:-}"
source "$(dirname "$0")/lib.sh"
export PGOPTIONS="-c client_min_messages=warning"
ROWS=${ROWS:-100000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENT_COUNTS=${CLIENT_COUNTS:-"2 8"}
MODES=${MODES:-"trigger wal"}                 # capture modes measured by `writers`
STATEMENTS=${STATEMENTS:-"insert update delete"}
BULK=${BULK:-"1000 100000"}
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(writers bulk)

cat > "$BENCH_DIR/insert.sql" <<'SQL'
INSERT INTO w (k, v) VALUES ((random() * 1000)::int, 1);
SQL
cat > "$BENCH_DIR/update.sql" <<SQL
\set id random(1, $ROWS)
UPDATE w SET v = v + 1 WHERE id = :id;
SQL
cat > "$BENCH_DIR/other.sql" <<'SQL'
INSERT INTO other (k, v) VALUES ((random() * 1000)::int, 1);
SQL
cat > "$BENCH_DIR/delete.sql" <<SQL
\set id random(1, $ROWS)
DELETE FROM w WHERE id = :id;
SQL
chown "$RUN_USER" "$BENCH_DIR"/*.sql

# A fresh table w of ROWS rows, registered or not (DROP TABLE drops its
# collection too).
fresh_table() {  # registered: yes|no
    recycle_wal
    bench_psql >/dev/null <<SQL
DROP TABLE IF EXISTS w;
CREATE TABLE w (id bigserial PRIMARY KEY, k int, v int);
INSERT INTO w (k, v) SELECT g % 1000, g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE w;
SQL
    if [ "$1" = yes ]; then
        bench_psql >/dev/null -c "SELECT decoupled.register_table('w', retain_history => '1 second')" \
            -c "SELECT decoupled.wait_for_capture('60 s')"
    fi
}

tps_of() {  # script clients
    bench_pgbench -n -c "$2" -j "$2" -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/$1.sql" 2>/dev/null |
        sed -nE 's/^tps = ([0-9.]+) .*/\1/p'
}

# A registered run: its tps, and the extension's processes' CPU per
# transaction in microseconds (until capture has taken in the run's changes) — what the
# writers' throughput ratio hides on a machine whose load drifts.
registered_run() {  # script clients
    local before after tps
    before=$(extension_cpu_ticks)
    tps=$(tps_of "$1" "$2")
    bench_psql >/dev/null -c "SELECT decoupled.wait_for_capture('600 s')"
    after=$(extension_cpu_ticks)
    echo "$tps $(echo "($after - $before) * 1000000 / $(getconf CLK_TCK) / ($tps * $SECONDS_PER_RUN)" | bc -l)"
}

# RUNS interleaved pairs of runs of `script` at `clients` — with no table
# registered, then with a fresh registered one — each side after `sql`:
# prints the medians "tps-unregistered tps-registered workers-us/txn".
interleaved() {  # script clients [sql]
    local plain=() registered=() cpu=() run
    for _ in $(seq "$RUNS"); do
        fresh_table no
        [ -z "${3:-}" ] || bench_psql >/dev/null -c "$3"
        plain+=("$(tps_of "$1" "$2")")
        fresh_table yes
        [ -z "${3:-}" ] || bench_psql >/dev/null -c "$3"
        run=$(registered_run "$1" "$2")
        registered+=("${run% *}")
        cpu+=("${run#* }")
    done
    echo "$(printf '%s\n' "${plain[@]}" | median) $(printf '%s\n' "${registered[@]}" | median)" \
         "$(printf '%s\n' "${cpu[@]}" | median)"
}

bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.table_tick_interval = '1s'" \
    -c "SELECT pg_reload_conf()"

set_capture() {
    bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.capture = '$1'" -c "SELECT pg_reload_conf()"
}

writers() {
    echo "-- writer throughput, pgbench, $ROWS-row table, wal_level = logical" \
         "(median of $RUNS x ${SECONDS_PER_RUN}s, interleaved with the plain table)"
    printf '%-8s %-9s %8s %12s %15s %8s %14s\n' "capture" "statement" "clients" "plain tps" \
        "registered tps" "ratio" "worker us/txn"
    for mode in $MODES; do
        set_capture "$mode"
        for statement in $STATEMENTS; do
            for clients in $CLIENT_COUNTS; do
                local p r c
                read -r p r c <<<"$(interleaved "$statement" "$clients")"
                printf '%-8s %-9s %8s %12.0f %15.0f %7.2fx %14.1f\n' "$mode" "$statement" \
                    "$clients" "$p" "$r" "$(echo "$r / $p" | bc -l)" "$c"
            done
        done
    done
}

bystanders() {
    echo "-- writers of a table nobody registered, pgbench single-row INSERT, another" \
         "$ROWS-row table captured from the WAL or none (median of $RUNS x ${SECONDS_PER_RUN}s, interleaved)"
    printf '%8s %16s %16s %8s %14s\n' "clients" "none captured" "one captured" "ratio" \
        "worker us/txn"
    set_capture wal
    bench_psql >/dev/null -c "DROP TABLE IF EXISTS other" \
        -c "CREATE TABLE other (id bigserial PRIMARY KEY, k int, v int)"
    local clients
    for clients in $CLIENT_COUNTS; do
        local n c u
        read -r n c u <<<"$(interleaved other "$clients" "TRUNCATE other")"
        printf '%8s %16.0f %16.0f %7.2fx %14.1f\n' "$clients" "$n" "$c" "$(echo "$c / $n" | bc -l)" "$u"
    done
    bench_psql >/dev/null -c "DROP TABLE other"
}

freshness() {
    local rate=${RATE:-800} probes=${PROBES:-60}
    echo "-- commit to captured: $probes single-row INSERTs 0.1 s apart, pgbench adding $rate a second," \
         "a $ROWS-row table captured from the WAL (median of $RUNS rounds)"
    set_capture wal
    fresh_table yes
    local medians=() p90s=() run stats
    for run in $(seq "$RUNS"); do
        bench_pgbench -n -c 2 -j 2 -R "$rate" -T $((probes / 10 + 4)) -f "$BENCH_DIR/insert.sql" \
            >/dev/null 2>&1 &
        local writers=$!
        sleep 1
        stats=$(bench_psql <<SQL | tail -1
CREATE TEMP TABLE probe_ms (ms float8);
DO \$\$
DECLARE
    lsn pg_lsn;
    t0 timestamptz;
BEGIN
    FOR i IN 1 .. $probes LOOP
        INSERT INTO w (k, v) VALUES (1, 1);
        COMMIT;
        lsn := pg_current_wal_insert_lsn();
        t0 := clock_timestamp();
        WHILE (SELECT captured_through FROM decoupled.capture) < lsn LOOP
            PERFORM pg_sleep(0.001);
        END LOOP;
        INSERT INTO probe_ms VALUES (extract(epoch FROM clock_timestamp() - t0) * 1000);
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
END
\$\$;
SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' ' ||
       round(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)::numeric, 1) FROM probe_ms;
SQL
)
        wait "$writers"
        medians+=("${stats% *}")
        p90s+=("${stats#* }")
    done
    echo "   median $(printf '%s\n' "${medians[@]}" | median) ms, p90 $(printf '%s\n' "${p90s[@]}" | median) ms" \
         "(rounds: medians ${medians[*]}; p90 ${p90s[*]})"
}

# Milliseconds `sql` takes (psql's own clock, commit included).
ms_of() {
    bench_psql <<SQL | tail -1
SELECT clock_timestamp() AS t0 \gset
$1;
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;
SQL
}

bulk() {
    echo "-- one UPDATE of N rows of a $ROWS-row table (median of $RUNS)"
    printf '%-8s %8s %14s %16s %8s %18s\n' "capture" "rows" "plain ms" "registered ms" "ratio" \
        "captured rows/s"
    for mode in trigger wal; do
        set_capture "$mode"
        for n in $BULK; do
            local plain=() registered=() capture=()
            for _ in $(seq "$RUNS"); do
                fresh_table no
                plain+=("$(ms_of "UPDATE w SET v = v + 1 WHERE id <= $n")")
                fresh_table yes
                registered+=("$(ms_of "UPDATE w SET v = v + 1 WHERE id <= $n")")
                capture+=("$(ms_of "SELECT decoupled.wait_for_capture('600 s')")")
            done
            local p r c rate=-
            p=$(printf '%s\n' "${plain[@]}" | median)
            r=$(printf '%s\n' "${registered[@]}" | median)
            c=$(printf '%s\n' "${capture[@]}" | median)
            [ "$mode" = wal ] && rate=$(printf '%.0f' "$(echo "2 * $n / ($c / 1000)" | bc -l)")
            printf '%-8s %8s %14.1f %16.1f %7.2fx %18s\n' "$mode" "$n" "$p" "$r" \
                "$(echo "$r / $p" | bc -l)" "$rate"
        done
    done
}

# pending: the same WAL-captured writers with the table's pending changes
# logged (decoupled.capture_unticked_wal_limit = 0, as before they were
# unlogged) and unlogged (the default), interleaved: tps, the workers' CPU
# and the WAL written per transaction, until capture took the run in.
set_unticked_limit() {  # value | default
    if [ "$1" = default ]; then
        bench_psql >/dev/null -c "ALTER SYSTEM RESET decoupled.capture_unticked_wal_limit" \
            -c "SELECT pg_reload_conf()"
    else
        bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.capture_unticked_wal_limit = '$1'" \
            -c "SELECT pg_reload_conf()"
    fi
}

pending() {
    echo "-- WAL capture, the table's pending changes logged against unlogged (the default)," \
         "$ROWS-row table (median of $RUNS x ${SECONDS_PER_RUN}s, interleaved)"
    printf '%-9s %8s %11s %14s %10s %13s %14s %10s %8s\n' "statement" "clients" "logged tps" \
        "worker us/txn" "WAL B/txn" "unlogged tps" "worker us/txn" "WAL B/txn" "ratio"
    set_capture wal
    local statement clients
    for statement in $STATEMENTS; do
        for clients in $CLIENT_COUNTS; do
            local tps_l=() cpu_l=() wal_l=() tps_u=() cpu_u=() wal_u=() limit
            for _ in $(seq "$RUNS"); do
                for limit in 0 default; do
                    set_unticked_limit "$limit"
                    fresh_table yes
                    # A tick that moves a captured row leaves pending empty:
                    # unlogged from then on, unless the limit is 0.
                    bench_psql >/dev/null -c "INSERT INTO w (k, v) VALUES (1, 1)" \
                        -c "SELECT decoupled.wait_for_capture('60 s')" -c "SELECT decoupled.tick_tables()"
                    local before after run tps
                    before=$(bench_psql -c "SELECT pg_current_wal_insert_lsn()")
                    run=$(registered_run "$statement" "$clients")
                    after=$(bench_psql -c "SELECT pg_current_wal_insert_lsn()")
                    tps=${run% *}
                    local bytes
                    bytes=$(bench_psql -c "SELECT round(pg_wal_lsn_diff('$after', '$before')
                                                        / ($tps * $SECONDS_PER_RUN))")
                    if [ "$limit" = 0 ]; then
                        tps_l+=("$tps"); cpu_l+=("${run#* }"); wal_l+=("$bytes")
                    else
                        tps_u+=("$tps"); cpu_u+=("${run#* }"); wal_u+=("$bytes")
                    fi
                done
            done
            local l u
            l=$(printf '%s\n' "${tps_l[@]}" | median)
            u=$(printf '%s\n' "${tps_u[@]}" | median)
            printf '%-9s %8s %11.0f %14.1f %10.0f %13.0f %14.1f %10.0f %7.2fx\n' "$statement" \
                "$clients" "$l" "$(printf '%s\n' "${cpu_l[@]}" | median)" \
                "$(printf '%s\n' "${wal_l[@]}" | median)" "$u" \
                "$(printf '%s\n' "${cpu_u[@]}" | median)" "$(printf '%s\n' "${wal_u[@]}" | median)" \
                "$(echo "$u / $l" | bc -l)"
        done
    done
    set_unticked_limit default
}

for part in "${PARTS[@]}"; do
    "$part"
done
echo "-- capture at the end (status|lag bytes|retained WAL bytes): $(bench_psql -c "SELECT concat_ws('|', status, lag_bytes, retained_wal_bytes) FROM decoupled.capture")"
