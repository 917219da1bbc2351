# Helpers shared by the TAP tests: a node with pg_decoupled preloaded, and
# waits built on the extension's own wait functions.
package DecoupledTest;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# A fresh, started-later node with the extension preloaded.  `_init`, if
# given, is a hash of PostgreSQL::Test::Cluster::init options
# (allows_streaming => 'logical' for a primary, say).
sub new_node {
    my ($name, %extra) = @_;
    my $init = delete $extra{_init} // {};
    my $node = PostgreSQL::Test::Cluster->new($name);
    $node->init(%$init);
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

# An SQL statement that drops the capture slot by hand. The capture worker
# takes the slot whenever it decodes and gives it back after a second without
# a change, so a drop may find it active: try again (30 s at most).
sub drop_capture_slot_sql {
    return q{
    DO $$
    BEGIN
        FOR i IN 1 .. 3000 LOOP
            BEGIN
                PERFORM pg_drop_replication_slot('pg_decoupled');
                RETURN;
            EXCEPTION WHEN object_in_use THEN
                PERFORM pg_sleep(0.01);
            END;
        END LOOP;
        RAISE EXCEPTION 'the capture worker kept the slot active for 30 s';
    END $$};
}

sub replica_pid {
    my ($node, $cluster, $replica) = @_;
    $replica //= 'r1';
    return $node->safe_psql('postgres', qq{
        SELECT pid FROM decoupled.supervised
         WHERE kind = 'replica' AND cluster = '$cluster' AND name = '$replica'});
}

# An SQL expression: the catalog's clusters, replicas, adapters and
# deployments as text, for comparing catalogs (an update, a restore).
sub topology_sql {
    return q{(SELECT string_agg(format('%s|%s|%s', name, managed, replication_factor), ','
                              ORDER BY name) FROM decoupled.catalog_clusters)
        || E'\n' || (SELECT string_agg(format('%s|%s|%s', cluster, name, replica_id), ','
                                         ORDER BY replica_id) FROM decoupled.catalog_replicas)
        || E'\n' || (SELECT string_agg(format('%s|%s', name, deployment), ',' ORDER BY name)
                         FROM decoupled.catalog_adapters)
        || E'\n' || (SELECT string_agg(format('%s|%s', name, state), ',' ORDER BY name)
                         FROM decoupled.catalog_deployments)};
}

# The extension's objects as sorted text, without OIDs: every member of the
# extension, functions with their definitions, relations, columns (by name:
# an update adds a column at the end), constraints, indexes, views, rules,
# triggers, policies, event triggers, types and domains, sequences, comments,
# privileges and the initial privileges pg_dump reads.  An install of an old
# version updated to the current one must have the same shape as a fresh
# install (t/021_upgrade.pl, docs/upgrades.md).  One element per object.
sub extension_shape {
    my ($node) = @_;
    my $all = $node->safe_psql('postgres', q{
    WITH ext AS (
        SELECT oid FROM pg_extension WHERE extname = 'pg_decoupled'
    ), members AS (
        SELECT d.classid, d.objid FROM pg_depend d, ext
         WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
    ), rels AS (
        SELECT c.* FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
    )
    SELECT string_agg(line, chr(30) ORDER BY line) FROM (
        SELECT 'member ' || pg_describe_object(classid, objid, 0) FROM members
        UNION ALL
        SELECT format('schema %s owner %s acl %s', n.nspname, pg_get_userbyid(n.nspowner), n.nspacl)
          FROM pg_namespace n
         WHERE n.nspname = 'decoupled'
            OR n.oid IN (SELECT objid FROM members WHERE classid = 'pg_namespace'::regclass)
        UNION ALL
        SELECT format('function %s owner %s acl %s%s', p.oid::regprocedure, pg_get_userbyid(p.proowner),
                      p.proacl, CASE WHEN p.prokind = 'a'
                                     THEN (SELECT format(' aggregate sfunc %s stype %s sspace %s final %s',
                                                         a.aggtransfn, a.aggtranstype::regtype,
                                                         a.aggtransspace, a.aggfinalfn)
                                             FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
                                     ELSE E'\n' || pg_get_functiondef(p.oid) END)
          FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
        UNION ALL
        SELECT format('relation %s kind %s persistence %s options %s owner %s acl %s row security %s/%s',
                      c.oid::regclass, c.relkind, c.relpersistence, c.reloptions,
                      pg_get_userbyid(c.relowner), c.relacl, c.relrowsecurity, c.relforcerowsecurity)
          FROM rels c
        UNION ALL
        -- By name, not position: an update adds a column at the end.
        SELECT format('column %s.%s %s not null %s default %s collation %s identity %s generated %s acl %s',
                      a.attrelid::regclass, a.attname, format_type(a.atttypid, a.atttypmod),
                      a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid),
                      nullif(a.attcollation, 0)::regcollation, a.attidentity, a.attgenerated, a.attacl)
          FROM pg_attribute a JOIN rels c ON c.oid = a.attrelid
          LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
         WHERE a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT format('constraint %s on %s: %s deferrable %s deferred %s', co.conname,
                      co.conrelid::regclass, pg_get_constraintdef(co.oid), co.condeferrable, co.condeferred)
          FROM pg_constraint co JOIN rels c ON c.oid = co.conrelid
        UNION ALL
        SELECT format('type %s kind %s base %s not null %s default %s', t.oid::regtype, t.typtype,
                      format_type(t.typbasetype, t.typtypmod), t.typnotnull, t.typdefault)
          FROM pg_type t JOIN members m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
        UNION ALL
        SELECT format('constraint %s on type %s: %s', co.conname, co.contypid::regtype,
                      pg_get_constraintdef(co.oid))
          FROM pg_constraint co JOIN members m ON m.classid = 'pg_type'::regclass AND m.objid = co.contypid
        UNION ALL
        SELECT format('sequence %s as %s start %s increment %s min %s max %s cache %s cycle %s',
                      s.seqrelid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement,
                      s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
          FROM pg_sequence s JOIN rels c ON c.oid = s.seqrelid
        UNION ALL
        SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN rels c ON c.oid = i.indrelid
        UNION ALL
        SELECT format('view %s: %s', c.oid::regclass, pg_get_viewdef(c.oid))
          FROM rels c WHERE c.relkind IN ('v', 'm')
        UNION ALL
        SELECT 'rule ' || pg_get_ruledef(r.oid)
          FROM pg_rewrite r JOIN rels c ON c.oid = r.ev_class WHERE r.rulename <> '_RETURN'
        UNION ALL
        -- Internal triggers (foreign keys) are named by OID; their constraints are above.
        SELECT format('trigger %s enabled %s', pg_get_triggerdef(t.oid), t.tgenabled)
          FROM pg_trigger t JOIN rels c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal
        UNION ALL
        SELECT format('policy %s on %s: %s %s to %s using %s check %s', p.polname, p.polrelid::regclass,
                      p.polcmd, p.polpermissive, p.polroles::regrole[], pg_get_expr(p.polqual, p.polrelid),
                      pg_get_expr(p.polwithcheck, p.polrelid))
          FROM pg_policy p JOIN rels c ON c.oid = p.polrelid
        UNION ALL
        SELECT format('event trigger %s on %s executes %s enabled %s tags %s owner %s', e.evtname,
                      e.evtevent, e.evtfoid::regprocedure, e.evtenabled, e.evttags,
                      pg_get_userbyid(e.evtowner))
          FROM pg_event_trigger e
          JOIN members m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = e.oid
        UNION ALL
        SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid),
                      d.description)
          FROM pg_description d JOIN members m ON m.classid = d.classoid AND m.objid = d.objoid
        UNION ALL
        -- What pg_dump takes as the extension's own privileges.
        SELECT format('initial privileges %s %s: %s',
                      pg_describe_object(ip.classoid, ip.objoid, ip.objsubid), ip.privtype, ip.initprivs)
          FROM pg_init_privs ip JOIN members m ON m.classid = ip.classoid AND m.objid = ip.objoid
    ) shape(line)});
    return split /\x1e/, $all;
}

1;
