# C8: the relay carries wake-ups to processes outside the server.  An
# external replica (pg_decoupled_replicad, polling only every 5 s) maintains
# a view over an in-server source: fed by the in-process relay (killed and
# restarted by the controller, and wedged) and by the external relay
# (pg_decoupled_relayd started after the server, killed with SIGKILL and
# restarted), and with no relay at all.  Wake-ups are hints: in every mode
# the view keeps advancing and verifies.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $segment = "pg_decoupled_tap_$$";

sub setup {
    my ($node) = @_;
    $node->start;
    $node->safe_psql('postgres', q{
        CREATE EXTENSION pg_decoupled;
        SELECT decoupled.create_source('feed', 'counter', options => '{"tick": "50ms"}',
                                       retain_history => '1 hour');
        SELECT decoupled.create_cluster('outside', replicas => 0, managed => false);
        SELECT decoupled.create_replica('outside', 'x', external => true);
        SELECT decoupled.create_materialized_view('outside_view',
            'SELECT n % 7 AS k, count(*) AS c FROM feed GROUP BY 1',
            cluster => 'outside', retain_history => '1 hour');
    });
    DecoupledTest::wait_following($node);
}

sub start_replicad {
    my ($node) = @_;
    my ($out, $err) = ('', '');
    my $h = IPC::Run::start(
        [ 'pg_decoupled_replicad', '--conninfo', $node->connstr('postgres'), '--cluster',
          'outside', '--replica', 'x', '--poll-ms', '5000' ],
        '>', \$out, '2>', \$err);
    return $h;
}

my $now = sub { $_[0]->safe_psql('postgres', 'SELECT decoupled.oracle_now()') };

# The view follows its input past `label`, and verifies at its latest time.
sub advances {
    my ($node, $label) = @_;
    DecoupledTest::wait_upper($node, 'outside_view', $now->($node));
    is($node->safe_psql('postgres', q{SELECT decoupled.verify('outside_view')}), 't',
        "$label: the external replica's view advances and verifies");
}

# ---------------------------------------------------------------------------
# The in-process relay (the default)
# ---------------------------------------------------------------------------
my $node = DecoupledTest::new_node('in_process');
setup($node);
DecoupledTest::wait_for($node, q{SELECT mode || ' ' || alive FROM decoupled.relay},
    'in_process true');
is($node->safe_psql('postgres', q{SELECT pid FROM decoupled.relay}),
    $node->safe_psql('postgres', q{SELECT pid FROM decoupled.supervised WHERE kind = 'relay'}),
    'the controller runs the relay worker');
my $replicad = start_replicad($node);
advances($node, 'in-process relay');
my $fanouts = $node->safe_psql('postgres', 'SELECT fanouts FROM decoupled.relay');
cmp_ok($fanouts, '>', 0, 'the relay fans out wake-ups');

# Killed under load: the controller starts it again.
my $relay = $node->safe_psql('postgres', 'SELECT pid FROM decoupled.relay');
kill 'TERM', $relay;
DecoupledTest::wait_for($node,
    qq{SELECT pid IS NOT NULL AND pid <> $relay AND alive FROM decoupled.relay}, 't');
pass('the controller restarted the killed relay');
advances($node, 'relay restarted');

# Wedged: nothing relays, the replica polls.
$relay = $node->safe_psql('postgres', 'SELECT pid FROM decoupled.relay');
kill 'STOP', $relay;
advances($node, 'relay wedged');
kill 'CONT', $relay;
advances($node, 'relay resumed');
$replicad->kill_kill;
$node->stop;

# ---------------------------------------------------------------------------
# The external relay, and no relay at all
# ---------------------------------------------------------------------------
IPC::Run::run([ 'pg_decoupled_relayd', '--name', $segment, '--remove' ]);
$node = DecoupledTest::new_node('external', 'decoupled.relay' => "'external'",
    'decoupled.relay_name' => "'$segment'");
setup($node);
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.supervised WHERE kind = 'relay'}),
    '0', 'with an external relay the controller starts none');
is($node->safe_psql('postgres', q{SELECT mode || ' ' || alive || ' ' || segment FROM decoupled.relay}),
    "external false $segment", 'no relay daemon yet');
$replicad = start_replicad($node);
advances($node, 'no relay (polling)');

# The daemon starts after the server: everyone attaches on their own.
my ($rout, $rerr) = ('', '');
my $relayd = IPC::Run::start([ 'pg_decoupled_relayd', '--name', $segment ], '>', \$rout,
    '2>', \$rerr);
DecoupledTest::wait_for($node, q{SELECT alive FROM decoupled.relay}, 't');
DecoupledTest::wait_for($node, q{SELECT followers >= 1 FROM decoupled.relay}, 't');
pass('the replica attached to the relay started after the server');
$fanouts = $node->safe_psql('postgres', 'SELECT fanouts FROM decoupled.relay');
advances($node, 'external relay');
DecoupledTest::wait_for($node, qq{SELECT fanouts > $fanouts FROM decoupled.relay}, 't');
pass('the server publishes and the daemon fans out');

# SIGKILL under load, then a restart that reuses the segment.
my $relayd_pid = $node->safe_psql('postgres', 'SELECT pid FROM decoupled.relay');
kill 'KILL', $relayd_pid;
$relayd->finish;
DecoupledTest::wait_for($node, q{SELECT alive FROM decoupled.relay}, 'f');
advances($node, 'external relay killed');
$relayd = IPC::Run::start([ 'pg_decoupled_relayd', '--name', $segment ], '>', \$rout,
    '2>', \$rerr);
DecoupledTest::wait_for($node, q{SELECT alive FROM decoupled.relay}, 't');
$fanouts = $node->safe_psql('postgres', 'SELECT fanouts FROM decoupled.relay');
DecoupledTest::wait_for($node, qq{SELECT fanouts > $fanouts FROM decoupled.relay}, 't');
advances($node, 'external relay restarted');
is($node->safe_psql('postgres', 'SELECT followers >= 1 FROM decoupled.relay'), 't',
    'the replica stayed attached across the restart');

# Across all of it the source and the view lost and doubled nothing.
my ($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($node, 'feed');
is("$rows|$max", "$expected|$expected", 'the source has every tick once');
my $upper = DecoupledTest::upper_of($node, 'outside_view');
my $since = $node->safe_psql('postgres',
    q{SELECT since FROM decoupled.frontiers WHERE name = 'outside_view'});
my $bad = $node->safe_psql('postgres', qq{
    SELECT string_agg(t::text, ',')
      FROM generate_series($since, $upper - 1, greatest(($upper - 1 - $since) / 10, 1)) t
     WHERE NOT decoupled.verify('outside_view', t)});
is($bad, '', 'the view verifies at sampled times');

kill 'TERM', $relayd->{KIDS}[0]{PID};
$relayd->finish;
$replicad->kill_kill;
$node->stop;
IPC::Run::run([ 'pg_decoupled_relayd', '--name', $segment, '--remove' ]);

done_testing();
