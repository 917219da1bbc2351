# Reads of a registered table across changes of decoupled.as_of, by every
# protocol a client may use (C2.2).  A SELECT the session runs itself has
# its reads decided at plan time (extension/read_rewrite.cpp, "Decided at
# plan time"): the extended protocol's statements, named or not, are kept
# in the plan cache between SET and RESET, and must be planned again at the
# next use after each — with custom and with generic plans.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('reads_by_protocol');
$node->start;

my $t0 = $node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE pt (id int PRIMARY KEY, v int NOT NULL);
    INSERT INTO pt SELECT g, g * 10 FROM generate_series(1, 100) g;
    SELECT decoupled.register_table('pt', retain_history => '1 day') > 0;
    SELECT decoupled.tick_tables() >= 0;
    SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'pt';
});
($t0) = (split /\n/, $t0)[-1];
$node->safe_psql('postgres', q{
    UPDATE pt SET v = v + 1 WHERE id = 5;
    SELECT decoupled.tick_tables();
});

# Each transaction reads at t0 or at the latest state, at random, with
# the same statements — pgbench prepares each command once per client — so
# that every statement is run on both sides of many changes of as_of.  A
# wrong value divides by zero, which aborts the client and fails the run.
my $script = qq{
\\set at_t0 random(0, 1)
\\if :at_t0 = 1
SET decoupled.as_of = $t0;
\\else
RESET decoupled.as_of;
\\endif
SELECT v AS one FROM pt WHERE id = 5 \\gset
SELECT sum(v) AS three FROM pt WHERE id BETWEEN 4 AND 6 \\gset
\\if (:at_t0 = 1 and (:one != 50 or :three != 150)) or (:at_t0 = 0 and (:one != 51 or :three != 151))
SELECT 1 / 0;
\\endif
};

my $conn = '-h ' . $node->host . ' -p ' . $node->port;
for my $cache_mode ('auto', 'force_custom_plan', 'force_generic_plan') {
    $node->safe_psql('postgres', "ALTER DATABASE postgres SET plan_cache_mode = $cache_mode");
    for my $protocol ('simple', 'extended', 'prepared') {
        $node->pgbench("$conn -n -M $protocol -c 2 -t 100 --random-seed=26",
            0, [qr{actually processed: 200/200}], [qr{\A(?:pgbench: setting random seed to 26\n)?\z}],
            "reads at t0 and latest alternate, $protocol protocol, plan_cache_mode $cache_mode",
            { "026_reads_${cache_mode}_$protocol" => $script }, 'postgres');
    }
}

# The check itself fails on a wrong value.
(my $wrong = $script) =~ s/:one != 50/:one != 49/;
$node->pgbench("$conn -n -M prepared -c 1 -t 20 --random-seed=26",
    2, [qr{actually processed: [0-9]+/20}], [qr{division by zero}],
    'a wrong value fails the check', { '026_wrong' => $wrong }, 'postgres');

$node->stop;
done_testing();
