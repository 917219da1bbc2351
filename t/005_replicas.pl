# C5, C6, C9: supervised replicas.  Stopping a replica abruptly (SIGTERM in
# the middle of its appends, SIGKILL with the crash restart PostgreSQL
# answers it with) loses and duplicates nothing; a fenced predecessor cannot
# write; two replicas make one copy; the controller's restart leaves
# replicas running; zero replicas pause a cluster; a drop is recorded once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

# A replica worker's crash restarts the server, as in production.
my $node = DecoupledTest::new_node('replicas', restart_after_crash => 'on');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.create_source('c', 'counter', options => '{"tick": "20ms"}',
                                   retain_history => '1 hour');
});
my $epoch = DecoupledTest::upper_of($node, 'c');
DecoupledTest::wait_upper($node, 'c', $epoch + 500);
DecoupledTest::wait_for($node,
    q{SELECT status FROM decoupled.source_statuses WHERE name = 'c'}, 'running');
pass('a counter source runs on the default replica');

sub assert_complete {
    my ($what) = @_;
    my ($rows, $max, $expected) = split /\|/, DecoupledTest::counter_shape($node, 'c');
    is($rows, $expected, "$what: one row for every tick");
    is($max, $rows, "$what: no tick twice");
}

# SIGTERM in the middle of the appends: the next incarnation continues.
my ($pid, $incarnation) = split /\|/, $node->safe_psql('postgres',
    q{SELECT pid, incarnation FROM decoupled.cluster_replicas WHERE cluster = 'default'});
kill 'TERM', $pid;
DecoupledTest::wait_for($node, qq{
    SELECT incarnation > $incarnation AND status = 'running'
      FROM decoupled.cluster_replicas WHERE cluster = 'default'}, 't');
my $upper = DecoupledTest::upper_of($node, 'c');
DecoupledTest::wait_upper($node, 'c', $upper + 300);
assert_complete('after SIGTERM');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.status_history
     WHERE name = 'c' AND status = 'running' AND incarnation IS NOT NULL}),
    '2', 'each incarnation reported running once');

# The fenced predecessor can no longer write, nor restore its health.
my $late = $node->psql('postgres', qq{
    SELECT decoupled.replica_append($incarnation, o.lifetime_id, '[]', f.upper, f.upper + 1)
      FROM decoupled.catalog_objects o JOIN decoupled.catalog_frontiers f USING (lifetime_id)
     WHERE o.name = 'c' AND o.dropped_at IS NULL});
isnt($late, 0, "a fenced predecessor's late append is rejected");
my ($rc, $out, $err) = $node->psql('postgres', qq{
    SELECT decoupled.replica_report($incarnation, lifetime_id, 'stalled', 'late')
      FROM decoupled.catalog_objects WHERE name = 'c' AND dropped_at IS NULL});
like($err, qr/replica incarnation $incarnation is not current/,
    "a fenced predecessor's late health report is rejected");
is($node->safe_psql('postgres', q{SELECT status FROM decoupled.source_statuses WHERE name = 'c'}),
    'running', 'current health is unchanged');

# The controller restarts; replicas keep running, untouched.
$pid = DecoupledTest::replica_pid($node, 'default');
my $controller = DecoupledTest::controller_pid($node);
kill 'TERM', $controller;
DecoupledTest::wait_for($node, qq{
    SELECT pid IS NOT NULL AND pid <> $controller AND state = 'following'
      FROM decoupled.controller_status()}, 't');
DecoupledTest::wait_following($node);
$upper = DecoupledTest::upper_of($node, 'c');
DecoupledTest::wait_upper($node, 'c', $upper + 300);
is(DecoupledTest::replica_pid($node, 'default'), $pid,
    'a new controller adopts the running replica: same process');
assert_complete('across a controller restart');

# Two replicas of one cluster: both run it, compare-and-append keeps one copy.
$node->safe_psql('postgres', q{SELECT decoupled.alter_cluster('default', 2)});
DecoupledTest::wait_for($node, q{
    SELECT count(*) FROM decoupled.source_statuses WHERE name = 'c' AND status = 'running'}, '2');
$upper = DecoupledTest::upper_of($node, 'c');
DecoupledTest::wait_upper($node, 'c', $upper + 500);
assert_complete('with two replicas');
$node->safe_psql('postgres', q{SELECT decoupled.alter_cluster('default', 1)});

# Zero replicas: the source is paused and its upper stops; a replica
# returning catches up without a gap.
$node->safe_psql('postgres', q{SELECT decoupled.alter_cluster('default', 0)});
DecoupledTest::wait_for($node, q{SELECT count(*) FROM decoupled.supervised WHERE kind = 'replica'}, '0');
is($node->safe_psql('postgres', q{SELECT status || '|' || hint FROM decoupled.source_statuses
     WHERE name = 'c'}), 'paused|no replica is running it', 'zero replicas: paused, with a hint');
$upper = DecoupledTest::upper_of($node, 'c');
($rc, $out, $err) = $node->psql('postgres',
    "SELECT decoupled.wait_for_upper('c', $upper, '1s')");
like($err, qr/timed out waiting for the upper of "c"/, 'a paused source does not advance');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.status_history
     WHERE name = 'c' AND status = 'paused'}), '1', 'the pause is in the history once');
$node->safe_psql('postgres', q{SELECT decoupled.alter_cluster('default', 1)});
DecoupledTest::wait_upper($node, 'c', $upper + 2000);
assert_complete('after the pause');

# A step's session ended by an administrator (pg_terminate_backend) while
# the step waits, computed and not committed: the replica opens a new
# session and goes on in the same process; the view is retried as any failed
# step and catches up (bgworker/replica_engine.cpp, attempt_in_session).
$node->safe_psql('postgres', q{
    CREATE TABLE st (id int PRIMARY KEY);
    SELECT decoupled.register_table('st');
    SELECT decoupled.create_materialized_view('st_n', 'SELECT count(*) AS n FROM st');
});
DecoupledTest::wait_following($node);
DecoupledTest::wait_upper($node, 'st_n',
    $node->safe_psql('postgres', q{SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'st'}));
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.wait_points = 'replica_maintain:computed';
    SELECT pg_reload_conf();
});
my $holder = $node->background_psql('postgres', on_error_stop => 0);
$holder->query_safe(q{SELECT decoupled.arm_wait_point('replica_maintain:computed')});
$node->safe_psql('postgres', q{INSERT INTO st VALUES (1); SELECT decoupled.tick_tables()});
DecoupledTest::wait_for($node,
    q{SELECT decoupled.wait_point_waiters('replica_maintain:computed') > 0}, 't');
my $worker = DecoupledTest::replica_pid($node, 'default');
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
    ALTER SYSTEM RESET decoupled.wait_points;
    SELECT pg_reload_conf();
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
     WHERE application_name = 'pg_decoupled replica default.r1'
       AND backend_type = 'client backend';
});
$holder->quit;
DecoupledTest::wait_upper($node, 'st_n',
    $node->safe_psql('postgres', q{SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'st'}));
is($node->safe_psql('postgres', 'SELECT n FROM st_n'), '1',
    'after its session was ended the step is retried and the view catches up');
is(DecoupledTest::replica_pid($node, 'default'), $worker,
    'the replica went on in a new session, in the same process');
ok($node->log_contains(q{stalled: the step's session ended}, $log_offset),
    'the step whose session ended is reported');
$node->safe_psql('postgres', q{SELECT decoupled.drop('st_n'); SELECT decoupled.unregister_table('st')});

# Crash: SIGKILL of an in-server replica makes PostgreSQL restart the whole
# server; the replica's next incarnation continues from durable progress.
$log_offset = -s $node->logfile;
$pid = DecoupledTest::replica_pid($node, 'default');
$upper = DecoupledTest::upper_of($node, 'c');
kill 'KILL', $pid;
$node->poll_query_until('postgres', 'SELECT 1', '1') or die 'server did not come back';
ok($node->log_contains('all server processes terminated; reinitializing', $log_offset),
    'a killed replica worker crash-restarts the server');
DecoupledTest::wait_upper($node, 'c', $upper + 1000);
assert_complete('after a crash');

# Dropping a running source: `dropped` is written once, by the dropping
# transaction; the replica stops maintaining it.
$node->safe_psql('postgres', q{SELECT decoupled.drop('c')});
DecoupledTest::wait_following($node);
$node->safe_psql('postgres', q{SELECT decoupled.create_source('d', 'counter', options => '{"tick": "20ms"}')});
my $d0 = DecoupledTest::upper_of($node, 'd');
DecoupledTest::wait_upper($node, 'd', $d0 + 200);
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.status_history
     WHERE name = 'c' AND status = 'dropped'}), '1', 'the drop is in the history exactly once');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.catalog_frontiers f
     JOIN decoupled.catalog_objects o USING (lifetime_id) WHERE o.name = 'c'}), '1',
    'the dropped collection keeps its frontier until finalization');

$node->stop;
done_testing();
