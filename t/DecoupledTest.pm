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
      . "lc_messages = 'C'\n";
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

1;
