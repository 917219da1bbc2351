// decoupled.wait_for_upper(): wait for progress without sleeping blindly.
//
// Every transaction that advances an upper calls _notify_upper_at_commit();
// its commit broadcasts a condition variable that waiters sleep on.  The
// broadcast is a hint: waiters also re-read every 100 ms, so a missed
// wake-up only costs latency.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include <algorithm>

#include "catalog_access.hpp"
#include "relay_client.hpp"
#include "shmem.hpp"
#include "wait_functions.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_notify_upper_at_commit);
PG_FUNCTION_INFO_V1(decoupled_wait_for_upper);
}

namespace {

bool notify_pending = false;
bool callback_registered = false;

void notify_on_commit(XactEvent event, void*) {
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT) {
        if (notify_pending) {
            pg_atomic_fetch_add_u64(&decoupled::shared_state()->frontier_epoch, 1);
            decoupled::relay_publish(decoupled::relay::Topic::Frontier);
            ConditionVariableBroadcast(&decoupled::shared_state()->upper_cv);
            // Replicas maintaining views and sinks react to new input
            // frontiers at once instead of at their next poll.
            decoupled::wake_workers();
        }
        notify_pending = false;
    } else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
               event == XACT_EVENT_PREPARE) {
        notify_pending = false;
    }
}

// The committed upper of `name` (a live collection or sink), read with the
// latest snapshot so that commits after this statement began are seen.
bool current_upper(text* name, int64* upper) {
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    Oid types[1] = {TEXTOID};
    Datum args[1] = {PointerGetDatum(name)};
    SPIPlanPtr plan = SPI_prepare(
        "SELECT f.upper FROM decoupled.catalog_objects o "
        "  JOIN decoupled.catalog_frontiers f USING (lifetime_id) "
        " WHERE o.name = $1 AND o.dropped_at IS NULL",
        1, types);
    if (!plan) elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
    if (SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                             false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not read the upper");
    bool found = SPI_processed == 1;
    if (found) {
        bool isnull;
        *upper = DatumGetInt64(
            SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    }
    SPI_finish();
    decoupled::restore_user(saved);
    return found;
}

// Milliseconds, saturated at a thousand years: a timeout of 300,000 years
// is "for ever", not an overflow that reads as negative (nor a deadline
// past the end of timestamps).  Negative ones stay negative.
int64 interval_ms(Interval* i) {
    constexpr int64 kForEver = INT64CONST(1000) * 365 * 24 * 3600 * 1000;
    __int128 us = static_cast<__int128>(i->time) +
                  static_cast<__int128>(i->day) * USECS_PER_DAY +
                  static_cast<__int128>(i->month) * DAYS_PER_MONTH * USECS_PER_DAY;
    __int128 ms = us / 1000;
    if (ms > kForEver) return kForEver;
    if (ms < -kForEver) return -kForEver;
    return static_cast<int64>(ms);
}

}  // namespace

void decoupled::notify_upper_at_commit() {
    if (!callback_registered) {
        RegisterXactCallback(notify_on_commit, nullptr);
        callback_registered = true;
    }
    notify_pending = true;
}

Datum decoupled_notify_upper_at_commit(PG_FUNCTION_ARGS) {
    decoupled::notify_upper_at_commit();
    PG_RETURN_VOID();
}

// decoupled.wait_for_upper(collection text, ts bigint, timeout interval)
Datum decoupled_wait_for_upper(PG_FUNCTION_ARGS) {
    static const char* const args[] = {"collection", "ts", "timeout"};
    for (int i = 0; i < 3; ++i)
        if (PG_ARGISNULL(i))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("%s must not be null", args[i])));
    text* name = PG_GETARG_TEXT_PP(0);
    int64 ts = PG_GETARG_INT64(1);
    int64 timeout_ms = interval_ms(PG_GETARG_INTERVAL_P(2));
    if (timeout_ms < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("timeout must not be negative")));

    ConditionVariable* cv = &decoupled::shared_state()->upper_cv;
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
    int64 upper = 0;
    ConditionVariablePrepareToSleep(cv);
    for (;;) {
        if (!current_upper(name, &upper)) {
            ConditionVariableCancelSleep();
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                            errmsg("collection \"%s\" does not exist", text_to_cstring(name))));
        }
        if (upper > ts) break;
        long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (remaining <= 0) {
            ConditionVariableCancelSleep();
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("timed out waiting for the upper of \"%s\" to pass the requested time",
                            text_to_cstring(name)),
                     errdetail("Waited for an upper beyond " INT64_FORMAT "; it is " INT64_FORMAT
                               ".", ts, upper),
                     errhint("decoupled.object_statuses says whether it is stalled, and why; "
                             "decoupled.cluster_replicas whether a replica runs it.")));
        }
        ConditionVariableTimedSleep(cv, std::min<long>(remaining, 100), PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    PG_RETURN_INT64(upper);
}
