# C10, C11: deployments under load.  A source, views (incremental and
# recomputed) over it and over a registered table that writers change, and a
# sink run while a new deployment prewarms beside the active one — also on an
# external replica (pg_decoupled_replicad --deployment), fenced by write
# authority until promotion.  Promotion waits for hydration (and fails
# clearly without it), hands over at the durable uppers with a short gap,
# stops the retired workers, and loses or doubles nothing.  A crash of the
# server in the middle of a promotion leaves exactly one active deployment.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $tick_ms = 100;
my $node = DecoupledTest::new_node('deployments',
    'decoupled.table_tick_interval' => "${tick_ms}ms",
    'decoupled.bound_publication_interval' => '1s');
$node->start;
$node->safe_psql('postgres', qq{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.create_source('feed', 'counter', options => '{"tick": "${tick_ms}ms"}',
                                   retain_history => '1 hour');
    CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, amount int NOT NULL);
    SELECT decoupled.register_table('orders', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('per_customer',
        'SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('largest',
        'SELECT customer, max(amount) AS top FROM orders GROUP BY customer',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('feed_mod',
        'SELECT n % 10 AS k, count(*) AS c FROM feed GROUP BY 1', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('feed_ranked',
        'SELECT n, row_number() OVER (ORDER BY n DESC) AS r FROM feed WHERE n % 20 = 0',
        retain_history => '1 hour');
    SELECT decoupled.create_sink('feed_out', 'feed', 'public.feed_out');
    -- An external replica on its own cluster: only pg_decoupled_replicad runs it.
    SELECT decoupled.create_cluster('cold', replicas => 0, managed => false);
    SELECT decoupled.create_replica('cold', 'x', external => true);
    SELECT decoupled.create_source('cold_feed', 'counter', cluster => 'cold',
                                   options => '{"tick": "${tick_ms}ms"}',
                                   retain_history => '1 hour');
    -- A view over it on the default cluster: nothing readable until the
    -- source ticks, which only the external replica of a deployment with
    -- write authority makes it do.
    SELECT decoupled.create_materialized_view('cold_mod',
        'SELECT n % 10 AS k, count(*) AS c FROM cold_feed GROUP BY 1', retain_history => '1 hour');

    -- Load: writers insert, update and delete, one transaction each.
    CREATE PROCEDURE write_orders(seconds float8) LANGUAGE plpgsql AS \$\$
    DECLARE
        i int := 0;
        stop timestamptz := clock_timestamp() + seconds * interval '1 s';
    BEGIN
        WHILE clock_timestamp() < stop LOOP
            i := i + 1;
            INSERT INTO orders VALUES (i, i % 17, i % 100);
            IF i % 5 = 0 THEN
                UPDATE orders SET amount = amount + 7 WHERE id = i - 3;
            END IF;
            IF i % 7 = 0 THEN
                DELETE FROM orders WHERE id = i - 5;
            END IF;
            COMMIT;
            PERFORM pg_sleep(0.003);
        END LOOP;
    END
    \$\$;
    -- The uppers as time passes, to find the longest gap.
    CREATE TABLE samples (at timestamptz, feed_mod bigint, per_customer bigint);
    CREATE PROCEDURE sample_uppers(seconds float8) LANGUAGE plpgsql AS \$\$
    DECLARE
        stop timestamptz := clock_timestamp() + seconds * interval '1 s';
    BEGIN
        WHILE clock_timestamp() < stop LOOP
            INSERT INTO samples
            SELECT clock_timestamp(),
                   (SELECT upper FROM decoupled.frontiers WHERE name = 'feed_mod'),
                   (SELECT upper FROM decoupled.frontiers WHERE name = 'per_customer');
            COMMIT;
            PERFORM pg_sleep(0.01);
        END LOOP;
    END
    \$\$;
});
DecoupledTest::wait_following($node);
my $now = sub { $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()') };
DecoupledTest::wait_upper($node, $_, $now->()) for qw(feed_mod feed_ranked feed_out);

# ---------------------------------------------------------------------------
# A prewarming deployment; promotion waits for its hydration
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT decoupled.create_deployment('green')});
DecoupledTest::wait_for($node, q{
    SELECT count(*) FROM decoupled.cluster_replicas
     WHERE deployment = 'green' AND cluster = 'default' AND status = 'running'}, '1');
pass('the prewarming deployment runs its replicas beside the active ones');

my ($ret, $out, $err) = $node->psql('postgres',
    q{SELECT decoupled.promote('green', wait_for_hydration => '2 s')});
isnt($ret, 0, 'promotion fails while a replica has not hydrated');
like($err, qr/deployment "green" is not hydrated/, '... with a clear error');
like($err, qr/source "cold_feed" on cluster "cold"/, '... naming what is not hydrated');
is($node->safe_psql('postgres',
        q{SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM decoupled.deployments}),
    'default:active,green:prewarming', '... and changing nothing');

# The external replica of the prewarming deployment: it hydrates but is
# fenced by write authority — the source it runs does not advance.
my $cold_upper = DecoupledTest::upper_of($node, 'cold_feed');
my ($rd_out, $rd_err) = ('', '');
my $replicad = IPC::Run::start(
    [ 'pg_decoupled_replicad', '--conninfo', $node->connstr('postgres'), '--cluster', 'cold',
      '--replica', 'x', '--deployment', 'green', '--poll-ms', '100' ],
    '>', \$rd_out, '2>', \$rd_err);
DecoupledTest::wait_for($node,
    q{SELECT unhydrated FROM decoupled.deployments WHERE name = 'green'}, '0');
pass('the deployment hydrates, on the external replica too');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM decoupled.hydration
     WHERE deployment = 'green' AND name = 'cold_mod' AND hydrated}), '1',
    '... and a view over a source that has not ticked (nothing to compute yet)');
my $external = $node->safe_psql('postgres', q{
    SELECT incarnation FROM decoupled.cluster_replicas
     WHERE cluster = 'cold' AND deployment = 'green'});
($ret, $out, $err) = $node->psql('postgres', qq{
    SELECT decoupled.replica_append($external, o.lifetime_id, '[]', f.upper, f.upper + 1)
      FROM decoupled.objects o JOIN decoupled.frontiers f USING (name)
     WHERE o.name = 'cold_feed'});
like($err, qr/deployment "green" has no write authority/,
    'a prewarming replica\'s append is refused by write authority');
is(DecoupledTest::upper_of($node, 'cold_feed'), $cold_upper,
    'the prewarming external replica wrote nothing');

# ---------------------------------------------------------------------------
# Promotion under load
# ---------------------------------------------------------------------------
my $psql = sub {
    my ($sql) = @_;
    my ($o, $e) = ('', '');
    return IPC::Run::start([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
                             $node->connstr('postgres'), '-c', $sql ], '>', \$o, '2>', \$e);
};
my $old_pids = $node->safe_psql('postgres', q{
    SELECT string_agg(pid::text, ',') FROM decoupled.supervised
     WHERE deployment = 'default' AND pid IS NOT NULL});
my $writer = $psql->('CALL write_orders(8)');
my $sampler = $psql->('CALL sample_uppers(8)');
DecoupledTest::wait_upper($node, 'per_customer', $now->() + 2000);
my $before = $now->();
$node->safe_psql('postgres', q{SELECT decoupled.promote('green')});
my $after = $now->();
pass('promotion under load');
ok($writer->finish, 'every writer transaction committed');
ok($sampler->finish, 'the uppers were sampled throughout');

is($node->safe_psql('postgres',
        q{SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM decoupled.deployments}),
    'default:retired,green:active', 'one transaction: green active, default retired');
for my $pid (split /,/, $old_pids) {
    DecoupledTest::wait_for($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0');
}
pass('the retired deployment\'s workers stopped');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT deployment, ',')
                                    FROM decoupled.supervised WHERE kind <> 'capture'
                                     AND kind <> 'relay'}),
    'green', 'only the new deployment\'s workers are supervised');

# Everything advances past the handover, written by the new deployment —
# the external replica too, from the source's durable upper.
my $end = $now->();
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
my $orders_upper = DecoupledTest::upper_of($node, 'orders');
DecoupledTest::wait_upper($node, $_, $orders_upper - 1) for qw(per_customer largest);
DecoupledTest::wait_upper($node, $_, $end) for qw(feed_mod feed_ranked feed_out cold_feed);
DecoupledTest::wait_upper($node, 'cold_mod', DecoupledTest::upper_of($node, 'cold_feed') - 1);
is($node->safe_psql('postgres', q{SELECT decoupled.verify('cold_mod')}), 't',
    'the view over it computes once the source ticks');
pass('sources, views and the sink advance after promotion');
my ($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($node, 'cold_feed');
is("$rows|$max", "$expected|$expected",
    'the external replica continued its source without gap or duplicate');

# The longest stall of an upper across the handover.
my $gap = $node->safe_psql('postgres', q{
    WITH changes AS (
        SELECT at FROM (SELECT at, feed_mod, lag(feed_mod) OVER (ORDER BY at) AS prev
                          FROM samples) s
         WHERE feed_mod IS DISTINCT FROM prev)
    SELECT round(max(extract(epoch FROM d) * 1000))
      FROM (SELECT at - lag(at) OVER (ORDER BY at) AS d FROM changes) g});
diag("longest gap in feed_mod's upper during the promotion: $gap ms");
cmp_ok($gap, '<=', $tick_ms + 1000, 'the upper stalled no longer than a tick and a second');

# Views verify at sampled times on both sides of the handover.
my @times = map { $before - 1500 + $_ * int(($end - 1 - $before + 1500) / 12) } 0 .. 12;
for my $view (qw(per_customer largest feed_mod feed_ranked)) {
    my $bad = $node->safe_psql('postgres', qq{
        SELECT string_agg(t::text, ',') FROM unnest(ARRAY[@{[join ',', @times]}]::bigint[]) t
         WHERE NOT decoupled.verify('$view', t)});
    is($bad, '', "$view verifies at sampled times across the handover");
}
# The sink has every change of its input exactly once.
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT n, sum(mz_diff) AS d FROM feed_out GROUP BY n) x
     WHERE d <> 1}), '0', 'the sink has no change twice');
my $sink_upper = DecoupledTest::upper_of($node, 'feed_out');
is($node->safe_psql('postgres', qq{
    SELECT count(*) FROM feed_out WHERE mz_timestamp < $sink_upper}),
    $node->safe_psql('postgres', qq{
        SET decoupled.as_of = @{[ $sink_upper - 1 ]}; SELECT count(*) FROM feed}),
    'the sink has every change of its input');

# The external replica and its cluster go (the crashes below would end the
# daemon anyway).
$replicad->kill_kill;
$node->safe_psql('postgres', q{
    SELECT decoupled.drop('cold_mod');
    SELECT decoupled.drop('cold_feed');
    SELECT decoupled.drop_cluster('cold');
});

# ---------------------------------------------------------------------------
# A crash in the middle of a promotion
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT decoupled.create_deployment('blue')});
DecoupledTest::wait_for($node,
    q{SELECT unhydrated = 0 FROM decoupled.deployments WHERE name = 'blue'}, 't');
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_safe('BEGIN');
$bg->query_safe(q{SELECT decoupled.promote('blue')});
$node->stop('immediate');
$bg->quit;
$node->start;
my $states = sub {
    $node->safe_psql('postgres', q{
        SELECT string_agg(name || ':' || state, ',' ORDER BY created_at)
          FROM decoupled.deployments});
};
is($states->(), 'default:retired,green:active,blue:prewarming',
    'a crash before the promotion commits: exactly the old active deployment');
DecoupledTest::wait_following($node);
$node->safe_psql('postgres', q{SELECT decoupled.promote('blue', '120 s')});
$node->stop('immediate');
$node->start;
is($states->(), 'default:retired,green:retired,blue:active',
    'a crash after the promotion committed: exactly the new active deployment');
DecoupledTest::wait_following($node);
my $restarted = $now->();
DecoupledTest::wait_upper($node, $_, $restarted) for qw(feed_mod feed_ranked feed_out);
ok($node->safe_psql('postgres', q{SELECT decoupled.verify('feed_mod')}) eq 't',
    'the promoted deployment maintains the views after the crash');

done_testing();
