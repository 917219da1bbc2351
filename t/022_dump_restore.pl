# C15.2: pg_dump -Fc -> pg_restore into a fresh server with the extension
# preloaded.
#
# The source: registered tables (WAL capture, one without a primary key),
# a counter source, incremental views (kept sums over a join, touched groups
# with min/max, a view over a view, a view over the source), a sink, a
# second cluster of two replicas, a declared adapter, a durable hold.  After
# the restore: every declaration is there with its lifetime id, clusters,
# replicas, adapters and deployments; runtime state (holds, incarnations)
# is not; each collection's rows, now and AS OF an earlier time, are the
# source's; the replicas resume from the restored uppers — views verify and
# follow new writes, the source continues its sequence, the sink continues
# without writing a change twice — and capture runs from a new slot.  A
# dump restored into a catalog that has declarations of its own is refused.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my %settings = (
    'wal_level' => 'logical',
    'decoupled.table_tick_interval' => "'50ms'",
    'decoupled.bound_publication_interval' => "'100ms'");
my $src = DecoupledTest::new_node('source', %settings);
$src->start;
$src->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
$src->safe_psql('postgres', q{
    CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, amount int NOT NULL)
        WITH (decoupled.registered, decoupled.retain_history = '1 hour');
    CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)
        WITH (decoupled.registered, decoupled.retain_history = '1 hour');
    CREATE TABLE notes (customer int, body text)
        WITH (decoupled.registered, decoupled.retain_history = '1 hour');
    INSERT INTO customers VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
    INSERT INTO orders SELECT i, i % 3 + 1, i * 10 FROM generate_series(1, 300) i;
    INSERT INTO notes SELECT i % 3 + 1, 'note ' || i FROM generate_series(1, 20) i;
    SELECT decoupled.create_cluster('reporting', 2);
    SELECT decoupled.declare_adapter('dashboards');
    SELECT decoupled.create_source('ticks', 'counter', options => '{"tick": "50ms"}',
                                   retain_history => '1 hour');
    CREATE MATERIALIZED VIEW per_customer
        WITH (decoupled.maintained, decoupled.retain_history = '1 hour') AS
        SELECT c.name, count(*) AS n, sum(o.amount) AS total
          FROM orders o JOIN customers c ON c.id = o.customer GROUP BY c.name;
    CREATE MATERIALIZED VIEW extremes
        WITH (decoupled.maintained, decoupled.cluster = 'reporting',
              decoupled.retain_history = '1 hour') AS
        SELECT customer, min(amount) AS low, max(amount) AS high FROM orders GROUP BY customer;
    CREATE MATERIALIZED VIEW best
        WITH (decoupled.maintained, decoupled.retain_history = '1 hour') AS
        SELECT max(total) AS best FROM per_customer;
    CREATE MATERIALIZED VIEW tick_count WITH (decoupled.maintained) AS
        SELECT count(*) AS n FROM ticks;
    COMMENT ON MATERIALIZED VIEW best IS 'the best customer''s total';
    SELECT decoupled.create_sink('feed', 'per_customer', 'per_customer_changes');
});

my $now = sub { $_[0]->safe_psql('postgres', 'SELECT decoupled.oracle_now()') };
my @collections = qw(orders customers notes ticks per_customer extremes best tick_count);
my $wait_all_past = sub {
    my ($node, $ts) = @_;
    DecoupledTest::wait_upper($node, $_, $ts) for @collections, 'feed';
};
my $churn = sub {
    my ($node, $step) = @_;
    $node->safe_psql('postgres', qq{
        UPDATE orders SET amount = amount + $step WHERE id % 7 = $step % 7;
        DELETE FROM orders WHERE id = 300 - $step;
        INSERT INTO orders VALUES (1000 + $step, $step % 3 + 1, $step * 3);
        INSERT INTO notes VALUES ($step % 3 + 1, 'later ' || $step);
    });
};
$churn->($src, $_) for 1 .. 3;
$wait_all_past->($src, $now->($src));
my $t0 = $now->($src);
$churn->($src, $_) for 4 .. 6;
$wait_all_past->($src, $now->($src));

# A hold: runtime state, which a dump does not carry.
$src->safe_psql('postgres', q{SELECT decoupled.acquire_hold('per_customer')});
is($src->safe_psql('postgres', 'SELECT count(*) FROM decoupled.catalog_holds'), '1',
    'the source has a durable hold');

# The source's state, quiet: ticks and the counter keep running, so the
# collections written by the server itself are compared up to a time.
my $declarations_sql = q{
    SELECT (SELECT string_agg(format('%s|%s|%s|%s|%s|%s', name, kind, cluster, lifetime_id,
                                     retain_history, owner), ',' ORDER BY lifetime_id)
              FROM decoupled.catalog_objects WHERE dropped_at IS NULL)
        || E'\n' || } . DecoupledTest::topology_sql() . q{
        || E'\n' || (SELECT string_agg(format('%s|%s|%s', name, strategy, method), ','
                                       ORDER BY name) FROM decoupled.view_maintenance)
        || E'\n' || obj_description('best'::regclass, 'pg_class')};
my $digest_sql = sub {
    my ($ts, @names) = @_;
    return "SELECT set_config('decoupled.as_of', '$ts', false) IS NULL;\n"
      . join(";\n", map {
            "SELECT '$_', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), ''))"
              . " FROM $_ x" } @names)
      . ";\nRESET decoupled.as_of;";
};
my @table_fed = qw(orders customers notes per_customer extremes best);
my $declarations_before = $src->safe_psql('postgres', $declarations_sql);
my $history_before = $src->safe_psql('postgres', $digest_sql->($t0, @table_fed));

# ---------------------------------------------------------------------------
# pg_dump while everything runs.
# ---------------------------------------------------------------------------
my $dump = PostgreSQL::Test::Utils::tempdir() . '/decoupled.dump';
$src->command_ok(['pg_dump', '-Fc', '-f', $dump, '-d', $src->connstr('postgres')],
    'pg_dump -Fc of a database with pg_decoupled');
my $latest_before = $src->safe_psql('postgres', qq{
    SELECT set_config('decoupled.as_of', '', false) IS NULL;
    SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM orders x;
    SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM per_customer_changes x});
my $sink_rows_before = $src->safe_psql('postgres', 'SELECT count(*) FROM per_customer_changes');
$src->stop;

# ---------------------------------------------------------------------------
# pg_restore into a new server: the dump creates the extension.
# ---------------------------------------------------------------------------
my $dst = DecoupledTest::new_node('restored', %settings);
$dst->start;
$dst->command_ok(['pg_restore', '-d', $dst->connstr('postgres'), $dump],
    'pg_restore of that dump into a new server succeeds without errors');
is($dst->safe_psql('postgres', 'SELECT count(*) FROM decoupled.restore'), '0',
    'the restore ended by itself (pg_restore created the marker last)');
DecoupledTest::wait_following($dst);
is($dst->safe_psql('postgres', $declarations_sql), $declarations_before,
    'every declaration came back: objects with their lifetime ids, owners and strategies, '
    . 'clusters, replicas, adapters, deployments, comments');
is($dst->safe_psql('postgres', q{
    SELECT (SELECT count(*) FROM decoupled.catalog_holds) || '|'
        || (SELECT count(*) FROM decoupled.session_records)}),
    '0|0', 'runtime state did not travel: no hold, no session');
is($dst->safe_psql('postgres', $digest_sql->($t0, @table_fed)), $history_before,
    'history travelled: every table-fed collection reads the same rows AS OF an earlier time');
is($dst->safe_psql('postgres', qq{
    SELECT set_config('decoupled.as_of', '', false) IS NULL;
    SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM orders x;
    SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM per_customer_changes x}),
    $latest_before, 'the tables and the sink\'s output are the source\'s');

# The replicas resume where the durable progress was.
my $t1 = $now->($dst);
$wait_all_past->($dst, $t1);
for my $view (qw(per_customer extremes best tick_count)) {
    is($dst->safe_psql('postgres', "SELECT decoupled.verify('$view')"), 't',
        "$view verifies after the restore");
}
my @shape = split /\|/, DecoupledTest::counter_shape($dst, 'ticks');
is($shape[0], $shape[2], "the counter source continues its sequence without a gap (@shape)");
is($shape[1], $shape[2], 'and without a duplicate');

# New writes reach history (captured from the WAL, from a new slot), the
# views and the sink.
$churn->($dst, $_) for 7 .. 9;
$dst->safe_psql('postgres', 'SELECT decoupled.wait_for_capture()');
my $t2 = $now->($dst);
$wait_all_past->($dst, $t2);
is($dst->safe_psql('postgres', q{
    SELECT status || '|' || wal_tables || '|' || (slot_name IS NOT NULL) FROM decoupled.capture}),
    'running|3|true', 'capture runs from the WAL again, from a slot of its own');
for my $view (qw(per_customer extremes best)) {
    is($dst->safe_psql('postgres', "SELECT decoupled.verify('$view')"), 't',
        "$view follows writes made after the restore");
}
is($dst->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT mz_timestamp, name, n, total FROM per_customer_changes
                           GROUP BY 1, 2, 3, 4 HAVING count(*) > 1) d}), '0',
    'the sink wrote no change twice');
cmp_ok($dst->safe_psql('postgres', 'SELECT count(*) FROM per_customer_changes'), '>',
    $sink_rows_before, 'and goes on writing');
is($dst->safe_psql('postgres', q{
    SELECT count(*) FROM (
        (SELECT name, n, total FROM per_customer
         EXCEPT ALL
         SELECT name, n, total FROM per_customer_changes GROUP BY name, n, total
         HAVING sum(mz_diff) > 0)
        UNION ALL
        (SELECT name, n, total FROM per_customer_changes GROUP BY name, n, total
         HAVING sum(mz_diff) > 0
         EXCEPT ALL
         SELECT name, n, total FROM per_customer)) d}), '0',
    'what the sink wrote adds up to its view');
# Declarations work on the restored catalog, and their ids follow on.
$dst->safe_psql('postgres', q{
    CREATE MATERIALIZED VIEW note_count WITH (decoupled.maintained) AS
        SELECT customer, count(*) AS n FROM notes GROUP BY customer});
cmp_ok($dst->safe_psql('postgres', q{
    SELECT lifetime_id FROM decoupled.catalog_objects WHERE name = 'note_count'}), '>',
    $dst->safe_psql('postgres', q{
    SELECT max(lifetime_id) FROM decoupled.catalog_objects WHERE name <> 'note_count'}),
    'a new declaration gets a new lifetime id');
DecoupledTest::wait_upper($dst, 'note_count', $now->($dst));
is($dst->safe_psql('postgres', q{SELECT decoupled.verify('note_count')}), 't',
    'and is maintained');

# ---------------------------------------------------------------------------
# A dump naming a role the restoring server lacks: that role's objects come
# back owned by the restoring role (as pg_restore leaves their relations),
# with a warning, and no other declaration is lost.
# ---------------------------------------------------------------------------
$dst->safe_psql('postgres', q{
    CREATE ROLE gone_owner IN ROLE decoupled_admin;
    GRANT CREATE ON SCHEMA public TO gone_owner;
    SET ROLE gone_owner;
    CREATE TABLE gone_t (id int PRIMARY KEY, v int NOT NULL)
        WITH (decoupled.registered, decoupled.retain_history = '1 hour');
    INSERT INTO gone_t SELECT i, i FROM generate_series(1, 10) i;
    CREATE MATERIALIZED VIEW gone_v WITH (decoupled.maintained) AS
        SELECT count(*) AS n, sum(v) AS s FROM gone_t;
    RESET ROLE});
$dst->safe_psql('postgres', 'SELECT decoupled.wait_for_capture()');
DecoupledTest::wait_upper($dst, 'gone_v', $now->($dst));
my $objects_sql = q{SELECT string_agg(name || ':' || lifetime_id, ',' ORDER BY lifetime_id)
                      FROM decoupled.catalog_objects WHERE dropped_at IS NULL};
my $objects_before = $dst->safe_psql('postgres', $objects_sql);
my $dump2 = PostgreSQL::Test::Utils::tempdir() . '/with_role.dump';
$dst->command_ok(['pg_dump', '-Fc', '-f', $dump2, '-d', $dst->connstr('postgres')],
    'pg_dump of a database where a role owns a table and a view');
my $norole = DecoupledTest::new_node('norole', %settings);
$norole->start;
my $norole_rc = $norole->run_log(['pg_restore', '-d', $norole->connstr('postgres'), $dump2]);
ok(!$norole_rc, 'pg_restore without that role reports errors (its ALTER ... OWNER TO fail)');
is($norole->safe_psql('postgres', $objects_sql), $objects_before,
    'every declaration came back all the same, with its lifetime id');
is($norole->safe_psql('postgres', q{
    SELECT (SELECT owner = current_user::text FROM decoupled.catalog_objects
             WHERE name = 'gone_v') || '|' || pg_get_userbyid(relowner)
      FROM pg_class WHERE oid = 'gone_t'::regclass}),
    'true|' . $norole->safe_psql('postgres', 'SELECT current_user'),
    'the missing role\'s view and table are the restoring role\'s');
like(slurp_file($norole->logfile),
    qr/role "gone_owner" does not exist: materialized view "gone_v" is now owned by/,
    '... with a warning naming the role and the object');
DecoupledTest::wait_following($norole);
$norole->safe_psql('postgres', q{
    INSERT INTO gone_t VALUES (11, 11);
    SELECT decoupled.wait_for_capture()});
DecoupledTest::wait_upper($norole, 'gone_v', $now->($norole));
is($norole->safe_psql('postgres', q{SELECT decoupled.verify('gone_v') || '|' || n || '|' || s
                                       FROM gone_v}),
    'true|11|66', 'the view is maintained from the restored table');
$norole->stop;

# ---------------------------------------------------------------------------
# A catalog with declarations of its own is not restored into.
# ---------------------------------------------------------------------------
my $busy = DecoupledTest::new_node('busy', %settings);
$busy->start;
$busy->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.create_cluster('mine', 0);
    SELECT setval('decoupled.lifetime_id_seq', 1000);
    CREATE TABLE mine_t (id int PRIMARY KEY);
    SELECT decoupled.register_table('mine_t')});
my ($rc, $out, $err) = ('', '', '');
$rc = $busy->run_log(['pg_restore', '-d', $busy->connstr('postgres'), $dump]);
ok(!$rc, 'pg_restore into a catalog with declarations of its own reports errors');
my $log = slurp_file($busy->logfile);
like($log, qr/cannot restore a dumped pg_decoupled catalog into this one/,
    'the catalog refuses the dumped rows, saying why');
is($busy->safe_psql('postgres', q{
    SELECT (SELECT string_agg(name, ',' ORDER BY name) FROM decoupled.catalog_clusters) || '|'
        || (SELECT count(*) FROM decoupled.catalog_objects) || '|'
        || (SELECT count(*) FROM decoupled.catalog_restore)}),
    'default,mine|1|0', 'and keeps its own declarations, untouched');
# The dump's sequences were set back all the same (SEQUENCE SET is no row the
# catalog can refuse): the end of the restore takes them past every id in use.
$busy->safe_psql('postgres', q{
    CREATE TABLE mine_u (id int PRIMARY KEY);
    SELECT decoupled.register_table('mine_u')});
is($busy->safe_psql('postgres', q{
    SELECT string_agg(name || ':' || (lifetime_id > 1000), ',' ORDER BY name)
      FROM decoupled.catalog_objects}),
    'mine_t:true,mine_u:true', 'a declaration after the refused restore gets an id of its own');

# A source's upper runs ahead to its next tick (up to a day): the oracle is
# not seeded from it after a restart, so writes stay at the clock's time.
$busy->safe_psql('postgres', q{
    SELECT decoupled.create_source('daily', 'counter', options => '{"tick": "1 day"}')});
$busy->restart;
cmp_ok($busy->safe_psql('postgres', q{
    SELECT decoupled.oracle_now() - (extract(epoch FROM clock_timestamp()) * 1000)::bigint}),
    '<', 10000, 'after a restart the oracle is at the clock, not at a daily source\'s next tick');

$dst->stop;
$busy->stop;
done_testing();
