# C5.7: the replica engine outside the server.  pg_decoupled_replicad runs
# an external replica over libpq; SIGKILL loses and duplicates nothing (the
# next incarnation continues from durable progress), and a second daemon for
# the same replica fences the first, which exits with status 3.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('replicad');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.create_cluster('outside', replicas => 0, managed => false);
    SELECT decoupled.create_replica('outside', 'x', external => true);
    SELECT decoupled.create_source('e', 'counter', cluster => 'outside',
                                   options => '{"tick": "20ms"}', retain_history => '1 hour');
});
DecoupledTest::wait_following($node);
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.supervised WHERE cluster = 'outside'}),
    '0', 'the controller leaves an external replica alone');
my $epoch = DecoupledTest::upper_of($node, 'e');

my $conninfo = $node->connstr('postgres');
sub start_daemon {
    my ($out, $err) = ('', '');
    my $h = IPC::Run::start(
        [ 'pg_decoupled_replicad', '--conninfo', $conninfo, '--cluster', 'outside',
          '--replica', 'x', '--poll-ms', '100' ],
        '>', \$out, '2>', \$err);
    return ($h, \$err);
}

my ($first, $first_err) = start_daemon();
DecoupledTest::wait_upper($node, 'e', $epoch + 500);
my ($pid, $incarnation, $host) = split /\|/, $node->safe_psql('postgres', q{
    SELECT pid, incarnation, host FROM decoupled.cluster_replicas WHERE cluster = 'outside'});
is($pid, $first->{KIDS}[0]{PID}, 'the daemon registered its own process as the incarnation');
isnt($host, 'in-server', 'and its host');
DecoupledTest::wait_for($node,
    q{SELECT status FROM decoupled.source_statuses WHERE name = 'e'}, 'running');
pass('the external replica maintains the source');

# SIGKILL in the middle of its work.
kill 'KILL', $pid;
$first->finish;
my $stopped_at = DecoupledTest::upper_of($node, 'e');
my ($second, $second_err) = start_daemon();
DecoupledTest::wait_upper($node, 'e', $stopped_at + 500);
my $next = $node->safe_psql('postgres',
    q{SELECT incarnation FROM decoupled.cluster_replicas WHERE cluster = 'outside'});
cmp_ok($next, '>', $incarnation, 'the restarted daemon is a new incarnation');
my ($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($node, 'e');
is($rows, $expected, 'after SIGKILL: one row for every tick');
is($max, $rows, 'after SIGKILL: no tick twice');

# A second daemon for the same replica fences the running one.
my ($third, $third_err) = start_daemon();
$second->finish;
is($second->result(0), 3, 'the fenced daemon exits with status 3');
like($$second_err, qr/fenced/, 'and says it was fenced');
my $upper = DecoupledTest::upper_of($node, 'e');
DecoupledTest::wait_upper($node, 'e', $upper + 300);
($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($node, 'e');
is($rows, $expected, 'after fencing: one row for every tick');
is($max, $rows, 'after fencing: no tick twice');

# SIGTERM: a clean stop that retires the incarnation.
$third->signal('TERM');
$third->finish;
is($third->result(0), 0, 'SIGTERM stops the daemon cleanly');
is($node->safe_psql('postgres',
    q{SELECT incarnation IS NULL FROM decoupled.cluster_replicas WHERE cluster = 'outside'}),
    't', 'its incarnation retired on the way out');

$node->stop;
done_testing();
