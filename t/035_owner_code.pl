# A registered table's owner's code never runs with the extension's rights
# when the extension reads the table (docs/architecture.md, "Security
# model").  The planner runs code of a table's owner whenever it plans a
# query over the table: it folds the constant calls of the table's index
# expressions and predicates and of its extended statistics' expressions.
# Registration (a SECURITY DEFINER function), the TRUNCATE capture trigger
# (one too) and the capture worker's taking a table again from its
# contents (a superuser) read the table by a scan of its heap instead
# (extension/table_contents.cpp), so none of that code runs there — a
# member of decoupled_admin whose function did ALTER ROLE ... SUPERUSER
# became a superuser before.  History still gets every row.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('owner_code', wal_level => 'logical');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE ROLE mal LOGIN IN ROLE decoupled_admin;
    CREATE SCHEMA mal AUTHORIZATION mal;
    SET ROLE mal;
    -- Who ran it, when a superuser did; and the escalation it tries then.
    CREATE TABLE mal.ran_as_superuser (who name, via text);
    GRANT INSERT ON mal.ran_as_superuser TO PUBLIC;
    GRANT USAGE ON SCHEMA mal TO PUBLIC;
    CREATE FUNCTION mal.k(via text) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
    BEGIN
        IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
            INSERT INTO mal.ran_as_superuser VALUES (current_user, via);
            EXECUTE 'ALTER ROLE mal SUPERUSER';
        END IF;
        RETURN 1;
    END $$;
    CREATE TABLE mal.mt (id int PRIMARY KEY, v int NOT NULL, note text);
    INSERT INTO mal.mt SELECT g, g, repeat('x', g) FROM generate_series(1, 10) g;
    CREATE INDEX mt_expression ON mal.mt ((v + mal.k('index expression')));
    CREATE INDEX mt_predicate ON mal.mt (v) WHERE mal.k('index predicate') > 0;
    CREATE STATISTICS mt_stats ON (v + mal.k('statistics')), id FROM mal.mt;
});

# What the owner sees AS OF the last tick, and in the table, read as the
# owner (a superuser's own query over the table would plan it too).
my $agrees = q{
    SELECT decoupled.tick_tables() >= 0;
    SET ROLE mal;
    SELECT set_config('decoupled.as_of', (upper - 1)::text, false) IS NOT NULL
      FROM decoupled.frontiers WHERE name = 'mt';
    SELECT string_agg(id || ':' || v || ':' || length(note), ',' ORDER BY id) FROM mal.mt;
    RESET decoupled.as_of;
    SELECT string_agg(id || ':' || v || ':' || length(note), ',' ORDER BY id) FROM mal.mt};
my $ran = q{SELECT count(*) || ' ' || coalesce(string_agg(DISTINCT via, ','), '')
              FROM mal.ran_as_superuser};
my $superuser = q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mal'};

sub history_matches {
    my ($name) = @_;
    my (undef, undef, $history, $table) = split /\n/, $node->safe_psql('postgres', $agrees);
    is($history, $table, "$name: history has the table's rows");
}

# Registration, in a session of the owner's own that has not planned the
# table yet.
$node->safe_psql('postgres', q{SELECT decoupled.register_table('mal.mt')},
    extra_params => [ '-U', 'mal' ]);
is($node->safe_psql('postgres', $ran), '0 ', 'registration runs none of the owner\'s code as a superuser');
history_matches('registration');

# The capture worker takes the table again from its contents after a lost
# slot, also with an index made since.
$node->safe_psql('postgres', q{
    SET ROLE mal;
    CREATE INDEX mt_later ON mal.mt ((v * mal.k('index made after registration')));
    INSERT INTO mal.mt VALUES (11, 11, 'eleven')}, extra_params => [ '-U', 'mal' ]);
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up';
$node->safe_psql('postgres', DecoupledTest::drop_capture_slot_sql());
$node->safe_psql('postgres', q{UPDATE mal.mt SET v = 100 WHERE id = 1},
    extra_params => [ '-U', 'mal' ]);
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '1');
$node->poll_query_until('postgres', 'SELECT decoupled.wait_for_capture()', 't')
  or die 'capture did not catch up after the lost slot';
is($node->safe_psql('postgres', $ran), '0 ',
    'taking the table again after a lost slot runs none of its code as a superuser');
history_matches('after the lost slot');

# Trigger capture: TRUNCATE's trigger reads the rows it removes.
$node->safe_psql('postgres', "ALTER SYSTEM SET decoupled.capture = 'trigger'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
DecoupledTest::wait_for($node, 'SELECT count(*) FROM decoupled.capture_relations', '0');
$node->safe_psql('postgres', q{
    TRUNCATE mal.mt;
    INSERT INTO mal.mt VALUES (42, 42, 'after the truncate')}, extra_params => [ '-U', 'mal' ]);
is($node->safe_psql('postgres', $ran), '0 ',
    'TRUNCATE\'s capture runs none of the table\'s code as a superuser');
history_matches('after TRUNCATE');

is($node->safe_psql('postgres', $superuser), 'f', 'the owner is still no superuser');
$node->stop;
done_testing();
