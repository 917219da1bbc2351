# The owner of the extension's database needs no superuser to give it
# defaults (ALTER DATABASE ... SET): read-only transactions, serializable
# isolation, statement, lock and idle timeouts, its own role or session
# authorization (a superuser's session takes them), array_nulls = off and
# xmloption = document (which change how rows read back from their text).
# The extension's processes run with their own settings over those: after
# a restart under such defaults, capture, the controller's ticks and a
# replica's view steps go on, as the database owner nowhere, rows with
# NULL array elements and xml content read back as they were, and no
# worker is ended by an idle timeout.
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
    CREATE TABLE t (id int PRIMARY KEY, g int NOT NULL, a text[], x xml);
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
    ALTER DATABASE postgres SET array_nulls = off;
    ALTER DATABASE postgres SET xmloption = document;
    ALTER DATABASE postgres SET role = 'dbo';
    ALTER DATABASE postgres SET session_authorization = 'dbo';
});
my $restarted_at = -s $node->logfile;
$node->restart;

# This test's own sessions set what they need.
sub sql {
    my ($query) = @_;
    return $node->safe_psql('postgres', qq{
        SET SESSION AUTHORIZATION DEFAULT; SET ROLE NONE;
        SET array_nulls = on; SET xmloption = content;
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

sql(q{INSERT INTO t (id, g, a, x)
      VALUES (200, 9, ARRAY[NULL, 'z'], xmlparse(content 'frag<x/>'));
      INSERT INTO t SELECT i, 7 FROM generate_series(100, 104) i;
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

is(sql(qq{SET decoupled.as_of = '$now';
          SELECT a[1] IS NULL AND a[2] = 'z' AND x::text = 'frag<x/>' FROM t WHERE id = 200}),
    't', 'a NULL array element and xml content read back from history as written');
is(sql(q{SELECT count(*) FROM decoupled.capture_resyncs}), '0',
    'capture set no table aside');

# Longer than the idle timeouts: no worker was ended meanwhile.
sleep 1;
is(sql(q{SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'pg_decoupled replica%'}),
    $replica, 'the replica\'s session outlived idle_session_timeout');
is(sql(q{SELECT count(*) FROM decoupled.supervised WHERE failures > 0}), '0',
    'no supervised process failed');
# As the database's owner (its role or session authorization taken), the
# controller could not read the catalog.
unlike(slurp_file($node->logfile, $restarted_at), qr/permission denied/,
    'no process of the extension ran as the database\'s owner');
is(sql(q{SELECT count(*) FROM decoupled.object_statuses WHERE status <> 'running'}), '0',
    'every object runs');

$node->stop;
done_testing();
