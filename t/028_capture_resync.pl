# A lost slot is made again and the tables it captured are taken again from
# their contents (C14.2): what they wrote while there was no slot is in no
# slot.  If the capture worker dies between making the new slot and
# committing that resynchronisation — killed, or the server crashes —
# the next worker must not decode from the new slot as if nothing were
# missing: it finds a slot without a recorded position, drops it and does
# both again (bgworker/capture_worker.cpp, create_slot).  Also: while
# capture is stalled, a tick does not advance a table captured from the
# WAL, so no write is stamped with a later tick's time than its own; and a
# prepared transaction that keeps the slot from being made is reported.
# And a change too large to turn into a line (decoupled.capture_max_row_size,
# 64 kB here) is its table's failure alone.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use DecoupledTest;

my $node = DecoupledTest::new_node('capture_resync', wal_level => 'logical',
    max_prepared_transactions => 5, 'decoupled.capture_max_row_size' => '64kB');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE ra (id int PRIMARY KEY, v int, tags int[] DEFAULT '{1,2}');  -- an array: resync keeps whole rows
    CREATE TABLE rb (id int PRIMARY KEY);
    SELECT decoupled.register_table('ra', retain_history => '1 day') > 0;
    SELECT decoupled.register_table('rb', retain_history => '1 day') > 0;
    INSERT INTO ra VALUES (1, 0);
});
$node->poll_query_until('postgres', 'SELECT count(*) FROM decoupled.capture_relations', '2')
  or die 'the tables were not adopted';
$node->safe_psql('postgres', 'SELECT decoupled.wait_for_capture(); SELECT decoupled.tick_tables()');

# History at the latest tick against the table.
my $agrees = q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name = 'ra';
    SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM ra;
    RESET decoupled.as_of;
    SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM ra};

# A session keeps rb locked (no transaction id: making a slot does not wait
# for it), so the resynchronisation waits for it after the new slot exists.
my ($out, $err) = ('', '');
my $holder = IPC::Run::start(
    [ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres', '-c',
      'BEGIN; SET application_name = holder; LOCK TABLE rb IN ROW EXCLUSIVE MODE; '
      . 'SELECT pg_sleep(60); COMMIT;' ],
    '>', \$out, '2>', \$err);
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
     WHERE c.relname = 'rb' AND l.mode = 'RowExclusiveLock' AND l.granted}, '1')
  or die 'the holder did not lock rb';

# The slot is lost (the worker holds it only while it decodes); writes
# land while there is none.
my $slot_idle = q{SELECT count(*) FROM pg_replication_slots
                   WHERE slot_name = 'pg_decoupled' AND NOT active};
$node->poll_query_until('postgres', $slot_idle, '1') or die 'the slot stayed active';
# One transaction: the worker, which notices the loss at once, cannot take
# ra for the resynchronisation before these writes committed.
$node->safe_psql('postgres', 'BEGIN;' . DecoupledTest::drop_capture_slot_sql() . q{;
    INSERT INTO ra VALUES (2, 0);
    UPDATE ra SET v = 1 WHERE id = 1;
    COMMIT});
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity
     WHERE backend_type = 'pg_decoupled capture'
       AND query LIKE '%resynchronising%' AND wait_event_type = 'Lock'}, '1')
  or die 'the worker did not start resynchronising';
is($node->safe_psql('postgres',
        q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}),
    '1', 'the new slot exists while the resynchronisation waits');

# The worker dies there.
$node->safe_psql('postgres', q{
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
     WHERE backend_type = 'pg_decoupled capture'});
$node->safe_psql('postgres', q{
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder'});
$holder->finish;

$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up';
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
my (undef, $history, $table) = split /\n/, $node->safe_psql('postgres', $agrees);
is($table, '1:1,2:0', 'the table has both writes');
is($history, $table, 'history has the writes made while there was no slot');

# The same with a crash in place of the worker's death.
$holder = IPC::Run::start(
    [ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres', '-c',
      'BEGIN; SET application_name = holder; LOCK TABLE rb IN ROW EXCLUSIVE MODE; '
      . 'SELECT pg_sleep(60); COMMIT;' ],
    '>', \$out, '2>', \$err);
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
     WHERE c.relname = 'rb' AND l.mode = 'RowExclusiveLock' AND l.granted}, '1')
  or die 'the holder did not lock rb';
$node->poll_query_until('postgres', $slot_idle, '1') or die 'the slot stayed active';
$node->safe_psql('postgres', 'BEGIN;' . DecoupledTest::drop_capture_slot_sql() . q{;
    INSERT INTO ra VALUES (3, 0);
    DELETE FROM ra WHERE id = 2;
    COMMIT});
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity
     WHERE backend_type = 'pg_decoupled capture'
       AND query LIKE '%resynchronising%' AND wait_event_type = 'Lock'}, '1')
  or die 'the worker did not start resynchronising';
$node->stop('immediate');
$holder->kill_kill;
$holder->finish;
$node->start;
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up after the crash';
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
(undef, $history, $table) = split /\n/, $node->safe_psql('postgres', $agrees);
is($table, '1:1,3:0', 'the table has the writes before the crash');
is($history, $table, 'and history has them after it');

# A stalled capture: a tick leaves the WAL-captured table's upper alone.
# (Capture fails recording its progress, which is no one table's failure;
# one table's would set that table aside after three passes.)
$node->safe_psql('postgres', q{
    CREATE FUNCTION stall_capture() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'capture stalled by the test'; END $$;
    CREATE TRIGGER stall BEFORE INSERT OR UPDATE ON decoupled.capture_progress
        FOR EACH ROW EXECUTE FUNCTION stall_capture();
    INSERT INTO ra VALUES (4, 0)});
$node->poll_query_until('postgres', q{SELECT status FROM decoupled.capture}, 'stalled')
  or die 'capture did not stall';
my $upper = $node->safe_psql('postgres', q{SELECT upper FROM decoupled.frontiers WHERE name = 'ra'});
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT decoupled.tick_tables()');
like($stderr, qr/WAL capture has not caught up with this tick/, 'a tick says capture lags');
is($node->safe_psql('postgres', q{SELECT upper FROM decoupled.frontiers WHERE name = 'ra'}),
    $upper, 'and leaves the upper of a table captured from the WAL where it was');
$node->safe_psql('postgres', 'DROP TRIGGER stall ON decoupled.capture_progress');
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not recover';
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
(undef, $history, $table) = split /\n/, $node->safe_psql('postgres', $agrees);
is($history, $table, 'once capture recovers, the next tick has the write');

# A prepared transaction keeps PostgreSQL from making a logical slot: the
# worker says so instead of waiting silently (while the slot being made
# kept WAL), and makes it once the transaction ended.
$node->safe_psql('postgres', q{
    SELECT decoupled.unregister_table('ra'), decoupled.unregister_table('rb')});
$node->poll_query_until('postgres',
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '0')
  or die 'the slot stayed';
$node->safe_psql('postgres', q{
    CREATE TABLE other (id int);
    BEGIN; INSERT INTO other VALUES (1); PREPARE TRANSACTION 'forgotten';});
$node->safe_psql('postgres', q{SELECT decoupled.register_table('ra') > 0});
$node->poll_query_until('postgres', q{
    SELECT status || ': ' || last_error FROM decoupled.capture},
    'stalled: cannot make replication slot "pg_decoupled" while 1 prepared transactions are open')
  or die 'capture did not say why it waits';
is($node->safe_psql('postgres',
        q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}),
    '0', 'no slot is half made meanwhile');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'forgotten'});
$node->poll_query_until('postgres', 'SELECT status FROM decoupled.capture', 'running')
  or die 'capture did not start once the prepared transaction ended';
pass('capture starts once the prepared transaction ended');

# A change whose row's text passes decoupled.capture_max_row_size (1 GB by
# default: a writer's 160 MB jsonb value of control characters, whose text
# and then its escaping as a record grow sevenfold, passed it) fails while
# it is decoded, before any line is written.  That failure counted against
# no table, and capture of every table stopped for good.  It is now the
# table's: after three passes the table is set aside — its changes left
# out of decoding, as turning them into lines is what fails — capture of
# the others goes on, and the table is taken again from its contents.
$node->safe_psql('postgres', q{
    CREATE TABLE big (id int PRIMARY KEY, doc text);
    CREATE TABLE small (id int PRIMARY KEY, v int);
    SELECT decoupled.register_table('big') > 0, decoupled.register_table('small') > 0;
    INSERT INTO big VALUES (1, 'short');
});
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM decoupled.capture_relations
     WHERE relation IN ('big'::regclass, 'small'::regclass)}, '2')
  or die 'the tables were not adopted';
# A record's text doubles each quote: 40,000 of them make 80 kB.
$node->safe_psql('postgres', q{
    INSERT INTO big VALUES (2, repeat('"', 40000));
    INSERT INTO small VALUES (1, 1);
});
is($node->safe_psql('postgres', q{SELECT decoupled.wait_for_capture('120 s')}), 't',
    'capture goes on past a row too large to capture');
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
my $tables_at_tick = q{
    SELECT set_config('decoupled.as_of', (min(upper) - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name IN ('big', 'small');
    SELECT (SELECT string_agg(id || ':' || length(doc), ',' ORDER BY id) FROM big) || ' '
        || (SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM small);
    RESET decoupled.as_of};
is((split /\n/, $node->safe_psql('postgres', $tables_at_tick))[1], '1:5,2:40000 1:1',
    'the other table is captured, and the large row taken in from the table');
like($node->safe_psql('postgres', q{
    SELECT string_agg(error, ' | ') FROM decoupled.status_history WHERE name = 'big'}),
    qr/capture could not .*a changed row of registered table "big" is too large to capture/,
    'the table was set aside, and its status history says why');
# Its other changes are captured again, and the row's own again set it aside.
$node->safe_psql('postgres', q{
    UPDATE big SET doc = 'shorter' WHERE id = 1;
    UPDATE big SET doc = doc || '"' WHERE id = 2;
    INSERT INTO small VALUES (2, 2);
});
is($node->safe_psql('postgres', q{SELECT decoupled.wait_for_capture('120 s')}), 't',
    'capture goes on again');
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
is((split /\n/, $node->safe_psql('postgres', $tables_at_tick))[1], '1:7,2:40001 1:1,2:2',
    'both tables read as they are at the next tick');
is($node->safe_psql('postgres', 'SELECT status FROM decoupled.capture'), 'running',
    'capture runs');
$node->stop;
done_testing();
