# C5.3, C13: the differential corpus of sql/mv_corpus.sql with more seeds.
# Every materialized view of the corpus is compared with its recomputation
# (decoupled.verify) after every step of each seed's random workload; each
# seed starts from the same table contents, so one seed replays alone.
#
# The corpus (tables, views, workload procedure) is the part of
# sql/mv_corpus.sql above its line "-- end of corpus setup": one definition
# for the regression suite and this test.
#
# CORPUS_SEEDS="<n> <n> ..." chooses the seeds (default: one fixed seed,
# 424242, to keep `make check` short; more seeds: CORPUS_SEEDS="7 424242 ...",
# not the regression suite's); CORPUS_STEPS the steps per seed (default 120).
# A failure names the seed and the view; replay it with
#   CORPUS_SEEDS=<seed> TAP_TESTS=t/012_mv_corpus_seeds.pl test/check.sh tap
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my @seeds = grep { length } split /[\s,]+/, ($ENV{CORPUS_SEEDS} // '424242');
my $steps = $ENV{CORPUS_STEPS} // 120;
die "CORPUS_SEEDS must be integers\n" if grep { !/^-?\d+$/ } @seeds;
die "CORPUS_STEPS must be a positive integer\n" unless $steps =~ /^\d+$/ && $steps > 0;
note("seeds @seeds, $steps steps each");

# test/check.sh runs prove in a copy of the test files: sql/ sits beside t/.
my $file = ($ENV{TESTDIR} // '.') . '/sql/mv_corpus.sql';
my $corpus = slurp_file($file);
$corpus =~ s/^-- end of corpus setup\n.*\z//ms
  or die "$file has no line '-- end of corpus setup'";

my $node = DecoupledTest::new_node('corpus');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
$node->safe_psql('postgres', $corpus);

# Every shape became a materialized view.
my $shapes = $node->safe_psql('postgres', 'SELECT count(*) FROM corpus_shapes');
cmp_ok($shapes, '>=', 60, "$shapes shapes");
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM corpus_shapes s
      JOIN decoupled.objects o ON o.name = s.name AND o.kind = 'materialized view'}),
    $shapes, 'every shape is a materialized view');

for my $seed (@seeds) {
    $node->safe_psql('postgres', "CALL corpus_run($seed, $steps)", timeout => 3600);
    # Each step verified or recorded a failure for every view.
    is($node->safe_psql('postgres', qq{
        SELECT count(*) FROM corpus_steps s
         WHERE s.seed = $seed AND s.step > 0
           AND s.verified + (SELECT count(*) FROM corpus_failures f
                              WHERE f.seed = s.seed AND f.step = s.step) = $shapes}),
        $steps, "seed $seed: $steps steps, every view checked after each");
    my $failures = $node->safe_psql('postgres', qq{
        SELECT string_agg(format('seed %s, view %s: %s failed steps, first at step %s%s',
                                 $seed, view, n, first_step, coalesce(': ' || error, '')),
                          E'\n' ORDER BY view)
          FROM (SELECT view, count(*) AS n, min(step) AS first_step, min(error) AS error
                  FROM corpus_failures WHERE seed = $seed GROUP BY view) f});
    is($failures, '', "seed $seed: every view equals its recomputation after every step")
      or diag("$failures\nreplay: CORPUS_SEEDS=$seed CORPUS_STEPS=$steps");
}

$node->stop;
done_testing();
