# C5.3, C5.4, C5.6, C3.4-C3.6: materialized views and sinks maintained by
# replicas.  Replicas are killed (SIGTERM, and SIGKILL with the crash
# restart PostgreSQL answers it with) while they maintain and sink: every
# sampled readable time still verifies, and each sink holds every change of
# its input exactly once.  Two replicas maintain one view and make one copy.
# Compaction of a view stops exactly at a hold and moves on once released,
# while its inputs keep compacting behind the view's progress.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('views', restart_after_crash => 'on',
    'decoupled.table_tick_interval' => "'50ms'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.alter_cluster('default', 2);
    SELECT decoupled.create_source('market', 'auction', options => '{"tick": "50ms"}',
                                   retain_history => '1 hour');
    CREATE TABLE stock (item int, qty int);
    INSERT INTO stock SELECT g % 20, g FROM generate_series(1, 200) g;
    SELECT decoupled.register_table('stock', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('top_bids',
        'SELECT a.id, a.seller, max(b.amount) AS top, count(*) AS bids
           FROM market_auctions a JOIN market_bids b ON b.auction_id = a.id
          GROUP BY a.id, a.seller', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('per_seller',
        'SELECT seller, sum(top) AS total, count(*) AS auctions FROM top_bids GROUP BY seller',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('stock_levels',
        'SELECT item, sum(qty) AS qty, count(*) AS n FROM stock GROUP BY item',
        retain_history => '1 hour');
    SELECT decoupled.create_sink('seller_sink', 'per_seller', 'seller_changes');
    SELECT decoupled.create_sink('stock_sink', 'stock', 'stock_changes');
});

my @views = qw(top_bids per_seller stock_levels);
my $step = 0;

# Writes to the table while replicas come and go.
sub churn {
    $step++;
    $node->safe_psql('postgres', qq{
        UPDATE stock SET qty = qty + 1 WHERE item = $step % 20;
        DELETE FROM stock WHERE item = ($step * 7) % 20 AND qty % 3 = 0;
        INSERT INTO stock SELECT ($step * 3) % 20, g FROM generate_series(1, 5) g;
    });
}

sub wait_all_past {
    my ($ts) = @_;
    DecoupledTest::wait_upper($node, $_, $ts) for @views, 'seller_sink', 'stock_sink';
}

DecoupledTest::wait_for($node, q{
    SELECT count(*) FILTER (WHERE status = 'running') FROM decoupled.cluster_replicas
     WHERE cluster = 'default'}, '2');
wait_all_past($node->safe_psql('postgres', 'SELECT decoupled.oracle_now()'));
churn();

# Kill replicas at arbitrary moments of their work.
for my $round (1 .. 4) {
    my $replica = $round % 2 ? 'r1' : 'r2';
    my $pid = DecoupledTest::replica_pid($node, 'default', $replica);
    churn();
    if ($round == 3) {
        my $offset = -s $node->logfile;
        kill 'KILL', $pid;
        $node->poll_query_until('postgres', q{SELECT 1}, '1') or die 'server did not come back';
        ok($node->log_contains('all server processes terminated; reinitializing', $offset),
            "round $round: SIGKILL of $replica crash-restarted the server");
    } else {
        kill 'TERM', $pid;
        pass("round $round: SIGTERM of $replica");
    }
    churn();
    DecoupledTest::wait_for($node, qq{
        SELECT count(*) FROM decoupled.supervised
         WHERE kind = 'replica' AND cluster = 'default' AND pid IS NOT NULL
           AND pid <> $pid}, '2');
    churn();
    wait_all_past($node->safe_psql('postgres', 'SELECT decoupled.oracle_now()'));
}

# Every view verifies at sampled readable times spread over its history.
for my $view (@views) {
    my $bad = $node->safe_psql('postgres', qq{
        SELECT string_agg(t::text, ', ')
          FROM decoupled.frontiers f,
               generate_series(f.since, f.upper - 1, greatest((f.upper - 1 - f.since) / 24, 1)) t
         WHERE f.name = '$view' AND NOT decoupled.verify('$view', t)});
    is($bad, '', "$view verifies at every sampled time");
}
is($node->safe_psql('postgres', q{
    SELECT bool_and(hydrated) FROM decoupled.hydration
     WHERE name IN ('top_bids', 'per_seller', 'stock_levels')}), 't',
    'both replicas report the views hydrated');

# Sinks: at every sampled time the sum of what was written equals the input
# AS OF that time, and no change was written twice.
sub sink_matches {
    my ($sink, $input, $table, $cols) = @_;
    return $node->safe_psql('postgres', qq{
        CREATE TEMP TABLE samples AS
        SELECT t FROM decoupled.frontiers s, decoupled.frontiers i,
               generate_series(greatest(i.since, (SELECT min(mz_timestamp) FROM $table)),
                               s.upper - 1, 97) t
         WHERE s.name = '$sink' AND i.name = '$input';
        CREATE FUNCTION pg_temp.mismatch(t bigint) RETURNS bigint LANGUAGE plpgsql AS \$\$
        DECLARE n bigint;
        BEGIN
            PERFORM set_config('decoupled.as_of', t::text, true);
            SELECT count(*) INTO n FROM (
                (SELECT $cols, count(*) FROM $input GROUP BY $cols
                 EXCEPT ALL
                 SELECT $cols, sum(mz_diff) FROM $table WHERE mz_timestamp <= t
                  GROUP BY $cols HAVING sum(mz_diff) <> 0)
                UNION ALL
                (SELECT $cols, sum(mz_diff) FROM $table WHERE mz_timestamp <= t
                  GROUP BY $cols HAVING sum(mz_diff) <> 0
                 EXCEPT ALL
                 SELECT $cols, count(*) FROM $input GROUP BY $cols)) d;
            PERFORM set_config('decoupled.as_of', '', true);
            RETURN n;
        END \$\$;
        SELECT count(*) || '|' || count(*) FILTER (WHERE pg_temp.mismatch(t) > 0) FROM samples;
        SELECT count(*) FROM (SELECT mz_timestamp, $cols FROM $table
                               GROUP BY mz_timestamp, $cols HAVING count(*) > 1) dup;});
}
my ($samples_s, $dups_s) = split /\n/, sink_matches('stock_sink', 'stock', 'stock_changes', 'item, qty');
like($samples_s, qr/^\d+\|0$/, "stock sink equals the table at every sampled time ($samples_s)");
is($dups_s, '0', 'stock sink wrote no change twice');
my ($samples_v, $dups_v) = split /\n/,
    sink_matches('seller_sink', 'per_seller', 'seller_changes', 'seller, total, auctions');
like($samples_v, qr/^\d+\|0$/, "seller sink equals the view at every sampled time ($samples_v)");
is($dups_v, '0', 'seller sink wrote no change twice');

# Holds: a view's compaction stops exactly at a hold and moves on once it is
# released; its inputs keep compacting behind the view's progress.
$node->safe_psql('postgres', q{
    SELECT decoupled.alter_cluster('default', 1);
    SELECT decoupled.drop('seller_sink');
    SELECT decoupled.drop('stock_sink');
});
$node->append_conf('postgresql.conf', "decoupled.bound_publication_interval = '100ms'\n");
$node->reload;
# With no adapter at all, views are maintained and compacted.
$node->safe_psql('postgres', q{SELECT decoupled.drop_adapter('default')});
$node->safe_psql('postgres', q{
    CREATE TABLE shelf (item int, qty int);
    INSERT INTO shelf SELECT g % 5, g FROM generate_series(1, 50) g;
    SELECT decoupled.register_table('shelf', retain_history => '200ms');
    SELECT decoupled.create_materialized_view('shelf_levels',
        'SELECT item, sum(qty) AS qty FROM shelf GROUP BY item', retain_history => '200ms');
});
my $created = $node->safe_psql('postgres',
    q{SELECT since FROM decoupled.frontiers WHERE name = 'shelf_levels'});
$node->safe_psql('postgres', 'UPDATE shelf SET qty = qty + 1');
DecoupledTest::wait_for($node, qq{
    SELECT bool_and(since > $created) FROM decoupled.frontiers
     WHERE name IN ('shelf', 'shelf_levels')}, 't');
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.adapters'), '0',
    'a view and its input are maintained and compacted with no adapter declared');
$node->safe_psql('postgres', q{SELECT decoupled.declare_adapter('default')});
$node->safe_psql('postgres', q{SELECT decoupled.acquire_hold('shelf_levels')});
my $held = $node->safe_psql('postgres', q{SELECT frontier FROM decoupled.holds});
$node->safe_psql('postgres', 'UPDATE shelf SET qty = qty + 1');
DecoupledTest::wait_for($node, qq{
    SELECT since > $held FROM decoupled.frontiers WHERE name = 'shelf'}, 't');
DecoupledTest::wait_for($node, q{
    SELECT since = (SELECT frontier FROM decoupled.holds) FROM decoupled.frontiers
     WHERE name = 'shelf_levels'}, 't');
pass('the input compacts past the hold on the view: the view requires only its progress');
my $upper = DecoupledTest::upper_of($node, 'shelf_levels');
$node->safe_psql('postgres', 'UPDATE shelf SET qty = qty + 1');
DecoupledTest::wait_upper($node, 'shelf_levels', $upper + 1000);
is($node->safe_psql('postgres', q{SELECT since FROM decoupled.frontiers WHERE name = 'shelf_levels'}),
    $held, 'the view compacts up to the hold and no further while it lasts');
is($node->safe_psql('postgres', qq{
    SELECT set_config('decoupled.as_of', '$held', false) IS NULL;
    SELECT count(*) FROM shelf_levels}), "f\n5", 'the held time stays readable');
# The session that took it ended; the next hold publication lifts it.
$node->safe_psql('postgres', q{SELECT decoupled.publish_holds()});
DecoupledTest::wait_for($node, qq{
    SELECT since > $held FROM decoupled.frontiers WHERE name = 'shelf_levels'}, 't');
pass('once released, the view compacts past it');
is($node->safe_psql('postgres', q{
    SELECT bool_and(since <= compaction_bound AND compaction_bound <= upper)
      FROM decoupled.frontiers WHERE since IS NOT NULL}), 't', 'since <= bound <= upper everywhere');

# A drop left open in a transaction holds up nothing else its replicas
# maintain: the dropped sink's steps find it busy, and the other sinks
# stepped with it in one transaction go on (never reported stalled).
$node->safe_psql('postgres', q{
    CREATE TABLE parcels (id int, w int);
    SELECT decoupled.register_table('parcels');
    SELECT decoupled.create_sink('parcel_sink_1', 'parcels', 'parcel_out_1');
    SELECT decoupled.create_sink('parcel_sink_2', 'parcels', 'parcel_out_2');
    SELECT decoupled.create_sink('parcel_sink_3', 'parcels', 'parcel_out_3');
    SELECT decoupled.create_materialized_view('parcel_weights',
        'SELECT id, sum(w) AS w FROM parcels GROUP BY id');
});
my $dropper = $node->background_psql('postgres', on_error_stop => 1);
$dropper->query_safe('BEGIN');
$dropper->query_safe(q{SELECT decoupled.drop('parcel_sink_1')});
for my $i (1 .. 5) {
    $node->safe_psql('postgres', "INSERT INTO parcels VALUES ($i, $i)");
    my $now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
    DecoupledTest::wait_upper($node, $_, $now) for qw(parcel_sink_2 parcel_sink_3 parcel_weights);
}
pass('while a drop of one sink is open, the other sinks and views go on');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM decoupled.status_history
     WHERE name IN ('parcel_sink_2', 'parcel_sink_3', 'parcel_weights') AND status = 'stalled'}),
    '0', 'and none of them was reported stalled');
$dropper->query_safe('ROLLBACK');
$dropper->quit;
my $now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, 'parcel_sink_1', $now);
is($node->safe_psql('postgres', q{
    SELECT (SELECT sum(mz_diff) FROM parcel_out_1) = (SELECT count(*) FROM parcels)
       AND (SELECT sum(mz_diff) FROM parcel_out_2) = (SELECT count(*) FROM parcels)}), 't',
    'the drop rolled back, its sink resumes where it was, nothing lost');
is($node->safe_psql('postgres', q{SELECT decoupled.verify('parcel_weights')}), 't',
    'and the view verifies');

$node->stop;
done_testing();
