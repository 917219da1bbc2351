# C14.1: the pending changes of WAL-captured tables are unlogged once a
# tick left them empty, and the slot is confirmed only up to what ticks
# moved into history.  A crash empties them: capture decodes those tables
# again from their ticked position, and the next tick's history is exactly
# the tables' contents — nothing lost, nothing twice.  A table released to
# trigger capture, and one no tick moves for more than
# decoupled.capture_unticked_wal_limit of WAL, gets logged pending changes
# again, and the slot moves on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

# The test ticks itself: a tick of the controller between a write and the
# check that no tick moved it would confirm the slot past it.
my $node = DecoupledTest::new_node('unlogged_pending', wal_level => 'logical',
    restart_after_crash => 'on', 'decoupled.table_tick_interval' => '0');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL);
    CREATE TABLE journal (a int, b text);  -- no primary key: REPLICA IDENTITY FULL
    CREATE TABLE noise (x text);           -- not registered: WAL to decode past
    INSERT INTO acct SELECT g, 100 FROM generate_series(1, 50) g;
    INSERT INTO journal SELECT g % 5, 'seed' FROM generate_series(1, 20) g;
    SELECT decoupled.register_table('acct', retain_history => '1 day');
    SELECT decoupled.register_table('journal', retain_history => '1 day');
    CREATE FUNCTION digest() RETURNS text LANGUAGE sql AS $$
        SELECT md5((SELECT coalesce(string_agg(t::text, ',' ORDER BY t.id), '') FROM acct t)
                   || '|' ||
                   (SELECT coalesce(string_agg(t::text, ',' ORDER BY t::text), '') FROM journal t))
    $$;
    CREATE FUNCTION persistence() RETURNS text LANGUAGE sql AS $$
        SELECT string_agg(o.name || '=' || c.relpersistence::text, ',' ORDER BY o.name)
          FROM decoupled.objects o
          JOIN pg_class c ON c.oid = ('decoupled_storage.c' || o.lifetime_id || '_pending')::regclass
         WHERE o.kind = 'table'
    $$;
    -- The history at the latest tick against the tables now (no writer
    -- runs between the tick and this).
    CREATE FUNCTION history_matches() RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
        now_digest text := digest();
        at_tick    text;
    BEGIN
        PERFORM set_config('decoupled.as_of',
            (SELECT (f.upper - 1)::text FROM decoupled.frontiers f WHERE f.name = 'acct'), true);
        at_tick := digest();
        PERFORM set_config('decoupled.as_of', '', true);
        RETURN now_digest = at_tick;
    END
    $$;
});
DecoupledTest::wait_for($node,
    q{SELECT wal_tables || ' ' || status FROM decoupled.capture}, '2 running');

# Writes `sql` and waits until capture took it in (not ticked).
sub write_captured {
    my ($sql) = @_;
    $node->safe_psql('postgres', "$sql; SELECT decoupled.wait_for_capture('60 s')");
}

sub tick {
    return $node->safe_psql('postgres',
        q{DO $$ BEGIN PERFORM decoupled.tick_tables(); END $$; SELECT history_matches()});
}

is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=p,journal=p',
    'pending changes start logged (they may hold what triggers captured)');
write_captured(q{UPDATE acct SET balance = balance + 1 WHERE id <= 5;
                 INSERT INTO journal VALUES (1, 'one')});
is(tick(), 't', 'a tick moves what capture took in');
is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=u,journal=u',
    'a tick that left them empty made them unlogged');

# Changes captured into unlogged pending relations, not ticked.
sub unticked_changes {
    my ($i) = @_;
    write_captured(qq{
        INSERT INTO acct VALUES (100 + $i, $i);
        UPDATE acct SET balance = balance * 2 WHERE id % 7 = $i % 7;
        DELETE FROM acct WHERE id = 40 + $i;
        INSERT INTO journal VALUES ($i, 'w$i'), ($i, 'w$i');
        UPDATE journal SET b = b || '+' WHERE a = $i % 5 AND b = 'seed';
        DELETE FROM journal WHERE b = 'w' || ($i - 1)});
}
# The slot's bound: just after the first unticked change committed.  Until
# capture took that change in, pending was empty and the slot could be
# confirmed up to anything decoded before it (the worker's own standby
# snapshots, say) — past a position read before the writes, which the
# check compared with and sometimes failed.  Never past this change.
my $before = $node->safe_psql('postgres',
    q{INSERT INTO acct VALUES (99, 99); SELECT pg_current_wal_insert_lsn()});
unticked_changes(1);
cmp_ok($node->safe_psql('postgres', q{
    SELECT (SELECT count(*) FROM decoupled_storage.c1_pending)
         + (SELECT count(*) FROM decoupled_storage.c2_pending)}), '>', 0,
    'captured changes wait in the unlogged pending relations');
is($node->safe_psql('postgres', qq{
    SELECT s.confirmed_flush_lsn <= '$before'
      FROM pg_replication_slots s WHERE s.slot_name = 'pg_decoupled'}), 't',
    'the slot is not confirmed past changes no tick moved');

# A crash empties them: capture decodes the two tables again.
my $offset = -s $node->logfile;
$node->stop('immediate');
$node->start;
DecoupledTest::wait_for($node, q{SELECT status FROM decoupled.capture}, 'running');
$node->safe_psql('postgres', q{SELECT decoupled.wait_for_capture('60 s')});
like(slurp_file($node->logfile, $offset),
    qr/decoded again the changes of 2 registered tables whose unlogged pending changes a crash emptied/,
    'after the crash, capture decoded both tables again from their ticked position');
is(tick(), 't', 'after a crash, history at the next tick is the tables\' contents: '
    . 'every change once');

# Two crashes in a row, the second before any tick.
unticked_changes(2);
$node->stop('immediate');
$node->start;
DecoupledTest::wait_for($node, q{SELECT status FROM decoupled.capture}, 'running');
$node->safe_psql('postgres', q{SELECT decoupled.wait_for_capture('60 s')});
unticked_changes(3);
$node->stop('immediate');
$node->start;
DecoupledTest::wait_for($node, q{SELECT status FROM decoupled.capture}, 'running');
$node->safe_psql('postgres', q{SELECT decoupled.wait_for_capture('60 s')});
is(tick(), 't', 'two crashes before a tick: history is the tables\' contents');

# A table that no tick moves: past the limit, its pending changes are made
# logged and the slot moves on.
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.capture_unticked_wal_limit = '1MB';
    SELECT pg_reload_conf()});
unticked_changes(4);
my $ticked = $node->safe_psql('postgres', 'SELECT ticked_lsn FROM decoupled.capture_ticked');
$node->safe_psql('postgres',
    q{INSERT INTO noise SELECT repeat(md5(g::text), 20) FROM generate_series(1, 5000) g});
$node->poll_query_until('postgres', q{
    SELECT persistence() = 'acct=p,journal=p'
       AND (SELECT decoupled.wait_for_capture('1 s'))}) or die 'pending changes stayed unlogged';
$node->poll_query_until('postgres', qq{
    SELECT confirmed_flush_lsn > '$ticked' FROM pg_replication_slots
     WHERE slot_name = 'pg_decoupled'}) or die 'the slot stayed where the last tick was';
pass('past decoupled.capture_unticked_wal_limit the pending changes were made logged and '
    . 'the slot moved on');
$node->stop('immediate');
$node->start;
DecoupledTest::wait_for($node, q{SELECT status FROM decoupled.capture}, 'running');
$node->safe_psql('postgres', q{SELECT decoupled.wait_for_capture('60 s')});
is(tick(), 't', 'their rows survived a crash as logged rows: history is the tables\' contents');
is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=u,journal=u',
    'the tick that emptied them made them unlogged again');

# decoupled.capture_unticked_wal_limit = 0: pending changes stay logged.
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.capture_unticked_wal_limit = 0;
    SELECT pg_reload_conf()});
unticked_changes(5);
$node->poll_query_until('postgres', q{SELECT persistence() = 'acct=p,journal=p'})
  or die 'pending changes stayed unlogged with the limit at 0';
is(tick(), 't', 'ticks go on with logged pending changes');
is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=p,journal=p',
    'with the limit at 0 ticks leave them logged');
$node->safe_psql('postgres', q{
    ALTER SYSTEM RESET decoupled.capture_unticked_wal_limit;
    SELECT pg_reload_conf()});
unticked_changes(6);
is(tick(), 't', 'a tick after the reset');
is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=u,journal=u',
    'unlogged again once the limit allows');

# Released to trigger capture: the captured rows not ticked become logged
# before the triggers write there, and survive a crash.
unticked_changes(7);
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.capture = 'trigger';
    SELECT pg_reload_conf()});
DecoupledTest::wait_for($node,
    q{SELECT wal_tables || ' ' || trigger_tables FROM decoupled.capture}, '0 2');
is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=p,journal=p',
    'released tables have logged pending changes');
$node->safe_psql('postgres', q{INSERT INTO acct VALUES (900, 9); INSERT INTO journal VALUES (9, 'trig')});
$node->stop('immediate');
$node->start;
is(tick(), 't', 'rows captured from the WAL before the release, and by triggers after, '
    . 'survive a crash');

# And adopted again.
$node->safe_psql('postgres', q{
    ALTER SYSTEM RESET decoupled.capture;
    SELECT pg_reload_conf()});
DecoupledTest::wait_for($node,
    q{SELECT wal_tables || ' ' || trigger_tables FROM decoupled.capture}, '2 0');
unticked_changes(8);
is(tick(), 't', 'adopted again: ticks go on');
is($node->safe_psql('postgres', 'SELECT persistence()'), 'acct=u,journal=u',
    'and their pending changes are unlogged again');

$node->stop;
done_testing();
