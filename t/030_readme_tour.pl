# The README's SQL, pasted in order into a fresh server, runs as written
# (issue 13): every ```sql block of README.md, one session, in order.  The
# only error is the one the tour shows on purpose (REFRESH of a maintained
# view), and its views verify.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $readme = slurp_file("$ENV{TESTDIR}/README.md");
my @blocks = $readme =~ /^```sql\n(.*?)^```/msg;
cmp_ok(scalar @blocks, '>=', 5, 'the README has its tour');

my $node = DecoupledTest::new_node('readme_tour', wal_level => 'logical');
$node->start;
my ($out, $err) = ('', '');
$node->psql('postgres', join("\n", @blocks),
    stdout => \$out, stderr => \$err, on_error_stop => 0, timeout => 600);
my @errors = grep { /ERROR|error:|warning:/ } split /\n/, $err;
ok(@errors == 1 && $errors[0] =~ /ERROR:  cannot refresh maintained materialized view "per_customer"/,
    'the tour runs with only the refusal it shows')
  or diag($err);
like($out, qr/^t$/m, 'verify() in the tour says true');

$node->stop;
done_testing();
