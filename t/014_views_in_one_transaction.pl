# Several materialized views created in one transaction while writers
# write, the controller ticks and publishes, and a replica steps views over
# the same tables (extension/write_locks.hpp).  Each creation locks its
# inputs' storage and bound rows until commit; several in one transaction
# take them outside the global lock order, and a tick, a publication round
# or a replica's step that waited for them deadlocked with the creating
# transaction (40P01) — every round of this test did before.  Maintenance
# now never waits for such locks: every round commits, nothing is reported
# stalled, and every view verifies.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('one_transaction',
    'wal_level' => 'logical',
    'decoupled.table_tick_interval' => "'50ms'",
    'decoupled.bound_publication_interval' => "'100ms'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE a (id int PRIMARY KEY, k int, v int);
    INSERT INTO a SELECT g, g % 100, g FROM generate_series(1, 20000) g;
    CREATE TABLE b (id int PRIMARY KEY, k int, v int);
    INSERT INTO b SELECT g, g % 100, g FROM generate_series(1, 20000) g;
    CREATE TABLE c (g int PRIMARY KEY, name text);
    INSERT INTO c SELECT g, 'n' || g FROM generate_series(0, 99) g;
    SELECT decoupled.register_table('a');
    SELECT decoupled.register_table('b');
    SELECT decoupled.register_table('c');
    -- A view the replica steps all along, which new views read.
    SELECT decoupled.create_materialized_view('base',
        'SELECT k, count(*) AS n, sum(v) AS s FROM b GROUP BY k');
    CREATE TABLE writer_stop ();
    CREATE PROCEDURE writer(t regclass) LANGUAGE plpgsql AS $$
    DECLARE
        i int := 0;
    BEGIN
        LOOP
            i := i + 1;
            EXECUTE format('UPDATE %s SET v = v + 1 WHERE id = $1', t)
                USING 1 + (i * 7919) % 20000;
            COMMIT;
            EXIT WHEN EXISTS (SELECT FROM writer_stop);
            PERFORM pg_sleep(0.002);  -- pacing, not waiting: the machine is small
        END LOOP;
    END
    $$;
});

my @writers = map {
    my $w = $node->background_psql('postgres', on_error_stop => 0);
    $w->query_until(qr/writing/, "\\echo writing\nCALL writer('$_');\n");
    $w
} qw(a b);

# Inputs before readers; created over tables, over `base`, and over views
# created earlier in the same transaction.
my @views = (
    [ m1  => 'SELECT k, count(*) AS n, sum(v) AS s FROM a GROUP BY k' ],
    [ m2  => 'SELECT c.name, count(*) AS n FROM b JOIN c ON c.g = b.k GROUP BY c.name' ],
    [ m3  => 'SELECT k, min(v) AS lo, max(v) AS hi FROM a GROUP BY k' ],
    [ m4  => 'SELECT c.g, count(a.id) AS n FROM c LEFT JOIN a ON a.k = c.g GROUP BY c.g' ],
    [ m5  => 'SELECT m1.k, m1.n + m3.lo AS x FROM m1 JOIN m3 USING (k)' ],
    [ m6  => 'SELECT a.k, count(*) AS n FROM a JOIN b ON a.id = b.id GROUP BY a.k' ],
    [ m7  => 'SELECT k, n FROM base WHERE n > 0' ],
    [ m8  => 'SELECT name, n FROM m2' ],
    [ m9  => 'SELECT base.k, base.s, m1.s AS s1 FROM base JOIN m1 USING (k)' ],
    [ m10 => 'SELECT DISTINCT k FROM b' ],
);

for my $round (1 .. 4) {
    my ($rc, $out, $err) = $node->psql('postgres',
        "BEGIN;\n"
          . join('', map { "SELECT decoupled.create_materialized_view('$_->[0]', \$q\$$_->[1]\$q\$);\n" }
              @views)
          . "COMMIT;\n",
        on_error_stop => 1);
    is($rc, 0, "round $round: ten views created in one transaction under writers")
      or diag($err);
    # Every view catches up with the tables and verifies there.
    my $upper = $node->safe_psql('postgres',
        "SELECT max(upper) - 1 FROM decoupled.frontiers WHERE name IN ('a', 'b', 'c')");
    for my $v (map { $_->[0] } @views, ['base']) {
        $node->safe_psql('postgres', "SELECT decoupled.wait_for_upper('$v', $upper, '120s')");
        is($node->safe_psql('postgres', "SELECT decoupled.verify('$v')"), 't',
            "round $round: $v verifies");
    }
    is($node->safe_psql('postgres', q{
        SELECT coalesce(string_agg(name || ': ' || status, ', '), 'none')
          FROM decoupled.object_statuses WHERE status <> 'running'}), 'none',
        "round $round: nothing is stalled");
    $node->safe_psql('postgres', "SELECT decoupled.drop('$_->[0]')") for reverse @views;
}

$node->safe_psql('postgres', 'INSERT INTO writer_stop DEFAULT VALUES');
for my $w (@writers) {
    $w->query_safe('SELECT 1');
    $w->quit;
}

my $log = slurp_file($node->logfile);
unlike($log, qr/deadlock detected/, 'no deadlock anywhere: creations, ticks, rounds, steps');
unlike($log, qr/stalled/, 'no table, view or replica was reported stalled');

$node->stop;
done_testing();
