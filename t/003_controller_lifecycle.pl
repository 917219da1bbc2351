# C9 skeleton: the controller waits for the extension without errors or
# spinning, follows CREATE / DROP / re-CREATE EXTENSION, survives catalog
# read failures and SIGHUP in place, and comes back after SIGTERM — never
# taking the server down.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('controller');
$node->start;
my $postmaster = DecoupledTest::postmaster_pid($node);
my $log_start = -s $node->logfile;

# Before CREATE EXTENSION: waiting, quietly.
$node->poll_query_until('postgres',
    q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_decoupled controller'}, '1')
  or die 'controller did not start';
my $controller = $node->safe_psql('postgres',
    q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_decoupled controller'});
ok($node->log_contains('pg_decoupled controller waits for CREATE EXTENSION', 0),
    'the controller says it waits for the extension');
# Its process stays idle between polls: a spinning loop would burn a core.
my $cpu_before = cpu_ticks($controller);
$node->safe_psql('postgres', "SELECT pg_sleep(1)");
my $cpu_used = cpu_ticks($controller) - $cpu_before;
cmp_ok($cpu_used, '<', 20, "the waiting controller is idle ($cpu_used ticks in 1s)");

$node->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
DecoupledTest::wait_following($node);
is(DecoupledTest::controller_pid($node), $controller, 'CREATE EXTENSION is followed in place');

# Replicas first: a DROP EXTENSION racing their queries can deadlock.
$node->safe_psql('postgres', "SELECT decoupled.alter_cluster('default', 0)");
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM decoupled.supervised WHERE kind = 'replica'}, '0');
$node->safe_psql('postgres', 'DROP EXTENSION pg_decoupled');
$node->poll_query_until('postgres',
    q{SELECT count(*) FROM pg_extension WHERE extname = 'pg_decoupled'}, '0');
# The controller's state is read through the library directly, since the
# extension's SQL functions are gone; re-create it to look.
$node->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
DecoupledTest::wait_following($node);
is($node->safe_psql('postgres', 'SELECT catalog_version FROM decoupled.controller'),
    '1', 'a re-created extension is a fresh catalog, followed from version 1');
is(DecoupledTest::controller_pid($node), $controller,
    'DROP and re-CREATE EXTENSION are followed by the same controller');

# A catalog read failure is retried, not fatal.
my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER TABLE decoupled.catalog_meta RENAME TO catalog_meta_away');
DecoupledTest::wait_controller_state($node, 'retrying');
ok($node->log_contains('could not read the catalog', $offset),
    'a failed catalog read is logged');
$node->safe_psql('postgres', 'ALTER TABLE decoupled.catalog_meta_away RENAME TO catalog_meta');
DecoupledTest::wait_following($node);
is(DecoupledTest::controller_pid($node), $controller, 'the controller recovered in place');

# SIGHUP reloads settings without a restart.
$node->append_conf('postgresql.conf', "decoupled.poll_interval = 300ms\n");
$node->reload;
$node->safe_psql('postgres', "SELECT decoupled.create_cluster('after_reload')");
DecoupledTest::wait_following($node);
is(DecoupledTest::controller_pid($node), $controller, 'SIGHUP is handled in place');

# SIGTERM ends the controller; the postmaster starts a new one, which
# follows the same catalog.  Other sessions are not disturbed.
my $session = $node->background_psql('postgres');
$session->query_safe('SELECT 1');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($controller)");
$node->poll_query_until('postgres',
    qq{SELECT pid IS NOT NULL AND pid <> $controller AND state = 'following'
         FROM decoupled.controller_status()})
  or die 'no new controller';
DecoupledTest::wait_following($node);
isnt(DecoupledTest::controller_pid($node), $controller, 'a terminated controller is restarted');
is($session->query_safe('SELECT 42'), '42', 'an open session survived the controller restart');
$session->quit;

is(DecoupledTest::postmaster_pid($node), $postmaster, 'the server never restarted');
ok(!DecoupledTest::crashed_since($node, $log_start), 'no crash restart is in the log');

# More processes declared than decoupled.max_workers has slots: those left
# out are listed as `no slot` and the log says so once, with the way out.
$node->append_conf('postgresql.conf', 'decoupled.max_workers = 4');
$node->restart;
DecoupledTest::wait_following($node);
my $slots_log = -s $node->logfile;
$node->safe_psql('postgres', q{SELECT decoupled.alter_cluster('default', 4)});
$node->poll_query_until('postgres',
    q{SELECT array_agg(name ORDER BY name) @> '{r2,r3,r4}'
        FROM decoupled.supervised WHERE action = 'no slot' AND kind = 'replica'})
  or die 'processes without a slot are not listed';
is($node->safe_psql('postgres',
        q{SELECT count(*) FROM decoupled.supervised WHERE action = 'no slot' AND pid IS NOT NULL}),
   '0', 'processes without a slot have no pid');
$node->poll_query_until('postgres',
    qq{SELECT pg_read_file('@{[ $node->logfile ]}', $slots_log, 100000)
              ~ 'left [0-9]+ declared processes unstarted: all 4 slots of decoupled.max_workers'})
  or die 'the log does not say why';
pass('the log says why they did not start');

$node->stop;
done_testing();

# User plus system CPU ticks of a process, from /proc.
sub cpu_ticks {
    my ($pid) = @_;
    my $stat = slurp_file("/proc/$pid/stat");
    my @fields = split ' ', ($stat =~ /\)\s+(.*)$/)[0];
    return $fields[11] + $fields[12];
}
