#!/usr/bin/env bash
# `make demo`: install what is missing, build, start a private throwaway
# PostgreSQL with pg_decoupled preloaded on a Unix socket in .demo/, walk
# through the catalog, and stop the server at the end or on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

bash tools/install-deps.sh
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
echo "== building pg_decoupled"
make -s PG_CONFIG="$PG_CONFIG"
make -s PG_CONFIG="$PG_CONFIG" install >/dev/null

# PostgreSQL refuses to run as root: as root, the server runs as `postgres`.
if [ "$(id -u)" -eq 0 ]; then RUN_AS=(runuser -u postgres --); RUN_USER=postgres
else RUN_AS=(); RUN_USER=$(id -un); fi

DEMO=$ROOT/.demo
rm -rf "$DEMO"
mkdir -p "$DEMO"
chown "$RUN_USER" "$DEMO"
if ! "${RUN_AS[@]}" test -w "$DEMO"; then
    # The project folder is not reachable for that user (a private home).
    rm -rf "$DEMO"
    DEMO=$(mktemp -d /tmp/pg_decoupled-demo.XXXXXX)
    chown "$RUN_USER" "$DEMO"
fi
PORT=${DEMO_PORT:-54329}

as_runner() { "${RUN_AS[@]}" env PATH="$BINDIR:$PATH" "$@"; }
stop_server() {
    if [ -f "$DEMO/data/postmaster.pid" ]; then
        echo "== stopping the demo server"
        as_runner pg_ctl -D "$DEMO/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$DEMO"
}
trap stop_server EXIT
trap 'exit 130' INT TERM

echo "== starting a throwaway server in $DEMO (socket only, port $PORT)"
as_runner initdb -D "$DEMO/data" -A trust -U postgres >/dev/null
cat >> "$DEMO/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$DEMO'
port = $PORT
shared_preload_libraries = 'pg_decoupled'
decoupled.database = 'postgres'
decoupled.poll_interval = 200ms
CONF
as_runner pg_ctl -D "$DEMO/data" -l "$DEMO/server.log" -w start >/dev/null

psql_demo() { as_runner psql -X -q -v SHOW_CONTEXT=never -h "$DEMO" -p "$PORT" -U postgres -d postgres "$@"; }
step() { printf '\n== %s\n' "$*"; }

step "CREATE EXTENSION pg_decoupled: catalog v1 with its defaults"
psql_demo -c 'CREATE EXTENSION pg_decoupled' \
    -c 'SELECT * FROM decoupled.catalog' \
    -c 'SELECT name, state, writes_enabled FROM decoupled.deployments' \
    -c 'SELECT cluster, replica, deployment, incarnation, pid, status FROM decoupled.cluster_replicas' \
    -c 'SELECT name, deployment, incarnation, pid, status FROM decoupled.adapters'

step "The controller follows the catalog and plans what to run"
psql_demo -c "SELECT decoupled.wait_for_controller(decoupled.catalog_version()) AS followed_version" \
    -c 'SELECT pid, state, schema_version, catalog_version FROM decoupled.controller' \
    -c 'SELECT kind, name, cluster, deployment, action FROM decoupled.supervised ORDER BY kind, name'

step "Catalog changes: a two-replica cluster and a second adapter"
psql_demo -c "SELECT decoupled.create_cluster('analytics', replicas => 2)" \
    -c "SELECT decoupled.declare_adapter('reporting')" \
    -c "SELECT decoupled.wait_for_controller(decoupled.catalog_version()) AS followed_version" \
    -c 'SELECT kind, name, cluster, deployment, action FROM decoupled.supervised ORDER BY kind, cluster, name'

step "Bad input is refused with a clear error and changes nothing"
psql_demo -c "SELECT decoupled.create_cluster('analytics')" 2>&1 || true
psql_demo -c "SELECT decoupled.alter_cluster('analytics', -1)" 2>&1 || true
psql_demo -c 'SELECT catalog_version FROM decoupled.catalog'

step "Scaling to zero pauses a cluster; dropping declarations is one catalog change each"
psql_demo -c "SELECT decoupled.alter_cluster('analytics', 0)" \
    -c "SELECT decoupled.drop_adapter('reporting')" \
    -c "SELECT decoupled.drop_cluster('analytics')" \
    -c "SELECT decoupled.wait_for_controller(decoupled.catalog_version()) AS followed_version" \
    -c 'SELECT kind, name, cluster, action FROM decoupled.supervised ORDER BY kind, name'

step "A registered table: captured on write, ticked into history"
psql_demo -c "CREATE TABLE bids (auction int, amount numeric, bidder text)" \
    -c "INSERT INTO bids VALUES (1, 10, 'ann'), (1, 10, 'ann'), (2, 5, 'bob')" \
    -c "SELECT decoupled.register_table('bids', retain_history => '1 hour') AS lifetime_id"
for round in 1 2 3; do
    psql_demo -c "INSERT INTO bids VALUES ($round, 10 + $round, 'cy')" \
        -c "DELETE FROM bids WHERE bidder = 'bob'" -c "SELECT decoupled.tick_tables()" >/dev/null
    psql_demo -At -c "SELECT format('tick %s: since %s, upper %s, %s rows', $round, since, upper,
                                     (SELECT count(*) FROM bids))
                        FROM decoupled.frontiers WHERE name = 'bids'"
done

step "Time travel: the same query at the first readable time and now"
psql_demo -c "SELECT set_config('decoupled.as_of', since::text, false) AS as_of
                FROM decoupled.frontiers WHERE name = 'bids'" \
    -c "SELECT * FROM bids ORDER BY auction, bidder"
psql_demo -c "SELECT * FROM bids ORDER BY auction, bidder"

step "A hold keeps history readable while compaction runs"
psql_demo -c "SELECT decoupled.acquire_hold('bids', since) AS hold FROM decoupled.frontiers WHERE name = 'bids'" \
    -c "SELECT decoupled.publish_bounds() AS bounds_advanced, decoupled.apply_compaction() AS compacted" \
    -c "SELECT collection, frontier FROM decoupled.holds" \
    -c "SELECT name, since, upper, compaction_bound FROM decoupled.frontiers"

step "An auction source, maintained by replica r1 of the default cluster"
psql_demo -c "SELECT decoupled.create_source('auction', 'auction', options => '{\"tick\": \"200ms\"}',
                                             retain_history => '1 minute') AS lifetime_id"
show_progress() {
    psql_demo -At -F ' ' -c "
        SELECT format('%-16s upper %s  lag %4s ms  %s', f.name, f.upper, f.lag_ms,
                      coalesce(s.status, '-'))
          FROM decoupled.frontiers f LEFT JOIN decoupled.source_statuses s USING (name)
         WHERE f.name LIKE 'auction%' ORDER BY f.name"
}
for second in 1 2 3 4 5; do
    psql_demo -At -c "SELECT decoupled.wait_for_upper('auction_bids', decoupled.oracle_now() + 1000) IS NULL" >/dev/null
    echo "-- after ${second}s"
    show_progress
done
psql_demo -c "SELECT cluster, replica, deployment, incarnation, pid, status FROM decoupled.cluster_replicas"
psql_demo -c "SELECT a.item, count(*) AS bids, max(b.amount) AS top_bid
                FROM auction_bids b JOIN auction_auctions a ON a.id = b.auction_id
               GROUP BY a.item ORDER BY bids DESC, a.item LIMIT 5"

step "Stop the replica abruptly: the controller starts a new incarnation, which resumes from durable progress"
replica_pid=$(psql_demo -At -c "SELECT pid FROM decoupled.cluster_replicas WHERE cluster = 'default'")
kill -TERM "$replica_pid"
psql_demo -At -c "SELECT decoupled.wait_for_upper('auction_bids', decoupled.oracle_now() + 1000) IS NULL" >/dev/null
psql_demo -c "SELECT cluster, replica, incarnation, pid, status FROM decoupled.cluster_replicas"
psql_demo -c "SELECT count(*) AS bids, max(id) AS last_bid_id, count(*) = max(id) AS no_gap_no_duplicate
                FROM auction_bids"
psql_demo -c "SELECT name, replica, status, incarnation FROM decoupled.status_history
               WHERE name = 'auction_bids' ORDER BY occurred_at"

step "Done. The server log:"
tail -n 8 "$DEMO/server.log"
