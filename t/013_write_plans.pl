# The write path keeps its plans per backend and lifetime id
# (extension/append_core.cpp), a view's step per backend and text
# (extension/kept_statements.cpp).  Lifetime ids start again after DROP and
# CREATE EXTENSION, with other storage and other columns: one session that
# wrote a collection before keeps writing correctly to the new collection
# with the same id, and stages a view with the same id — the same statement
# texts naming other relations — with the new view's rows.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('write_plans');
$node->start;

# Replicas off: a DROP EXTENSION racing their queries can deadlock.
my $no_replicas = q{
    SELECT decoupled.alter_cluster('default', 0);
    SELECT decoupled.wait_for_controller(decoupled.catalog_version(), '120s');
};
$node->safe_psql('postgres', "CREATE EXTENSION pg_decoupled; $no_replicas");
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM decoupled.supervised WHERE kind = 'replica'}, '0');

# A view's step statements, run by hand: its changes at every change time
# of its input, then the whole plan at the last one, into a table shaped
# like its stage (the stage itself is a scratch in memory, which a query
# cannot read).
my $stage_view = q{
    SELECT decoupled._storage(lifetime_id, 'stage') AS stage,
           (definition->>'plan')::oid::regclass AS plan,
           (definition->>'owner')::oid AS owner,
           (definition->'inputs'->>0)::bigint AS input
      FROM decoupled.catalog_objects WHERE name = 'v' AND dropped_at IS NULL \gset
    SELECT decoupled._change_times(ARRAY[:input]::bigint[], 0, upper, 16) AS times
      FROM decoupled.catalog_frontiers WHERE lifetime_id = :input \gset
    DROP TABLE IF EXISTS staged;
    CREATE TEMP TABLE staged (LIKE :stage);
    SELECT sum(decoupled._stage_delta(:'plan', :owner, t, 'pg_temp.staged'))
      FROM unnest(:'times'::bigint[]) t;
    SELECT 'changes ' || string_agg(mz_diff || ':' || mz_key, ' ' ORDER BY mz_ts, mz_key, mz_diff)
      FROM staged;
    DELETE FROM staged;
    SELECT decoupled._stage_plan(:'plan', :owner, (:'times'::bigint[])[3], 'pg_temp.staged');
    SELECT 'plan ' || string_agg(mz_diff || ':' || mz_key, ' ' ORDER BY mz_key) FROM staged;
};

# One session (one psql script), so that the plans kept for the first
# collection are still there when the second one gets its id.
my $out = $node->safe_psql('postgres', qq{
    CREATE TABLE first_t (k int, v text);
    SELECT 'first ' || decoupled.register_table('first_t');
    SELECT 'view ' || decoupled.create_materialized_view('v', 'SELECT k, v FROM first_t');
    INSERT INTO first_t VALUES (1, 'a'), (2, 'b');
    SELECT decoupled.tick_tables();
    UPDATE first_t SET v = 'c' WHERE k = 1;
    SELECT decoupled.tick_tables();
    SELECT decoupled.append('first_t',
        format('[{"mz_timestamp": %s, "mz_diff": -1, "data": {"k": 2, "v": "b"}}]', upper)::jsonb,
        upper, upper + 1) > 0
      FROM decoupled.frontiers WHERE name = 'first_t';
    $stage_view

    DROP EXTENSION pg_decoupled CASCADE;
    CREATE EXTENSION pg_decoupled;
    $no_replicas

    CREATE TABLE second_t (name text, amount numeric, tags text[], flag boolean);
    SELECT 'second ' || decoupled.register_table('second_t');
    SELECT 'view ' || decoupled.create_materialized_view('v', 'SELECT name, amount FROM second_t');
    INSERT INTO second_t VALUES ('x', 1.5, '{a}', true), ('y', 2, NULL, false);
    SELECT decoupled.tick_tables();
    UPDATE second_t SET amount = amount * 2 WHERE name = 'x';
    DELETE FROM second_t WHERE name = 'y';
    SELECT decoupled.tick_tables();
    SELECT decoupled.append('second_t',
        format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"name": "z", "tags": ["b", "c"]}}]',
               upper)::jsonb, upper, upper + 1) > 0
      FROM decoupled.frontiers WHERE name = 'second_t';
    $stage_view
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name = 'second_t';
    SELECT 'history ' || string_agg(t::text, ' ' ORDER BY t::text) FROM second_t t;
});
my ($first) = $out =~ /^first (\d+)$/m;
my ($second) = $out =~ /^second (\d+)$/m;
is($second, $first, 'the re-created extension hands out the same lifetime id again');
my @views = $out =~ /^view (\d+)$/mg;
is($views[1], $views[0], 'the second view has the first one\'s lifetime id');
my @changes = $out =~ /^changes (.*)$/mg;
is_deeply(\@changes,
    ['1:(1,a) 1:(2,b) -1:(1,a) 1:(1,c) -1:(2,b)',
     '1:(x,1.5) 1:(y,2) -1:(x,1.5) 1:(x,3.0) -1:(y,2) 1:(z,)'],
    'each view stages its own changes');
my @plans = $out =~ /^plan (.*)$/mg;
is_deeply(\@plans, ['1:(1,c)', '1:(x,3.0) 1:(z,)'],
    'the same plan text computes each view with its own columns');
like($out, qr/^history \(x,3\.0,\{a\},t\) \(z,,"\{b,c\}",\)$/m,
    'ticks and appends to the new collection write its own columns');
is($node->safe_psql('postgres',
        q{SELECT count(*) FROM decoupled.table_health WHERE status = 'stalled'}),
    '0', 'no tick stalled');

$node->stop;
done_testing();
