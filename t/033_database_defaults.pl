# The owner of the extension's database needs no superuser to give it
# defaults (ALTER DATABASE ... SET): read-only transactions, serializable
# isolation, statement, lock and idle timeouts.  The extension's processes
# run with their own settings over those: after a restart under such
# defaults, capture, the controller's ticks and a replica's view steps go
# on, and no worker is ended by an idle timeout.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('database_defaults', wal_level => 'logical',
    'decoupled.table_tick_interval' => '100ms');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE ROLE dbo LOGIN;
    ALTER DATABASE postgres OWNER TO dbo;
    CREATE TABLE t (id int PRIMARY KEY, g int NOT NULL);
    INSERT INTO t SELECT i, i % 3 FROM generate_series(1, 30) i;
    SELECT decoupled.register_table('t');
    SELECT decoupled.create_materialized_view('t_counts', 'SELECT g, count(*) AS n FROM t GROUP BY g');
});
$node->safe_psql('postgres',
    q{SELECT decoupled.wait_for_upper('t_counts', decoupled.oracle_now(), '60s')});

# The database's owner sets defaults that would stop every session of the
# extension.
$node->safe_psql('postgres', q{
    SET ROLE dbo;
    ALTER DATABASE postgres SET default_transaction_read_only = on;
    ALTER DATABASE postgres SET default_transaction_isolation = 'serializable';
    ALTER DATABASE postgres SET statement_timeout = '50ms';
    ALTER DATABASE postgres SET lock_timeout = '10ms';
    ALTER DATABASE postgres SET idle_in_transaction_session_timeout = '50ms';
    ALTER DATABASE postgres SET idle_session_timeout = '300ms';
});
$node->restart;

# This test's own sessions set what they need.
sub sql {
    my ($query) = @_;
    return $node->safe_psql('postgres', qq{
        SET default_transaction_read_only = off; SET statement_timeout = 0;
        SET lock_timeout = 0; SET idle_session_timeout = 0;
        SET default_transaction_isolation = 'read committed';
        $query});
}

$node->poll_query_until('postgres',
    q{SELECT status = 'running' AND worker_pid IS NOT NULL FROM decoupled.capture})
  or die 'capture does not run under the database defaults: '
  . sql('SELECT status || coalesce(last_error, \'\') FROM decoupled.capture');
pass('capture runs under the database\'s defaults');

my $replica = sql(q{SELECT pid FROM pg_stat_activity
                     WHERE application_name LIKE 'pg_decoupled replica%'});
isnt($replica, '', 'a replica session is connected');

sql(q{INSERT INTO t SELECT i, 7 FROM generate_series(100, 104) i;
      UPDATE t SET g = 8 WHERE id <= 3;
      DELETE FROM t WHERE id BETWEEN 10 AND 12});
# Captured, then ticked by the controller, then stepped by the replica.
sql(q{SELECT decoupled.wait_for_capture('60s')});
my $captured = sql(q{SELECT upper FROM decoupled.frontiers WHERE name = 't'});
$node->poll_query_until('postgres',
    qq{SELECT upper > $captured FROM decoupled.frontiers WHERE name = 't'})
  or die 'the controller does not tick under the database defaults';
my $now = sql(q{SELECT upper - 1 FROM decoupled.frontiers WHERE name = 't'});
is(sql(qq{SELECT decoupled.wait_for_upper('t_counts', $now, '60s') IS NOT NULL}), 't',
    'the controller ticks and the replica steps the view under those defaults');
is(sql(qq{SET decoupled.as_of = '$now';
          SELECT string_agg(g || ':' || n, ',' ORDER BY g) FROM t_counts}),
    sql(qq{SELECT string_agg(g || ':' || n, ',' ORDER BY g)
             FROM (SELECT g, count(*) AS n FROM t GROUP BY g) x}),
    'the view holds the table\'s counts');

# Longer than the idle timeouts: no worker was ended meanwhile.
sleep 1;
is(sql(q{SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'pg_decoupled replica%'}),
    $replica, 'the replica\'s session outlived idle_session_timeout');
is(sql(q{SELECT count(*) FROM decoupled.supervised WHERE failures > 0}), '0',
    'no supervised process failed');
is(sql(q{SELECT count(*) FROM decoupled.object_statuses WHERE status <> 'running'}), '0',
    'every object runs');

$node->stop;
done_testing();
