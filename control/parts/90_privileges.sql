------------------------------------------------------------------------------
-- Privileges: default deny, then grant what each audience needs.
------------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA decoupled FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA decoupled FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA decoupled FROM PUBLIC;
REVOKE ALL ON SCHEMA decoupled_storage FROM PUBLIC;
-- Readers of collections go through the history views there.
GRANT USAGE ON SCHEMA decoupled_storage TO PUBLIC;

-- Everyone reads the public views.
DO $$
DECLARE
    v regclass;
BEGIN
    FOR v IN SELECT c.oid FROM pg_catalog.pg_class c
              WHERE c.relnamespace = 'decoupled'::regnamespace AND c.relkind = 'v'
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO PUBLIC', v);
    END LOOP;
END
$$;

-- Everyone: observation, waiting, reading at a time, protecting reads.
GRANT EXECUTE ON FUNCTION
    decoupled.supported_schema_version(), decoupled.catalog_version(),
    decoupled.controller_status(), decoupled.supervision(),
    decoupled.wait_for_controller(bigint, interval),
    decoupled.oracle_now(), decoupled.as_of(), decoupled._history_gate(bigint),
    decoupled._history_gate_before(bigint), decoupled._row_text(record),
    decoupled.acquire_hold(text, bigint), decoupled.release_hold(bigint),
    decoupled.dry_run(text), decoupled._catalog_inventory(),
    decoupled.wait_for_upper(text, bigint, interval), decoupled.verify(text, bigint),
    decoupled._shared_holds(), decoupled.subscribe(text, bigint, bigint),
    decoupled._kept_sum_int8(bigint, numeric), decoupled._kept_sum_numeric(bigint, numeric),
    decoupled._kept_avg(bigint, numeric), decoupled._weighted_sum(bigint, bigint),
    decoupled._capture_switching(),
    decoupled.wait_for_capture(interval), decoupled._capture_state(),
    decoupled._capture_error(), decoupled._visible_error(text, oid, text),
    decoupled._unhydrated(text), decoupled._relay_state(),
    decoupled._diagnose_values(jsonb, text, jsonb)
TO PUBLIC;
-- Implementations of entry points (decoupled._acquire_hold, ...) and the
-- subscription helpers are granted to nobody: their entry points call them
-- (extension/caller.cpp, subscribe.cpp), after recording who called.

-- Catalog changes and the write path: superuser or decoupled_admin.
GRANT EXECUTE ON FUNCTION
    decoupled.create_cluster(text, integer, boolean), decoupled.alter_cluster(text, integer),
    decoupled.drop_cluster(text), decoupled.declare_adapter(text),
    decoupled.drop_adapter(text), decoupled.stop_adapter(text), decoupled.start_adapter(text),
    decoupled.retire_incarnation(text, bigint), decoupled.publish_holds(),
    decoupled.register_table(regclass, interval), decoupled.unregister_table(regclass),
    decoupled.tick_tables(), decoupled.append(text, jsonb, bigint, bigint, text, bigint),
    decoupled.publish_bounds(), decoupled.apply_compaction(), decoupled.finalize_dropped(),
    decoupled.create_source(text, text, text, jsonb, interval),
    decoupled.drop(text, boolean),
    decoupled.create_materialized_view(text, text, text, interval, bigint),
    decoupled.create_sink(text, text, text, text, boolean),
    decoupled.create_replica(text, text, boolean), decoupled.drop_replica(text, text),
    decoupled.prune_status_history(interval), decoupled.finish_restore(),
    decoupled.create_deployment(text), decoupled.drop_deployment(text),
    decoupled.promote(text, interval), decoupled.reconcile_configuration(text, text)
TO decoupled_admin;

-- The replica protocol: what replica processes call, as a role in
-- decoupled_replica (or a superuser), each call fenced by its incarnation.
-- Not decoupled_admin: a replica writes every source's and view's history,
-- and an admin must not forge another role's.
GRANT EXECUTE ON FUNCTION
    decoupled.replica_start(bigint, text, integer, text), decoupled.replica_stop(bigint),
    decoupled.replica_heartbeat(bigint, text, text), decoupled.replica_desired_state(bigint),
    decoupled.replica_append(bigint, bigint, jsonb, bigint, bigint),
    decoupled.replica_report(bigint, bigint, text, text, text, boolean),
    decoupled.replica_compact(bigint), decoupled.replica_maintained(bigint),
    decoupled.replica_maintain(bigint, bigint, bigint), decoupled.replica_sink(bigint, bigint, bigint),
    decoupled.replica_maintain_many(bigint, bigint[], bigint[], integer),
    decoupled.replica_prewarm(bigint, bigint),
    decoupled.replica_advance_idle(bigint, bigint[], bigint[])
TO decoupled_replica;

-- Wake the controller once the extension's creation commits.
SELECT decoupled._wake_controller_at_commit();
