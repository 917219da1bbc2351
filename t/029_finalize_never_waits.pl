# A drop never waits for readers (C2.6), nor does the controller's round
# that finalizes the dropped storage.  Any role may lock a collection's
# PUBLIC history view (LOCK TABLE on a view locks what it reads, checked
# as the view's owner); the round's DROP VIEW of a dropped collection used
# to wait for such a lock without limit (its lock_timeout did not bound the
# wait in the controller), and no registered table ticked meanwhile.  Now
# finalization locks NOWAIT and retries at a later round.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use DecoupledTest;

my $node = DecoupledTest::new_node('finalize_never_waits',
    'decoupled.table_tick_interval' => "'100ms'",
    'decoupled.bound_publication_interval' => "'200ms'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE ROLE reader LOGIN;
    CREATE TABLE gone (id int PRIMARY KEY);
    CREATE TABLE kept (id int PRIMARY KEY);
    SELECT decoupled.register_table('gone') > 0;
    SELECT decoupled.register_table('kept') > 0;
});
my $history = $node->safe_psql('postgres', q{
    SELECT format('decoupled_storage.c%s_history', lifetime_id)
      FROM decoupled.objects WHERE name = 'gone'});

# An ordinary role keeps the dropped table's history view locked.
my ($out, $err) = ('', '');
my $holder = IPC::Run::start(
    [ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-U', 'reader', '-d', 'postgres',
      '-c', "BEGIN; SET application_name = holder; LOCK TABLE $history IN ACCESS SHARE MODE; "
          . 'SELECT pg_sleep(120); COMMIT;' ],
    '>', \$out, '2>', \$err);
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity
     WHERE application_name = 'holder' AND wait_event = 'PgSleep'}, '1')
  or die 'the holder did not lock the view';
$node->safe_psql('postgres', q{SELECT decoupled.unregister_table('gone')});

# Several rounds later, the other table still ticks.
$node->safe_psql('postgres', 'INSERT INTO kept VALUES (1)');
my $ticked = $node->safe_psql('postgres', q{
    SELECT decoupled.wait_for_upper('kept', decoupled.oracle_now() + 2000, '30 s') > 0});
is($ticked, 't', 'ticks go on while a reader holds a dropped collection\'s history view');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
     WHERE NOT l.granted AND a.backend_type = 'pg_decoupled controller'}),
    '0', 'the controller waits for no lock');

# Once the reader is gone, a later round finalizes it.
$node->safe_psql('postgres', q{
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder'});
$holder->finish;
$node->poll_query_until('postgres', q{
    SELECT finalized_at IS NOT NULL FROM decoupled.catalog_objects WHERE name = 'gone'}, 't')
  or die 'the dropped table was never finalized';
pass('the dropped table is finalized once the reader is gone');
$node->stop;
done_testing();
