# C2, C3, C5.6 on PostgreSQL's own streaming replication, and a replica
# killed at a deterministic moment.
#
#   * A replica is stopped at the debug wait point "replica_maintain:computed"
#     (its step computed and appended, not committed) and killed there: the
#     server restarts, the step is gone, and the next incarnation resumes
#     from the durable upper without gap or duplicate.
#   * On a hot standby (synchronous replication), latest and AS OF reads of
#     collections and views work and match the primary; holds,
#     subscriptions, catalog changes, appends, ticks and verify() are refused
#     with a clear error and hint; the controller waits for promotion.
#   * Failover: the primary is killed while writers insert, the standby is
#     promoted: the controller starts, replicas resume from durable uppers,
#     WAL capture takes over the registered table, every acknowledged write
#     is in history, views verify and the sink has each change once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use DecoupledTest;

my $primary = DecoupledTest::new_node('primary', _init => { allows_streaming => 'logical' },
    restart_after_crash => 'on',
    'decoupled.table_tick_interval' => '100ms',
    'decoupled.bound_publication_interval' => '1s');
$primary->start;
$primary->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.create_source('feed', 'counter', options => '{"tick": "50ms"}',
                                   retain_history => '1 hour');
    CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, amount int NOT NULL);
    SELECT decoupled.register_table('orders', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('per_customer',
        'SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('feed_mod',
        'SELECT n % 5 AS k, count(*) AS c FROM feed GROUP BY 1', retain_history => '1 hour');
    SELECT decoupled.create_sink('feed_out', 'feed', 'public.feed_out');
    INSERT INTO orders SELECT g, g % 7, g FROM generate_series(1, 100) g;
});
DecoupledTest::wait_following($primary);
my $now = sub { $_[0]->safe_psql('postgres', 'SELECT decoupled.oracle_now()') };
DecoupledTest::wait_upper($primary, $_, $now->($primary)) for qw(per_customer feed_mod feed_out);

# ---------------------------------------------------------------------------
# A replica killed between computing a step and committing it
# ---------------------------------------------------------------------------
$primary->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.wait_points = 'replica_maintain:computed';
    SELECT pg_reload_conf();
});
my $test = $primary->background_psql('postgres', on_error_stop => 0);
$test->query_safe(q{SELECT decoupled.arm_wait_point('replica_maintain:computed')});
DecoupledTest::wait_for($primary,
    q{SELECT decoupled.wait_point_waiters('replica_maintain:computed') > 0}, 't');
pass('a replica\'s step stops at the wait point, computed and not committed');
my $held_upper = DecoupledTest::upper_of($primary, 'feed_mod');
$primary->safe_psql('postgres', q{
    ALTER SYSTEM RESET decoupled.wait_points;
    SELECT pg_reload_conf();
});
my $replica = DecoupledTest::replica_pid($primary, 'default');
kill 'KILL', $replica;
$test->quit;
$primary->poll_query_until('postgres', 'SELECT 1', '1')
  or die 'the server did not come back after the crash';
DecoupledTest::wait_following($primary);
DecoupledTest::wait_upper($primary, $_, $now->($primary)) for qw(per_customer feed_mod feed_out);
is($primary->safe_psql('postgres', q{SELECT decoupled.verify('feed_mod')}), 't',
    'after the kill the next incarnation resumes and the view verifies');
my ($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($primary, 'feed');
is("$rows|$max", "$expected|$expected", 'the source lost and doubled nothing');
cmp_ok(DecoupledTest::upper_of($primary, 'feed_mod'), '>', $held_upper,
    'the view moved past where the killed step stood');

# ---------------------------------------------------------------------------
# A hot standby with synchronous replication
# ---------------------------------------------------------------------------
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->safe_psql('postgres', q{
    ALTER SYSTEM SET synchronous_standby_names = '*';
    SELECT pg_reload_conf();
});
$primary->wait_for_catchup($standby);
$primary->safe_psql('postgres', 'INSERT INTO orders VALUES (101, 1, 1)');
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is($standby->safe_psql('postgres', 'SELECT state FROM decoupled.controller'), 'not running',
    'the controller waits for promotion');
my $at = $standby->safe_psql('postgres',
    q{SELECT least(f.upper, g.upper) - 1 FROM decoupled.frontiers f, decoupled.frontiers g
       WHERE f.name = 'per_customer' AND g.name = 'feed_mod'});
for my $q ('SELECT count(*), sum(total) FROM per_customer',
           'SELECT count(*), sum(c) FROM feed_mod', 'SELECT count(*), max(n) FROM feed') {
    my $sql = "SET decoupled.as_of = $at; $q";
    is($standby->safe_psql('postgres', $sql), $primary->safe_psql('postgres', $sql),
        "AS OF read on the standby matches the primary: $q");
}
is($standby->safe_psql('postgres', 'SELECT count(*), sum(amount) FROM orders'),
    $primary->safe_psql('postgres', 'SELECT count(*), sum(amount) FROM orders'),
    'a latest read of the registered table matches the primary');

for my $case (
    [ q{SELECT decoupled.acquire_hold('feed')}, qr/holds and subscriptions cannot be taken on a hot standby.*HINT:  Take holds and subscriptions on the primary/s, 'a hold' ],
    [ q{BEGIN; DECLARE c CURSOR FOR SELECT decoupled.subscribe('feed'); FETCH 1 FROM c},
      qr/holds and subscriptions cannot be taken on a hot standby/, 'a subscription' ],
    [ q{SELECT decoupled.create_cluster('x')}, qr/cannot change the pg_decoupled catalog on a hot standby.*HINT:  Run catalog changes on the primary/s, 'a catalog change' ],
    [ q{SELECT decoupled.append('orders', '[]', 1, 2)}, qr/cannot append on a hot standby/, 'an append' ],
    [ q{SELECT decoupled.tick_tables()}, qr/cannot tick registered tables on a hot standby/, 'a tick' ],
    [ q{SELECT decoupled.verify('feed_mod')}, qr/verify\(\) cannot run on a hot standby/, 'verify()' ])
{
    my ($sql, $pattern, $what) = @$case;
    my ($ret, $out, $err) = $standby->psql('postgres', $sql, extra_params => [ '-v', 'VERBOSITY=default' ]);
    like($err, $pattern, "$what is refused on the standby with a clear error");
}

# ---------------------------------------------------------------------------
# Failover
# ---------------------------------------------------------------------------
my $acknowledged = 101;
for my $id (102 .. 160) {
    $primary->safe_psql('postgres', "INSERT INTO orders VALUES ($id, $id % 7, $id)");
    $acknowledged = $id;
}
my $killed = time;
$primary->stop('immediate');
$standby->promote;
DecoupledTest::wait_following($standby);
my $promoted_at = $now->($standby);
DecoupledTest::wait_upper($standby, $_, $promoted_at) for qw(feed_mod feed_out);
my $failover = time - $killed;
diag(sprintf('failover: primary killed -> views advancing on the promoted standby in %.1f s',
             $failover));
pass('after promotion the controller starts and the views advance');

$standby->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
my $orders_upper = DecoupledTest::upper_of($standby, 'orders');
DecoupledTest::wait_upper($standby, 'per_customer', $orders_upper - 1);
is($standby->safe_psql('postgres', qq{
        SET decoupled.as_of = @{[ $orders_upper - 1 ]};
        SELECT count(*) FROM orders WHERE id <= $acknowledged}),
    $acknowledged, 'every acknowledged write is in history');
is($standby->safe_psql('postgres', qq{
        SET decoupled.as_of = @{[ $orders_upper - 1 ]}; SELECT count(*), sum(amount) FROM orders}),
    $standby->safe_psql('postgres', 'SELECT count(*), sum(amount) FROM orders'),
    'history at the latest tick equals the table');
for my $view (qw(per_customer feed_mod)) {
    is($standby->safe_psql('postgres', "SELECT decoupled.verify('$view')"), 't',
        "$view verifies on the promoted standby");
}
is($standby->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT n, sum(mz_diff) AS d FROM feed_out GROUP BY n) x WHERE d <> 1}),
    '0', 'the sink has no change twice');
my $sink_upper = DecoupledTest::upper_of($standby, 'feed_out');
is($standby->safe_psql('postgres', "SELECT count(*) FROM feed_out WHERE mz_timestamp < $sink_upper"),
    $standby->safe_psql('postgres', "SET decoupled.as_of = @{[ $sink_upper - 1 ]}; SELECT count(*) FROM feed"),
    'the sink has every change of its input');
($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($standby, 'feed');
is("$rows|$max", "$expected|$expected", 'the source continued without gap or duplicate');

$standby->stop;
done_testing();
