// A replica step's hard deadline, and what the owner's code must not leave
// behind in the replica's session (docs/architecture.md, "Security model").
//
// Why.  A replica's session runs its views' steps one after another, each
// view's query as its owner, under decoupled.step_timeout as the session's
// statement_timeout.  That timeout is a query cancel, and PL/pgSQL can catch
// a cancel: a view whose function loops in `EXCEPTION WHEN query_canceled`
// never ended its step, and every view, sink and source of the cluster
// waited behind it (a review found it).  The owner's code could also take a
// session-level advisory lock there, which outlived the step in the
// replica's long-lived session, held under the replica's name.
//
// What.  decoupled._bound_step(), called where a replica's step may run an
// owner's code (replica_maintain, replica_maintain_many, replica_prewarm),
// arms a timer for twice decoupled.step_timeout.  If it fires, the session
// ends as pg_terminate_backend ends one: a FATAL error at the next
// interrupt check, which no exception handler catches; the transaction
// rolls back and its locks go.  The replica engine connects again and
// stalls that object for ten times the timeout (bgworker/replica_engine.cpp).
// At the end of the transaction the timer is disarmed and every
// session-level advisory lock is released: the extension takes none in a
// replica's session, so any there is the owner's code's.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/timeout.h"
}

#include <climits>
#include <csignal>

#include "gucs.hpp"
#include "step_deadline.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_bound_step);
}

namespace {

TimeoutId deadline_id = MAX_TIMEOUTS;  // registered at first use
bool armed = false;
volatile sig_atomic_t fired = false;

// In the timer's signal handler: only flags and the latch.
void deadline_reached() {
    fired = true;
    ProcDiePending = true;
    InterruptPending = true;
    SetLatch(MyLatch);
}

// The session ends (before_shmem_exit): say why, once, in the server log.
void explain_exit(int, Datum) {
    if (fired)
        ereport(LOG, (errmsg("pg_decoupled ended a replica's session: its step ran for twice "
                             "decoupled.step_timeout (%d ms) without stopping when cancelled",
                             decoupled::guc_step_timeout)));
}

void at_transaction_end(XactEvent event, void*) {
    if (!armed) return;
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            disable_timeout(deadline_id, false);
            armed = false;
            LockReleaseSession(USER_LOCKMETHOD);
            break;
        default:
            break;
    }
}

}  // namespace

bool decoupled::in_replica_step() { return armed; }

// decoupled._bound_step() -> void
Datum decoupled_bound_step(PG_FUNCTION_ARGS) {
    (void)fcinfo;
    if (deadline_id == MAX_TIMEOUTS) {
        deadline_id = RegisterTimeout(USER_TIMEOUT, deadline_reached);
        RegisterXactCallback(at_transaction_end, nullptr);
        before_shmem_exit(explain_exit, 0);
    }
    armed = true;  // the advisory locks go at the transaction's end, timeout or not
    int timeout = decoupled::guc_step_timeout;
    if (timeout > 0)
        enable_timeout_after(deadline_id, timeout > INT_MAX / 2 ? INT_MAX : 2 * timeout);
    else
        disable_timeout(deadline_id, false);
    PG_RETURN_VOID();
}
