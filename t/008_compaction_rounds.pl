# C3.5, C3.6, C5.5: compaction runs by itself, with no adapter.  Replicas
# publish and apply bounds for the sources on their cluster, the controller
# for registered tables; since follows upper - retain_history, stops exactly
# at a hold while it lasts, and moves on once the hold is released.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('rounds',
    'decoupled.bound_publication_interval' => "'100ms'",
    'decoupled.table_tick_interval' => "'100ms'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.drop_adapter('default');
    SELECT decoupled.create_source('c', 'counter', options => '{"tick": "20ms"}',
                                   retain_history => '300ms');
    CREATE TABLE t (k int, v int);
    INSERT INTO t SELECT g, g FROM generate_series(1, 50) g;
    SELECT decoupled.register_table('t', retain_history => '2s');
});
my ($c_epoch) = DecoupledTest::upper_of($node, 'c');
my ($t_since) = $node->safe_psql('postgres', q{SELECT since FROM decoupled.frontiers WHERE name = 't'});

# The source's history is compacted by its replica.
DecoupledTest::wait_for($node,
    qq{SELECT since > $c_epoch + 500 FROM decoupled.frontiers WHERE name = 'c'}, 't');
is($node->safe_psql('postgres', q{SELECT since <= compaction_bound AND compaction_bound <= upper
     FROM decoupled.frontiers WHERE name = 'c'}), 't', 'since <= bound <= upper');

# A hold pins it exactly; no adapter needed for any of this.  (Holds belong
# to an adapter incarnation: declare one to take one.)  The session that
# took it ends at once; its adapter's durable hold stays until the next hold
# publication (decoupled.hold_publication_interval, 60 s by default).
$node->safe_psql('postgres', q{SELECT decoupled.declare_adapter('default')});
$node->safe_psql('postgres', q{SELECT decoupled.acquire_hold('c')});
my $held = $node->safe_psql('postgres', q{SELECT frontier FROM decoupled.holds});
DecoupledTest::wait_upper($node, 'c', $held + 1500);
DecoupledTest::wait_for($node,
    q{SELECT since = (SELECT frontier FROM decoupled.holds) FROM decoupled.frontiers
       WHERE name = 'c'}, 't');
my $upper = DecoupledTest::upper_of($node, 'c');
DecoupledTest::wait_upper($node, 'c', $upper + 500);
is($node->safe_psql('postgres', q{SELECT since FROM decoupled.frontiers WHERE name = 'c'}),
    $held, 'compaction stops exactly at the hold while it lasts');
is($node->safe_psql('postgres', qq{
    SELECT set_config('decoupled.as_of', '$held', false) IS NULL;
    SELECT count(*) > 0 FROM c}), "f\nt", 'the held time stays readable');

$node->safe_psql('postgres', q{SELECT decoupled.publish_holds()});
DecoupledTest::wait_for($node,
    qq{SELECT since > $held FROM decoupled.frontiers WHERE name = 'c'}, 't');
pass('once its release is published, compaction moves past it');

# Registered tables: the controller ticks them and compacts their history.
my $t_id = $node->safe_psql('postgres',
    q{SELECT lifetime_id FROM decoupled.objects WHERE name = 't'});
$node->safe_psql('postgres', q{
    SELECT decoupled.alter_cluster('default', 0);  -- nothing else runs meanwhile
    UPDATE t SET v = v + 1;
    DELETE FROM t WHERE k <= 10;
});
my $changed = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, 't', $changed);
# Kept for retain_history (2 s) after their tick: long enough to count them
# on a loaded machine, where two ticks may split the UPDATE and the DELETE.
my $retracted = $node->safe_psql('postgres',
    "SELECT count(*) FROM decoupled_storage.c${t_id}_dead");
cmp_ok($retracted, '>=', 50, 'the ticked change left its retractions in the history');
# Past the tick that retracted them, which may come after $changed.
my $retracted_at = $node->safe_psql('postgres',
    "SELECT max(valid_to) FROM decoupled_storage.c${t_id}_dead");
DecoupledTest::wait_for($node,
    qq{SELECT since >= $retracted_at FROM decoupled.frontiers WHERE name = 't'}, 't');
is($node->safe_psql('postgres', "SELECT count(*) FROM decoupled_storage.c${t_id}_dead"),
    '0', 'compaction past the change removed them');
is($node->safe_psql('postgres', q{SELECT count(*) || '|' || sum(v) FROM t}), '40|1260',
    'the table itself is untouched');
my $latest = $node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NULL
      FROM decoupled.frontiers WHERE name = 't';
    SELECT count(*) || '|' || sum(v) FROM t});
is((split /\n/, $latest)[-1], '40|1260', 'and its compacted history still reads back exactly');

$node->stop;
done_testing();
