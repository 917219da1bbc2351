# Helpers shared by the TAP tests: a node with pg_decoupled preloaded, and
# waits built on the extension's own wait functions.
package DecoupledTest;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# A fresh, started-later node with the extension preloaded.
sub new_node {
    my ($name, %extra) = @_;
    my $node = PostgreSQL::Test::Cluster->new($name);
    $node->init;
    my $conf = "shared_preload_libraries = 'pg_decoupled'\n"
      . "decoupled.database = 'postgres'\n"
      . "decoupled.poll_interval = 200ms\n"
      . "max_worker_processes = 32\n"
      . "lc_messages = 'C'\n"
      # Tests that want the controller's table ticks turn them on.
      . "decoupled.table_tick_interval = 0\n"
      . "decoupled.bound_publication_interval = 0\n";
    $conf .= "$_ = $extra{$_}\n" for sort keys %extra;
    $node->append_conf('postgresql.conf', $conf);
    return $node;
}

# Blocks until the controller follows the committed catalog version.
sub wait_following {
    my ($node) = @_;
    return $node->safe_psql('postgres',
        "SELECT decoupled.wait_for_controller(decoupled.catalog_version(), '120s')");
}

# Polls decoupled.controller until `state` is reached (for the states that
# wait_for_controller does not cover: waiting, refusing, retrying).
sub wait_controller_state {
    my ($node, $state) = @_;
    $node->poll_query_until('postgres',
        "SELECT state FROM decoupled.controller_status()", $state)
      or die "controller never reached state '$state'";
}

sub controller_pid {
    my ($node) = @_;
    return $node->safe_psql('postgres', 'SELECT pid FROM decoupled.controller_status()');
}

sub postmaster_pid {
    my ($node) = @_;
    open my $fh, '<', $node->data_dir . '/postmaster.pid' or die "no postmaster.pid: $!";
    my $pid = <$fh>;
    close $fh;
    chomp $pid;
    return $pid;
}

# True when the server log shows a crash restart (all backends terminated).
sub crashed_since {
    my ($node, $offset) = @_;
    my $log = slurp_file($node->logfile, $offset);
    return $log =~ /terminating any other active server processes|was terminated by signal/;
}


package DecoupledTest;

# The upper of a collection.
sub upper_of {
    my ($node, $name) = @_;
    return $node->safe_psql('postgres',
        "SELECT upper FROM decoupled.frontiers WHERE name = '$name'");
}

# Waits until the collection's upper passes `ts` (the extension's own wait).
sub wait_upper {
    my ($node, $name, $ts) = @_;
    return $node->safe_psql('postgres',
        "SELECT decoupled.wait_for_upper('$name', $ts, '120s')");
}

# For a counter source: "rows|max n|expected rows" as of its latest
# readable time; a complete history without duplicates has all three equal.
sub counter_shape {
    my ($node, $name) = @_;
    my $out = $node->safe_psql('postgres', qq{
        SELECT set_config('decoupled.as_of', (f.upper - 1)::text, false) IS NULL
          FROM decoupled.frontiers f WHERE f.name = '$name';
        SELECT count(*) || '|' || max(n) || '|' ||
               (SELECT (decoupled.as_of() - f.since) / (o.definition->>'tick_ms')::bigint + 1
                  FROM decoupled.frontiers f JOIN decoupled.catalog_objects o
                    ON o.name = f.name AND o.dropped_at IS NULL
                 WHERE f.name = '$name')
          FROM $name});
    return (split /\n/, $out)[-1];
}

# Polls (with the server's own clock) until `sql` returns `expected`.
sub wait_for {
    my ($node, $sql, $expected) = @_;
    $node->poll_query_until('postgres', $sql, $expected)
      or die "timed out waiting for: $sql = $expected";
}

sub replica_pid {
    my ($node, $cluster, $replica) = @_;
    $replica //= 'r1';
    return $node->safe_psql('postgres', qq{
        SELECT pid FROM decoupled.supervised
         WHERE kind = 'replica' AND cluster = '$cluster' AND name = '$replica'});
}

1;
