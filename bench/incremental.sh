#!/usr/bin/env bash
# Incremental maintenance (brief C13.5, issue 11 item 6), two measurements
# side by side in one throwaway server (bench/lib.sh):
#
#   step     per-step cost of four view shapes over a registered table
#            t(id, k, v) of ROWS rows in NGROUPS groups (and d(g, name) of
#            NGROUPS rows for the join):
#              group  SELECT k, count(*), sum(v) FROM t GROUP BY k
#              join   SELECT d.name, count(*), sum(t.v) FROM t JOIN d
#                       ON d.g = t.k GROUP BY d.name
#              minmax SELECT k, min(v), max(v) FROM t GROUP BY k
#              left   SELECT d.g, count(t.id), sum(t.v) FROM d LEFT JOIN t
#                       ON t.k = d.g GROUP BY d.g   (the partitions strategy)
#            after UPDATEs of v in 1, 1,000 and 100,000 random rows (CHANGES),
#            against REFRESH MATERIALIZED VIEW CONCURRENTLY of the same query
#            on a plain copy changed the same way, and pg_ivm where it is
#            installed ("skipped" otherwise); medians of RUNS each
#   writers  pgbench single-row INSERT into a ROWS-row registered table that
#            feeds ten views, at each of CLIENTS_LIST clients, against the
#            same pgbench on a plain table (medians of RUNS runs of
#            SECONDS_PER_RUN s), the CPU the extension's processes (its
#            workers and the replicas' sessions) spent per writer
#            transaction until the views caught up and the run's history
#            past retention was compacted, and the views' lag
#            sampled every LAG_SAMPLE_MS during the registered runs
#
#   bash bench/incremental.sh [step|writers ...]
#   (ROWS=1000000 NGROUPS=1000 CHANGES="1 1000 100000" SHAPES="group join minmax left" RUNS=5
#    SECONDS_PER_RUN=10 CLIENTS_LIST="2 8" TICK_INTERVAL=100ms
#    LAG_SAMPLE_MS=50 WAL_LEVEL=logical)
#
# The step is what the replica spends, seen from outside: from the commit of
# the tick that makes the change history (decoupled.tick_tables()) until
# decoupled.wait_for_upper says the view's upper passed that tick.  That wall
# time includes a fixed part every step pays whatever changed (the replica's
# wake-up, reading its catalog, appending the new upper, the waiter's
# wake-up), measured as an idle step: a tick with no change.  The table
# reports wall, idle and net = wall - idle; the ratio is net / REFRESH.
# Neither side includes writing the change (the UPDATE; for pg_decoupled
# also the tick, shown apart).  pg_ivm maintains inside the writer's
# statement, so its cost is its UPDATE's time minus the plain copy's.
#
# Everything is bounded: a step or a view's creation slower than
# STEP_TIMEOUT stops the driver with wait_for_upper's error; views that have
# not caught up CATCHUP_TIMEOUT s after a writers run print a warning and
# the next run starts anyway.
CMDLINE=("$0" "$@")
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
ROWS=${ROWS:-1000000}
NGROUPS=${NGROUPS:-1000}
CHANGES=${CHANGES:-1 1000 100000}
SHAPES=${SHAPES:-group join minmax left}
RUNS=${RUNS:-5}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENTS_LIST=${CLIENTS_LIST:-2 8}
TICK_INTERVAL=${TICK_INTERVAL:-100ms}
LAG_SAMPLE_MS=${LAG_SAMPLE_MS:-50}
WAL_LEVEL=${WAL_LEVEL:-logical}
STEP_TIMEOUT=${STEP_TIMEOUT:-600s}          # one step, or a view's creation
CATCHUP_TIMEOUT=${CATCHUP_TIMEOUT:-30}      # s, views catching up after writers

# WAL-based capture (C14.1) needs wal_level = logical; pg_ivm needs preloading.
# BENCH_CONF: more postgresql.conf lines (decoupled.capture_unticked_wal_limit
# = 0, say, to measure with logged pending changes).
BENCH_CONF="wal_level = $WAL_LEVEL"$'\n'"${BENCH_CONF:-}"
IVM_LIB="$("$PG_CONFIG" --pkglibdir)/pg_ivm.so"
if [ -f "$IVM_LIB" ]; then
    BENCH_CONF+=$'\n'"shared_preload_libraries = 'pg_decoupled,pg_ivm'"
fi
source "$(dirname "$0")/lib.sh"
export PGOPTIONS="-c client_min_messages=warning"
PARTS=("$@")
if [ ${#PARTS[@]} -eq 0 ]; then PARTS=(step writers); fi
SUMMARY_STEP=()
SUMMARY_WRITERS=()

# x / y with 2 decimals, "-" when either is missing or y is 0
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x == "" || y == "" || x == "-" || y == "-" || y + 0 == 0) print "-"; else printf "%.2f", x / y }'; }
# x - y, at least 0
minus() { awk -v x="$1" -v y="$2" 'BEGIN { d = x - y; printf "%.2f", (d < 0 ? 0 : d) }'; }
# "yes"/"no": $1 <= $2
within() { awk -v x="$1" -v y="$2" 'BEGIN { if (x == "-" || y == "-") print "-"; else print (x + 0 <= y + 0 ? "yes" : "no") }'; }
# $2 if $1 is 1, else nothing (always succeeds, for use in $(...))
when1() { if [ "$1" = 1 ]; then echo "$2"; fi; }
# column $1 (1-based, '|'-separated) of the lines on stdin, median
col_median() { cut -d'|' -f"$1" | median; }

header() {
    local env_line="" v
    for v in PG_CONFIG ROWS NGROUPS CHANGES RUNS SECONDS_PER_RUN CLIENTS_LIST TICK_INTERVAL \
        LAG_SAMPLE_MS WAL_LEVEL STEP_TIMEOUT CATCHUP_TIMEOUT; do
        env_line+="$v=$(printf '%q' "${!v}") "
    done
    echo "# command: ${env_line}bash ${CMDLINE[*]}"
    echo "# started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (modified)')"
    echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# server: $(bench_psql -c 'SHOW server_version'), shared_buffers $(bench_psql -c 'SHOW shared_buffers'), wal_level $(bench_psql -c 'SHOW wal_level'), pg_decoupled $(bench_psql -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_decoupled'")"
    local capture
    capture=$(bench_psql -c "SELECT current_setting('decoupled.capture', true)")
    echo "# decoupled.capture: ${capture:-(no such setting: statement triggers)}"
}

# The view's maintenance strategy where the extension reports one (C13.3):
# any public view of the decoupled schema with columns name and strategy.
strategy_of() {
    local rel
    rel=$(bench_psql -c "SELECT c.table_name FROM information_schema.columns c
        JOIN information_schema.columns n USING (table_schema, table_name)
        WHERE c.table_schema = 'decoupled' AND c.column_name = 'strategy'
          AND n.column_name = 'name' ORDER BY 1 LIMIT 1")
    if [ -z "$rel" ]; then echo "not reported"; return; fi
    bench_psql -c "SELECT coalesce(string_agg(DISTINCT strategy::text, ', '), '?')
        FROM decoupled.$rel WHERE name = '$1'"
}

ivm_available() {
    [ "$(bench_psql -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_ivm'")" = 1 ] &&
        [ -f "$IVM_LIB" ]
}

###############################################################################
step() {
    local ivm=0 ivm_fn=""
    if ivm_available; then
        bench_psql >/dev/null -c "CREATE EXTENSION IF NOT EXISTS pg_ivm"
        ivm_fn=$(bench_psql -c "SELECT quote_ident(n.nspname) || '.create_immv' FROM pg_proc p
            JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = 'create_immv' LIMIT 1")
        if [ -n "$ivm_fn" ]; then ivm=1; fi
    fi
    echo
    echo "-- step: setting up $ROWS rows in $NGROUPS groups (three copies: registered, plain$(when1 $ivm ', pg_ivm'))"
    bench_psql -c "ALTER SYSTEM SET decoupled.table_tick_interval = 0" \
        -c "SELECT pg_reload_conf()" >/dev/null
    # perm: a random order of the row ids, and for each row the amount its v
    # moves when it changes (either sign, up to ROWS: min and max move too).
    # A run changes the rows of a window of perm; every copy the same rows.
    bench_psql >/dev/null <<SQL
CREATE TABLE perm (r int PRIMARY KEY, id int NOT NULL, delta int NOT NULL);
INSERT INTO perm
SELECT row_number() OVER (ORDER BY random()), g,
       (CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END) * (1 + floor(random() * $ROWS))::int
  FROM generate_series(1, $ROWS) g;
CREATE TABLE plain_t (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL);
INSERT INTO plain_t SELECT g, g % $NGROUPS, g FROM generate_series(1, $ROWS) g;
CREATE TABLE plain_d (g int PRIMARY KEY, name text NOT NULL);
INSERT INTO plain_d SELECT g, 'group ' || g FROM generate_series(0, $NGROUPS - 1) g;
CREATE TABLE t (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL);
INSERT INTO t SELECT * FROM plain_t;
CREATE TABLE d (g int PRIMARY KEY, name text NOT NULL);
INSERT INTO d SELECT * FROM plain_d;
$(when1 $ivm "CREATE TABLE ivm_t (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL);
INSERT INTO ivm_t SELECT * FROM plain_t;
CREATE TABLE ivm_d (g int PRIMARY KEY, name text NOT NULL);
INSERT INTO ivm_d SELECT * FROM plain_d;")
VACUUM ANALYZE;
SELECT decoupled.register_table('t', retain_history => '1 second');
SELECT decoupled.register_table('d', retain_history => '1 second');
SELECT decoupled.tick_tables();
SQL
    [ $ivm = 1 ] || echo "pg_ivm: skipped (not installed)"

    # name | query over T and D | the plain MV's unique key
    local shapes=(
        "group|SELECT k, count(*) AS n, sum(v) AS s FROM {T} GROUP BY k|k"
        "join|SELECT d.name, count(*) AS n, sum(t.v) AS s FROM {T} t JOIN {D} d ON d.g = t.k GROUP BY d.name|name"
        "minmax|SELECT k, min(v) AS lo, max(v) AS hi FROM {T} GROUP BY k|k"
        "left|SELECT d.g, count(t.id) AS n, sum(t.v) AS s FROM {D} d LEFT JOIN {T} t ON t.k = d.g GROUP BY d.g|g"
    )
    local off=0 idle_runs=$((RUNS > 5 ? RUNS : 5))
    local shape name tmpl key q_reg q_plain q_ivm
    for shape in "${shapes[@]}"; do
        IFS='|' read -r name tmpl key <<<"$shape"
        [[ " $SHAPES " == *" $name "* ]] || continue
        q_reg=${tmpl//\{T\}/t}; q_reg=${q_reg//\{D\}/d}
        q_plain=${tmpl//\{T\}/plain_t}; q_plain=${q_plain//\{D\}/plain_d}
        q_ivm=${tmpl//\{T\}/ivm_t}; q_ivm=${q_ivm//\{D\}/ivm_d}
        local created
        created=$(bench_psql <<SQL | tail -1
CREATE MATERIALIZED VIEW plain_mv AS $q_plain;
CREATE UNIQUE INDEX ON plain_mv ($key);
SELECT clock_timestamp() AS c0 \gset
SELECT decoupled.create_materialized_view('inc_$name', \$q\$$q_reg\$q\$) IS NOT NULL AS created \gset
SELECT decoupled.wait_for_upper('inc_$name',
    (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 't'), '$STEP_TIMEOUT') IS NOT NULL AS done \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'c0'::timestamptz)::numeric, 1);
SQL
)
        local ivm_here=$ivm
        if [ $ivm = 1 ] && ! bench_psql >/dev/null -c "SELECT $ivm_fn('ivm_mv', \$q\$$q_ivm\$q\$)"; then
            echo "pg_ivm: create_immv refused this query"
            ivm_here=0
        fi
        echo
        echo "-- step: $name: $q_reg"
        echo "   view created and hydrated in ${created}s; strategy: $(strategy_of "inc_$name")"

        # One run: change rows r in [lo, hi] of perm in every copy.
        # Prints: update plain | refresh | update ivm | update registered | tick | step (ms)
        one_run() {
            local lo=$1 hi=$2
            bench_psql <<SQL | tail -1
SELECT clock_timestamp() AS t0 \gset
UPDATE plain_t x SET v = x.v + p.delta FROM perm p WHERE p.r BETWEEN $lo AND $hi AND x.id = p.id;
SELECT clock_timestamp() AS t1 \gset
REFRESH MATERIALIZED VIEW CONCURRENTLY plain_mv;
SELECT clock_timestamp() AS t2 \gset
$(when1 "$ivm_here" "UPDATE ivm_t x SET v = x.v + p.delta FROM perm p WHERE p.r BETWEEN $lo AND $hi AND x.id = p.id;")
SELECT clock_timestamp() AS t3 \gset
UPDATE t x SET v = x.v + p.delta FROM perm p WHERE p.r BETWEEN $lo AND $hi AND x.id = p.id;
SELECT clock_timestamp() AS t4 \gset
SELECT decoupled.tick_tables() IS NOT NULL AS ticked \gset
SELECT clock_timestamp() AS t5, upper - 1 AS u FROM decoupled.frontiers WHERE name = 't' \gset
SELECT decoupled.wait_for_upper('inc_$name', :u, '$STEP_TIMEOUT') IS NOT NULL AS done \gset
SELECT clock_timestamp() AS t6 \gset
SELECT concat_ws('|', $(for i in 0 1 2 3 4 5; do
                printf "round((extract(epoch FROM :'t%d'::timestamptz - :'t%d'::timestamptz) * 1000)::numeric, 3)%s" \
                    $((i + 1)) $i "$(if [ $i -lt 5 ]; then echo ,; fi)"; done));
SQL
        }
        # Idle steps: a tick with nothing changed (the fixed part of a step).
        local idle=()
        for _ in $(seq "$idle_runs"); do
            idle+=("$(bench_psql <<SQL | tail -1
SELECT decoupled.tick_tables() IS NOT NULL AS ticked \gset
SELECT clock_timestamp() AS t0, upper - 1 AS u FROM decoupled.frontiers WHERE name = 't' \gset
SELECT decoupled.wait_for_upper('inc_$name', :u, '$STEP_TIMEOUT') IS NOT NULL AS done \gset
SELECT round((extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000)::numeric, 3);
SQL
)")
        done
        local idle_ms
        idle_ms=$(printf '%s\n' "${idle[@]}" | median)
        if [ $((off + 1)) -gt "$ROWS" ]; then off=0; fi
        one_run $((off + 1)) $((off + 1)) >/dev/null  # warm-up, not counted
        off=$((off + 1))

        printf '   %-9s %12s %12s %10s %12s %8s %10s %12s\n' "changed" "REFRESH CC" "step wall" \
            "idle" "step net" "ratio" "tick" "pg_ivm"
        local n
        for n in $CHANGES; do
            if [ "$n" -gt "$ROWS" ]; then n=$ROWS; fi
            local lines=()
            for _ in $(seq "$RUNS"); do
                if [ $((off + n)) -gt "$ROWS" ]; then off=0; fi
                lines+=("$(one_run $((off + 1)) $((off + n)))")
                off=$((off + n))
            done
            local upd refresh upd_ivm tick wall net ivm_ms
            upd=$(printf '%s\n' "${lines[@]}" | col_median 1)
            refresh=$(printf '%s\n' "${lines[@]}" | col_median 2)
            tick=$(printf '%s\n' "${lines[@]}" | col_median 5)
            wall=$(printf '%s\n' "${lines[@]}" | col_median 6)
            net=$(minus "$wall" "$idle_ms")
            if [ "$ivm_here" = 1 ]; then
                # per run: UPDATE with the IMMV minus the plain UPDATE
                ivm_ms=$(printf '%s\n' "${lines[@]}" | awk -F'|' '{d = $3 - $1; print (d < 0 ? 0 : d)}' | median)
                ivm_ms=$(printf '%.1f ms' "$ivm_ms")
            else
                ivm_ms=skipped
            fi
            local r target ok
            r=$(ratio "$net" "$refresh")
            case $n in
                1) target="<= 5 ms"; ok=$(within "$net" 5) ;;
                1000) target="<= 0.05x"; ok=$(within "$r" 0.05) ;;
                100000) target="<= 1x"; ok=$(within "$r" 1) ;;
                *) target="none"; ok="-" ;;
            esac
            printf '   %-9s %9.1f ms %9.1f ms %7.1f ms %9.1f ms %7sx %7.1f ms %12s\n' "$n" "$refresh" \
                "$wall" "$idle_ms" "$net" "$r" "$tick" "$ivm_ms"
            SUMMARY_STEP+=("| $name | $n | $(printf '%.1f' "$refresh") ms | $(printf '%.1f' "$net") ms ($(printf '%.1f' "$wall") wall) | ${r}x | $ivm_ms | $target: $ok |")
        done
        echo "   (plain UPDATE of the changed rows, not counted: median $(printf '%s\n' "${lines[@]}" | col_median 1) ms at the last size)"
        bench_psql >/dev/null -c "DROP MATERIALIZED VIEW plain_mv" -c "SELECT decoupled.drop('inc_$name')"
        if [ "$ivm_here" = 1 ]; then bench_psql >/dev/null -c "DROP TABLE ivm_mv"; fi
    done
    bench_psql >/dev/null -c "SELECT decoupled.drop('t')" -c "SELECT decoupled.drop('d')" \
        -c "DROP TABLE IF EXISTS t, d, plain_t, plain_d, ivm_t, ivm_d, perm CASCADE"
}

###############################################################################
writers() {
    local views=10
    echo
    echo "-- writers: setting up $ROWS rows, plain and registered, $views views"
    # The controller ticks the table, every TICK_INTERVAL ('default': the GUC's).
    if [ "$TICK_INTERVAL" = default ]; then
        bench_psql >/dev/null -c "ALTER SYSTEM RESET decoupled.table_tick_interval" -c "SELECT pg_reload_conf()"
    else
        bench_psql >/dev/null -c "ALTER SYSTEM SET decoupled.table_tick_interval = '$TICK_INTERVAL'" \
            -c "SELECT pg_reload_conf()"
    fi
    bench_psql >/dev/null <<SQL
CREATE SEQUENCE plain_w_id START $((ROWS + 1));
CREATE TABLE plain_w (id bigint PRIMARY KEY DEFAULT nextval('plain_w_id'), k int NOT NULL, v int NOT NULL);
INSERT INTO plain_w SELECT g, g % $NGROUPS, g FROM generate_series(1, $ROWS) g;
CREATE SEQUENCE w_id START $((ROWS + 1));
CREATE TABLE w (id bigint PRIMARY KEY DEFAULT nextval('w_id'), k int NOT NULL, v int NOT NULL);
INSERT INTO w SELECT * FROM plain_w;
VACUUM ANALYZE plain_w, w;
SELECT decoupled.register_table('w', retain_history => '1 second');
CREATE TABLE lag_samples (clients int, run int, at timestamptz, name text,
                          lag_ms bigint, behind_ms bigint);
SQL
    local i created
    created=$(bench_psql <<SQL | tail -1
SELECT clock_timestamp() AS c0 \gset
$(for i in $(seq $views); do
    echo "SELECT decoupled.create_materialized_view('w_view$i',
    'SELECT k % $((i * 10)) AS bucket, count(*) AS n, sum(v) AS s FROM w GROUP BY 1') IS NOT NULL AS c \gset"
done)
SELECT round(extract(epoch FROM clock_timestamp() - :'c0'::timestamptz)::numeric, 1);
SQL
)
    echo "   $views views created in ${created}s: SELECT k % n AS bucket, count(*), sum(v) FROM w GROUP BY 1, n = 10, 20, ..., $((views * 10)); strategy: $(strategy_of w_view1)"
    echo "INSERT INTO plain_w (k, v) VALUES ((random() * $NGROUPS)::int, 1);" >"$BENCH_DIR/plain.sql"
    echo "INSERT INTO w (k, v) VALUES ((random() * $NGROUPS)::int, 1);" >"$BENCH_DIR/reg.sql"
    chown "$RUN_USER" "$BENCH_DIR/plain.sql" "$BENCH_DIR/reg.sql"

    # The statements that tick w (after capture took in what was committed)
    # and wait until every view has caught up with that tick (a warning if
    # some view did not within CATCHUP_TIMEOUT).
    catch_up_sql() {
        cat <<SQL
SELECT decoupled.tick_tables() IS NOT NULL AS ticked \gset
DO \$\$
DECLARE
    u bigint;
BEGIN
    SELECT upper - 1 INTO u FROM decoupled.frontiers WHERE name = 'w';
    FOR i IN 1 .. $views LOOP
        PERFORM decoupled.wait_for_upper('w_view' || i, u, '${CATCHUP_TIMEOUT}s');
    END LOOP;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RAISE WARNING 'views did not catch up within ${CATCHUP_TIMEOUT}s';
END
\$\$;
SQL
    }
    # Back to ROWS rows; for the registered table, tick and wait until every
    # view has caught up: prints the seconds that took.
    reset_table() {
        bench_psql -c "DELETE FROM $1 WHERE id > $ROWS" -c "VACUUM $1"
        [ "$1" = w ] || return 0
        bench_psql <<SQL | tail -1
SELECT clock_timestamp() AS c0 \gset
$(catch_up_sql)
SELECT round(extract(epoch FROM clock_timestamp() - :'c0'::timestamptz)::numeric, 2);
SQL
    }
    pgbench_tps() {
        bench_pgbench -n -c "$1" -j "$1" -T "$SECONDS_PER_RUN" -f "$BENCH_DIR/$2" 2>/dev/null |
            sed -nE 's/^tps = ([0-9.]+) .*/\1/p'
    }
    # Compaction of history older than the table's retention (1 s), at once
    # rather than at the next publication: before a measured run, so that
    # the history the reset's deletes made is not counted in it; after, so
    # that its own is.
    compact_now() {
        bench_psql >/dev/null -c "SELECT pg_sleep(1.2)" -c "SELECT decoupled.publish_bounds()" \
            -c "SELECT decoupled.apply_compaction()"
    }
    # A registered run: its tps and what the extension's processes spent per
    # writer transaction, in microseconds, until every view had caught up
    # with the run's last tick — what the throughput ratio hides on a
    # machine whose load drifts from run to run.
    registered_run() {  # clients
        local before after tps
        compact_now
        before=$(extension_cpu_ticks)
        tps=$(pgbench_tps "$1" reg.sql)
        catch_up_sql | bench_psql >/dev/null
        compact_now
        after=$(extension_cpu_ticks)
        echo "$tps $(echo "($after - $before) * 1000000 / $(getconf CLK_TCK) / ($tps * $SECONDS_PER_RUN)" | bc -l)"
    }
    # The views' and the table's lag, every LAG_SAMPLE_MS while writers run:
    # lag_ms = oracle now - upper (decoupled.frontiers); behind_ms = the
    # table's upper - the view's (how far the view is behind its input).
    sample_lag() {
        local n=$((SECONDS_PER_RUN * 1000 / LAG_SAMPLE_MS))
        bench_psql >/dev/null <<SQL
DO \$\$
DECLARE
    t_end timestamptz := clock_timestamp() + interval '$SECONDS_PER_RUN s';
BEGIN
    FOR i IN 1 .. $n LOOP
        EXIT WHEN clock_timestamp() > t_end;
        INSERT INTO lag_samples
        SELECT $1, $2, clock_timestamp(), f.name, f.lag_ms, tf.upper - f.upper
          FROM decoupled.frontiers f,
               (SELECT upper FROM decoupled.frontiers WHERE name = 'w') tf
         WHERE f.name = 'w' OR f.name LIKE 'w\_view%';
        COMMIT;
        PERFORM pg_sleep($LAG_SAMPLE_MS / 1000.0);
    END LOOP;
END
\$\$;
SQL
    }

    local clients
    for clients in $CLIENTS_LIST; do
        local plain=() reg=() cost=() catchup=() run out
        for run in $(seq "$RUNS"); do
            reset_table plain_w >/dev/null
            plain+=("$(pgbench_tps "$clients" plain.sql)")
            catchup+=("$(reset_table w)")
            sample_lag "$clients" "$run" &
            local sampler=$!
            out=$(registered_run "$clients")
            reg+=("${out% *}")
            cost+=("${out#* }")
            wait "$sampler"
        done
        # after the last run: how long the views took to catch up
        catchup+=("$(reset_table w)")
        local p r us stats
        p=$(printf '%s\n' "${plain[@]}" | median)
        r=$(printf '%s\n' "${reg[@]}" | median)
        us=$(printf '%s\n' "${cost[@]}" | median)
        stats=$(bench_psql <<SQL
SELECT concat_ws('|',
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_ms) FILTER (WHERE name <> 'w')),
    round(percentile_cont(0.99) WITHIN GROUP (ORDER BY lag_ms) FILTER (WHERE name <> 'w')),
    max(lag_ms) FILTER (WHERE name <> 'w'),
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY behind_ms) FILTER (WHERE name <> 'w')),
    max(behind_ms) FILTER (WHERE name <> 'w'),
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_ms) FILTER (WHERE name = 'w')),
    max(lag_ms) FILTER (WHERE name = 'w'),
    count(*) FILTER (WHERE name <> 'w'))
  FROM lag_samples WHERE clients = $clients
SQL
)
        local lag_med lag_p99 lag_max beh_med beh_max tab_med tab_max nsamples
        IFS='|' read -r lag_med lag_p99 lag_max beh_med beh_max tab_med tab_max nsamples <<<"$stats"
        echo
        echo "-- writers: $clients clients, pgbench single-row INSERT, median of $RUNS x ${SECONDS_PER_RUN}s, ticks every $TICK_INTERVAL"
        printf '   %-36s %10.0f tps %7.2fx\n' "plain table" "$p" 1
        printf '   %-36s %10.0f tps %7.2fx   extension %.1f us/txn (runs: %s)\n' \
            "registered table, $views views" "$r" "$(ratio "$r" "$p")" "$us" \
            "$(printf '%.1f ' "${cost[@]}")"
        echo "   view lag (now - upper), $nsamples samples of $views views: median $lag_med ms, p99 $lag_p99 ms, max $lag_max ms"
        echo "   views behind the table (table upper - view upper): median $beh_med ms, max $beh_max ms"
        echo "   the table's own lag (now - its upper): median $tab_med ms, max $tab_max ms"
        echo "   views caught up with the table (writers stopped, their rows deleted) in: $(printf '%ss ' "${catchup[@]:1}")"
        SUMMARY_WRITERS+=("| $clients | $(printf '%.0f' "$p") | $(printf '%.0f' "$r") | $(ratio "$r" "$p")x | $(printf '%.1f' "$us") µs | $lag_med ms | $lag_max ms | $beh_med ms | $tab_med ms | $(within "$lag_med" 100) |")
    done
    for i in $(seq $views); do
        bench_psql >/dev/null -c "SELECT decoupled.drop('w_view$i')"
    done
    bench_psql >/dev/null -c "SELECT decoupled.drop('w')" -c "DROP TABLE plain_w, w, lag_samples CASCADE"
}

header
for part in "${PARTS[@]}"; do
    "$part"
done

echo
echo "## Summary (for docs/performance.md): ROWS=$ROWS NGROUPS=$NGROUPS RUNS=$RUNS, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#SUMMARY_STEP[@]} -gt 0 ]; then
    echo
    echo "| view | rows changed | REFRESH CONCURRENTLY | pg_decoupled step (net of idle) | ratio | pg_ivm | target: met |"
    echo "|---|---:|---:|---:|---:|---:|---|"
    printf '%s\n' "${SUMMARY_STEP[@]}"
fi
if [ ${#SUMMARY_WRITERS[@]} -gt 0 ]; then
    echo
    echo "| clients | plain tps | registered, 10 views, tps | ratio | extension per txn | view lag median | view lag max | behind table median | table lag median | median lag <= 100 ms |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    printf '%s\n' "${SUMMARY_WRITERS[@]}"
fi
