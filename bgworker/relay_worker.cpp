// The in-process relay (brief C8.1): a background worker the controller
// starts (and restarts) when decoupled.relay = in_process.
//
// Inside the server, wake-ups already travel through shared memory: a
// commit that advances an upper or changes the catalog bumps an epoch and
// sets the latches of every supervised worker, this one included.  The
// relay carries them to processes outside the server: whenever an epoch
// moved since it last looked, it sends one NOTIFY on the channel
// decoupled_wakeup ("frontier <epoch>" or "catalog <epoch>"), which every
// session that ran LISTEN decoupled_wakeup receives — pg_decoupled_replicad
// does.  Many commits between two looks make one notification.  Wake-ups
// are hints: a follower that misses one polls.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include "../extension/gucs.hpp"
#include "../extension/pg_guard.hpp"
#include "../extension/shmem.hpp"

extern "C" {
PGDLLEXPORT void decoupled_relay_main(Datum);
}

namespace {

// One transaction: the notifications are delivered at its commit.
void notify(const char* topic, uint64 epoch) {
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT pg_catalog.pg_notify('decoupled_wakeup', '%s %llu')",
             topic, static_cast<unsigned long long>(epoch));
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, "relay fan-out");
    SPI_connect();
    if (SPI_execute(sql, false, 1) != SPI_OK_SELECT) elog(ERROR, "could not notify");
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
}

}  // namespace

void decoupled_relay_main(Datum arg) {
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGINT, SIG_IGN);
    BackgroundWorkerUnblockSignals();

    decoupled::SpecSlot spec;
    decoupled::claim_own_slot(arg, &spec);
    BackgroundWorkerInitializeConnection(decoupled::guc_database, nullptr, 0);
    decoupled::pin_worker_settings();
    pgstat_report_appname("pg_decoupled relay");

    decoupled::SharedState* s = decoupled::shared_state();
    // Start from what is current: followers read everything at their start.
    uint64 frontier_seen = pg_atomic_read_u64(&s->frontier_epoch);
    uint64 catalog_seen = pg_atomic_read_u64(&s->catalog_epoch);
    while (!ShutdownRequestPending) {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        uint64 catalog = pg_atomic_read_u64(&s->catalog_epoch);
        uint64 frontier = pg_atomic_read_u64(&s->frontier_epoch);
        bool sent = false;
        if (catalog != catalog_seen) {
            notify("catalog", catalog);
            catalog_seen = catalog;
            sent = true;
        }
        if (frontier != frontier_seen) {
            notify("frontier", frontier);
            frontier_seen = frontier;
            sent = true;
        }
        if (sent) {
            pg_atomic_fetch_add_u64(&s->relay_fanouts, 1);
            pg_atomic_write_u64(&s->relay_last_fanout, static_cast<uint64>(GetCurrentTimestamp()));
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        decoupled::guc_poll_interval, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
    proc_exit(0);
}
