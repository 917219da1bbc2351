# C5.2: registered tables are ticked by the controller on a timer, so
# table-fed history advances with no client calling tick_tables() and with
# no adapter declared at all.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('ticks', 'decoupled.table_tick_interval' => "'100ms'");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE orders (id int, amount int);
    SELECT decoupled.register_table('orders', retain_history => '1 hour');
    SELECT decoupled.drop_adapter('default');
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM decoupled.adapters'), '0',
    'no adapter is declared');

my $start = DecoupledTest::upper_of($node, 'orders');
DecoupledTest::wait_upper($node, 'orders', $start + 300);
pass('an idle registered table advances on the controller\'s ticks');

$node->safe_psql('postgres', q{
    INSERT INTO orders SELECT g, g * 10 FROM generate_series(1, 100) g;
    DELETE FROM orders WHERE id % 10 = 0;
    UPDATE orders SET amount = amount + 1 WHERE id <= 5;
});
my $written = $node->safe_psql('postgres', 'SELECT decoupled.oracle_now()');
DecoupledTest::wait_upper($node, 'orders', $written + 1);
my $history = $node->safe_psql('postgres', q{
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NULL
      FROM decoupled.frontiers WHERE name = 'orders';
    SELECT count(*) || '|' || sum(amount) FROM orders});
is((split /\n/, $history)[-1],
    $node->safe_psql('postgres', q{SELECT count(*) || '|' || sum(amount) FROM orders}),
    'committed writes reach the collection without a manual tick');

$node->stop;
done_testing();
