# C1.1: defaults are created on a fresh install only.  A declaration the user
# dropped stays dropped across a clean restart and a crash restart.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('defaults');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
DecoupledTest::wait_following($node);

is($node->safe_psql('postgres', 'SELECT name, deployment FROM decoupled.adapters'),
    'default|default', 'a fresh install declares the default adapter');
is($node->safe_psql('postgres', 'SELECT cluster, replica FROM decoupled.cluster_replicas'),
    'default|r1', 'a fresh install declares the default cluster with one replica');

$node->safe_psql('postgres', "SELECT decoupled.drop_adapter('default')");
$node->safe_psql('postgres', "SELECT decoupled.drop_cluster('default')");
my $version = $node->safe_psql('postgres', 'SELECT decoupled.catalog_version()');

$node->restart;
DecoupledTest::wait_following($node);
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.adapters'),
    '0', 'after a restart the adapter inventory stays empty');
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.clusters'),
    '0', 'after a restart the dropped default cluster stays dropped');
is($node->safe_psql('postgres', 'SELECT decoupled.catalog_version()'),
    $version, 're-opening the catalog does not change it');
is($node->safe_psql('postgres',
        'SELECT string_agg(kind, \',\' ORDER BY kind) FROM decoupled.supervised'),
    'capture,relay', 'the controller plans only the capture worker and the relay for an empty inventory');

$node->stop('immediate');
$node->start;
DecoupledTest::wait_following($node);
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.adapters'),
    '0', 'after a crash restart the adapter inventory stays empty');
is($node->safe_psql('postgres', 'SELECT decoupled.catalog_version()'),
    $version, 'crash recovery does not re-create declarations');

# Declaring again works and is a normal catalog change.
$node->safe_psql('postgres', "SELECT decoupled.declare_adapter('default')");
DecoupledTest::wait_following($node);
is($node->safe_psql('postgres',
        "SELECT name FROM decoupled.supervised WHERE kind = 'adapterd'"),
    'default', 'a re-declared adapter is planned again');

$node->stop;
done_testing();
