# C4, C7, C9.1: adapters (adapterd) are SQL front doors, and nothing
# maintained depends on them.
#
#   adapter loss     stop_adapter: sources, table- and source-fed views, a
#                    sink and compaction go on; the adapter's holds stay in
#                    force (compaction stops exactly at them); a replica
#                    restarted meanwhile reconstructs and progresses;
#                    start_adapter: a new incarnation serves sessions again
#   sessions         a session's holds end with it; a retired incarnation's
#                    session fails clearly (a protected operation, a read
#                    under its released hold, the hold's release); a
#                    predecessor's late row never shows as the successor's
#   retirement       retire_incarnation releases exactly its holds
#   two adapters     one's restart or drop changes nothing for the other's
#                    holds, sessions and subscriptions
#   zero adapters    maintenance goes on; a new adapter serves queries
#   re-created       the extension dropped and created again: a session's
#                    holds and attachment of the dropped catalog never pass
#                    for the new one's
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('adapters',
    'decoupled.table_tick_interval' => "'100ms'",
    'decoupled.bound_publication_interval' => "'100ms'",
    # Released holds lift their protection only when published: the tests
    # publish when they mean to.
    'decoupled.hold_publication_interval' => "'1h'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.create_source('market', 'auction', options => '{"tick": "50ms"}',
                                   retain_history => '300ms');
    CREATE TABLE stock (item int, qty int);
    INSERT INTO stock SELECT g % 10, g FROM generate_series(1, 100) g;
    SELECT decoupled.register_table('stock', retain_history => '300ms');
    SELECT decoupled.create_materialized_view('top_bids',
        'SELECT auction_id, max(amount) AS top FROM market_bids GROUP BY auction_id',
        retain_history => '300ms');
    SELECT decoupled.create_materialized_view('stock_levels',
        'SELECT item, sum(qty) AS qty FROM stock GROUP BY item', retain_history => '300ms');
    SELECT decoupled.create_sink('stock_feed', 'stock_levels', 'stock_changes');
});
my $now = sub { $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()') };
my $since = sub {
    my ($name) = @_;
    $node->safe_psql('postgres', "SELECT since FROM decoupled.frontiers WHERE name = '$name'");
};
my $all_advance = sub {
    my ($label) = @_;
    my $t = $now->();
    $node->safe_psql('postgres', "UPDATE stock SET qty = qty + 1 WHERE item = 1");
    DecoupledTest::wait_upper($node, $_, $t + 500)
      for qw(market_bids top_bids stock stock_levels stock_feed);
    pass("$label: sources, views and the sink advance");
};
DecoupledTest::wait_upper($node, 'stock_feed', $now->());

# A session's holds end with it.
my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $h1 = $bg->query_safe(q{SELECT decoupled.acquire_hold('stock_levels')});
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.session_holds'), '1',
    'a session hold is listed');
$bg->quit;
DecoupledTest::wait_for($node, 'SELECT count(*) FROM decoupled.session_holds', '0');
pass('the hold ended with its session');
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.holds'), '1',
    'its durable protection stays until the next hold publication');
$node->safe_psql('postgres', 'SELECT decoupled.publish_holds()');
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.holds'), '0',
    'and is lifted by it');

# ---------------------------------------------------------------------------
# Adapter loss
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT decoupled.acquire_hold('top_bids')});
my $held = $node->safe_psql('postgres', q{SELECT frontier FROM decoupled.holds});
my $old_incarnation = $node->safe_psql('postgres',
    q{SELECT incarnation FROM decoupled.adapters WHERE name = 'default'});
my $adapterd = $node->safe_psql('postgres',
    q{SELECT pid FROM decoupled.supervised WHERE kind = 'adapterd'});
$node->safe_psql('postgres', q{SELECT decoupled.stop_adapter('default')});
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM decoupled.supervised WHERE kind = 'adapterd' AND pid IS NOT NULL}, '0');
ok(!kill(0, $adapterd), 'stop_adapter stopped adapterd');
is($node->safe_psql('postgres', q{SELECT status || ' ' || incarnation FROM decoupled.adapters}),
    "stopped $old_incarnation", 'the adapter is stopped; its incarnation still owns its holds');

$all_advance->('adapter stopped');
my $stock_since = $since->('stock_levels');
DecoupledTest::wait_for($node, qq{SELECT since > $stock_since FROM decoupled.frontiers
                                  WHERE name = 'stock_levels'}, 't');
pass('compaction goes on without the adapter');
DecoupledTest::wait_for($node, qq{SELECT since = $held FROM decoupled.frontiers
                                  WHERE name = 'top_bids'}, 't');
my $upper = DecoupledTest::upper_of($node, 'top_bids');
DecoupledTest::wait_upper($node, 'top_bids', $upper + 500);
is($since->('top_bids'), $held, 'compaction stops exactly at the stopped adapter\'s hold');

# A replica restarted during the outage reconstructs and progresses.
my $replica = DecoupledTest::replica_pid($node, 'default');
kill 'TERM', $replica;
DecoupledTest::wait_for($node, qq{
    SELECT pid IS NOT NULL AND pid <> $replica FROM decoupled.supervised WHERE kind = 'replica'},
    't');
$all_advance->('replica restarted during the outage');

# Sessions meanwhile get a clear error for protected operations.
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT decoupled.acquire_hold('stock')});
like($err, qr/adapter "default" is stopped/, 'a protected operation says the adapter is stopped');

# The adapter comes back as a new incarnation; sessions work again, and the
# old incarnation's holds are released with its retirement.
$node->safe_psql('postgres', q{SELECT decoupled.start_adapter('default')});
DecoupledTest::wait_for($node, qq{
    SELECT status = 'running' AND incarnation > $old_incarnation FROM decoupled.adapters}, 't');
cmp_ok($node->safe_psql('postgres', q{SELECT decoupled.acquire_hold('stock')}), '>', 0,
    'a new session takes a hold again');
DecoupledTest::wait_for($node, qq{SELECT since > $held FROM decoupled.frontiers
                                  WHERE name = 'top_bids'}, 't');
pass('the retired incarnation\'s hold was released and compaction passed it');
is($node->safe_psql('postgres',
    q{SELECT decoupled.verify('top_bids') AND decoupled.verify('stock_levels')}), 't',
    'the views verify after the outage');
is($node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NULL
      FROM decoupled.frontiers WHERE name = 'stock_feed';
    SELECT count(*) FROM ((SELECT item, qty FROM stock_levels
                           EXCEPT ALL SELECT item, qty FROM stock_changes
                            WHERE mz_timestamp <= decoupled.as_of()
                            GROUP BY item, qty HAVING sum(mz_diff) > 0)) d}), "f\n0",
    'the sink adds up to its view across the outage');
$node->safe_psql('postgres', 'SELECT decoupled.publish_holds()');

# ---------------------------------------------------------------------------
# Sessions of a retired incarnation; predecessors' rows; retirement
# ---------------------------------------------------------------------------
$bg = $node->background_psql('postgres', on_error_stop => 0);
my $hold1 = $bg->query_safe(q{SELECT decoupled.acquire_hold('stock_levels')});
my $held1 = $node->safe_psql('postgres',
    qq{SELECT frontier FROM decoupled.session_holds WHERE hold_id = $hold1});
my $inc1 = $node->safe_psql('postgres', q{SELECT incarnation FROM decoupled.adapters});
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.sessions
                                   WHERE incarnation = } . $inc1), '1',
    'the session is recorded under its incarnation');
# Restart adapterd: a new incarnation, which reclaims its predecessor.
$adapterd = $node->safe_psql('postgres', q{SELECT pid FROM decoupled.supervised WHERE kind = 'adapterd'});
kill 'TERM', $adapterd;
DecoupledTest::wait_for($node, qq{SELECT incarnation > $inc1 AND status = 'running'
                                    FROM decoupled.adapters}, 't');
my $inc2 = $node->safe_psql('postgres', q{SELECT incarnation FROM decoupled.adapters});
# The old session's late protected operation fails and writes nothing.
$bg->query(q{SELECT decoupled.acquire_hold('stock')});
like($bg->{stderr}, qr/incarnation $inc1 of adapter "default" that this session attached to was retired/,
    'the retired incarnation\'s session fails clearly on its next protected operation');
$bg->{stderr} = '';
# Its hold is released with its incarnation: no longer listed, and a read
# under it, once compaction passed it, says why, as does its release.
is($node->safe_psql('postgres',
    qq{SELECT count(*) FROM decoupled.session_holds WHERE hold_id = $hold1}), '0',
    'the retired incarnation\'s session hold is no longer listed');
DecoupledTest::wait_for($node, qq{SELECT since > $held1 FROM decoupled.frontiers
                                  WHERE name = 'stock_levels'}, 't');
$bg->query(qq{SET decoupled.as_of = $held1; SELECT count(*) FROM stock_levels});
like($bg->{stderr}, qr/incarnation $inc1 of adapter "default" that this session attached to was retired/,
    'a read under the released hold says the incarnation was retired, not just "compacted"');
$bg->{stderr} = '';
$bg->query(qq{RESET decoupled.as_of; SELECT decoupled.release_hold($hold1)});
like($bg->{stderr}, qr/incarnation $inc1 of adapter "default" that hold $hold1 was taken under was retired/,
    'so does its release');
$bg->{stderr} = '';
$bg->query(qq{SELECT decoupled.release_hold($hold1)});
like($bg->{stderr}, qr/hold $hold1 does not exist/, 'which removed it');
$bg->{stderr} = '';
# A predecessor's late row (as if written just before it was fenced) never
# appears as the successor's.
$node->safe_psql('postgres', qq{
    INSERT INTO decoupled.session_records (adapter, deployment, incarnation, session_pid,
                                           connected_at, role)
    VALUES ('default', 'default', $inc1, 4242, now(), 'late')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.sessions
                                   WHERE session_pid = 4242 OR incarnation <> } . $inc2), '0',
    'decoupled.sessions shows only the live incarnation\'s sessions');
$bg->quit;

# retire_incarnation releases exactly that owner's holds.
$node->safe_psql('postgres', q{SELECT decoupled.declare_adapter('other')});
$node->safe_psql('postgres', q{SET decoupled.adapter = 'other';
                               SELECT decoupled.acquire_hold('stock_levels')});
$node->safe_psql('postgres', q{SELECT decoupled.acquire_hold('stock_levels')});
is($node->safe_psql('postgres', q{SELECT string_agg(adapter, ',' ORDER BY adapter)
                                    FROM decoupled.holds}), 'default,other', 'two owners hold');
$node->safe_psql('postgres', qq{SELECT decoupled.retire_incarnation('default', $inc2)});
is($node->safe_psql('postgres', q{SELECT string_agg(adapter, ',') FROM decoupled.holds}), 'other',
    'retiring an incarnation releases exactly its holds');
DecoupledTest::wait_for($node, qq{SELECT incarnation > $inc2 FROM decoupled.adapters
                                   WHERE name = 'default'}, 't');
pass('its fenced adapterd stopped and a new incarnation took over');
$node->safe_psql('postgres', q{SET decoupled.adapter = 'other'; SELECT decoupled.publish_holds()});

# ---------------------------------------------------------------------------
# Two adapters: independence
# ---------------------------------------------------------------------------
my $sub = $node->background_psql('postgres', on_error_stop => 0);
$sub->query_safe(q{SET decoupled.adapter = 'other'});
$sub->query_safe(q{BEGIN});
$sub->query_safe(q{DECLARE feed CURSOR FOR
    SELECT (s).mz_diff FROM (SELECT decoupled.subscribe('stock') AS s) x});
$sub->query_safe(q{FETCH 1 FROM feed});
# A hold of 'other', kept at its (soon old) time while 'default' moves on.
$node->safe_psql('postgres', q{SET decoupled.adapter = 'other';
                               SELECT decoupled.acquire_hold('stock')});
my $old = $node->safe_psql('postgres',
    q{SELECT frontier FROM decoupled.holds WHERE adapter = 'other' AND collection = 'stock'});
my $other_inc = $node->safe_psql('postgres',
    q{SELECT incarnation FROM decoupled.adapters WHERE name = 'other'});
for my $round (1 .. 3) {
    # 'default' restarts, right away, as a new incarnation, and takes a
    # newer hold each time.
    my $before = $node->safe_psql('postgres',
        q{SELECT incarnation FROM decoupled.adapters WHERE name = 'default'});
    $node->safe_psql('postgres', q{SELECT decoupled.stop_adapter('default')});
    $node->safe_psql('postgres', q{SELECT decoupled.start_adapter('default')});
    DecoupledTest::wait_for($node, qq{SELECT status FROM decoupled.adapters
                                       WHERE name = 'default' AND incarnation > $before},
        'running');
    $node->safe_psql('postgres', q{SELECT decoupled.acquire_hold('stock')});
}
is($node->safe_psql('postgres', qq{SELECT frontier FROM decoupled.holds
                                    WHERE adapter = 'other' AND collection = 'stock'}), $old,
    'one adapter\'s hold stays at its old timestamp while the other restarts');
cmp_ok($node->safe_psql('postgres', q{SELECT frontier FROM decoupled.holds
                                       WHERE adapter = 'default' AND collection = 'stock'}),
    '>', $old, 'while the other\'s holds advance');
is($node->safe_psql('postgres', q{SELECT incarnation FROM decoupled.adapters WHERE name = 'other'}),
    $other_inc, 'the other adapter kept its incarnation');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.subscriptions
                                   WHERE adapter = 'other'}), '1',
    'and its subscription runs on');
$node->safe_psql('postgres', q{INSERT INTO stock VALUES (99, 99)});
like($sub->query(q{FETCH 1 FROM feed}), qr/1/, 'the subscription still streams new changes');
# Dropping 'default' leaves 'other' alone too.
$node->safe_psql('postgres', q{SELECT decoupled.drop_adapter('default')});
is($node->safe_psql('postgres', q{SELECT string_agg(adapter, ',') FROM decoupled.holds}), 'other',
    'dropping an adapter releases only its own holds');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.subscriptions}), '1',
    'the other adapter\'s subscription is untouched');
$sub->query(q{ROLLBACK});
$sub->quit;

# ---------------------------------------------------------------------------
# A waiting subscription whose client dies ends with it
# ---------------------------------------------------------------------------
# Its FETCH has nothing to send, so PostgreSQL would not notice the closed
# socket; the subscription's wait asks it, and its hold goes with it.
my ($client_out, $client_err) = ('', '');
my $client = IPC::Run::start(
    [ 'psql', '-X', '-d', $node->connstr('postgres'),
      '-c', q{SET decoupled.adapter = 'other'}, '-c', 'BEGIN',
      '-c', q{DECLARE gone CURSOR FOR
                  SELECT (s).mz_diff FROM (SELECT decoupled.subscribe('stock') AS s) x},
      '-c', 'FETCH ALL FROM gone' ],
    '>', \$client_out, '2>', \$client_err);
DecoupledTest::wait_for($node, q{SELECT count(*) FROM decoupled.subscriptions}, '1');
my $fetching = $node->safe_psql('postgres',
    q{SELECT pid FROM pg_stat_activity WHERE query = 'FETCH ALL FROM gone'});
ok($fetching, 'a client waits in a subscription');
$client->kill_kill;
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_stat_activity WHERE query = 'FETCH ALL FROM gone'}, '0');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.subscriptions}), '0',
    'its client killed, the waiting subscription ended');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.session_holds}), '0',
    'and its hold went with it');

# ---------------------------------------------------------------------------
# Zero adapters
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT decoupled.drop_adapter('other')});
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.adapters'), '0', 'no adapter at all');
my $start = $now->();
my $lifted = $since->('stock');
DecoupledTest::wait_upper($node, $_, $start + 3000) for qw(top_bids stock_levels stock_feed);
DecoupledTest::wait_for($node, qq{SELECT since > $lifted FROM decoupled.frontiers
                                  WHERE name = 'stock'}, 't');
pass('with zero adapters, maintenance and compaction go on');
is($node->safe_psql('postgres',
    q{SELECT decoupled.verify('top_bids') AND decoupled.verify('stock_levels')}), 't',
    'and the views verify');
$node->safe_psql('postgres', q{SELECT decoupled.declare_adapter('fresh')});
is($node->safe_psql('postgres', q{SET decoupled.adapter = 'fresh';
    SELECT count(*) > 0 FROM decoupled.frontiers f,
                             decoupled.subscribe('stock', f.upper - 1, f.upper) s
     WHERE f.name = 'stock'}), 't',
    'a newly declared adapter serves queries');

# ---------------------------------------------------------------------------
# The extension dropped and created again under a session's holds
# ---------------------------------------------------------------------------
# The new catalog starts its sequences again; the session stays attached to
# the dropped catalog's incarnation and its holds stay in shared memory until
# it ends: none of it may pass for the new catalog's.
my $old_session = $node->background_psql('postgres', on_error_stop => 0);
$old_session->query_safe(q{SET decoupled.adapter = 'fresh'});
$old_session->query_safe(q{SELECT decoupled.acquire_hold('stock')});
my $fresh_inc = $node->safe_psql('postgres',
    q{SELECT incarnation FROM decoupled.adapters WHERE name = 'fresh'});
$node->safe_psql('postgres', q{
    SET client_min_messages = warning;
    DROP EXTENSION pg_decoupled CASCADE;
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.register_table('stock', retain_history => '300ms');
    SELECT decoupled.declare_adapter('fresh');
});
DecoupledTest::wait_for($node, q{SELECT count(*) FROM decoupled.adapters
                                  WHERE name = 'fresh' AND status = 'running'}, '1');
cmp_ok($node->safe_psql('postgres',
    q{SELECT min(incarnation) FROM decoupled.adapters}), '>', $fresh_inc,
    'the new catalog\'s incarnations come after every one this server handed out');
is($node->safe_psql('postgres', q{SELECT count(*) FROM decoupled.session_holds}), '0',
    'the dropped catalog\'s session holds are not the new one\'s');
$old_session->query(q{SELECT decoupled.acquire_hold('stock')});
like($old_session->{stderr}, qr/incarnation $fresh_inc of adapter "fresh" that this session attached to was retired/,
    'the session attached under the dropped catalog is told to reconnect');
$old_session->quit;
my $new_session = $node->safe_psql('postgres', q{SET decoupled.adapter = 'fresh';
    SELECT decoupled.acquire_hold('stock') > 0});
is($new_session, 't', 'a new session holds under the new catalog');

$node->stop;
done_testing();
