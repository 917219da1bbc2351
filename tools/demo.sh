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
wal_level = logical
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

step "A registered table: captured from the WAL, ticked into history"
psql_demo -c "CREATE TABLE bids (auction int, amount numeric, bidder text)" \
    -c "INSERT INTO bids VALUES (1, 10, 'ann'), (1, 10, 'ann'), (2, 5, 'bob')" \
    -c "SELECT decoupled.register_table('bids', retain_history => '1 hour') AS lifetime_id" \
    -c "SELECT decoupled.wait_for_capture() AS captured_from_the_wal" \
    -c "SELECT setting, status, wal_tables, slot_name FROM decoupled.capture"
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

step "Materialized views over the auction, and a sink: maintained by the replica, no client involved"
psql_demo -c "SELECT decoupled.create_materialized_view('winning_bids',
                  'SELECT a.id AS auction, a.seller, a.item, max(b.amount) AS top, count(*) AS bids
                     FROM auction_auctions a JOIN auction_bids b ON b.auction_id = a.id
                    GROUP BY a.id, a.seller, a.item', retain_history => '1 minute') AS lifetime_id" \
    -c "SELECT decoupled.create_materialized_view('seller_totals',
                  'SELECT seller, count(*) AS auctions, sum(top) AS total FROM winning_bids
                    GROUP BY seller', retain_history => '1 minute') AS lifetime_id" \
    -c "SELECT decoupled.create_sink('seller_feed', 'seller_totals', 'seller_changes') AS lifetime_id" \
    -c "SELECT collection, required_by, frontier FROM decoupled.requirements ORDER BY 2, 1"
show_pipeline() {
    psql_demo -At -F ' ' -c "
        SELECT format('%-16s %-18s since %-14s upper %s  lag %4s ms  %s', f.name, o.kind,
                      coalesce(f.since::text, '-'), f.upper, f.lag_ms,
                      coalesce((SELECT string_agg(s.status || CASE WHEN h.hydrated THEN ', hydrated'
                                                               ELSE '' END, '; ')
                                  FROM decoupled.object_statuses s
                                  LEFT JOIN decoupled.hydration h
                                         ON h.name = s.name AND h.replica = s.replica
                                        AND h.deployment = (SELECT d.name FROM decoupled.deployments d
                                                             WHERE d.state = 'active')
                                 WHERE s.name = f.name), '-'))
          FROM decoupled.frontiers f JOIN decoupled.objects o USING (name)
         WHERE f.name IN ('auction_bids', 'winning_bids', 'seller_totals', 'seller_feed')
         ORDER BY o.lifetime_id"
}
for second in 1 2 3 4; do
    psql_demo -At -c "SELECT decoupled.wait_for_upper('seller_feed', decoupled.oracle_now() + 1000) IS NULL" >/dev/null
    echo "-- after ${second}s"
    show_pipeline
done
psql_demo -c "SELECT * FROM seller_totals ORDER BY total DESC, seller LIMIT 5" \
    -c "SELECT decoupled.verify('winning_bids') AS winning_bids_verified,
               decoupled.verify('seller_totals') AS seller_totals_verified" \
    -c "SELECT name, strategy, method, reason, incremental_steps, recompute_steps
          FROM decoupled.view_maintenance ORDER BY name" \
    -c "SELECT count(*) AS changes_written, count(DISTINCT mz_timestamp) AS times,
               sum(mz_diff) AS net_rows FROM seller_changes"

step "SUBSCRIBE: seller_totals' state at its first time, then every change (bounded by up_to here)"
psql_demo -c "SELECT s.mz_timestamp - f.since AS ms_after_start, s.mz_diff, s.data
                FROM decoupled.frontiers f,
                     decoupled.subscribe('seller_totals', f.since, f.upper) s
               WHERE f.name = 'seller_totals'
               ORDER BY s.mz_timestamp, s.data LIMIT 8"

step "An adapter outage on purpose: adapterd stops, nothing maintained does, its holds stay"
psql_demo -c "SELECT decoupled.acquire_hold('winning_bids') > 0 AS held" \
    -c "SELECT decoupled.stop_adapter('default')" \
    -c "SELECT name, incarnation, status FROM decoupled.adapters"
psql_demo -At -c "SELECT decoupled.wait_for_upper('seller_feed', decoupled.oracle_now() + 1000) IS NULL" >/dev/null
show_pipeline
psql_demo -c "SELECT h.adapter, h.incarnation, h.collection,
                     h.frontier >= f.compaction_bound AS still_protected
                FROM decoupled.holds h JOIN decoupled.frontiers f ON f.name = h.collection"
psql_demo -c "SELECT decoupled.start_adapter('default')" \
    -c "SELECT decoupled.wait_for_controller(decoupled.catalog_version()) IS NOT NULL AS followed"

step "Stop the replica abruptly: the controller starts a new incarnation, which resumes from durable progress"
replica_pid=$(psql_demo -At -c "SELECT pid FROM decoupled.cluster_replicas WHERE cluster = 'default'")
kill -TERM "$replica_pid"
psql_demo -At -c "SELECT decoupled.wait_for_upper('auction_bids', decoupled.oracle_now() + 1000) IS NULL" >/dev/null
psql_demo -c "SELECT cluster, replica, incarnation, pid, status FROM decoupled.cluster_replicas"
psql_demo -c "SELECT count(*) AS bids, max(id) AS last_bid_id, count(*) = max(id) AS no_gap_no_duplicate
                FROM auction_bids"
psql_demo -c "SELECT name, replica, status, incarnation FROM decoupled.status_history
               WHERE name = 'auction_bids' ORDER BY occurred_at"
psql_demo -At -c "SELECT decoupled.wait_for_upper('seller_feed', decoupled.oracle_now() + 500) IS NULL" >/dev/null
show_pipeline
psql_demo -c "SELECT decoupled.verify('seller_totals') AS verified_after_restart" \
    -c "SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL AS at_sink_progress
          FROM decoupled.frontiers WHERE name = 'seller_feed'" \
    -c "SELECT (SELECT sum(mz_diff) FROM seller_changes WHERE mz_timestamp <= decoupled.as_of())
               = (SELECT count(*) FROM seller_totals) AS sink_adds_up_to_the_view"

step "A new generation of workers: prewarm a deployment beside the active one, then promote it"
psql_demo -c "SELECT decoupled.create_deployment('blue')" \
    -c "SELECT name, state, writes_enabled FROM decoupled.deployments ORDER BY created_at"
psql_demo -At -c "SELECT decoupled.wait_for_controller(decoupled.catalog_version()) IS NULL" >/dev/null
for second in 1 2; do
    psql_demo -At -c "SELECT pg_sleep(1)" >/dev/null
    psql_demo -At -c "SELECT format('-- blue after %ss: %s of %s objects hydrated', $second,
                                    count(*) FILTER (WHERE hydrated), count(*))
                        FROM decoupled.hydration WHERE deployment = 'blue'"
done
psql_demo -c "SELECT deployment, replica, incarnation, pid, status FROM decoupled.cluster_replicas
               ORDER BY deployment"
before=$(psql_demo -At -c "SELECT upper FROM decoupled.frontiers WHERE name = 'seller_feed'")
psql_demo -c "\\timing on" -c "SELECT decoupled.promote('blue')"
psql_demo -At -c "SELECT decoupled.wait_for_upper('seller_feed', decoupled.oracle_now() + 500) IS NULL" >/dev/null
psql_demo -c "SELECT name, state, writes_enabled FROM decoupled.deployments ORDER BY created_at" \
    -c "SELECT deployment, replica, incarnation, pid, status FROM decoupled.cluster_replicas"
show_pipeline
psql_demo -c "SELECT upper > $before AS sink_advanced_after_handover,
                     decoupled.verify('seller_totals') AS verified_after_handover
                FROM decoupled.frontiers WHERE name = 'seller_feed'" \
    -c "SELECT count(*) = count(DISTINCT (mz_timestamp, mz_diff, seller, auctions, total))
               AS sink_has_no_duplicate FROM seller_changes"

step "Done. The server log:"
tail -n 8 "$DEMO/server.log"
