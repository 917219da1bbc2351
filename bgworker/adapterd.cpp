// adapterd: the live process of one adapter (brief C4, C7, C9.1), a dynamic
// background worker started by the controller for one supervised slot.
//
// It registers a new incarnation of its adapter (retiring the older ones),
// then every second runs one round in one transaction: heartbeat, reclaim
// of retired predecessors and of ended sessions, and — every
// decoupled.hold_publication_interval — the publication of its sessions'
// hold weakening.  A failed round is logged and retried: only being fenced
// (its incarnation retired) ends it, because a restart is a new incarnation
// and releases what the old one protected.  SIGTERM ends it and leaves its
// incarnation and holds in place: silence never expires a hold.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include <cstring>

#include "../extension/gucs.hpp"
#include "../extension/pg_guard.hpp"
#include "../extension/shmem.hpp"
#include "../extension/write_locks.hpp"

extern "C" {
PGDLLEXPORT void decoupled_adapterd_main(Datum);
}

namespace {

constexpr long kRoundMs = 1000;
// A round that found bound rows locked tries again after this long.
constexpr long kBusyRetryMs = 50;

int my_slot = -1;
char adapter[NAMEDATALEN];
char deployment[NAMEDATALEN];

int64 now_ms() { return GetCurrentTimestamp() / 1000; }

// Runs one statement returning at most one bigint, in a transaction of its
// own.  Raises PostgreSQL errors: call it through pg_call.
int64 run(const char* sql, int nargs, Oid* types, Datum* values) {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, sql);
    SPI_connect();
    if (SPI_execute_with_args(sql, nargs, types, values, nullptr, false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not run %s", sql);
    int64 result = 0;
    if (SPI_processed > 0) {
        bool isnull;
        Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        if (!isnull && SPI_tuptable->tupdesc->attrs[0].atttypid == INT8OID) result = DatumGetInt64(d);
    }
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
    return result;
}

int64 start_incarnation() {
    Oid types[3] = {TEXTOID, TEXTOID, INT4OID};
    Datum values[3] = {CStringGetTextDatum(adapter), CStringGetTextDatum(deployment),
                       Int32GetDatum(MyProcPid)};
    return run("SELECT decoupled._adapter_start($1, $2, $3)", 3, types, values);
}

Datum int8_array(const int64* values, int n) {
    Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    for (int i = 0; i < n; ++i) elems[i] = Int64GetDatum(values[i]);
    return PointerGetDatum(construct_array(elems, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

// One round: heartbeat and reclaim; durable protection for the holds its
// sessions wait on; when `publish`, the weakening of the others.  The
// sessions' holds are snapshotted before the transaction and confirmed only
// after it committed.
void adapter_round(int64 incarnation, bool publish) {
    // The snapshot lives across the transaction: in a context of its own,
    // emptied every round.
    static MemoryContext round_context = nullptr;
    if (!round_context)
        round_context = AllocSetContextCreate(TopMemoryContext, "pg_decoupled adapterd round",
                                              ALLOCSET_DEFAULT_SIZES);
    MemoryContextReset(round_context);
    MemoryContext caller = MemoryContextSwitchTo(round_context);
    int n = 0;
    decoupled::HeldCollection* held = decoupled::snapshot_holds(my_slot, incarnation, publish, &n);
    int64* lids = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
    int64* mins = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
    int64* pending = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
    for (int i = 0; i < n; ++i) {
        lids[i] = held[i].lifetime_id;
        mins[i] = held[i].min_frontier;
        pending[i] = held[i].min_pending;
    }
    MemoryContextSwitchTo(caller);

    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "pg_decoupled adapterd round");
    SPI_connect();
    Oid round_types[1] = {INT8OID};
    Datum round_values[1] = {Int64GetDatum(incarnation)};
    if (SPI_execute_with_args("SELECT decoupled._adapter_round($1) IS NULL", 1, round_types,
                              round_values, nullptr, false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not run the adapterd round");
    Oid types[5] = {INT8OID, INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID, BOOLOID};
    Datum values[5] = {Int64GetDatum(incarnation), int8_array(lids, n), int8_array(mins, n),
                       int8_array(pending, n), BoolGetDatum(publish)};
    if (SPI_execute_with_args("SELECT decoupled._adapter_apply($1, $2, $3, $4, $5)", 5, types,
                              values, nullptr, false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not apply the sessions' holds");
    // (collection, bound) pairs: waiting holds below the bound are refused.
    int nfailed = 0;
    int64* failed = nullptr;
    bool isnull;
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (!isnull) {
        ArrayType* arr = DatumGetArrayTypeP(d);
        Datum* elems;
        bool* nulls;
        deconstruct_array(arr, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls,
                          &nfailed);
        failed = static_cast<int64*>(MemoryContextAlloc(round_context,
                                                        sizeof(int64) * (nfailed + 1)));
        for (int i = 0; i < nfailed; ++i) failed[i] = DatumGetInt64(elems[i]);
        nfailed /= 2;  // (collection, bound) pairs
    }
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
    decoupled::confirm_holds(my_slot, incarnation, publish, held, n, failed, nfailed);
}

// Fenced (ZD001: its incarnation was retired) or beaten to the start by
// another adapterd (ZD003): the protocol's codes, never message text.
bool is_fenced(const decoupled::PgError& e) {
    return e.data()->sqlerrcode == MAKE_SQLSTATE('Z', 'D', '0', '0', '1') ||
           e.data()->sqlerrcode == MAKE_SQLSTATE('Z', 'D', '0', '0', '3');
}

}  // namespace

void decoupled_adapterd_main(Datum arg) {
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    // A query cancel is how lock_timeout ends a wait (a round takes bound
    // rows that a transaction creating views may hold with a moment's
    // timeout, then tries again: ZD004); it surfaces inside pg_call as any
    // SQL error does.  One that arrives between rounds is dropped there.
    pqsignal(SIGINT, StatementCancelHandler);
    BackgroundWorkerUnblockSignals();

    decoupled::SpecSlot spec;
    int slot = decoupled::claim_own_slot(arg, &spec);
    my_slot = slot;
    strlcpy(adapter, spec.name, sizeof(adapter));
    strlcpy(deployment, spec.deployment, sizeof(deployment));

    BackgroundWorkerInitializeConnection(decoupled::guc_database, nullptr, 0);
    decoupled::pin_worker_settings();
    SetConfigOption("application_name", "pg_decoupled adapterd", PGC_USERSET, PGC_S_SESSION);
    pgstat_report_appname("pg_decoupled adapterd");

    int64 incarnation = 0;
    int64 last_publication = now_ms();
    int64 next_round = 0;
    int failures = 0;
    int64 busy_until = 0;  // a round found bound rows locked: not before this
    int64 busy_since = 0;  // rounds have found them locked since (0: they did not)
    bool busy_logged = false;
    while (!ShutdownRequestPending) {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        // Its latch is set by every catalog change and upper advance: rounds
        // keep their own pace, unless a session waits for protection.
        // (After a failure, the backoff holds even then.)
        bool urgent = incarnation != 0 && failures == 0 && now_ms() >= busy_until &&
                      (decoupled::holds_pending(incarnation) ||
                       decoupled::publication_requested(my_slot));
        int64 left = next_round - now_ms();
        if (left > 0 && !urgent) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left,
                            PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
            continue;
        }
        long sleep_ms = kRoundMs;
        QueryCancelPending = false;  // one that came between rounds cancels nothing
        try {
            if (incarnation == 0) {
                incarnation = decoupled::pg_call([] { return start_incarnation(); });
                ereport(LOG, (errmsg("pg_decoupled adapterd \"%s\" started incarnation " INT64_FORMAT,
                                     adapter, incarnation)));
            }
            bool publish = now_ms() - last_publication >= decoupled::guc_hold_publication_interval ||
                           decoupled::publication_requested(my_slot);
            decoupled::pg_call([&] { adapter_round(incarnation, publish); });
            if (publish) last_publication = now_ms();
            failures = 0;
            busy_since = 0;
        } catch (const decoupled::PgError& e) {
            AbortCurrentTransaction();
            pgstat_report_activity(STATE_IDLE, nullptr);
            if (incarnation != 0 && is_fenced(e)) {
                ereport(LOG, (errmsg("pg_decoupled adapterd \"%s\" stops: %s", adapter, e.what()),
                              errdetail("Its incarnation was retired.")));
                proc_exit(1);
            }
            // Bound rows another transaction holds (one creating views, say):
            // tried again shortly, without counting as a failure.
            if (incarnation != 0 && e.data()->sqlerrcode == DECOUPLED_ERRCODE_BUSY) {
                if (busy_since == 0) {
                    busy_since = now_ms();
                    busy_logged = false;
                } else if (!busy_logged && now_ms() - busy_since >= 10000) {
                    busy_logged = true;
                    ereport(LOG, (errmsg("pg_decoupled adapterd \"%s\" has waited 10 s: %s", adapter,
                                         e.what()),
                                  errdetail("Holds wait for their protection until the "
                                            "transaction holding those rows ends.")));
                }
                FreeErrorData(e.data());
                busy_until = now_ms() + kBusyRetryMs;
                next_round = busy_until;
                continue;
            }
            ereport(LOG, (errmsg("pg_decoupled adapterd \"%s\": %s", adapter, e.what())));
            FreeErrorData(e.data());
            // Not yet started (stopped, undeclared): the controller decides.
            if (incarnation == 0) proc_exit(1);
            sleep_ms = std::min<long>(kRoundMs << std::min(++failures, 5), 30000);
        }
        next_round = now_ms() + sleep_ms;
    }
    proc_exit(0);
}
