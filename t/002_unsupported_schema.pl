# C1.2: a catalog at an unsupported schema version is refused with a clear
# error, by the controller and by every catalog change, and left untouched.
# Before that, the install: a schema "decoupled" that exists before CREATE
# EXTENSION is installed into only if it is a superuser's, empty, and
# nobody else may create in it — its owner (here the database's owner)
# could otherwise put there an overload that the extension's own
# SECURITY DEFINER code would call with a superuser's rights.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('schema');
$node->start;
$node->safe_psql('postgres', q{
    CREATE ROLE dbown LOGIN;
    GRANT CREATE ON DATABASE postgres TO dbown;
    SET ROLE dbown;
    CREATE SCHEMA decoupled;
    CREATE FUNCTION decoupled._caller_can_select(r regclass) RETURNS boolean
        LANGUAGE sql AS 'SELECT true';
    RESET ROLE});
my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION pg_decoupled');
like($err, qr/cannot be installed into the existing schema "decoupled".*\n.*owned by role "dbown", who is not a superuser/,
    'a schema decoupled of a role that is not a superuser is refused');
$node->safe_psql('postgres', 'ALTER SCHEMA decoupled OWNER TO CURRENT_USER');
($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION pg_decoupled');
like($err, qr/DETAIL:  It already holds function _caller_can_select\(regclass\)/,
    'so is one that holds objects of others');
$node->safe_psql('postgres', q{
    DROP FUNCTION decoupled._caller_can_select(regclass);
    GRANT CREATE ON SCHEMA decoupled TO dbown});
($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION pg_decoupled');
like($err, qr/DETAIL:  Role "dbown" may create objects in it/,
    'and one where another role may create objects');
$node->safe_psql('postgres', 'REVOKE CREATE ON SCHEMA decoupled FROM dbown');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM pg_proc WHERE proname = '_caller_can_select'
       AND pronamespace = 'decoupled'::regnamespace}), '1',
    'an empty schema of a superuser takes the install');
$node->safe_psql('postgres', "SELECT decoupled.create_cluster('kept', 2)");
DecoupledTest::wait_following($node);

# A fingerprint of every catalog table's rows, to prove nothing changes.
my @tables = split /\n/, $node->safe_psql('postgres', q{
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'decoupled' AND c.relkind = 'r' ORDER BY 1});
sub fingerprint {
    my $sql = join(' UNION ALL ', map {
        "SELECT '$_', md5(coalesce(string_agg(x::text, ';' ORDER BY x::text), '')) "
          . "FROM decoupled.$_ x" } @tables);
    return $node->safe_psql('postgres', $sql);
}

$node->safe_psql('postgres', 'UPDATE decoupled.catalog_meta SET schema_version = 99');
my $offset = -s $node->logfile;

$node->restart;
DecoupledTest::wait_controller_state($node, 'refusing catalog');
# From here on nothing may write the refused catalog.  (Before the restart
# the replica that ran under version 2 still wrote its heartbeats.)
my $before = fingerprint();
ok($node->log_contains(
        'refuses the catalog: catalog schema version 99 is newer than this build', $offset),
    'the controller logs why it refuses the catalog');
is($node->safe_psql('postgres', 'SELECT schema_version FROM decoupled.controller'),
    '99', 'decoupled.controller shows the refused schema version');
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.supervised'),
    '0', 'nothing is supervised from a refused catalog');

my ($rc, $out, $err) = $node->psql('postgres', "SELECT decoupled.create_cluster('new')");
isnt($rc, 0, 'a catalog change on a refused catalog fails');
like($err, qr/catalog schema version 99 is newer than this build of pg_decoupled supports \(1 to 2\)/,
    'the error names the found and the supported schema versions');
($rc, $out, $err) = $node->psql('postgres', "SELECT decoupled.drop_cluster('kept')");
like($err, qr/schema version 99/, 'every catalog change is refused');

is(fingerprint(), $before, 'the refused catalog is left unchanged');

# Restoring a supported version (as an upgrade would) is picked up by polling.
$node->safe_psql('postgres', 'UPDATE decoupled.catalog_meta SET schema_version = 2');
DecoupledTest::wait_following($node);
$node->safe_psql('postgres', "SELECT decoupled.create_cluster('new')");
is($node->safe_psql('postgres', "SELECT count(*) FROM decoupled.clusters WHERE name = 'new'"),
    '1', 'a supported catalog accepts changes again');

$node->stop;
done_testing();
