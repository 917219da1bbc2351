# Switching decoupled.capture between 'wal' and 'trigger' while writers
# run (C14.1, C14.2): nothing committed is lost or doubled, and capture and
# ticks go on.  A table leaves WAL capture only once every change committed
# before its triggers exist has been captured (bgworker/capture_worker.cpp,
# release_tables).  Releasing first and draining the WAL afterwards let a
# tick take later transactions' trigger rows first (the table stalled: a
# retraction found no row), and let the drain find those rows live (capture
# failed at every pass).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use DecoupledTest;

my $node = DecoupledTest::new_node('capture_switch', wal_level => 'logical',
    'decoupled.table_tick_interval' => "'100ms'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE pc (id int PRIMARY KEY, v int, s text);
    -- Inserts, updates (of the key too, in a subtransaction that may roll
    -- back) and deletes of a few hundred keys.
    CREATE FUNCTION wr(k int, r int) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO pc VALUES (k, r, repeat('x', r))
            ON CONFLICT (id) DO UPDATE SET v = pc.v + 1, s = pc.s || 'u';
        BEGIN
            IF r = 3 THEN UPDATE pc SET id = id + 1000 WHERE id = k + 1; END IF;
            IF r = 4 THEN UPDATE pc SET id = id - 1000 WHERE id = k + 1000; END IF;
        EXCEPTION WHEN unique_violation THEN NULL;
        END;
        IF r > 7 THEN DELETE FROM pc WHERE id = k + 2; END IF;
    END
    $$;
    SELECT decoupled.register_table('pc', retain_history => '1 day') > 0;
    -- Transactions that write two tables: AS OF every tick, ta has as
    -- many rows as tb counts.
    CREATE TABLE ta (id bigserial PRIMARY KEY);
    CREATE TABLE tb (k int PRIMARY KEY, n bigint NOT NULL);
    INSERT INTO tb VALUES (1, 0);
    SELECT decoupled.register_table('ta', retain_history => '1 day') > 0;
    SELECT decoupled.register_table('tb', retain_history => '1 day') > 0;
});
my $wal_tables = "SELECT count(*) FROM decoupled.capture_relations";
$node->poll_query_until('postgres', $wal_tables, '3') or die 'the tables were not adopted';

my $dir = $node->basedir;
PostgreSQL::Test::Utils::append_to_file("$dir/write.sql",
    "\\set k random(1, 300)\n\\set r random(1, 10)\nSELECT wr(:k, :r);\n");
PostgreSQL::Test::Utils::append_to_file("$dir/abort.sql",
    "\\set k random(1, 300)\nBEGIN;\nSELECT wr(:k, 9);\nROLLBACK;\n");
PostgreSQL::Test::Utils::append_to_file("$dir/pair.sql",
    "BEGIN;\nINSERT INTO ta DEFAULT VALUES;\nUPDATE tb SET n = n + 1 WHERE k = 1;\nCOMMIT;\n");
my ($out, $err) = ('', '');
my $bench = IPC::Run::start(
    [ 'pgbench', '-n', '-h', $node->host, '-p', $node->port, '-c', '4', '-j', '4', '-T', '30',
      '-f', "$dir/write.sql\@9", '-f', "$dir/abort.sql\@1", '-f', "$dir/pair.sql\@5",
      'postgres' ],
    '>', \$out, '2>', \$err);

# Six switches while the writers run, each once the previous one took
# effect (the worker moved the table).
my $mode = 'trigger';
for my $switch (1 .. 6) {
    $node->safe_psql('postgres', "ALTER SYSTEM SET decoupled.capture = '$mode'");
    $node->safe_psql('postgres', 'SELECT pg_reload_conf()');
    $node->poll_query_until('postgres', $wal_tables, $mode eq 'wal' ? '3' : '0')
      or die "capture did not switch to $mode";
    $mode = $mode eq 'wal' ? 'trigger' : 'wal';
}
ok($bench->pumpable, 'the writers still ran when the last switch took effect');
$bench->finish;
is($?, 0, 'every writer transaction ran');
like($out, qr/actually processed: [1-9][0-9]*/, 'the writers committed transactions');

$node->safe_psql('postgres', "ALTER SYSTEM SET decoupled.capture = 'wal'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->poll_query_until('postgres', $wal_tables, '3') or die 'capture did not switch back';

# Everything committed is in history, once: its state at the last tick is
# the table's.
is($node->safe_psql('postgres', q{
    SELECT decoupled.wait_for_capture('60 s');
    SELECT decoupled.tick_tables() >= 0;
    SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'pc' \gset
    CREATE TEMP TABLE now_rows AS SELECT * FROM pc;
    SET decoupled.as_of = :t;
    CREATE TEMP TABLE history_rows AS SELECT * FROM pc;
    RESET decoupled.as_of;
    SELECT (SELECT count(*) FROM (TABLE now_rows EXCEPT ALL TABLE history_rows) a),
           (SELECT count(*) FROM (TABLE history_rows EXCEPT ALL TABLE now_rows) b),
           (SELECT count(*) FROM now_rows) > 0;
}), "t\nt\n0|0|t", 'history at the last tick is the table, row for row');
is($node->safe_psql('postgres',
        "SELECT status FROM decoupled.object_statuses WHERE name = 'pc'"),
    'running', 'the table never stays stalled');

# A tick is one cut of every table, while a switch has some captured by
# triggers and others from the WAL too: AS OF every time either table
# changed, ta has as many rows as tb counts.  (The controller's tick left
# out a table whose writers it could not hold off at once and ticked the
# others: such a transaction landed in two ticks.)
my ($ta, $tb) = split /\|/, $node->safe_psql('postgres', q{
    SELECT (SELECT lifetime_id FROM decoupled.objects WHERE name = 'ta') || '|' ||
           (SELECT lifetime_id FROM decoupled.objects WHERE name = 'tb')});
my @times = split /\n/, $node->safe_psql('postgres', qq{
    SELECT t FROM (SELECT mz_ts FROM decoupled_storage.c${ta}_cur
                   UNION SELECT mz_ts FROM decoupled_storage.c${tb}_cur
                   UNION SELECT valid_to FROM decoupled_storage.c${tb}_dead) x(t)
     WHERE t < (SELECT min(upper) FROM decoupled.frontiers WHERE name IN ('ta', 'tb'))
     ORDER BY 1});
cmp_ok(scalar(@times), '>', 20, 'the two tables changed at many ticks');
my $cuts = join('', map {
    "SET decoupled.as_of = $_;\n"
      . "SELECT '$_' WHERE (SELECT count(*) FROM ta) <> (SELECT n FROM tb);\n" } @times);
is($node->safe_psql('postgres', $cuts . 'RESET decoupled.as_of;'), '',
    'AS OF every tick, the two tables show the same transactions');
my $log = slurp_file($node->logfile);
unlike($log, qr/capture pass failed/, 'no capture pass failed');
unlike($log, qr/registered table "pc" stalled/, 'no tick of the table failed');

# A table a reader keeps from being released stays captured from the WAL
# while the setting says 'trigger': a session's tick still waits for
# capture, so a write committed before it is in it.
$node->safe_psql('postgres', q{
    CREATE TABLE pr (id int PRIMARY KEY);
    SELECT decoupled.register_table('pr', retain_history => '1 day') > 0;
});
$node->poll_query_until('postgres', $wal_tables, '4') or die 'pr was not adopted';
my $holder = IPC::Run::start(
    [ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres', '-c',
      'BEGIN; SET application_name = pr_reader; SELECT count(*) FROM pr; '
      . 'SELECT pg_sleep(120); COMMIT;' ],
    '>', \my $hout, '2>', \my $herr);
$node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
     WHERE c.relname = 'pr' AND l.granted}, '1')
  or die 'the reader did not take pr';
$node->safe_psql('postgres', "ALTER SYSTEM SET decoupled.capture = 'trigger'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->poll_query_until('postgres', q{
    SELECT string_agg(o.name, ',') FROM decoupled.capture_relations r
      JOIN decoupled.catalog_objects o USING (lifetime_id)}, 'pr')
  or die 'pc, ta and tb were not released';
is($node->safe_psql('postgres', q{
    INSERT INTO pr SELECT generate_series(1, 1000);
    SELECT decoupled.tick_tables() >= 0;
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name = 'pr';
    SELECT count(*) FROM pr;
}), "t\nt\n1000", 'a tick while the table is being released has what committed before it');
$node->safe_psql('postgres',
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pr_reader'");
$holder->finish;
$node->poll_query_until('postgres', $wal_tables, '0') or die 'pr was not released';
$node->safe_psql('postgres', "ALTER SYSTEM SET decoupled.capture = 'wal'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');

$node->stop;
done_testing();
