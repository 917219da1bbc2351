#!/usr/bin/env bash
# What a burst of captured changes costs the ticks that follow it (brief
# C14.3): pgbench single-row INSERTs at RATE rows/s (CLIENTS clients) into a
# registered table of ROWS rows with a primary key, WAL capture, the
# controller ticking every 100 ms; SECONDS_PER_RUN s in all, and BURST_AT s
# in, one UPDATE of BURST rows.  Pending (c<id>_pending) is a queue: every
# tick empties it, and the pages the burst grew it to stay until something
# gives it a new file.  Printed: the controller's CPU (its ticks) before the
# burst and from SETTLE s after it to the end, in % of one core, and
# pending's pages at the end; medians of RUNS runs (a fresh table each).
#
#   bash bench/pending_burst.sh   (ROWS=200000 BURST=100000 RATE=800 CLIENTS=2
#                                  SECONDS_PER_RUN=40 BURST_AT=5 SETTLE=10 RUNS=3)
#   PG_CONFIG=/other/pg_config bash bench/pending_burst.sh   (another build)
ROWS=${ROWS:-200000}
BURST=${BURST:-100000}
RATE=${RATE:-800}
CLIENTS=${CLIENTS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-40}
BURST_AT=${BURST_AT:-5}
SETTLE=${SETTLE:-10}
RUNS=${RUNS:-3}
BENCH_CONF=$'wal_level = logical\ndecoupled.table_tick_interval = \'100ms\''
source "$(dirname "$0")/lib.sh"
export PGOPTIONS="-c client_min_messages=warning"
print_run_header "ROWS=$ROWS BURST=$BURST RATE=$RATE CLIENTS=$CLIENTS SECONDS_PER_RUN=$SECONDS_PER_RUN BURST_AT=$BURST_AT SETTLE=$SETTLE RUNS=$RUNS bash bench/pending_burst.sh"

hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pct() { awk -v d="$1" -v hz="$hz" -v s="$2" 'BEGIN {printf "%.1f", d * 100 / hz / s}'; }
controller=$(bench_psql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pg_decoupled controller' LIMIT 1")

printf '%-4s %22s %22s %16s\n' run "controller, before %" "controller, after %" "pending pages"
before_all=() after_all=() pages_all=()
for run in $(seq "$RUNS"); do
    bench_psql <<SQL >/dev/null
DROP TABLE IF EXISTS b;
DROP SEQUENCE IF EXISTS b_id;
CREATE SEQUENCE b_id START $((ROWS + 1));
CREATE TABLE b (id bigint PRIMARY KEY, k int NOT NULL, v int NOT NULL);
INSERT INTO b SELECT g, g % 1000, g FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE b;
SELECT decoupled.register_table('b', retain_history => '1 second');
SELECT decoupled.wait_for_capture('60s');
SQL
    echo "INSERT INTO b VALUES (nextval('b_id'), (random() * 999)::int, 1);" >"$BENCH_DIR/b.sql"
    chown "$RUN_USER" "$BENCH_DIR/b.sql"
    bench_pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" -R "$RATE" \
        -f "$BENCH_DIR/b.sql" >/dev/null 2>&1 &
    writers=$!
    sleep 1
    c0=$(ticks "$controller")
    sleep $((BURST_AT - 1))
    c1=$(ticks "$controller")
    bench_psql -c "UPDATE b SET v = v + 1 WHERE id <= $BURST" >/dev/null
    sleep "$SETTLE"
    c2=$(ticks "$controller")
    wait "$writers"
    c3=$(ticks "$controller")
    elapsed=$((SECONDS_PER_RUN - BURST_AT - SETTLE))
    before=$(pct $((c1 - c0)) $((BURST_AT - 1)))
    after=$(pct $((c3 - c2)) "$elapsed")
    pages=$(bench_psql -c "SELECT pg_relation_size(format('decoupled_storage.c%s_pending',
        (SELECT lifetime_id FROM decoupled.objects WHERE name = 'b'))::regclass) / 8192")
    printf '%-4s %22s %22s %16s\n' "$run" "$before" "$after" "$pages"
    before_all+=("$before") after_all+=("$after") pages_all+=("$pages")
    bench_psql -c "SELECT decoupled.unregister_table('b')" >/dev/null
done
printf '%-4s %22s %22s %16s\n' median "$(printf '%s\n' "${before_all[@]}" | median)" \
    "$(printf '%s\n' "${after_all[@]}" | median)" "$(printf '%s\n' "${pages_all[@]}" | median)"
echo "# controller: its backend's CPU in % of one core, 1..${BURST_AT} s (before) and $((BURST_AT + SETTLE))..${SECONDS_PER_RUN} s (after the burst settled)"
