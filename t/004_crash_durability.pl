# C2: crash the server (immediate stop) in the middle of a workload of
# writes, ticks, publications and compactions.  After recovery frontiers,
# bounds, holds and the timestamp oracle are intact, nothing committed is
# lost, and the history reads back exactly at every recorded time.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('crash');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE w (k int, v int);
    INSERT INTO w SELECT g, g FROM generate_series(1, 50) g;
    SELECT decoupled.register_table('w', retain_history => '0');
    -- Ground truth: the table's row count at each tick's time, written in
    -- the tick's own transaction.
    CREATE TABLE truth (ts bigint PRIMARY KEY, n bigint, s bigint);
    CREATE PROCEDURE workload(iterations int) LANGUAGE plpgsql AS $$
    BEGIN
        FOR i IN 1..iterations LOOP
            INSERT INTO w VALUES (1000 + i, i), (1000 + i, i);
            UPDATE w SET v = v + 1 WHERE k = (i % 50) + 1;
            IF i % 3 = 0 THEN
                DELETE FROM w WHERE k = 1000 + i - 1;
            END IF;
            PERFORM decoupled.tick_tables();
            INSERT INTO truth
            SELECT f.upper - 1, (SELECT count(*) FROM w), (SELECT sum(v) FROM w)
              FROM decoupled.frontiers f WHERE f.name = 'w';
            IF i % 7 = 0 THEN
                PERFORM decoupled.publish_bounds();
                PERFORM decoupled.apply_compaction();
            END IF;
            COMMIT;
        END LOOP;
    END
    $$;
});
# A hold at the very beginning keeps all of the history readable.  Its
# adapter is then stopped: an outage leaves the incarnation's durable hold in
# force (silence never expires a hold), across the crash below too.
$node->safe_psql('postgres', q{
    SELECT decoupled.acquire_hold('w', since) FROM decoupled.frontiers WHERE name = 'w'});
$node->safe_psql('postgres', q{SELECT decoupled.stop_adapter('default')});
my $held_at = $node->safe_psql('postgres',
    q{SELECT frontier FROM decoupled.holds WHERE collection = 'w'});

my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_until(qr/started/, "\\echo started\nCALL workload(1000000);\n");
$node->poll_query_until('postgres', 'SELECT count(*) >= 150 FROM truth')
  or die 'the workload made no progress';

# What committed before the crash: the recovered state may only be ahead.
my ($upper_before, $bound_before, $oracle_before) = split /\|/, $node->safe_psql('postgres', q{
    SELECT f.upper, f.compaction_bound, decoupled.oracle_now()
      FROM decoupled.frontiers f WHERE f.name = 'w'});
my $truth_before = $node->safe_psql('postgres', 'SELECT count(*) FROM truth');

$node->stop('immediate');
eval { $bg->quit };
$node->start;

my ($since, $upper, $bound) = split /\|/, $node->safe_psql('postgres', q{
    SELECT since, upper, compaction_bound FROM decoupled.frontiers WHERE name = 'w'});
cmp_ok($upper, '>=', $upper_before, 'the upper survived the crash');
cmp_ok($bound, '>=', $bound_before, 'the compaction bound survived the crash');
cmp_ok($since, '<=', $bound, 'since stayed within the bound');
is($node->safe_psql('postgres', q{SELECT frontier FROM decoupled.holds WHERE collection = 'w'}),
    $held_at, 'the hold survived the crash unchanged');
is($since, $held_at, 'compaction stopped exactly at the hold');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM truth'), '>=', $truth_before,
    'every committed tick is still recorded');

my $next = $node->safe_psql('postgres', 'SELECT decoupled._next_timestamp()');
cmp_ok($next, '>=', $upper, 'the oracle resumes beyond every committed upper');
cmp_ok($next, '>', $oracle_before, 'the oracle did not go backwards');

# Nothing captured was lost: after one more tick the collection's latest
# state equals the table.
$node->safe_psql('postgres', 'SELECT decoupled.tick_tables()');
my $latest = $node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) FROM decoupled.frontiers
     WHERE name = 'w';
    SELECT string_agg(k || ':' || v, ',' ORDER BY k, v) FROM w});
my $table = $node->safe_psql('postgres', q{SELECT string_agg(k || ':' || v, ',' ORDER BY k, v) FROM w});
is((split /\n/, $latest)[-1], $table, 'the collection matches the table after recovery');

# The history reads back exactly at every recorded time.
my $mismatches = $node->safe_psql('postgres', q{
    CREATE FUNCTION pg_temp.state_at(t bigint, OUT n bigint, OUT s bigint) LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM set_config('decoupled.as_of', t::text, true);
        SELECT count(*), sum(v) INTO n, s FROM w;
        PERFORM set_config('decoupled.as_of', '', true);
    END
    $$;
    SELECT count(*) FROM truth t, LATERAL pg_temp.state_at(t.ts) a
     WHERE (a.n, a.s) IS DISTINCT FROM (t.n, t.s)});
is($mismatches, '0', 'AS OF reads at every recorded tick match the ground truth');

$node->stop;
done_testing();
