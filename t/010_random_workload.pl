# C2, C3, C5.3, C5.6: a seeded random workload — inserts, updates and
# deletes into two registered tables (captured from the WAL), ticks at
# random moments, a counter source, views of every strategy (views over
# views too), two sinks, holds, replica kills (SIGTERM, and SIGKILL, which
# PostgreSQL answers with a crash restart), adapter stops, server crashes
# (immediate stop) and deployment promotions — after which every view
# verifies at every sampled time of its history, each sink has its input's
# changes exactly once, and no hold was ever passed by compaction.
#
# `make check` runs 400 steps.  The soak (issue 16) is the same test run
# longer: DECOUPLED_STEPS=10000 (docs/performance.md has a run's figures).
# DECOUPLED_SEED=<n> replays a workload; a failure prints its seed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $seed = $ENV{DECOUPLED_SEED} // 20261201;
my $steps = $ENV{DECOUPLED_STEPS} // 400;
srand($seed);
note("seed $seed, $steps steps");
END { diag("replay with DECOUPLED_SEED=$seed DECOUPLED_STEPS=$steps") if $? }

my $node = DecoupledTest::new_node('random', _init => { allows_streaming => 'logical' },
    restart_after_crash => 'on', 'decoupled.bound_publication_interval' => '500ms');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.alter_cluster('default', 2);
    CREATE TABLE accounts (id int, owner int, balance int);
    CREATE TABLE owners (id int, name text, region text);
    INSERT INTO owners SELECT g, 'owner ' || g, (ARRAY['north', 'south', 'east'])[g % 3 + 1]
      FROM generate_series(1, 10) g;
    INSERT INTO accounts SELECT g, g % 10 + 1, g * 3 FROM generate_series(1, 40) g;
    SELECT decoupled.register_table('accounts', retain_history => '1 hour');
    SELECT decoupled.register_table('owners', retain_history => '1 hour');
    SELECT decoupled.tick_tables();
    SELECT decoupled.create_materialized_view('by_region',
        'SELECT o.region, count(*) AS accounts, sum(a.balance) AS total, min(a.balance) AS low
           FROM accounts a JOIN owners o ON o.id = a.owner GROUP BY o.region',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('rich_owners',
        'SELECT o.name, sum(a.balance) AS total FROM owners o
           LEFT JOIN accounts a ON a.owner = o.id
          GROUP BY o.name HAVING coalesce(sum(a.balance), 0) > 200',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('even_accounts',
        'SELECT id, balance FROM accounts WHERE balance % 2 = 0', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('per_owner',
        'SELECT owner, count(*) AS n, sum(balance) AS total, avg(balance) AS mean
           FROM accounts GROUP BY owner', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('owner_range',
        'SELECT owner, min(balance) AS low, max(balance) AS high FROM accounts
          GROUP BY owner HAVING count(*) > 1', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('owner_kinds',
        'SELECT owner, count(DISTINCT balance % 7) AS kinds FROM accounts GROUP BY owner',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('region_summary',
        'SELECT count(*) AS regions, sum(total) AS total FROM by_region',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('owner_accounts',
        'SELECT o.id, o.name, count(a.id) AS n, sum(a.balance) AS total FROM owners o
           LEFT JOIN accounts a ON a.owner = o.id GROUP BY o.id, o.name',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('outside_west',
        'SELECT id, balance FROM accounts a
          WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.id = a.owner AND o.region = ''west'')',
        retain_history => '1 hour');
    SELECT decoupled.create_sink('account_sink', 'accounts', 'account_changes');
    SELECT decoupled.create_source('feed', 'counter', options => '{"tick": "100ms"}',
                                   retain_history => '1 hour');
    SELECT decoupled.create_sink('feed_sink', 'feed', 'feed_changes');
});
my @views = qw(by_region rich_owners even_accounts per_owner owner_range owner_kinds
  region_summary owner_accounts outside_west);
# The keyed outer joins keep sums (their null-extended rows' changes found
# by probes on the key); the subquery is maintained by key partitions.
is($node->safe_psql('postgres', q{
    SELECT string_agg(name || ':' || method, ' ' ORDER BY name) FROM decoupled.view_maintenance
     WHERE name IN ('owner_accounts', 'rich_owners', 'outside_west')}),
   'outside_west:partitions owner_accounts:sums rich_owners:sums',
   'keyed outer joins keep sums, NOT EXISTS is partitions');

my ($ticks, $kills, $crashes, $adapter_stops, $promotions, $holds, $holds_refused) =
    (0, 0, 0, 0, 0, 0, 0);
my @regions = qw(north south east west);
my $started = time;
for my $step (1 .. $steps) {
    my $r = rand();
    # Every 150 steps a server crash and a promotion for sure, so that a
    # short run has them too.
    $r = 0.984 if $step % 150 == 50;
    $r = 0.9855 if $step % 150 == 100;
    my $id = 1 + int(rand(60));
    my $owner = 1 + int(rand(12));
    my $amount = int(rand(100)) - 20;
    if ($r < 0.30) {
        $node->safe_psql('postgres',
            "INSERT INTO accounts VALUES ($id, $owner, " . int(rand(100)) . ")");
    } elsif ($r < 0.55) {
        $node->safe_psql('postgres',
            "UPDATE accounts SET balance = balance + $amount WHERE id = $id");
    } elsif ($r < 0.70) {
        $node->safe_psql('postgres', "DELETE FROM accounts WHERE id = $id");
    } elsif ($r < 0.78) {
        my $region = $regions[int(rand(@regions))];
        $node->safe_psql('postgres', "UPDATE owners SET region = '$region' WHERE id = $owner");
    } elsif ($r < 0.82) {
        $node->safe_psql('postgres',
            "INSERT INTO owners VALUES ($owner, 'owner $owner', 'west')");
    } elsif ($r < 0.84) {
        $node->safe_psql('postgres', "DELETE FROM owners WHERE id = $owner");
    } elsif ($r < 0.975) {
        $node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
        $ticks++;
    } elsif ($r < 0.98) {
        # A hold at the latest readable time (refused, and counted apart,
        # while a restarted adapter has no incarnation yet).
        my $c = (qw(accounts feed per_owner by_region))[int(rand(4))];
        my ($ret) = $node->psql('postgres', "SELECT decoupled.acquire_hold('$c')");
        $ret == 0 ? $holds++ : $holds_refused++;
    } elsif ($r < 0.983) {
        # The adapter stops and starts again: nothing maintained waits for it.
        $node->safe_psql('postgres', q{SELECT decoupled.stop_adapter('default')});
        $node->safe_psql('postgres', q{SELECT decoupled.start_adapter('default')});
        $adapter_stops++;
    } elsif ($r < 0.985) {
        # The server crashes (immediate stop) and comes back.
        $node->stop('immediate');
        $node->start;
        $crashes++;
    } elsif ($r < 0.986) {
        # A new generation of workers takes over.
        my $name = 'gen' . ($promotions + 1);
        $node->safe_psql('postgres', "SELECT decoupled.create_deployment('$name')");
        $node->safe_psql('postgres', "SELECT decoupled.promote('$name', '120 s')");
        $promotions++;
    } else {
        # A replica dies at whatever it was doing; now and then with SIGKILL,
        # which PostgreSQL answers with a crash restart.
        my $replica = rand() < 0.5 ? 'r1' : 'r2';
        my $pid = DecoupledTest::replica_pid($node, 'default', $replica);
        next unless $pid;
        my $signal = $kills % 3 == 2 ? 'KILL' : 'TERM';
        my $offset = -s $node->logfile;
        kill $signal, $pid;
        $kills++;
        if ($signal eq 'KILL') {
            $node->poll_query_until('postgres', q{SELECT 1}, '1')
              or die 'server did not come back';
            $node->log_contains('all server processes terminated; reinitializing', $offset)
              or die 'no crash restart after SIGKILL';
        }
    }
}
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
$ticks++;
my $minutes = (time - $started) / 60;
diag(sprintf('%d steps in %.1f min: %d ticks, %d replica kills, %d server crashes, '
             . '%d adapter stops, %d promotions, %d holds (%d refused)', $steps, $minutes,
             $ticks, $kills, $crashes, $adapter_stops, $promotions, $holds, $holds_refused));
cmp_ok($kills, '>=', 1, 'replicas were killed during the workload');

my $last = $node->safe_psql('postgres',
    q{SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'accounts'});
DecoupledTest::wait_upper($node, $_, $last) for @views, 'account_sink';
DecoupledTest::wait_upper($node, 'feed_sink', $node->safe_psql('postgres',
    'SELECT decoupled.oracle_now()'));

# Every time at which an input changed, plus times in between.
for my $view (@views) {
    my $out = $node->safe_psql('postgres', qq{
        WITH f AS (SELECT since, upper FROM decoupled.frontiers WHERE name = '$view'),
             samples AS (
                 SELECT DISTINCT t FROM f, LATERAL (
                     SELECT unnest(decoupled._change_times(
                         ARRAY(SELECT lifetime_id FROM decoupled.objects
                                WHERE name IN ('accounts', 'owners')),
                         f.since, f.upper, 1000))
                     UNION ALL
                     SELECT generate_series(f.since, f.upper - 1,
                                            greatest((f.upper - f.since) / 20, 1))) x(t)
                  WHERE t >= f.since AND t < f.upper)
        SELECT count(*) || '|' || count(*) FILTER (WHERE NOT decoupled.verify('$view', t))
          FROM samples});
    my ($n, $bad) = split /\|/, $out;
    cmp_ok($n, '>=', 20, "$view: $n sampled times");
    is($bad, '0', "$view verifies at every sampled time");
}

# The single-input views stepped incrementally — through the replica kills
# and crash restarts — and each of their steps verified above: kept counts
# and sums, kept extremes (owner_range: `sums` with min and max), touched
# groups computed again (owner_kinds: count(DISTINCT) is `groups`).
is($node->safe_psql('postgres', q{
    SELECT string_agg(name || ':' || method || ':' || (incremental_steps > 0), ' ' ORDER BY name)
      FROM decoupled.view_maintenance
     WHERE name IN ('even_accounts', 'per_owner', 'owner_range', 'owner_kinds')}),
    'even_accounts:linear:true owner_kinds:groups:true owner_range:sums:true per_owner:sums:true',
    'incremental views stepped incrementally');

# The sink adds up to the table at the end, and wrote each change once.
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (
        (SELECT id, owner, balance, count(*) FROM accounts GROUP BY 1, 2, 3
         EXCEPT ALL
         SELECT id, owner, balance, sum(mz_diff) FROM account_changes GROUP BY 1, 2, 3
         HAVING sum(mz_diff) <> 0)
        UNION ALL
        (SELECT id, owner, balance, sum(mz_diff) FROM account_changes GROUP BY 1, 2, 3
         HAVING sum(mz_diff) <> 0
         EXCEPT ALL
         SELECT id, owner, balance, count(*) FROM accounts GROUP BY 1, 2, 3)) d}), '0',
    'the sink adds up to the table');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT 1 FROM account_changes GROUP BY mz_timestamp, id, owner, balance
                          HAVING count(*) > 1) d}), '0', 'the sink wrote no change twice');

# The counter source's sink: every tick once, up to the sink's progress.
my $sink_upper = DecoupledTest::upper_of($node, 'feed_sink');
is($node->safe_psql('postgres', qq{
    SELECT count(*) || '|' || count(DISTINCT n) FROM feed_changes WHERE mz_timestamp < $sink_upper}),
    $node->safe_psql('postgres', qq{
        SET decoupled.as_of = @{[ $sink_upper - 1 ]};
        SELECT count(*) || '|' || count(*) FROM feed}),
    'the source\'s sink has every tick exactly once');
my ($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($node, 'feed');
is("$rows|$max", "$expected|$expected", 'the source lost and doubled no tick');

# Compaction never passed a hold while it was held; since <= bound <= upper.
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM decoupled.frontiers
     WHERE NOT (since <= coalesce(compaction_bound, since) AND coalesce(compaction_bound, since) <= upper)}),
    '0', 'since <= compaction bound <= upper everywhere');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM decoupled.holds h JOIN decoupled.frontiers f ON f.name = h.collection
     WHERE h.frontier < f.since}), '0', 'no live hold was passed by compaction');

$node->stop;
done_testing();
