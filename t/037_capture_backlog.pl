# WAL capture catches up with a backlog larger than one pass reads
# (C14.1): a pass decodes at most 64 MB past what capture has taken in.
# A decoding opened afresh starts at the slot's confirmed position, which
# unticked pending changes hold back; its window was counted from there,
# so with more than 64 MB of WAL between that position and what capture
# had taken in, every pass decoded the same window again, captured
# nothing, and closed the decoding — capture never caught up, no table
# ticked again, and everything still said `running`.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('capture_backlog', wal_level => 'logical',
    'decoupled.table_tick_interval' => '5s', max_wal_size => '1GB');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE t (id int PRIMARY KEY, v int) WITH (decoupled.registered = true);
    CREATE TABLE junk (id int, pad text);
    INSERT INTO t VALUES (1, 1);
});
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up';
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
# Between two ticks: changes of t pending (the slot stays confirmed before
# them), then more than 64 MB of WAL nobody registered, then t again.
$node->safe_psql('postgres', q{
    INSERT INTO t SELECT i, i FROM generate_series(2, 20001) i;
    INSERT INTO junk SELECT i, repeat(md5(i::text), 8) FROM generate_series(1, 400000) i;
    INSERT INTO t VALUES (0, 0);
});
$node->poll_query_until('postgres', q{SELECT decoupled.wait_for_capture('10 s')}, 't')
  or die 'capture did not catch up with the backlog';
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
is($node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name = 't';
    SELECT count(*) FROM t}), "t\n20002", 'history has every change once capture caught up');
is($node->safe_psql('postgres', q{
    SELECT captured_through >= pg_current_wal_flush_lsn() - 65536 FROM decoupled.capture}), 't',
    'capture is where the WAL is');
$node->stop;
done_testing();
