#!/usr/bin/env bash
# The collection write path (brief C2.1, C14.3), in one throwaway server
# (bench/lib.sh):
#
#   append  decoupled.append() by one writer (compare-and-append serializes
#           writers of one collection) of batches of 1, 100 and 10,000 rows
#           (BATCHES), built as JSON in the same statement: pgbench, median
#           of RUNS runs of SECONDS_PER_RUN s each.  Beside it, in the same
#           run, the floor of each batch (the same statement without the
#           append: the upper's look-up and the JSON), so that latency -
#           floor is what the append costs, and a single-row INSERT into a
#           plain table (a write and its commit).
#   tick    decoupled.tick_tables() moving CHANGES captured rows of a
#           registered table of BASE_ROWS rows into history, after an
#           INSERT of that many new rows, an UPDATE of them (two captured
#           changes a row: its retraction and its new version) and a DELETE
#           of them (retractions); median of RUNS ticks each, from the
#           statement's start to its commit (psql's \timing).
#   idle    decoupled.tick_tables() with IDLE_TABLES registered tables and
#           nothing captured: median of RUNS ticks.
# Ticks run in one session that has already ticked WARMUP rounds of each
# size (not counted), as the controller's long-lived session has: what a
# tick costs, not what a new backend costs.  A new backend's first ticks
# also pay for its first touch of each page of shared memory it writes
# (the WAL buffers, 16 MB at these settings, and the buffer pool): on the
# project's virtual machine a 1,000-insert tick took 5.2 ms in a new
# session and 3.2-4.3 ms forty ticks later (docs/performance.md).
#
# CAPTURE=wal: the server runs with wal_level = logical, so the table is
# captured from the WAL (C14.1) and every timed tick first waits for
# capture (wait_for_capture, not timed).  SPREAD=random: the UPDATE and
# DELETE of a round change CHANGES rows at random over the whole table
# instead of the rows the round inserted — what writers of a large table
# do, and the tick then probes and writes all over its indexes.
#
#   bash bench/append_throughput.sh [append|tick|idle ...]
#   (RUNS=5 SECONDS_PER_RUN=10 BATCHES="1 100 10000" BASE_ROWS=100000
#    CHANGES="1000 100000" IDLE_TABLES=1000 WARMUP=10)
#
# The controller's own ticks are off (decoupled.table_tick_interval = 0):
# a tick between a writer's reading the upper and its append would make the
# append lose the race, and one during a timed tick would take its rows.
# Commits do not wait for the WAL flush (synchronous_commit = off): the
# flush costs any write the same (several ms on a busy shared disk) and
# would hide what the write path itself costs; the plain INSERT floor shows
# what is left of a commit.
CMDLINE=("$0" "$@")
BENCH_CONF="decoupled.table_tick_interval = 0"$'\n'"synchronous_commit = off"$'\n'"${BENCH_CONF:-}"
CAPTURE=${CAPTURE:-trigger}
SPREAD=${SPREAD:-inserted}
if [ "$CAPTURE" = wal ]; then BENCH_CONF+=$'\n'"wal_level = logical"; fi
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
BATCHES=${BATCHES:-1 100 10000}
BASE_ROWS=${BASE_ROWS:-100000}
CHANGES=${CHANGES:-1000 100000}
IDLE_TABLES=${IDLE_TABLES:-1000}
WARMUP=${WARMUP:-10}
PARTS=("$@")
if [ ${#PARTS[@]} -eq 0 ]; then PARTS=(append tick idle); fi

echo "# ${CMDLINE[*]}  (RUNS=$RUNS SECONDS_PER_RUN=$SECONDS_PER_RUN BATCHES=\"$BATCHES\"" \
     "BASE_ROWS=$BASE_ROWS CHANGES=\"$CHANGES\" IDLE_TABLES=$IDLE_TABLES CAPTURE=$CAPTURE" \
     "SPREAD=$SPREAD WARMUP=$WARMUP)"
echo "# commit $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"

# pgbench latency (ms) of the script $1, median of RUNS runs
pgbench_latency() {
    printf '%s\n' "$1" > "$BENCH_DIR/q.sql"
    chown "$RUN_USER" "$BENCH_DIR/q.sql"
    for _ in $(seq "$RUNS"); do
        bench_pgbench -n -M prepared -c 1 -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/q.sql" 2>/dev/null |
            sed -nE 's/^latency average = ([0-9.]+) ms/\1/p'
    done | median
}

# Timing one statement in a session: `measured LABEL STATEMENT` prints the
# SQL that runs it so that marked_timings reports "LABEL wall_ms cpu_ms":
# the wall time psql's \timing reports, and the CPU time the backend spent
# on it (from /proc/self/schedstat, read by the backend itself), which the
# other work on a shared machine disturbs much less.
measured() {
    local label=$1
    shift
    cat <<SQL
SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint AS cpu0 \\gset
\\echo mark $label
$*
SELECT 'cpu ' || (split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - :cpu0) / 1e6;
SQL
}
# The same statement, not timed (a warm-up round).
untimed() { shift; echo "$*"; }
marked_timings() {
    { echo '\timing on'; cat; } | bench_psql |
        awk '/^mark / { label = substr($0, 6); wall = ""; next }
             /^Time: / { if (label != "" && wall == "") wall = $2; next }
             /^cpu / { if (label != "") { print label, wall, $2; label = "" } }'
}

part_append() {
    bench_psql >/dev/null <<'SQL'
CREATE TABLE appended (k bigint, v text);
SELECT decoupled.register_table('appended', retain_history => '0');
CREATE TABLE plain_floor (k bigint, v text);
SQL
    echo "-- append: one writer, pgbench -M prepared, median of $RUNS x ${SECONDS_PER_RUN}s"
    echo "-- floor: the same statement without the append (the upper's look-up, the JSON)"
    printf '%-8s %12s %10s %11s %12s %12s\n' batch "latency ms" "floor ms" "append ms" \
        "appends/s" "rows/s"
    for batch in $BATCHES; do
        local updates="(SELECT jsonb_agg(jsonb_build_object('mz_timestamp', f.upper, 'mz_diff', 1,
                         'data', jsonb_build_object('k', g, 'v', 'row ' || g)))
                  FROM generate_series(1, $batch) g)"
        ms=$(pgbench_latency "SELECT decoupled.append('appended', $updates, f.upper, f.upper + 1)
  FROM decoupled.frontiers f WHERE f.name = 'appended';")
        floor=$(pgbench_latency "SELECT f.upper, $updates
  FROM decoupled.frontiers f WHERE f.name = 'appended';")
        printf '%-8s %12.3f %10.3f %11.3f %12.1f %12.0f\n' "$batch" "$ms" "$floor" \
            "$(echo "$ms - $floor" | bc -l)" "$(echo "1000 / $ms" | bc -l)" \
            "$(echo "1000 * $batch / $ms" | bc -l)"
    done
    ms=$(pgbench_latency "INSERT INTO plain_floor VALUES (1, 'row 1');")
    printf '%-40s %12.3f\n' "plain single-row INSERT (a write and its commit)" "$ms"
}

part_tick() {
    bench_psql >/dev/null <<SQL
CREATE TABLE ticked (id bigint PRIMARY KEY, k int, v text);
CREATE TABLE gone (id bigint);
INSERT INTO ticked SELECT g, g % 1000, md5(g::text) FROM generate_series(1, $BASE_ROWS) g;
SELECT decoupled.register_table('ticked', retain_history => '0');
VACUUM ANALYZE ticked;
SQL
    local next=$((BASE_ROWS + 1)) script="$BENCH_DIR/ticks.sql" wait=""
    # With WAL capture a tick moves what capture took in: wait for it first.
    if [ "$CAPTURE" = wal ]; then wait='SELECT decoupled.wait_for_capture() \gset'; fi
    echo 'SELECT decoupled.tick_tables();' > "$script"
    for n in $CHANGES; do
        for round in $(seq $((WARMUP + RUNS))); do
            # The first WARMUP rounds run the same statements untimed.
            local tick='SELECT decoupled.tick_tables();' timed=measured
            if [ "$round" -le "$WARMUP" ]; then timed=untimed; fi
            local lo=$next hi=$((next + n - 1))
            next=$((hi + 1))
            # The rows an UPDATE and a DELETE change: the round's own, or
            # n distinct ids drawn over the whole table (those a DELETE
            # drew are inserted again after its tick, so every round finds
            # n rows to delete).
            local changed="id BETWEEN $lo AND $hi"
            if [ "$SPREAD" = random ]; then
                changed="id IN (SELECT DISTINCT (random() * ($BASE_ROWS - 1))::bigint + 1
                                  FROM generate_series(1, $n * 2) LIMIT $n)"
            fi
            {
                echo "INSERT INTO ticked SELECT g, g % 1000, md5(g::text) FROM generate_series($lo, $hi) g;"
                echo "$wait"
                $timed "insert $n" "$tick"
                echo "UPDATE ticked SET v = v || 'x' WHERE $changed;"
                echo "$wait"
                $timed "update $n" "$tick"
                echo "WITH d AS (DELETE FROM ticked WHERE $changed RETURNING id)
                      INSERT INTO gone SELECT id FROM d;"
                echo "$wait"
                $timed "delete $n" "$tick"
                if [ "$SPREAD" = random ]; then
                    echo "INSERT INTO ticked SELECT id, id % 1000, md5(id::text) FROM gone;"
                    echo "TRUNCATE gone;"
                    echo "$wait"
                    echo 'SELECT decoupled.tick_tables();'
                fi
            } >> "$script"
            cat >> "$script" <<SQL
VACUUM ticked;
SELECT format('VACUUM %s, %s, %s', decoupled._storage(lifetime_id, 'cur'),
              decoupled._storage(lifetime_id, 'dead'), decoupled._storage(lifetime_id, 'pending'))
  FROM decoupled.catalog_objects WHERE name = 'ticked' AND dropped_at IS NULL
\gexec
SQL
        done
    done
    local timings
    timings=$(marked_timings < "$script")
    echo "-- tick: a registered table of $BASE_ROWS rows, one session, median of $RUNS ticks" \
         "after $WARMUP rounds not counted;"
    echo "-- wall: statement start to commit; cpu: the backend's CPU time for it"
    printf '%-8s %8s %9s %9s %12s %9s %12s\n' change rows captured "wall ms" "captured/s" \
        "cpu ms" "captured/s"
    for n in $CHANGES; do
        for kind in insert update delete; do
            local captured=$n
            [ "$kind" = update ] && captured=$((2 * n))
            ms=$(echo "$timings" | awk -v k="$kind" -v n="$n" '$1 == k && $2 == n { print $3 }' | median)
            cpu=$(echo "$timings" | awk -v k="$kind" -v n="$n" '$1 == k && $2 == n { print $4 }' | median)
            printf '%-8s %8d %9d %9.1f %12.0f %9.1f %12.0f\n' "$kind" "$n" "$captured" "$ms" \
                "$(echo "1000 * $captured / $ms" | bc -l)" "$cpu" "$(echo "1000 * $captured / $cpu" | bc -l)"
        done
    done
}

part_idle() {
    bench_psql >/dev/null <<SQL
SELECT format('CREATE TABLE idle_%s (k bigint, v text)', g) FROM generate_series(1, $IDLE_TABLES) g
\\gexec
SELECT format('SELECT decoupled.register_table(%L, retain_history => ''0'')', 'idle_' || g)
  FROM generate_series(1, $IDLE_TABLES) g
\\gexec
SQL
    local tables
    tables=$(bench_psql -c "SELECT count(*) FROM decoupled.catalog_objects
                             WHERE kind = 'table' AND dropped_at IS NULL")
    local timings
    timings=$({ echo 'SELECT decoupled.tick_tables();'
                for _ in $(seq "$RUNS"); do measured idle 'SELECT decoupled.tick_tables();'; done
              } | marked_timings)
    ms=$(echo "$timings" | awk '{ print $2 }' | median)
    cpu=$(echo "$timings" | awk '{ print $3 }' | median)
    echo "-- idle: $tables registered tables, nothing captured, one session, median of $RUNS ticks"
    printf '%-10s %10s %12s %10s %12s\n' tables "wall ms" "us/table" "cpu ms" "us/table"
    printf '%-10d %10.1f %12.1f %10.1f %12.1f\n' "$tables" "$ms" "$(echo "1000 * $ms / $tables" | bc -l)" \
        "$cpu" "$(echo "1000 * $cpu / $tables" | bc -l)"
}

for part in "${PARTS[@]}"; do
    case $part in
        append|tick|idle) "part_$part" ;;
        *) echo "unknown part '$part' (append, tick, idle)" >&2; exit 2 ;;
    esac
done
