# A role that may lock a registered table (LOCK TABLE ... IN ACCESS
# EXCLUSIVE MODE needs UPDATE, DELETE or TRUNCATE on it: any writer of the
# application) holds up the views that read that table, and only them: a
# replica's step waits a moment for the lock (lock_timeout), then tries
# that view again shortly, while it steps the cluster's other views. Once
# the lock has been held for ten seconds the waiting views are reported
# stalled, saying why; when it goes they catch up and verify.
#
# And a reader that keeps a dropped view open holds up nothing: not the
# controller, which removes the dropped view's relation with a moment's
# lock timeout (the controller's own cancel is what ends that wait), nor
# any table's ticks — also while the view's owner tries to create a view of
# the same name, which says why it cannot yet.
#
# A transaction that creates a view over a table holds that table's
# storage until it ends, so a tick cannot move the table's changes: ticks
# wait for it (a transaction that wrote it and another table lands in one
# tick), but for 10 s at most; then the other tables tick without it, and
# it catches up once the transaction ends.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('locked_input', wal_level => 'logical',
    'decoupled.table_tick_interval' => '100ms',
    # The controller's rounds: publication, compaction, finalization.
    'decoupled.bound_publication_interval' => '200ms');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE ROLE mallory LOGIN IN ROLE decoupled_admin;
    CREATE ROLE bob LOGIN IN ROLE decoupled_admin;
    CREATE ROLE app LOGIN;
    GRANT CREATE ON SCHEMA public TO mallory, bob;
    SET ROLE mallory;
    CREATE TABLE m (id int PRIMARY KEY, g int NOT NULL);
    INSERT INTO m SELECT i, i % 5 FROM generate_series(1, 50) i;
    GRANT SELECT, UPDATE ON m TO app;
    CREATE TABLE n (g int PRIMARY KEY, w text NOT NULL);
    INSERT INTO n SELECT g, 'w' || g FROM generate_series(0, 4) g;
    SELECT decoupled.register_table('m');
    SELECT decoupled.register_table('n');
    SELECT decoupled.create_materialized_view('m_counts',
        'SELECT n.w, string_agg(m.id::text, '','' ORDER BY m.id) AS ids
           FROM m JOIN n ON n.g = m.g GROUP BY n.w');
    SELECT decoupled.create_materialized_view('m_rows',
        'SELECT m.id, n.w, row_number() OVER (PARTITION BY n.w ORDER BY m.id) AS r
           FROM m JOIN n ON n.g = m.g');
    RESET ROLE;
    SET ROLE bob;
    CREATE TABLE b (id int PRIMARY KEY, v int NOT NULL);
    SELECT decoupled.register_table('b');
    SELECT decoupled.create_materialized_view('b_total', 'SELECT count(*) AS n, sum(v) AS s FROM b');
});
my $now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, $_, $now) for qw(m_counts m_rows b_total);

# The application's role takes m and keeps it; then n changes, and the
# views over both must read m to step (a grouped view computes its touched
# groups from the tables, the other one all of it: both through the plan
# that reads m).
my $locker = $node->background_psql('postgres', on_error_stop => 1);
$locker->query_safe('SET ROLE app');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE m IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', "UPDATE n SET w = w || 'x' WHERE g = 3");

for my $i (1 .. 5) {
    $node->safe_psql('postgres', "INSERT INTO b VALUES ($i, $i)");
    my $ts = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
    $node->safe_psql('postgres', "SELECT decoupled.wait_for_upper('b_total', $ts, '20s')");
}
pass('while another role holds a lock on m, a view over another table keeps up');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM decoupled.status_history WHERE name = 'b_total' AND status = 'stalled'}),
    '0', 'and it was never reported stalled');
is($node->safe_psql('postgres', q{
    SELECT (SELECT count(*) FROM m_rows WHERE w LIKE '%x')
         + (SELECT count(*) FROM m_counts WHERE w LIKE '%x')
         + (SELECT count(*) FROM decoupled.frontiers v
             WHERE v.name IN ('m_counts', 'm_rows')
               AND v.upper >= (SELECT upper FROM decoupled.frontiers WHERE name = 'n'))}),
    '0', 'the views over m wait for it: n\'s change is not in them, their uppers behind n\'s');

# Held ten seconds: they are reported stalled, with the reason.
$node->poll_query_until('postgres', q{
    SELECT count(DISTINCT name) = 2 FROM decoupled.object_statuses
     WHERE name IN ('m_counts', 'm_rows') AND status = 'stalled'
       AND error LIKE 'another transaction holds a lock it needs%'})
  or die 'the views over m were not reported stalled: '
  . $node->safe_psql('postgres',
      q{SELECT string_agg(name || ' ' || status || ' ' || coalesce(error, ''), '; ')
          FROM decoupled.object_statuses WHERE name IN ('m_counts', 'm_rows')});
pass('held for ten seconds, the views over m are reported stalled, saying why');

$locker->query_safe('ROLLBACK');
$locker->quit;
$now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, $_, $now) for qw(m_counts m_rows);
is($node->safe_psql('postgres', q{
    SELECT decoupled.verify('m_counts') AND decoupled.verify('m_rows')}), 't',
    'once the lock goes, they catch up and verify');
$node->poll_query_until('postgres', q{
    SELECT bool_and(status = 'running') FROM decoupled.object_statuses
     WHERE name IN ('m_counts', 'm_rows')})
  or die 'the views over m did not run again';
pass('and run again');

# A reader keeps a dropped view open.
$node->safe_psql('postgres', q{
    SELECT decoupled.create_materialized_view('b_rows', 'SELECT id, v FROM b')});
$now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, 'b_rows', $now);
my $reader = $node->background_psql('postgres', on_error_stop => 1);
$reader->query_safe('BEGIN');
$reader->query_safe('DECLARE c CURSOR FOR SELECT * FROM b_rows');
$reader->query_safe('FETCH 1 FROM c');
$node->safe_psql('postgres', q{SELECT decoupled.drop('b_rows')});
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
    SELECT decoupled.create_materialized_view('b_rows', 'SELECT id FROM b')});
like($stderr, qr/relation "b_rows" already exists.*\n.*dropped materialized view "b_rows", which a transaction still open reads/,
    'its name is taken while the reader is open, and the error says why');
for my $i (6 .. 10) {
    $node->safe_psql('postgres', "INSERT INTO b VALUES ($i, $i)");
    my $ts = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
    $node->safe_psql('postgres', "SELECT decoupled.wait_for_upper('b', $ts, '20s'),
                                         decoupled.wait_for_upper('b_total', $ts, '20s')");
}
pass('tables tick and views step while the reader holds the dropped view');
$reader->query_safe('COMMIT');
$reader->quit;
$node->poll_query_until('postgres', q{SELECT to_regclass('public.b_rows') IS NULL})
  or die 'the dropped view\'s relation was not removed after the reader ended';
$node->safe_psql('postgres', q{
    SELECT decoupled.create_materialized_view('b_rows', 'SELECT id FROM b')});
pass('once the reader ends, the name is free again');

# A view's creation over q stays open while q has changes to tick.
$node->safe_psql('postgres', q{
    SET ROLE mallory;
    CREATE TABLE q (id int PRIMARY KEY, h int NOT NULL);
    INSERT INTO q SELECT i, i % 3 FROM generate_series(1, 30) i;
    SELECT decoupled.register_table('q');
    SELECT decoupled.create_materialized_view('q_rows', 'SELECT id, h FROM q');
});
$now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, 'q_rows', $now);
# Captured from the WAL, as b: the capture worker adopts a new table once
# it can take it and its pending changes for a moment (a tick or a step
# may have them), which the view's creation below would keep it from.
DecoupledTest::wait_for($node, q{
    SELECT count(*) FROM decoupled.capture_relations r
      JOIN decoupled.catalog_objects o USING (lifetime_id) WHERE o.name = 'q'}, '1');
my $creator = $node->background_psql('postgres', on_error_stop => 1);
$creator->query_safe('SET ROLE mallory');
$creator->query_safe('BEGIN');
# (A grouped view that computes its touched groups from q: its arrangement,
# an index on h over q's storage, is new and held until commit.)
$creator->query_safe(q{SELECT decoupled.create_materialized_view('q_by_h',
    'SELECT h, string_agg(id::text, '','' ORDER BY id) AS ids FROM q GROUP BY h')});
$node->safe_psql('postgres', 'UPDATE q SET h = h + 1 WHERE id <= 10');
$node->safe_psql('postgres', 'INSERT INTO b VALUES (11, 11)');
my $ts = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
$node->safe_psql('postgres', "SELECT decoupled.wait_for_upper('b', $ts, '60s')");
pass('another table ticks while a view\'s creation holds q\'s storage');
is($node->safe_psql('postgres', "SELECT upper <= $ts FROM decoupled.frontiers WHERE name = 'q'"),
    't', 'q is left behind meanwhile');
ok(slurp_file($node->logfile) =~ /registered table "q" is left out of ticks while another transaction holds it/,
    'and the log says so');
$creator->query_safe('COMMIT');
$creator->quit;
$now = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, $_, $now) for qw(q q_rows q_by_h);
is($node->safe_psql('postgres', q{
    SELECT decoupled.verify('q_rows') AND decoupled.verify('q_by_h')
       AND (SELECT count(*) FROM q_rows WHERE h = 3) = 3}), 't',
    'once the creation commits, q catches up and its views verify');

# Each table's 10 s are its own: while q is left behind, n held for a
# moment holds the tick back as before, so a transaction that wrote n and
# b lands in one tick for both.
my %id = map { $_ => $node->safe_psql('postgres',
    "SELECT lifetime_id FROM decoupled.objects WHERE name = '$_'") } qw(q n b);
my $hold_q = $node->background_psql('postgres', on_error_stop => 1);
$hold_q->query_safe('BEGIN');
$hold_q->query_safe("SELECT FROM decoupled.catalog_frontiers WHERE lifetime_id = $id{q} FOR UPDATE");
$node->safe_psql('postgres', 'UPDATE q SET h = h + 1 WHERE id <= 5');
$node->safe_psql('postgres', 'INSERT INTO b VALUES (12, 12)');
$ts = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
$node->safe_psql('postgres', "SELECT decoupled.wait_for_upper('b', $ts, '60s')");
my $hold_n = $node->background_psql('postgres', on_error_stop => 1);
$hold_n->query_safe('BEGIN');
$hold_n->query_safe("SELECT FROM decoupled.catalog_frontiers WHERE lifetime_id = $id{n} FOR UPDATE");
$node->safe_psql('postgres', q{
    BEGIN;
    INSERT INTO n VALUES (99, 'w99');
    INSERT INTO b VALUES (99, 99);
    COMMIT});
$node->safe_psql('postgres', 'SELECT decoupled.wait_for_capture(\'60s\')');
$hold_n->query_safe('COMMIT');
$hold_n->quit;
$ts = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
$node->safe_psql('postgres', "SELECT decoupled.wait_for_upper('b', $ts, '60s'),
                                     decoupled.wait_for_upper('n', $ts, '60s')");
is($node->safe_psql('postgres', qq{
    SELECT (SELECT mz_ts FROM decoupled_storage.c$id{n}_cur WHERE g = 99)
         = (SELECT mz_ts FROM decoupled_storage.c$id{b}_cur WHERE id = 99)}), 't',
    'a table held a moment while another is left behind still ticks with the transaction\'s other table');
$hold_q->query_safe('COMMIT');
$hold_q->quit;
$ts = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, $_, $ts) for qw(q q_rows q_by_h);
is($node->safe_psql('postgres', q{SELECT decoupled.verify('q_rows') AND decoupled.verify('q_by_h')}),
    't', 'and q catches up');

$node->stop;
done_testing();
