// The controller: the supervisor worker of pg_decoupled (brief C9).
//
// It connects to decoupled.database, waits for the extension, follows the
// catalog version and derives from the committed catalog which processes
// must run.  It never writes the catalog: what it observes and plans lives in
// shared memory (decoupled.controller, decoupled.supervision).
//
// Errors never kill it: a failed catalog read is aborted, logged and retried
// with backoff.  SIGTERM ends it with exit code 1 so that the postmaster
// starts a fresh controller after bgw_restart_time, except at shutdown.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include <algorithm>
#include <string>
#include <vector>

#include "../extension/core/backoff.hpp"
#include "../extension/core/launch_spec.hpp"
#include "../extension/core/schema_version.hpp"
#include "../extension/gucs.hpp"
#include "../extension/pg_guard.hpp"
#include "../extension/shmem.hpp"
#include "../extension/write_locks.hpp"

extern "C" {
PGDLLEXPORT void decoupled_controller_main(Datum);
}

namespace {

using decoupled::ControllerState;
using decoupled::LaunchSpec;
using decoupled::SharedState;
using decoupled::WorkerKind;

// Every process the catalog declares, for all deployments that are not
// retired.  The in-process relay serves every deployment.
constexpr const char* kLaunchSpecQuery = R"sql(
    SELECT 'replica' AS kind, r.name, r.cluster, d.name AS deployment, r.replica_id
      FROM decoupled.catalog_replicas r
      CROSS JOIN decoupled.catalog_deployments d
     WHERE d.state <> 'retired' AND NOT r.external
    UNION ALL
    SELECT 'adapterd', a.name, NULL, a.deployment, NULL
      FROM decoupled.catalog_adapters a
      JOIN decoupled.catalog_deployments d ON d.name = a.deployment
     WHERE d.state <> 'retired'
       AND NOT EXISTS (SELECT FROM decoupled.catalog_adapter_stops s
                        WHERE s.adapter = a.name AND s.deployment = a.deployment)
)sql";

// What one read of the catalog found.  Plain data, filled by PostgreSQL code.
struct RawSpec {
    char* kind;
    char* name;
    char* cluster;
    char* deployment;
    int64 replica_id;
};

struct Observation {
    bool extension_present = false;
    bool restoring = false;  // pg_restore is loading the catalog
    int32 schema_version = 0;
    int64 catalog_version = 0;
    bool specs_read = false;  // false: catalog version unchanged or refused
    int nspecs = 0;
    RawSpec* specs = nullptr;
};

char* copy_value(SPITupleTable* table, int row, int column) {
    char* value = SPI_getvalue(table->vals[row], table->tupdesc, column);
    return value ? pstrdup(value) : nullptr;
}

// Reads the catalog in one transaction and one snapshot.  Runs inside
// pg_call; results are allocated in `into`, which outlives the transaction.
void read_catalog(Observation* obs, int64 known_version, bool prune_history, MemoryContext into) {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "pg_decoupled controller: reading catalog");

    obs->extension_present = OidIsValid(get_extension_oid("pg_decoupled", true));
    // While pg_restore loads a dumped catalog (85_dump_restore.sql) nothing
    // is read: the catalog is half there.  Catalogs older than the restore
    // table are never restoring.
    Oid nsp = get_namespace_oid("decoupled", true);
    obs->restoring = false;
    if (obs->extension_present && OidIsValid(nsp) &&
        OidIsValid(get_relname_relid("catalog_restore", nsp))) {
        SPI_connect();
        if (SPI_execute("SELECT FROM decoupled.catalog_restore", true, 1) != SPI_OK_SELECT)
            elog(ERROR, "could not read decoupled.catalog_restore");
        obs->restoring = SPI_processed > 0;
        SPI_finish();
    }
    if (obs->extension_present && !obs->restoring) {
        SPI_connect();
        if (SPI_execute("SELECT schema_version, catalog_version FROM decoupled.catalog_meta",
                        true, 1) != SPI_OK_SELECT || SPI_processed != 1)
            elog(ERROR, "decoupled.catalog_meta must hold exactly one row");
        bool isnull = false;
        obs->schema_version = DatumGetInt32(
            SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        obs->catalog_version = DatumGetInt64(
            SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

        // An unsupported schema is left alone: not even the launch specs are
        // read, since their shape is exactly what may have changed.
        if (decoupled::is_supported_schema_version(obs->schema_version) &&
            obs->catalog_version != known_version) {
            if (SPI_execute(kLaunchSpecQuery, true, 0) != SPI_OK_SELECT)
                elog(ERROR, "could not read launch specifications");
            MemoryContext old = MemoryContextSwitchTo(into);
            obs->nspecs = static_cast<int>(SPI_processed);
            obs->specs = static_cast<RawSpec*>(palloc0(sizeof(RawSpec) * (obs->nspecs + 1)));
            for (int i = 0; i < obs->nspecs; ++i) {
                RawSpec& spec = obs->specs[i];
                spec.kind = copy_value(SPI_tuptable, i, 1);
                spec.name = copy_value(SPI_tuptable, i, 2);
                spec.cluster = copy_value(SPI_tuptable, i, 3);
                spec.deployment = copy_value(SPI_tuptable, i, 4);
                char* id = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5);
                spec.replica_id = id ? strtoll(id, nullptr, 10) : 0;
            }
            MemoryContextSwitchTo(old);
            obs->specs_read = true;
        }
        if (prune_history && decoupled::is_supported_schema_version(obs->schema_version)) {
            // Retention is maintenance of derived rows, not a catalog change.
            char sql[160];
            snprintf(sql, sizeof sql,
                     "SELECT decoupled.prune_status_history(make_interval(secs => %d))",
                     decoupled::guc_status_history_retention);
            if (SPI_execute(sql, false, 1) != SPI_OK_SELECT)
                elog(ERROR, "could not prune the status history");
        }
        SPI_finish();
    }

    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
}

// Runs one maintenance statement in a transaction of its own, so that its
// failure never fails the catalog pass.  Runs inside pg_call.
void run_maintenance(const char* sql) {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, sql);
    SPI_connect();
    if (SPI_execute(sql, false, 1) != SPI_OK_SELECT) elog(ERROR, "could not run %s", sql);
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
}

// What runs without the extension too: the capture worker, which then
// drops the slot a DROP EXTENSION left behind.
std::vector<LaunchSpec> extensionless_specs() {
    LaunchSpec capture;
    capture.kind = WorkerKind::Capture;
    capture.name = "capture";
    return {capture};
}

std::vector<LaunchSpec> desired_specs(const Observation& obs) {
    std::vector<LaunchSpec> specs = extensionless_specs();
    // With an external relay, pg_decoupled_relayd runs outside the server.
    if (decoupled::guc_relay == decoupled::kRelayInProcess) {
        LaunchSpec relay;
        relay.kind = WorkerKind::Relay;
        relay.name = "relay";
        specs.push_back(relay);
    }
    for (int i = 0; i < obs.nspecs; ++i) {
        const RawSpec& raw = obs.specs[i];
        LaunchSpec spec;
        spec.kind = strcmp(raw.kind, "replica") == 0 ? WorkerKind::Replica : WorkerKind::Adapterd;
        spec.name = raw.name ? raw.name : "";
        spec.cluster = raw.cluster ? raw.cluster : "";
        spec.deployment = raw.deployment ? raw.deployment : "";
        spec.replica_id = raw.replica_id;
        specs.push_back(std::move(spec));
    }
    return specs;
}

void copy_text(char* dst, size_t size, const std::string& src) { strlcpy(dst, src.c_str(), size); }

int64 now_ms() { return GetCurrentTimestamp() / 1000; }

// A worker that has not claimed its slot this long after registration
// failed to start.
constexpr int64 kStartTimeoutMs = 10'000;

// Publishes what the controller observed of the catalog.
void publish(ControllerState state, const Observation& obs) {
    SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->lock, LW_EXCLUSIVE);
    s->state = state;
    s->observed_schema_version = obs.schema_version;
    s->observed_catalog_version = obs.catalog_version;
    s->observed_at = GetCurrentTimestamp();
    s->publications++;
    LWLockRelease(s->lock);
    ConditionVariableBroadcast(&s->observed_cv);
}

LaunchSpec spec_of(const decoupled::SpecSlot& slot) {
    LaunchSpec spec;
    spec.kind = strcmp(slot.kind, "replica") == 0    ? WorkerKind::Replica
                : strcmp(slot.kind, "adapterd") == 0 ? WorkerKind::Adapterd
                : strcmp(slot.kind, "capture") == 0  ? WorkerKind::Capture
                                                     : WorkerKind::Relay;
    spec.name = slot.name;
    spec.cluster = slot.cluster;
    spec.deployment = slot.deployment;
    spec.replica_id = slot.replica_id;
    return spec;
}

void fill_slot(decoupled::SpecSlot& slot, const LaunchSpec& spec, int64 now) {
    slot.in_use = true;
    slot.generation++;
    slot.pid = 0;
    slot.failures = 0;
    slot.started_ms = 0;
    slot.next_start_ms = now;
    slot.no_process_reported = false;
    slot.state = decoupled::SlotState::Pending;
    copy_text(slot.kind, sizeof(slot.kind), decoupled::worker_kind_name(spec.kind));
    copy_text(slot.name, sizeof(slot.name), spec.name);
    copy_text(slot.cluster, sizeof(slot.cluster), spec.cluster);
    copy_text(slot.deployment, sizeof(slot.deployment), spec.deployment);
    slot.replica_id = spec.replica_id;
    // adapterd's fields are under holds_lock (taken after `lock`, which the
    // caller holds): a reused slot forgets its previous adapterd.
    SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    slot.incarnation = 0;
    slot.pub_started = slot.pub_committed = 0;
    slot.publish_requested = false;
    LWLockRelease(s->holds_lock);
}

bool register_worker(int index, const decoupled::SpecSlot& slot) {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    bool adapterd = strcmp(slot.kind, "adapterd") == 0;
    bool capture = strcmp(slot.kind, "capture") == 0;
    bool relay = strcmp(slot.kind, "relay") == 0;
    const char* function = adapterd ? "decoupled_adapterd_main"
                           : capture ? "decoupled_capture_main"
                           : relay   ? "decoupled_relay_main"
                                     : "decoupled_replica_main";
    if (relay) {
        snprintf(worker.bgw_name, BGW_MAXLEN, "pg_decoupled relay");
        snprintf(worker.bgw_type, BGW_MAXLEN, "pg_decoupled relay");
        worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    } else if (capture) {
        snprintf(worker.bgw_name, BGW_MAXLEN, "pg_decoupled capture");
        snprintf(worker.bgw_type, BGW_MAXLEN, "pg_decoupled capture");
        worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    } else if (adapterd) {
        snprintf(worker.bgw_name, BGW_MAXLEN, "pg_decoupled adapterd %s (%s)", slot.name,
                 slot.deployment);
        snprintf(worker.bgw_type, BGW_MAXLEN, "pg_decoupled adapterd");
        worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    } else {
        snprintf(worker.bgw_name, BGW_MAXLEN, "pg_decoupled replica %s.%s (%s)", slot.cluster,
                 slot.name, slot.deployment);
        snprintf(worker.bgw_type, BGW_MAXLEN, "pg_decoupled replica");
        // The engine talks to the server over libpq: no database connection
        // of its own.
        worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
    }
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the controller restarts, with backoff
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_decoupled");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
    worker.bgw_main_arg = Int32GetDatum(index);
    memcpy(worker.bgw_extra, &slot.generation, sizeof(slot.generation));
    worker.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    return RegisterDynamicBackgroundWorker(&worker, &handle);
}

// Brings the running processes in line with `desired`: starts what is
// missing, restarts what exited (with backoff), stops what is no longer
// declared, and leaves running ones alone — including those a previous
// controller started.  Returns the ms until the next scheduled start.
int64 supervise(const std::vector<LaunchSpec>& desired) {
    using decoupled::SlotState;
    SharedState* s = decoupled::shared_state();
    int64 now = now_ms();
    int64 next_due = decoupled::guc_poll_interval;
    std::vector<int> to_start;

    LWLockAcquire(s->lock, LW_EXCLUSIVE);
    for (int i = 0; i < s->nspecs; ++i) s->specs[i].wanted = false;
    s->specs_truncated = false;
    int left_out = 0;
    for (const LaunchSpec& spec : desired) {
        std::string key = spec.key();
        int found = -1, free_slot = -1;
        for (int i = 0; i < decoupled::guc_max_workers && found < 0; ++i) {
            if (s->specs[i].in_use) {
                if (spec_of(s->specs[i]).key() == key) found = i;
            } else if (free_slot < 0) {
                free_slot = i;
            }
        }
        if (found < 0) {
            if (free_slot < 0) {
                s->specs_truncated = true;
                if (left_out < decoupled::kLeftOutShown) {
                    decoupled::LeftOutSpec& out = s->left_out[left_out];
                    copy_text(out.kind, sizeof(out.kind), decoupled::worker_kind_name(spec.kind));
                    copy_text(out.name, sizeof(out.name), spec.name);
                    copy_text(out.cluster, sizeof(out.cluster), spec.cluster);
                    copy_text(out.deployment, sizeof(out.deployment), spec.deployment);
                    out.replica_id = spec.replica_id;
                }
                ++left_out;
                continue;
            }
            found = free_slot;
            fill_slot(s->specs[found], spec, now);
            s->nspecs = std::max(s->nspecs, found + 1);
        }
        s->specs[found].wanted = true;
    }
    s->specs_left_out = left_out;
    for (int i = 0; i < s->nspecs; ++i) {
        decoupled::SpecSlot& slot = s->specs[i];
        if (!slot.in_use) continue;
        if (!slot.wanted) {
            if (slot.pid != 0) {
                kill(slot.pid, SIGTERM);
                slot.state = SlotState::Stopping;
            } else {
                slot.in_use = false;
            }
            continue;
        }
        if (slot.state == SlotState::Planned) continue;
        // Declared again while it was being stopped, and it has stopped.
        if (slot.state == SlotState::Stopping && slot.pid == 0) slot.state = SlotState::Pending;
        if (slot.pid != 0) {
            slot.state = SlotState::Running;
            continue;
        }
        bool exited = slot.state == SlotState::Running ||
                      (slot.state == SlotState::Starting && now - slot.started_ms > kStartTimeoutMs);
        if (exited) {
            decoupled::Backoff backoff({}, slot.failures);
            slot.next_start_ms = backoff.on_failure(slot.started_ms, now);
            slot.failures = backoff.failures();
            slot.state = SlotState::Backoff;
        }
        if (slot.state == SlotState::Pending || slot.state == SlotState::Backoff ||
            slot.state == SlotState::NoProcess) {
            if (now >= slot.next_start_ms) {
                slot.state = SlotState::Starting;
                slot.started_ms = now;
                to_start.push_back(i);
            } else {
                next_due = std::min(next_due, slot.next_start_ms - now);
            }
        }
    }
    LWLockRelease(s->lock);

    // Said once each time the number left out changes, not at every pass.
    static int reported_left_out = 0;
    if (left_out != reported_left_out) {
        if (left_out > 0)
            ereport(WARNING,
                    (errmsg("pg_decoupled controller left %d declared processes unstarted: all "
                            "%d slots of decoupled.max_workers are in use",
                            left_out, decoupled::guc_max_workers),
                     errdetail("decoupled.supervised lists them with action \"no slot\"."),
                     errhint("Raise decoupled.max_workers (needs a restart), or declare fewer "
                             "replicas and adapters.")));
        reported_left_out = left_out;
    }

    for (int i : to_start) {
        if (register_worker(i, s->specs[i])) {
            s->specs[i].no_process_reported = false;
            continue;
        }
        // Said once until it starts (decoupled.supervised shows it meanwhile).
        if (!s->specs[i].no_process_reported)
            ereport(WARNING, (errmsg("pg_decoupled controller could not start %s %s",
                                     s->specs[i].kind, s->specs[i].name),
                              errdetail("The postmaster has no background worker slot left; "
                                        "decoupled.supervised shows \"no worker process\" "
                                        "while it retries every second."),
                              errhint("Raise max_worker_processes (needs a restart).")));
        LWLockAcquire(s->lock, LW_EXCLUSIVE);
        s->specs[i].state = SlotState::NoProcess;
        s->specs[i].no_process_reported = true;
        s->specs[i].next_start_ms = now + 1000;
        LWLockRelease(s->lock);
    }
    return std::max<int64>(next_due, 1);
}

void detach_from_shmem(int, Datum) {
    SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->lock, LW_EXCLUSIVE);
    if (s->controller_pid == MyProcPid) {
        s->controller_pid = 0;
        s->controller_latch = nullptr;
        s->state = ControllerState::NotRunning;
    }
    LWLockRelease(s->lock);
    ConditionVariableBroadcast(&s->observed_cv);
}

void attach_to_shmem() {
    SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->lock, LW_EXCLUSIVE);
    s->controller_pid = MyProcPid;
    s->controller_latch = MyLatch;
    s->state = ControllerState::WaitingForExtension;
    LWLockRelease(s->lock);
    on_shmem_exit(detach_from_shmem, 0);
}

class Controller {
  public:
    explicit Controller(MemoryContext context) : context_(context) {}

    // One pass: read the catalog, publish what changed.  Returns how long to
    // sleep before the next pass unless woken.
    long step() {
        MemoryContextReset(context_);
        Observation obs;
        int64 started = now_ms();
        try {
            // A failing prune must not fail every pass: try once a minute.
            bool prune = started - last_prune_ >= kPruneEveryMs;
            if (prune) last_prune_ = started;
            decoupled::pg_call([&] { read_catalog(&obs, known_version_, prune, context_); });
        } catch (const decoupled::PgError& e) {
            return on_failure(e, started);
        }
        backoff_.reset();

        ControllerState state;
        if (obs.restoring) {
            // Nothing runs on a half-loaded catalog; the restore's end is a
            // catalog change, read afresh.
            state = ControllerState::WaitingForRestore;
            note_state(state, obs);
            known_version_ = 0;
            desired_ = extensionless_specs();
        } else if (!obs.extension_present) {
            state = ControllerState::WaitingForExtension;
            note_state(state, obs);
            known_version_ = 0;
            desired_ = extensionless_specs();
        } else if (auto problem = decoupled::schema_version_problem(obs.schema_version)) {
            state = ControllerState::RefusingCatalog;
            if (note_state(state, obs))
                ereport(WARNING,
                        (errmsg("pg_decoupled controller refuses the catalog: %s",
                                problem->c_str()),
                         errdetail("The catalog is left unchanged and nothing is supervised."),
                         errhint("Run the pg_decoupled build that matches this catalog.")));
            known_version_ = 0;
            desired_.clear();
        } else {
            state = ControllerState::Following;
            note_state(state, obs);
            if (obs.specs_read) {
                desired_ = desired_specs(obs);
                ereport(LOG, (errmsg("pg_decoupled controller follows catalog version " INT64_FORMAT
                                     ": %zu processes declared",
                                     obs.catalog_version, desired_.size())));
                known_version_ = obs.catalog_version;
            }
        }
        // Supervise before publishing: whoever waits for this version then
        // finds decoupled.supervised up to date.  It runs every pass, so
        // exits are noticed between versions.
        int64 next_start = supervise(desired_);
        publish(state, obs);
        int64 next_tick = decoupled::guc_poll_interval;
        int64 next_round = decoupled::guc_poll_interval;
        if (state == ControllerState::Following) {
            // Registered tables: table-fed work never waits for an adapter
            // (C5.2), and their compaction continues without one (C5.5).
            next_tick = maintain_if_due(decoupled::guc_table_tick_interval, &last_tick_,
                                        "SELECT decoupled.tick_tables()");
            next_round = maintain_if_due(decoupled::guc_bound_publication_interval, &last_round_,
                                         "SELECT decoupled._maintain_tables()");
            // Schema 1 (an extension not yet updated) keeps no configuration.
            if (reconcile_config_ && obs.schema_version >= kConfigurationSchema)
                reconcile_config_ = !run_once(
                    "SELECT decoupled.reconcile_configuration(NULL, 'pg_decoupled controller (pid ' "
                    "|| pg_backend_pid() || ')')");
        }
        return std::min<int64>({next_start, next_tick, next_round,
                                (int64)decoupled::guc_poll_interval});
    }

    // The settings were read again (SIGHUP): record them at the next pass.
    void config_reloaded() { reconcile_config_ = true; }

  private:
    static constexpr int32 kConfigurationSchema = 2;

    // Runs `sql` once; returns whether it succeeded (a failure is logged).
    bool run_once(const char* sql) {
        try {
            decoupled::pg_call([sql] { run_maintenance(sql); });
            return true;
        } catch (const decoupled::PgError& e) {
            AbortCurrentTransaction();
            pgstat_report_activity(STATE_IDLE, nullptr);
            ereport(LOG, (errmsg("pg_decoupled controller: %s failed: %s", sql, e.what())));
            FreeErrorData(e.data());
            return false;
        }
    }

    // Runs `sql` when `interval` ms (0: never) passed since `*last`;
    // returns the ms until it is due again.
    int64 maintain_if_due(int interval, int64* last, const char* sql) {
        if (interval <= 0) return decoupled::guc_poll_interval;
        int64 now = now_ms();
        if (now - *last < interval) return *last + interval - now;
        *last = now;
        run_once(sql);
        return interval;
    }

    // Returns true when the state differs from the previous pass.
    bool note_state(ControllerState state, const Observation&) {
        bool changed = state != last_state_;
        if (changed && state == ControllerState::WaitingForExtension)
            ereport(LOG, (errmsg("pg_decoupled controller waits for CREATE EXTENSION "
                                 "pg_decoupled in database \"%s\"",
                                 decoupled::guc_database)));
        if (changed && state == ControllerState::WaitingForRestore)
            ereport(LOG, (errmsg("pg_decoupled controller waits while pg_restore loads the "
                                 "catalog")));
        last_state_ = state;
        return changed;
    }

    long on_failure(const decoupled::PgError& e, int64 started) {
        AbortCurrentTransaction();
        pgstat_report_activity(STATE_IDLE, nullptr);
        // A DROP EXTENSION that commits mid-read is routine, not a failure.
        bool vanished = false;
        try {
            decoupled::pg_call([&] {
                StartTransactionCommand();
                vanished = !OidIsValid(get_extension_oid("pg_decoupled", true));
                CommitTransactionCommand();
            });
        } catch (const decoupled::PgError&) {
            AbortCurrentTransaction();
        }
        ereport(vanished ? DEBUG1 : LOG,
                (errmsg("pg_decoupled controller could not read the catalog: %s", e.what())));
        FreeErrorData(e.data());
        last_state_ = ControllerState::Failing;
        known_version_ = 0;
        Observation none;
        none.extension_present = !vanished;
        publish(ControllerState::Failing, none);
        // Keep supervising what was last declared: exited replicas restart
        // even while the catalog cannot be read.
        if (vanished) desired_ = extensionless_specs();
        int64 next_start = supervise(desired_);
        int64 now = now_ms();
        return static_cast<long>(
            std::max<int64>(std::min(backoff_.on_failure(started, now) - now, next_start), 1));
    }

    MemoryContext context_;
    decoupled::Backoff backoff_;
    std::vector<LaunchSpec> desired_;
    int64 last_prune_ = 0;
    int64 last_tick_ = 0;
    int64 last_round_ = 0;
    // At start and after each reload (C11.1).
    bool reconcile_config_ = true;
    static constexpr int64 kPruneEveryMs = 60'000;
    ControllerState last_state_ = ControllerState::NotRunning;
    int64 known_version_ = 0;
};

}  // namespace

void decoupled_controller_main(Datum) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    // A query cancel is how lock_timeout ends a wait: finalization takes a
    // dropped view's relation, which a reader may hold, and arrangements,
    // with a moment's timeout each.  Ignored, the controller waited for
    // that reader, and every table's ticks with it.  The cancel surfaces as
    // an ordinary error inside pg_call, as any SQL error does; between
    // passes there is nothing to cancel (below).
    pqsignal(SIGINT, StatementCancelHandler);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(decoupled::guc_database, nullptr, 0);
    // Its own settings, over the database's defaults (search_path first).
    decoupled::pin_worker_settings();
    pgstat_report_appname("pg_decoupled controller");
    // Its ticks never wait for a table's storage (write_locks.hpp).
    decoupled::ticks_never_wait = true;
    attach_to_shmem();

    MemoryContext context = AllocSetContextCreate(TopMemoryContext, "pg_decoupled controller",
                                                  ALLOCSET_DEFAULT_SIZES);
    Controller controller(context);
    for (;;) {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
            controller.config_reloaded();
        }
        long sleep_ms = decoupled::guc_poll_interval;
        try {
            sleep_ms = controller.step();
        } catch (const std::exception& e) {
            // Out of memory in C++ code: nothing crossed into PostgreSQL;
            // drop any lock held and try again on the next pass.
            LWLockReleaseAll();
            ereport(LOG, (errmsg("pg_decoupled controller pass failed: %s", e.what())));
        }
        if (ShutdownRequestPending) break;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        QueryCancelPending = false;  // a cancel between passes cancels nothing
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending) break;
    }
    // Exit code 1: the postmaster restarts us unless the server is stopping.
    proc_exit(1);
}
