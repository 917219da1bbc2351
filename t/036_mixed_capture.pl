# Tables captured by triggers beside tables captured from the WAL (a table
# not adopted yet, a switch of decoupled.capture under way) — C14.1, C2.
#
# One cut: while WAL capture lags, the controller's ticks leave the
# trigger-captured tables where they are too, so a transaction that wrote
# one of each kind lands in one tick.  For 10 s: past that the
# trigger-captured tables tick on (logged), so that a stalled capture stops
# only its own tables.  Before, they ticked at once and AS OF a tick a
# transaction showed its write to one table and not to the other.
#
# A switch never holds the table while it waits: the capture worker takes
# the table and its pending relation for 20 ms at most.  Before, it waited
# without bound for the pending relation of a table a transaction had
# ticked, holding the table from all its users meanwhile, and deadlocked
# with that transaction once it read the table.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('mixed_capture', wal_level => 'logical',
    'decoupled.table_tick_interval' => '100ms',
    'decoupled.wait_points' => "'capture:decoding'",
    # Pending relations stay logged: a release then drops their key index.
    'decoupled.capture_unticked_wal_limit' => '0');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE wa (id int PRIMARY KEY, n int);
    SELECT decoupled.register_table('wa');
});
DecoupledTest::wait_for($node, q{SELECT wal_tables FROM decoupled.capture}, '1');

# Capture held before it decodes: WAL-captured tables cannot tick.
my $holder = $node->background_psql('postgres', on_error_stop => 1);
$holder->query_safe(q{SELECT decoupled.arm_wait_point('capture:decoding')});
DecoupledTest::wait_for($node, q{SELECT decoupled.wait_point_waiters('capture:decoding')}, '1');
# A table registered now stays captured by triggers: the worker adopts it
# after its capture.
$node->safe_psql('postgres', q{
    CREATE TABLE tb (id int PRIMARY KEY, n int);
    SELECT decoupled.register_table('tb');
});
my $log_offset = -s $node->logfile;
my $written_at = $node->safe_psql('postgres', q{
    BEGIN;
    INSERT INTO wa VALUES (1, 1);
    INSERT INTO tb VALUES (1, 1);
    COMMIT;
    SELECT decoupled.oracle_now()});
DecoupledTest::wait_for($node,
    qq{SELECT upper > $written_at FROM decoupled.frontiers WHERE name = 'tb'}, 't');
my $tb_at = $node->safe_psql('postgres', q{
    SELECT min(mz_timestamp) FROM decoupled.subscribe('tb',
        (SELECT since FROM decoupled.frontiers WHERE name = 'tb'),
        (SELECT upper FROM decoupled.frontiers WHERE name = 'tb'))});
cmp_ok($tb_at - $written_at, '>=', 9000,
    'while WAL capture lags the trigger-captured table waits with it (10 s)');
ok($node->log_contains('whose capture has lagged for 10 s', $log_offset),
    'then it ticks on, and the log says why');

# Capture goes on; both tables' writes are in history.
$holder->query_safe(q{SELECT decoupled.release_wait_point('capture:decoding')});
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up';
DecoupledTest::wait_for($node, q{SELECT wal_tables FROM decoupled.capture}, '2');
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
is($node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (min(upper) - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name IN ('wa', 'tb');
    SELECT (SELECT count(*) FROM wa) || ',' || (SELECT count(*) FROM tb)}), "t\n1,1",
    'both writes are in history once capture caught up');

# A switch to triggers while a transaction holds the tables' pending
# relations (it ticked them): the worker's attempt gives up at once.  The
# controller's ticks stop first, so that the transaction's tick has rows
# to move (and pending's locks to hold).
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.table_tick_interval = 0;
    SELECT pg_reload_conf()});
my $ticker = $node->background_psql('postgres', on_error_stop => 0);
$ticker->query_safe(q{INSERT INTO wa VALUES (2, 2)});
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up';
$ticker->query_safe(q{BEGIN; SELECT decoupled.tick_tables()});
# The worker's attempts say at DEBUG1 that they gave up: logged for the
# window only, they show the switch was tried while the table was held.
my $switch_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET log_min_messages = 'debug1';
    ALTER SYSTEM SET decoupled.capture = 'trigger';
    SELECT pg_reload_conf()});
# The worker tries once a second: readers meanwhile are not held up.
foreach my $round (1 .. 3) {
    is($node->safe_psql('postgres', q{
        SET lock_timeout = '5s';
        SELECT count(*) FROM wa, pg_sleep(0.5)}), '2',
        "the table stays readable while the switch cannot finish ($round)");
}
ok($node->wait_for_log(qr/table \d+ stays captured from the WAL for now/, $switch_offset),
    'the worker tried the switch meanwhile and gave up at once');
my $read = $ticker->query(q{SELECT count(*) FROM wa});
is($read, '2', 'the transaction that ticked reads the table: no deadlock');
$ticker->query_safe('COMMIT');
$node->safe_psql('postgres', q{
    ALTER SYSTEM RESET log_min_messages;
    SELECT pg_reload_conf()});
$ticker->quit;
$holder->quit;
DecoupledTest::wait_for($node, q{SELECT wal_tables FROM decoupled.capture}, '0');
$node->safe_psql('postgres', q{INSERT INTO wa VALUES (3, 3)});
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
is($node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name = 'wa';
    SELECT string_agg(id::text, ',' ORDER BY id) FROM wa}), "t\n1,2,3",
    'once it ended the switch is made, and the table is captured by triggers');

$node->stop;
done_testing();
