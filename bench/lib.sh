#!/usr/bin/env bash
# Shared by the benchmark drivers: build, install and start a throwaway
# server with pg_decoupled preloaded; stop it on exit.  The server, the
# client programs and the extension all come from PG_CONFIG's installation
# (its --bindir; `make install` into its --pkglibdir and --sharedir), so
#   PG_CONFIG=/path/to/pg_config bash bench/<driver>.sh
# benchmarks a private PostgreSQL tree.  BENCH_CONF: extra postgresql.conf
# lines, appended last (so they override the defaults below).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
(cd "$ROOT" && bash tools/install-deps.sh && make -s PG_CONFIG="$PG_CONFIG" &&
    make -s PG_CONFIG="$PG_CONFIG" install >/dev/null)

if [ "$(id -u)" -eq 0 ]; then RUN_AS=(runuser -u postgres --); RUN_USER=postgres
else RUN_AS=(); RUN_USER=$(id -un); fi
BENCH_DIR=$(mktemp -d /tmp/pg_decoupled-bench.XXXXXX)
chown "$RUN_USER" "$BENCH_DIR"
BENCH_PORT=${BENCH_PORT:-54339}
RUNS=${RUNS:-5}

as_runner() { "${RUN_AS[@]}" env PATH="$BINDIR:$PATH" "$@"; }
bench_psql() { as_runner psql -X -q -At -v ON_ERROR_STOP=1 -h "$BENCH_DIR" -p "$BENCH_PORT" -U postgres -d postgres "$@"; }
bench_pgbench() { as_runner pgbench -h "$BENCH_DIR" -p "$BENCH_PORT" -U postgres "$@" postgres; }
stop_bench_server() {
    as_runner pg_ctl -D "$BENCH_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$BENCH_DIR"
}
trap stop_bench_server EXIT

as_runner initdb -D "$BENCH_DIR/data" -A trust -U postgres >/dev/null
cat >> "$BENCH_DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$BENCH_DIR'
port = $BENCH_PORT
shared_preload_libraries = 'pg_decoupled'
shared_buffers = '1GB'
max_wal_size = '8GB'
min_wal_size = '4GB'
checkpoint_timeout = '30min'
# A tick over thousands of registered tables locks a few relations of each.
max_locks_per_transaction = 1024
${BENCH_CONF:-}
CONF
as_runner pg_ctl -D "$BENCH_DIR/data" -l "$BENCH_DIR/server.log" -w start >/dev/null
bench_psql -c 'CREATE EXTENSION pg_decoupled' >/dev/null

# A fresh cluster has no WAL segments to recycle: each 16 MB of WAL goes to a
# new file, zero-filled and fsynced (about 80 ms of CPU on the project's
# machine), charged to whichever process crosses into it.  A server in
# steady state recycles its segments at each checkpoint and pays none of
# that.  So the server starts with 4 GB of segments to recycle: WAL written
# by logical messages before any table exists, then a checkpoint
# (min_wal_size keeps them), so that no page a driver writes is logged whole
# for a checkpoint it did not cause.  recycle_wal checkpoints again: a driver
# whose rounds each create a table calls it first, so that what the rounds
# before wrote is reused.
bench_psql -c "SELECT count(pg_logical_emit_message(false, 'pg_decoupled bench', repeat('x', 1048576)))
                 FROM generate_series(1, 4096)" -c 'CHECKPOINT' >/dev/null
recycle_wal() { bench_psql -c 'CHECKPOINT' >/dev/null; }

# CPU time, in clock ticks, the extension's processes have used so far: its
# background workers (capture, controller and its ticks, replica hosts) and
# the replicas' sessions, where view steps run.
extension_cpu_ticks() {
    local total=0 pid ticks
    for pid in $(bench_psql -c "SELECT pid FROM pg_stat_activity
                                 WHERE backend_type LIKE 'pg_decoupled%'
                                    OR application_name LIKE 'pg_decoupled%'"); do
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null)
        total=$((total + ${ticks:-0}))
    done
    echo "$total"
}

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# the p-quantile (nearest rank) of the numbers on stdin; $1: p in (0, 1]
percentile() {
    sort -g | awk -v p="$1" '{a[NR]=$1} END {i = int(p * NR + 0.999999); if (i < 1) i = 1; print a[i]}'
}
# The lines every driver's output starts with: how to run it again ($1:
# the command), when, at which commit, on what machine.
print_run_header() {
    echo "# command: $1"
    echo "# started: $(date -u '+%F %T') UTC  commit $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD -- . || echo ' (modified)')"
    echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
