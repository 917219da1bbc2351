// SQL views onto the controller's shared-memory observations, and the wait
// function tests and scripts use instead of sleeping.
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "pgstat.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <algorithm>
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_controller_status);
PG_FUNCTION_INFO_V1(decoupled_supervision);
PG_FUNCTION_INFO_V1(decoupled_wait_for_controller);
}

using decoupled::SharedState;

// One row: pid, state, schema_version, catalog_version, observed_at.
Datum decoupled_controller_status(PG_FUNCTION_ARGS) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "return type must be a row type");
    desc = BlessTupleDesc(desc);

    SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->lock, LW_SHARED);
    pid_t pid = s->controller_pid;
    decoupled::ControllerState state = s->state;
    int32 schema_version = s->observed_schema_version;
    int64 catalog_version = s->observed_catalog_version;
    TimestampTz observed_at = s->observed_at;
    LWLockRelease(s->lock);

    // A missing observation is NULL, never an invented zero.
    Datum values[5];
    bool nulls[5] = {pid == 0, false, schema_version == 0, catalog_version == 0,
                     observed_at == 0};
    values[0] = Int32GetDatum(pid);
    values[1] = CStringGetTextDatum(decoupled::controller_state_name(state));
    values[2] = Int32GetDatum(schema_version);
    values[3] = Int64GetDatum(catalog_version);
    values[4] = TimestampTzGetDatum(observed_at);
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

// kind, name, cluster, deployment, replica_id, action, pid, failures — one
// row per supervised process.
Datum decoupled_supervision(PG_FUNCTION_ARGS) {
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);

    SharedState* s = decoupled::shared_state();
    // Copy under the lock, build tuples (which may spill) after it.
    LWLockAcquire(s->lock, LW_SHARED);
    int nspecs = s->nspecs;
    auto* slots = static_cast<decoupled::SpecSlot*>(palloc(sizeof(decoupled::SpecSlot) * (nspecs + 1)));
    memcpy(slots, s->specs, sizeof(decoupled::SpecSlot) * nspecs);
    int left_out = std::min(s->specs_left_out, decoupled::kLeftOutShown);
    decoupled::LeftOutSpec shown[decoupled::kLeftOutShown];
    memcpy(shown, s->left_out, sizeof(decoupled::LeftOutSpec) * left_out);
    LWLockRelease(s->lock);
    for (int i = 0; i < nspecs; ++i) {
        const decoupled::SpecSlot& spec = slots[i];
        if (!spec.in_use) continue;
        Datum values[8];
        bool nulls[8] = {false, false, spec.cluster[0] == '\0', spec.deployment[0] == '\0',
                         spec.replica_id == 0, false, spec.pid == 0, false};
        values[0] = CStringGetTextDatum(spec.kind);
        values[1] = CStringGetTextDatum(spec.name);
        values[2] = CStringGetTextDatum(spec.cluster);
        values[3] = CStringGetTextDatum(spec.deployment);
        values[4] = Int64GetDatum(spec.replica_id);
        values[5] = CStringGetTextDatum(decoupled::slot_state_name(spec.state));
        values[6] = Int32GetDatum(spec.pid);
        values[7] = Int32GetDatum(spec.failures);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    for (int i = 0; i < left_out; ++i) {
        const decoupled::LeftOutSpec& spec = shown[i];
        Datum values[8];
        bool nulls[8] = {false, false, spec.cluster[0] == '\0', spec.deployment[0] == '\0',
                         spec.replica_id == 0, false, true, false};
        values[0] = CStringGetTextDatum(spec.kind);
        values[1] = CStringGetTextDatum(spec.name);
        values[2] = CStringGetTextDatum(spec.cluster);
        values[3] = CStringGetTextDatum(spec.deployment);
        values[4] = Int64GetDatum(spec.replica_id);
        values[5] = CStringGetTextDatum("no slot");
        values[6] = Int32GetDatum(0);
        values[7] = Int32GetDatum(0);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}

// Wait until the controller has observed catalog version `version` (or a
// later one); returns the version it observed.
Datum decoupled_wait_for_controller(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("%s must not be null", PG_ARGISNULL(0) ? "catalog_version" : "timeout")));
    int64 version = PG_GETARG_INT64(0);
    Interval* timeout = PG_GETARG_INTERVAL_P(1);
    int64 timeout_ms = (timeout->time + (timeout->day * (int64)USECS_PER_DAY) +
                        (timeout->month * (int64)DAYS_PER_MONTH * USECS_PER_DAY)) / 1000;
    if (timeout_ms < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("timeout must not be negative")));

    SharedState* s = decoupled::shared_state();
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
    int64 observed = 0;
    ConditionVariablePrepareToSleep(&s->observed_cv);
    for (;;) {
        LWLockAcquire(s->lock, LW_SHARED);
        observed = s->observed_catalog_version;
        bool following = s->state == decoupled::ControllerState::Following;
        LWLockRelease(s->lock);
        if (following && observed >= version) break;

        long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (remaining <= 0) {
            ConditionVariableCancelSleep();
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("timed out waiting for the controller to observe catalog version "
                            INT64_FORMAT, version),
                     observed ? errdetail("It last observed catalog version " INT64_FORMAT ".",
                                          observed)
                              : errdetail("It has observed no catalog yet."),
                     errhint("Check decoupled.controller and the server log.")));
        }
        ConditionVariableTimedSleep(&s->observed_cv, remaining, PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    PG_RETURN_INT64(observed);
}
