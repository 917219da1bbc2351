# C15.3, C1.1, C1.2: ALTER EXTENSION pg_decoupled UPDATE from 1.0 to 1.1.
#
# A catalog installed as 1.0 (schema version 1) and filled — a source,
# registered tables with writes, an incremental GROUP BY view, a join view,
# a view over the source, a sink, a durable hold — is updated while its
# replicas run and a writer keeps writing.  After the update: extension 1.1
# at schema version 2, one catalog change, every view verifies and
# advances, history AS OF an earlier time reads the same rows, the sink goes
# on without duplicates, the hold stays, no declaration is re-created or
# lost.  The updated catalog has exactly the objects of a fresh 1.1 install
# (this catches a change in control/parts/ that an update script misses).
# A catalog at an unknown schema version is refused, by catalog changes and
# by the update itself.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

# ---------------------------------------------------------------------------
# A fresh 1.1 install: the shape the update must reach.
# ---------------------------------------------------------------------------
my $fresh = DecoupledTest::new_node('fresh');
$fresh->start;
$fresh->safe_psql('postgres', 'CREATE EXTENSION pg_decoupled');
is($fresh->safe_psql('postgres', q{
    SELECT e.extversion || '|' || m.schema_version || '|' || decoupled.supported_schema_version()
      FROM pg_extension e, decoupled.catalog_meta m WHERE e.extname = 'pg_decoupled'}),
    '1.1|2|2', 'a fresh install is extension 1.1 at schema version 2');
my @fresh_shape = DecoupledTest::extension_shape($fresh);

# The update refuses a catalog that is not at schema version 1, and leaves
# it as it was.
$fresh->safe_psql('postgres', q{
    DROP EXTENSION pg_decoupled;
    CREATE EXTENSION pg_decoupled VERSION '1.0';
    UPDATE decoupled.catalog_meta SET schema_version = 99;
});
my ($rc, $out, $err) = $fresh->psql('postgres', 'ALTER EXTENSION pg_decoupled UPDATE');
isnt($rc, 0, 'the update of a catalog at an unknown schema version fails');
like($err, qr/cannot update pg_decoupled from 1\.0 to 1\.1: the catalog is at schema version 99/,
    'and says why');
is($fresh->safe_psql('postgres', q{
    SELECT e.extversion || '|' || m.schema_version
      FROM pg_extension e, decoupled.catalog_meta m WHERE e.extname = 'pg_decoupled'}),
    '1.0|99', 'the refused catalog is left as it was');
$fresh->stop;

# ---------------------------------------------------------------------------
# Install 1.0 and fill it.
# ---------------------------------------------------------------------------
my $node = DecoupledTest::new_node('upgrade',
    'decoupled.table_tick_interval' => "'50ms'",
    'decoupled.bound_publication_interval' => "'100ms'",
    # The hold must stay: released holds are lifted only when published.
    'decoupled.hold_publication_interval' => "'1h'");
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION pg_decoupled VERSION '1.0'});
is($node->safe_psql('postgres', q{
    SELECT e.extversion || '|' || m.schema_version || '|' || m.catalog_version
      FROM pg_extension e, decoupled.catalog_meta m WHERE e.extname = 'pg_decoupled'}),
    '1.0|1|1', 'CREATE EXTENSION VERSION 1.0 stamps schema version 1 with this library');
DecoupledTest::wait_following($node);
is($node->safe_psql('postgres', 'SELECT state || schema_version FROM decoupled.controller'),
    'following1', 'the controller follows the 1.0 catalog');

$node->safe_psql('postgres', q{
    SELECT decoupled.create_source('market', 'auction', options => '{"tick": "50ms"}',
                                   retain_history => '1 hour');
    CREATE TABLE stock (item int, qty int);
    INSERT INTO stock SELECT g % 20, g FROM generate_series(1, 200) g;
    SELECT decoupled.register_table('stock', retain_history => '1 hour');
    CREATE TABLE items (item int PRIMARY KEY, label text);
    INSERT INTO items SELECT g, 'item ' || g FROM generate_series(0, 14) g;
    SELECT decoupled.register_table('items', retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('stock_levels',
        'SELECT item, sum(qty) AS qty, count(*) AS n FROM stock GROUP BY item',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('labelled_stock',
        'SELECT i.label, s.qty FROM stock s JOIN items i ON i.item = s.item',
        retain_history => '1 hour');
    SELECT decoupled.create_materialized_view('top_bids',
        'SELECT auction_id, max(amount) AS top FROM market_bids GROUP BY auction_id',
        retain_history => '1 hour');
    SELECT decoupled.create_sink('stock_sink', 'stock_levels', 'stock_changes');
    -- The writer during the update, and what it has written.
    CREATE TABLE writer_progress (i int);
    CREATE TABLE writer_stop ();
    CREATE PROCEDURE writer() LANGUAGE plpgsql AS $$
    DECLARE
        i int := 0;
    BEGIN
        LOOP
            i := i + 1;
            UPDATE stock SET qty = qty + 1 WHERE item = i % 20;
            INSERT INTO stock VALUES (i % 20, i);
            IF i % 3 = 0 THEN
                DELETE FROM stock WHERE item = (i * 7) % 20 AND qty % 5 = 0;
            END IF;
            IF i % 10 = 0 THEN
                UPDATE items SET label = 'item ' || item || ' v' || i WHERE item = i % 15;
            END IF;
            -- Reads after writes in one transaction, as applications do:
            -- the update locks what they read in their order (a writer was
            -- aborted as a deadlock).
            PERFORM count(*) FROM stock WHERE item = i % 20;
            PERFORM count(*) FROM stock_levels;
            INSERT INTO writer_progress VALUES (i);
            COMMIT;
            EXIT WHEN EXISTS (SELECT FROM writer_stop);
            PERFORM pg_sleep(0.01);  -- pacing, not waiting: the machine is small
        END LOOP;
    END
    $$;
});

my @views = qw(stock_levels labelled_stock top_bids);
my @collections = (qw(market_bids stock items), @views, 'stock_sink');
my $now = sub { $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()') };
my $wait_all_past = sub {
    my ($ts) = @_;
    DecoupledTest::wait_upper($node, $_, $ts) for @collections;
};
my $churn = sub {
    my ($step) = @_;
    $node->safe_psql('postgres', qq{
        UPDATE stock SET qty = qty + 1 WHERE item = $step % 20;
        DELETE FROM stock WHERE item = ($step * 7) % 20 AND qty % 3 = 0;
        INSERT INTO stock SELECT ($step * 3) % 20, g FROM generate_series(1, 5) g;
        UPDATE items SET label = label || '+' WHERE item = $step % 15;
    });
};
$churn->($_) for 1 .. 3;
$wait_all_past->($now->());

# A durable hold, taken by a session that lives through the update.
my $holder = $node->background_psql('postgres', on_error_stop => 0);
my ($hold_id) = $holder->query_safe(q{SELECT decoupled.acquire_hold('stock_levels')}) =~ /(\d+)/;
my $hold_before = $node->safe_psql('postgres',
    q{SELECT string_agg(format('%s|%s|%s|%s', hold_id, adapter, collection, frontier), ',')
        FROM decoupled.holds});
like($hold_before, qr/\|default\|stock_levels\|\d+$/, 'a durable hold on stock_levels');

# History at an earlier time: every collection's rows AS OF $t0.
$churn->($_) for 4 .. 6;
my $t0 = $now->();
$wait_all_past->($t0);
my $digest_sql = sub {
    my ($ts) = @_;
    return "SELECT set_config('decoupled.as_of', '$ts', false) IS NULL;\n"
      . join(";\n", map {
            "SELECT '$_', count(*), md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), ''))"
              . " FROM $_ x" } qw(stock items), @views)
      . ";\nRESET decoupled.as_of;";
};
my $history_before = $node->safe_psql('postgres', $digest_sql->($t0));
$churn->($_) for 7 .. 9;
$wait_all_past->($now->());

# What was declared, and the running replica.
my $declarations_sql = q{
    SELECT (SELECT string_agg(format('%s|%s|%s|%s|%s|%s', name, kind, cluster, lifetime_id,
                                     created_in_version, dropped_at IS NULL), ','
                              ORDER BY lifetime_id) FROM decoupled.catalog_objects)
        || E'\n' || } . DecoupledTest::topology_sql() . q{};
my $declarations_before = $node->safe_psql('postgres', $declarations_sql);
my $replica_before = $node->safe_psql('postgres', q{
    SELECT incarnation || '|' || pid FROM decoupled.cluster_replicas
     WHERE cluster = 'default' AND replica = 'r1'});
my $uppers_before = $node->safe_psql('postgres', q{
    SELECT string_agg(name || '=' || upper, ',' ORDER BY name) FROM decoupled.frontiers});

# The 1.1 library steps the 1.0 catalog with what that catalog has: the
# batch calls of 1.1 (replica_maintain_many, replica_advance_idle) are not
# tried, and failed, at every pass.
ok(!$node->log_contains(qr/function decoupled\.replica_\w+\(.*\) does not exist/),
    'the replica does not call functions a 1.0 catalog lacks');

# ---------------------------------------------------------------------------
# The update, while the replica runs and the writer writes.
# ---------------------------------------------------------------------------
# An arrangement index 1.0 left behind (its drop found the storage busy
# and never tried again): no catalog row names it.
$node->safe_psql('postgres', q{
    DO $$ BEGIN
        EXECUTE format('CREATE INDEX c%s_a0123456789ab_dead ON %s (item, valid_to)',
                       (SELECT lifetime_id FROM decoupled.objects WHERE name = 'items'),
                       decoupled._storage((SELECT lifetime_id FROM decoupled.objects
                                            WHERE name = 'items'), 'dead'));
    END $$});
my $writer = $node->background_psql('postgres', on_error_stop => 0);
$writer->query_until(qr/writing/, "\\echo writing\nCALL writer();\n");
DecoupledTest::wait_for($node, 'SELECT count(*) >= 20 FROM writer_progress', 't');
my $version_before = $node->safe_psql('postgres', 'SELECT decoupled.catalog_version()');
my $written_before = $node->safe_psql('postgres', 'SELECT count(*) FROM writer_progress');
# A session that called an entry point under 1.0 (its implementation
# compiled), and calls again while the update waits: its call waits too,
# then runs the updated implementation.  It failed on its old plans
# ("type of parameter ... does not match").
my $early = $node->background_psql('postgres', on_error_stop => 0);
$early->query_safe(q{SELECT decoupled.release_hold(decoupled.acquire_hold('stock_levels'))});
my $blocker = $node->background_psql('postgres', on_error_stop => 0);
$blocker->query_safe(q{BEGIN; SELECT count(*) FROM decoupled.objects});
my $updater = $node->background_psql('postgres', on_error_stop => 0);
$updater->query_until(qr/updating/, "\\echo updating\nALTER EXTENSION pg_decoupled UPDATE;\n\\echo updated\n");
DecoupledTest::wait_for($node, q{SELECT count(*) FROM pg_stat_activity
                                   WHERE query LIKE 'ALTER EXTENSION%' AND wait_event_type = 'Lock'},
    '1');
# The update takes its locks all or none and gives them back while it
# waits, so a call may also slip through between two attempts and run
# under 1.0.  The blocker ends its transaction only once it sees the call
# waiting for decoupled.catalog_objects behind the update, and the call is
# made again until the update has run: the call that waited is the last.
my $early_pid = $early->query_safe('SELECT pg_backend_pid()');
$blocker->query_until(qr/polling/, "\\echo polling\n" . qq{
    DO \$\$
    DECLARE
        deadline timestamptz := clock_timestamp() + interval '$PostgreSQL::Test::Utils::timeout_default s';
    BEGIN
        LOOP
            PERFORM pg_stat_clear_snapshot();
            EXIT WHEN EXISTS (SELECT FROM pg_locks
                               WHERE pid = $early_pid AND NOT granted
                                 AND relation = 'decoupled.catalog_objects'::regclass);
            IF clock_timestamp() > deadline THEN
                RAISE EXCEPTION 'the call never waited for the update';
            END IF;
            PERFORM pg_sleep(0.002);
        END LOOP;
    END
    \$\$;
COMMIT;
\\echo committed
});
my $calls = 0;
do {
    $early->query_until(qr/called/,
        "SELECT decoupled.release_hold(decoupled.acquire_hold('stock_levels'));\n\\echo called\n");
    $calls++;
} until $node->safe_psql('postgres',
        q{SELECT extversion FROM pg_extension WHERE extname = 'pg_decoupled'}) eq '1.1'
    || $calls >= 10000;
$blocker->query_until(qr/committed/, '');
note("the call was made $calls times");
is($blocker->{stderr}, '', 'a call waited for the update while it ran');
$blocker->quit;
$updater->query_until(qr/updated/, '');
like($updater->{stderr}, qr/^$/, 'the update ran once what held the catalog ended');
$updater->quit;
is($early->{stderr}, '', 'a call that waited for the update runs the updated implementation');
$early->quit;
my $written_after = $node->safe_psql('postgres', 'SELECT count(*) FROM writer_progress');
is($node->safe_psql('postgres', q{
    SELECT e.extversion || '|' || m.schema_version
      FROM pg_extension e, decoupled.catalog_meta m WHERE e.extname = 'pg_decoupled'}),
    '1.1|2', 'the update moves the catalog to extension 1.1 and schema version 2');
is($node->safe_psql('postgres', 'SELECT decoupled.catalog_version()'), $version_before + 1,
    'the update is one catalog change');
is($node->safe_psql('postgres', q{
    SELECT decoupled.wait_for_controller(decoupled.catalog_version(), '120s')
           = decoupled.catalog_version()}), 't', 'the controller follows the updated catalog');
is($node->safe_psql('postgres', 'SELECT state || schema_version FROM decoupled.controller'),
    'following2', 'at schema version 2');
DecoupledTest::wait_for($node, 'SELECT count(*) > ' . $written_after . ' FROM writer_progress', 't');
pass("the writer wrote through the update ($written_before commits before it, "
    . "$written_after when it returned, and more after)");
$node->safe_psql('postgres', 'INSERT INTO writer_stop DEFAULT VALUES');
$writer->query_safe('SELECT 1');
$writer->quit;

# ---------------------------------------------------------------------------
# Everything keeps running, with its history.
# ---------------------------------------------------------------------------
is($node->safe_psql('postgres', $declarations_sql), $declarations_before,
    'no declaration was re-created, lost or changed (C1.1)');
# Storage made under 1.0 reads its changes from dead by a range closed on
# both sides, as storage made under 1.1 does (_create_read_views).
is($node->safe_psql('postgres', q{
    SELECT count(*) FILTER (WHERE pg_get_viewdef(v) NOT LIKE '%<= ''9223372036854775807''::bigint%')
           || '/' || count(*)
      FROM decoupled.catalog_objects o,
           LATERAL to_regclass(decoupled._storage(o.lifetime_id, 'delta')) v
     WHERE v IS NOT NULL}),
    '0/' . $node->safe_psql('postgres', q{
        SELECT count(*) FROM decoupled.catalog_objects o
         WHERE to_regclass(decoupled._storage(o.lifetime_id, 'cur')) IS NOT NULL}),
    'the change views of collections made under 1.0 read dead by a closed range');
# A kept-sums state made under 1.0 loses its index on emptied groups, as
# 1.1 makes them: updates of a group's counts can be HOT.
is($node->safe_psql('postgres', q{
    SELECT count(*) FILTER (WHERE i.indpred IS NOT NULL) || '|'
           || (count(*) FILTER (WHERE i.indisunique) = count(DISTINCT i.indrelid)
               AND count(*) > 0)
      FROM decoupled.catalog_objects o
      JOIN pg_index i ON i.indrelid = to_regclass(decoupled._storage(o.lifetime_id, 'state'))}),
    '0|true', 'the kept states of 1.0 GROUP BY views have only their key index');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM pg_class
     WHERE relnamespace = 'decoupled_storage'::regnamespace AND relname LIKE '%a0123456789ab%'}),
    '0', 'an arrangement index 1.0 left behind is dropped by the update');
is($node->safe_psql('postgres', q{
    SELECT incarnation || '|' || pid FROM decoupled.cluster_replicas
     WHERE cluster = 'default' AND replica = 'r1'}), $replica_before,
    'the replica kept its incarnation and process through the update');

$churn->(10);
my $t1 = $now->();
$wait_all_past->($t1);
my %upper_before = map { split /=/ } split /,/, $uppers_before;
for my $name (@collections) {
    cmp_ok(DecoupledTest::upper_of($node, $name), '>', $upper_before{$name},
        "$name advanced after the update");
}
for my $view (@views) {
    my $bad = $node->safe_psql('postgres', qq{
        SELECT string_agg(t::text, ', ')
          FROM decoupled.frontiers f,
               generate_series(greatest(f.since, $t0), f.upper - 1,
                               greatest((f.upper - 1 - greatest(f.since, $t0)) / 16, 1)) t
         WHERE f.name = '$view' AND NOT decoupled.verify('$view', t)});
    is($bad, '', "$view verifies at times before, during and after the update");
    ok($node->safe_psql('postgres', "SELECT decoupled.verify('$view')") eq 't',
        "$view verifies at its latest time");
}
is($node->safe_psql('postgres', $digest_sql->($t0)), $history_before,
    'history AS OF a time before the update reads the same rows');

# The sink: at sampled times what it wrote adds up to the view, and it wrote
# no change twice.
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT mz_timestamp, item, qty, n FROM stock_changes
                           GROUP BY mz_timestamp, item, qty, n HAVING count(*) > 1) dup}),
    '0', 'the sink wrote no change twice');
my $sink_mismatches = $node->safe_psql('postgres', qq{
    CREATE FUNCTION pg_temp.mismatch(t bigint) RETURNS bigint LANGUAGE plpgsql AS \$\$
    DECLARE mismatches bigint;
    BEGIN
        PERFORM set_config('decoupled.as_of', t::text, true);
        SELECT count(*) INTO mismatches FROM (
            (SELECT item, qty, n, count(*) FROM stock_levels GROUP BY item, qty, n
             EXCEPT ALL
             SELECT item, qty, n, sum(mz_diff) FROM stock_changes WHERE mz_timestamp <= t
              GROUP BY item, qty, n HAVING sum(mz_diff) <> 0)
            UNION ALL
            (SELECT item, qty, n, sum(mz_diff) FROM stock_changes WHERE mz_timestamp <= t
              GROUP BY item, qty, n HAVING sum(mz_diff) <> 0
             EXCEPT ALL
             SELECT item, qty, n, count(*) FROM stock_levels GROUP BY item, qty, n)) d;
        PERFORM set_config('decoupled.as_of', '', true);
        RETURN mismatches;
    END \$\$;
    SELECT count(*) || '|' || count(*) FILTER (WHERE pg_temp.mismatch(t) > 0)
      FROM decoupled.frontiers s, decoupled.frontiers v,
           generate_series(greatest(v.since, $t0), s.upper - 1, 53) t
     WHERE s.name = 'stock_sink' AND v.name = 'stock_levels'});
like($sink_mismatches, qr/^[1-9]\d*\|0$/,
    "the sink equals its view at every sampled time across the update ($sink_mismatches)");

# The hold.
is($node->safe_psql('postgres',
    q{SELECT string_agg(format('%s|%s|%s|%s', hold_id, adapter, collection, frontier), ',')
        FROM decoupled.holds}), $hold_before, 'the durable hold is unchanged');
is($node->safe_psql('postgres', qq{
    SELECT count(*) FROM decoupled.session_holds WHERE hold_id = $hold_id}), '1',
    'and so is the session hold it protects');
is($node->safe_psql('postgres', q{
    SELECT f.since <= h.frontier FROM decoupled.frontiers f, decoupled.holds h
     WHERE f.name = 'stock_levels'}), 't', 'the held time is still readable');
$holder->quit;

# Declarations after the update: one catalog change each, maintained.
my $version = $node->safe_psql('postgres', 'SELECT decoupled.catalog_version()');
$node->safe_psql('postgres', q{
    SELECT decoupled.create_materialized_view('label_counts',
        'SELECT label, count(*) AS n FROM items GROUP BY label')});
is($node->safe_psql('postgres', 'SELECT decoupled.catalog_version()'), $version + 1,
    'a declaration after the update is one catalog change');
$churn->(11);
my $t2 = $now->();
DecoupledTest::wait_upper($node, 'label_counts', $t2);
is($node->safe_psql('postgres', q{SELECT decoupled.verify('label_counts')}), 't',
    'a view created after the update is maintained');
# 1.1 describes each maintained view in its relation's comment (psql's
# \dv+): the update gave the views of 1.0 theirs.
is($node->safe_psql('postgres', q{
    SELECT string_agg(o.name || ':' || (obj_description(o.relation, 'pg_class') LIKE
                                        'Materialized view maintained by pg_decoupled%'),
                      ',' ORDER BY o.name)
      FROM decoupled.catalog_objects o
     WHERE o.kind = 'materialized view' AND o.dropped_at IS NULL}),
    'label_counts:true,labelled_stock:true,stock_levels:true,top_bids:true',
    'every maintained view is described, those of 1.0 included');
# PostgreSQL's own statements work on the updated catalog.
$node->safe_psql('postgres', q{
    CREATE MATERIALIZED VIEW item_count WITH (decoupled.maintained) AS
        SELECT count(*) AS n FROM items;
    COMMENT ON MATERIALIZED VIEW top_bids IS 'kept from 1.0'});
my $t3 = $now->();
DecoupledTest::wait_upper($node, 'item_count', $t3);
is($node->safe_psql('postgres', q{SELECT decoupled.verify('item_count')}), 't',
    'a view made with CREATE MATERIALIZED VIEW after the update is maintained');
$node->safe_psql('postgres', 'DROP MATERIALIZED VIEW item_count');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM decoupled.objects WHERE name = 'item_count'}), '0',
    'and DROP MATERIALIZED VIEW drops it through the catalog');

# ---------------------------------------------------------------------------
# The updated catalog has exactly the objects of a fresh 1.1 install.
# ---------------------------------------------------------------------------
my @updated_shape = DecoupledTest::extension_shape($node);
my %count;
$count{$_}++ for @fresh_shape;
$count{$_}-- for @updated_shape;
my @missing = grep { $count{$_} > 0 } sort keys %count;
my @extra = grep { $count{$_} < 0 } sort keys %count;
cmp_ok(scalar(@fresh_shape), '>', 200, 'the shape lists the extension\'s objects');
is(join("\n\n", @missing), '',
    'nothing a fresh 1.1 install has is missing after the update (add it to the update script)');
is(join("\n\n", @extra), '',
    'the update leaves nothing a fresh 1.1 install does not have');

# ---------------------------------------------------------------------------
# An unknown schema version is refused (C1.2).
# ---------------------------------------------------------------------------
($rc, $out, $err) = $node->psql('postgres', q{
    BEGIN;
    UPDATE decoupled.catalog_meta SET schema_version = 99;
    SELECT decoupled.create_cluster('refused');
    COMMIT;});
like($err, qr/catalog schema version 99 is newer than this build of pg_decoupled supports \(1 to 2\)/,
    'a catalog change at an unknown schema version is refused');
is($node->safe_psql('postgres', q{
    SELECT schema_version || '|' || (SELECT count(*) FROM decoupled.clusters WHERE name = 'refused')
      FROM decoupled.catalog_meta}), '2|0', 'and nothing changed');

$node->stop;
done_testing();
