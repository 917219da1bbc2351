#include "gucs.hpp"
#include "core/worker_settings.hpp"

#include <climits>

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
}

namespace decoupled {

char* guc_database = nullptr;
int guc_poll_interval = 1000;
int guc_max_workers = 64;
char* guc_adapter = nullptr;
char* guc_replica_conninfo = nullptr;
int guc_status_history_retention = 7 * 24 * 3600;
int guc_table_tick_interval = 1000;
int guc_capture = kCaptureWal;
int guc_capture_unticked_wal_limit = 256;
int guc_capture_max_row_size = MaxAllocSize / 1024;
int guc_relay = kRelayInProcess;
char* guc_relay_name = nullptr;
char* guc_wait_points = nullptr;

namespace {
const struct config_enum_entry capture_options[] = {
    {"wal", kCaptureWal, false},
    {"trigger", kCaptureTrigger, false},
    {nullptr, 0, false},
};
const struct config_enum_entry relay_options[] = {
    {"in_process", kRelayInProcess, false},
    {"external", kRelayExternal, false},
    {nullptr, 0, false},
};
}  // namespace
int guc_bound_publication_interval = 1000;
int guc_step_work_mem = 64 * 1024;
int guc_step_timeout = 5 * 60 * 1000;

namespace {

// work_mem takes 64 kB at least: a step would fail to set a smaller value.
bool check_step_work_mem(int* value, void**, GucSource) {
    if (*value == -1 || *value >= 64) return true;
    GUC_check_errdetail("decoupled.step_work_mem is -1 (work_mem) or at least 64 kB.");
    return false;
}

}  // namespace
int guc_hold_publication_interval = 60000;
int guc_max_holds_per_session = 64;

void define_gucs() {
    DefineCustomStringVariable(
        "decoupled.database", "Database that holds the pg_decoupled catalog.",
        "The controller connects to this database; CREATE EXTENSION pg_decoupled is "
        "accepted only there.",
        &guc_database, "postgres", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.poll_interval", "How often workers re-read the catalog without a wake-up.",
        "Wake-ups are hints; polling is what keeps the system correct when they are lost.",
        &guc_poll_interval, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
        nullptr);

    DefineCustomIntVariable(
        "decoupled.step_work_mem",
        "Memory a view step's sorts and hashes may use, each, before spilling to disk.",
        "A step is maintenance, like CREATE INDEX: it gets more than a query's work_mem. "
        "-1 uses work_mem.",
        &guc_step_work_mem, 64 * 1024, -1, MAX_KILOBYTES, PGC_SIGHUP, GUC_UNIT_KB,
        check_step_work_mem, nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.step_timeout",
        "Longest a replica's statement (a view's or sink's step) may run before it is "
        "cancelled.",
        "The replica's sessions run with it as statement_timeout: a view whose query never "
        "ends (a function of its creator's, say) stalls, and is retried only after ten times "
        "this, instead of holding up every view and sink of its cluster. 0 turns it off.",
        &guc_step_timeout, 5 * 60 * 1000, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
        nullptr);

    DefineCustomIntVariable(
        "decoupled.max_workers", "Maximum number of processes the controller supervises.",
        "Sizes the shared-memory table of launch specifications. Each running worker also "
        "needs a slot in max_worker_processes.",
        &guc_max_workers, 64, 1, 4096, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);

    DefineCustomStringVariable(
        "decoupled.adapter", "The adapter this session attaches to.",
        "Holds and sessions are owned by the live incarnation of this adapter in the active "
        "deployment.",
        &guc_adapter, "default", PGC_USERSET, 0, nullptr, nullptr, nullptr);

    DefineCustomStringVariable(
        "decoupled.replica_conninfo", "How replica workers connect to the server.",
        "Empty: the first Unix socket directory, the server's port and decoupled.database, as "
        "the operating-system user the server runs as. Credentials stay in the process.",
        &guc_replica_conninfo, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.status_history_retention", "How long status transitions are kept.",
        "The controller deletes older rows of decoupled.status_history about once a minute.",
        &guc_status_history_retention, 7 * 24 * 3600, 60, INT_MAX, PGC_SIGHUP, GUC_UNIT_S,
        nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.table_tick_interval", "How often the controller ticks registered tables.",
        "Captured writes become history at the next tick. 0 turns the controller's ticks off "
        "(decoupled.tick_tables() still works).",
        &guc_table_tick_interval, 1000, 0, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
        nullptr);

    DefineCustomEnumVariable(
        "decoupled.capture", "How writes to registered tables are captured.",
        "wal: from the WAL by the capture worker, where wal_level = logical (else by "
        "triggers); trigger: by statement triggers in the writers' transactions.",
        &guc_capture, kCaptureWal, capture_options, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.capture_unticked_wal_limit",
        "How much WAL the capture slot may keep for changes no tick has moved yet.",
        "Pending changes of tables captured from the WAL are unlogged, and the slot keeps the "
        "WAL since the last tick that moved them. Beyond this much, such a table's pending "
        "changes are made logged again and the slot moves on. 0: they stay logged.",
        &guc_capture_unticked_wal_limit, 256, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_MB, nullptr,
        nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.capture_max_row_size",
        "The largest text of one changed row that WAL capture takes in.",
        "A change of a registered table whose row's text, escaped as a record, is larger is "
        "that table's failure: after three passes the table is set aside and taken again from "
        "its contents, and capture of the other tables goes on. At most, and by default, 1 GB, "
        "the most a text value may hold.",
        &guc_capture_max_row_size, MaxAllocSize / 1024, 1, MaxAllocSize / 1024, PGC_SIGHUP,
        GUC_UNIT_KB, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.bound_publication_interval",
        "How often compaction bounds are published and applied.",
        "Replicas do it for what runs on their cluster, the controller for registered tables. "
        "0 turns these rounds off (decoupled.publish_bounds() and apply_compaction() still "
        "work).",
        &guc_bound_publication_interval, 1000, 0, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
        nullptr, nullptr);

    DefineCustomIntVariable(
        "decoupled.hold_publication_interval",
        "How often adapterd publishes the weakening of its sessions' holds.",
        "Released holds lift their durable protection at the next publication, in the same "
        "transaction as adapterd's heartbeat. New and stronger holds are durable at once.",
        &guc_hold_publication_interval, 60000, 10, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS,
        nullptr, nullptr, nullptr);

    // Each backend owns a fixed share of the hold slots, so no session (nor
    // a role's sessions) can take what another needs.
    DefineCustomIntVariable(
        "decoupled.max_holds_per_session",
        "Maximum number of holds (subscriptions included) one session has at once.",
        "Shared memory keeps this many hold slots for every possible backend (MaxBackends), "
        "so every session can always reach its quota.",
        &guc_max_holds_per_session, 64, 1, 65536, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);

    DefineCustomEnumVariable(
        "decoupled.relay", "How wake-ups reach processes outside the server.",
        "in_process: a relay worker started by the controller sends them as NOTIFY "
        "decoupled_wakeup; external: pg_decoupled_relayd fans them out through the shared "
        "memory segment named by decoupled.relay_name. Wake-ups are hints: without a relay "
        "everyone polls every decoupled.poll_interval.",
        &guc_relay, kRelayInProcess, relay_options, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);

    DefineCustomStringVariable(
        "decoupled.relay_name", "The shared memory segment of pg_decoupled_relayd.",
        "Used when decoupled.relay = external: the server's processes publish into it and "
        "processes on this host attach to it.",
        &guc_relay_name, "pg_decoupled_relay", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);

    DefineCustomStringVariable(
        "decoupled.wait_points", "Debug wait points this session honours (tests only).",
        "A comma-separated list of point names; at a named point the session waits while "
        "decoupled.arm_wait_point() holds it.  Empty (the default) in production.",
        &guc_wait_points, "", PGC_SUSET, GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);

    MarkGUCPrefixReserved("decoupled");
}

void pin_worker_settings() {
    // The session's authorization checks the role's name in the catalog:
    // in a transaction.
    bool outside = !IsTransactionState();
    if (outside) StartTransactionCommand();
    // Above the database's and roles' defaults.  A setting the process
    // sets again later is pinned as a session's own SET, which that later
    // setting overrides: as an override, every later set_config of the
    // timeouts was ignored — the controller's lock_timeout around a drop
    // a reader held, which then waited for that reader and held up every
    // table's ticks.
    SetConfigOption("session_authorization", GetUserNameFromId(GetAuthenticatedUserId(), false),
                    PGC_SUSET, PGC_S_OVERRIDE);
    for (const PinnedSetting& setting : kPinnedSettings)
        SetConfigOption(setting.name, setting.value, PGC_SUSET,
                        setting.set_later ? PGC_S_SESSION : PGC_S_OVERRIDE);
    if (outside) CommitTransactionCommand();
}

int planner_settings_off(const char* const* names) {
    int level = NewGUCNestLevel();
    for (const char* const* name = names; *name != nullptr; ++name)
        (void)set_config_option(*name, "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                                false);
    return level;
}

}  // namespace decoupled
