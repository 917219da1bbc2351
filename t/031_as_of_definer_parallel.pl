# decoupled.as_of does not reach another role's SECURITY DEFINER function
# through a parallel plan (docs/architecture.md, "Security model", rule
# 11): a function's statement planned when its caller called it directly,
# where the caller's time counted, may be a parallel plan; run again inside
# the definer function, where that time does not count, it starts no
# worker (workers cannot tell whose the value is), and reads the latest
# state.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('as_of_definer_parallel', wal_level => 'logical');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE ROLE owner_role IN ROLE decoupled_admin;
    CREATE ROLE caller_role;
    GRANT CREATE ON SCHEMA public TO owner_role;
    SET ROLE owner_role;
    CREATE TABLE secrets (id int PRIMARY KEY, who text, secret text);
    INSERT INTO secrets VALUES (1, 'caller_role', 'before');
    SELECT decoupled.register_table('secrets', retain_history => '1 hour') > 0;
});
my $before = $node->safe_psql('postgres', q{
    SELECT decoupled.wait_for_capture('60 s');
    SELECT decoupled.tick_tables() >= 0;
    SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'secrets'});
$before = (split /\n/, $before)[-1];
$node->safe_psql('postgres', q{
    SET ROLE owner_role;
    UPDATE secrets SET secret = 'after' WHERE id = 1;
    SELECT decoupled.wait_for_capture('60 s');
    SELECT decoupled.tick_tables() >= 0;
    CREATE FUNCTION read_mine() RETURNS SETOF text LANGUAGE plpgsql AS
        $$ BEGIN RETURN QUERY SELECT secret FROM public.secrets WHERE who = session_user; END $$;
    CREATE FUNCTION read_mine_as_owner() RETURNS SETOF text LANGUAGE plpgsql SECURITY DEFINER AS
        $$ BEGIN RETURN QUERY SELECT * FROM public.read_mine(); END $$;
    GRANT EXECUTE ON FUNCTION read_mine_as_owner() TO caller_role;
});
my ($out, $err) = ('', '');
$node->psql('postgres', qq{
    SET SESSION AUTHORIZATION caller_role;
    SET decoupled.as_of = $before;
    SET force_parallel_mode = on; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
    SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = off;
    SELECT * FROM read_mine();
    SELECT * FROM read_mine_as_owner();
}, stdout => \$out, stderr => \$err, on_error_stop => 0);
like($err, qr/permission denied for table secrets/, 'the caller may not read the table itself');
is($out, 'after', 'inside the definer function the caller\'s time does not count, parallel plan or not');
$node->stop;
done_testing();
