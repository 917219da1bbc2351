// decoupled.subscribe(collection, as_of, up_to) (brief C7.2, C7.3).
//
// A value-per-call set-returning function: it emits the collection's state
// at as_of, then every change in time order, batch by batch — each batch is
// the changes between the last frontier emitted and the collection's
// current upper — and, with no up_to, waits for the upper to move on
// (woken at commit by the condition variable appends broadcast).  Called in
// the select list (ProjectSet) it streams row by row into a cursor; called
// in FROM, PostgreSQL would collect every row before returning the first,
// so an unbounded subscription is refused there.
//
// Its hold (a session hold flagged as a subscription) starts at as_of and
// follows the frontier; it is released when the function finishes or its
// cursor is closed.  A dropped collection ends it with 42704.
//
// No C++ objects live here: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

// From libpq/libpq.h, which needs GSSAPI's headers where PostgreSQL was
// built with them.
bool pq_check_connection(void);
}

#include "caller.hpp"
#include "catalog_access.hpp"
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_subscribe);
}

namespace {

constexpr long kWaitMs = 1000;  // re-check even without a wake-up

// A client that went away while its subscription waited for changes: its
// rows have no reader, and its hold keeps the collection from compaction.
// PostgreSQL notices only when it next writes to the socket (or with
// client_connection_check_interval, off by default), which a subscription
// with nothing to send never does; so the wait asks the socket and ends the
// session as PostgreSQL's own check does (FATAL "connection to client
// lost": the holds go with the session).
void end_if_client_gone() {
    if (whereToSendOutput != DestRemote || MyProcPort == nullptr) return;
    if (pq_check_connection()) return;
    ClientConnectionLost = true;
    InterruptPending = true;
    CHECK_FOR_INTERRUPTS();
}

struct Subscription {
    int64 lifetime_id;
    int64 as_of;
    int64 up_to;      // -1: unbounded
    int64 next;       // every change at a time < next has been fetched
    bool snapshot_pending;
    int64 hold_id;
    // The current batch, in a context of its own emptied for the next one.
    MemoryContext batch_context;
    int nrows;
    int pos;
    int64* ts;
    int64* diff;
    Datum* data;
};

void release_hold(void* arg) {
    auto* sub = static_cast<Subscription*>(arg);
    if (sub->hold_id > 0) decoupled::forget_hold(sub->hold_id);
    sub->hold_id = 0;
}

int64 fetch_int8(const char* sql, int nargs, Oid* types, Datum* values) {
    if (SPI_execute_with_args(sql, nargs, types, values, nullptr, false, 1) != SPI_OK_SELECT ||
        SPI_processed != 1)
        elog(ERROR, "could not run %s", sql);
    bool isnull;
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    return isnull ? -1 : DatumGetInt64(d);
}

// The helpers (75_subscriptions.sql) read the private catalog and storage
// with the extension's rights, and nobody else may call them: they run as
// the catalog reader, and check the caller recorded here, as the caller,
// in a frame of its own (extension/caller.cpp).
using Step = void (*)(Subscription*, void*);

void as_extension(Step step, Subscription* sub, void* arg) {
    auto* frame = static_cast<decoupled::CallerFrame*>(palloc0(sizeof(decoupled::CallerFrame)));
    decoupled::push_caller_frame(frame);
    PG_TRY();
    {
        decoupled::SavedUser saved = decoupled::become_catalog_reader();
        step(sub, arg);
        decoupled::restore_user(saved);
    }
    PG_FINALLY();
    {
        decoupled::pop_caller_frame(frame);
    }
    PG_END_TRY();
}

struct StartRequest {
    Datum collection;
    bool as_of_null, up_to_null;
    int64 as_of, up_to;
};

void start_step(Subscription* sub, void* arg) {
    auto* r = static_cast<StartRequest*>(arg);
    Oid types[3] = {TEXTOID, INT8OID, INT8OID};
    Datum values[3] = {r->collection, Int64GetDatum(r->as_of), Int64GetDatum(r->up_to)};
    char nulls[3] = {' ', r->as_of_null ? 'n' : ' ', r->up_to_null ? 'n' : ' '};
    SPI_connect();
    if (SPI_execute_with_args("SELECT lifetime_id, start_at, hold_id "
                              "  FROM decoupled._subscribe_start($1, $2, $3)",
                              3, types, values, nulls, false, 1) != SPI_OK_SELECT ||
        SPI_processed != 1)
        elog(ERROR, "could not start the subscription");
    bool isnull;
    HeapTuple row = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    sub->lifetime_id = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
    sub->as_of = DatumGetInt64(SPI_getbinval(row, desc, 2, &isnull));
    sub->hold_id = DatumGetInt64(SPI_getbinval(row, desc, 3, &isnull));
    SPI_finish();
}

void start(Subscription* sub, Datum collection, bool as_of_null, int64 as_of, bool up_to_null,
           int64 up_to) {
    StartRequest request{collection, as_of_null, up_to_null, as_of, up_to};
    as_extension(start_step, sub, &request);
    sub->up_to = up_to_null ? -1 : up_to;
    sub->next = sub->as_of + 1;  // the snapshot covers everything up to as_of
    sub->snapshot_pending = true;
}

struct FetchRequest {
    MemoryContext context;
    bool got;
};

void fetch_step(Subscription* sub, void* arg) {
    auto* r = static_cast<FetchRequest*>(arg);
    MemoryContext context = r->context;
    r->got = false;
    SPI_connect();
    Oid id_type[1] = {INT8OID};
    Datum id_value[1] = {Int64GetDatum(sub->lifetime_id)};
    int64 upper = fetch_int8("SELECT decoupled._subscribe_upper($1)", 1, id_type, id_value);
    int64 target = sub->up_to >= 0 ? Min(upper, sub->up_to) : upper;
    // The snapshot needs as_of readable; later changes need the upper past them.
    bool ready = sub->snapshot_pending ? target > sub->as_of : target > sub->next;
    sub->nrows = sub->pos = 0;
    if (!ready) {
        SPI_finish();
        return;
    }
    Oid types[4] = {INT8OID, INT8OID, INT8OID, INT8OID};
    Datum values[4] = {Int64GetDatum(sub->lifetime_id), Int64GetDatum(sub->next),
                       Int64GetDatum(target), Int64GetDatum(sub->as_of)};
    char nulls[4] = {' ', ' ', ' ', sub->snapshot_pending ? ' ' : 'n'};
    if (SPI_execute_with_args("SELECT mz_timestamp, mz_diff, data "
                              "  FROM decoupled._subscribe_batch($1, $2, $3, $4)",
                              4, types, values, nulls, false, 0) != SPI_OK_SELECT)
        elog(ERROR, "could not read the subscription's changes");
    int n = static_cast<int>(SPI_processed);
    if (!sub->batch_context)
        sub->batch_context = AllocSetContextCreate(context, "pg_decoupled subscription batch",
                                                   ALLOCSET_DEFAULT_SIZES);
    MemoryContextReset(sub->batch_context);
    MemoryContext old = MemoryContextSwitchTo(sub->batch_context);
    sub->ts = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
    sub->diff = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
    sub->data = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    for (int i = 0; i < n; ++i) {
        bool isnull;
        HeapTuple row = SPI_tuptable->vals[i];
        TupleDesc desc = SPI_tuptable->tupdesc;
        sub->ts[i] = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
        sub->diff[i] = DatumGetInt64(SPI_getbinval(row, desc, 2, &isnull));
        sub->data[i] = datumCopy(SPI_getbinval(row, desc, 3, &isnull), false, -1);
    }
    MemoryContextSwitchTo(old);
    sub->nrows = n;
    sub->snapshot_pending = false;
    sub->next = target;
    SPI_finish();
    r->got = true;
}

// Fetches the next batch into `sub` (in `context`); returns false when there
// is nothing new yet.
bool fetch(Subscription* sub, MemoryContext context) {
    FetchRequest request{context, false};
    as_extension(fetch_step, sub, &request);
    // Changes before `next` are emitted: history through next - 1 may go.
    if (request.got) decoupled::advance_hold(sub->hold_id, Max(sub->as_of, sub->next - 1));
    return request.got;
}

bool finished(const Subscription* sub) {
    return !sub->snapshot_pending && sub->up_to >= 0 && sub->next >= sub->up_to;
}

}  // namespace

Datum decoupled_subscribe(PG_FUNCTION_ARGS) {
    FuncCallContext* funcctx;
    if (SRF_IS_FIRSTCALL()) {
        if (PG_ARGISNULL(0))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("collection name must not be null")));
        auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
        if (PG_ARGISNULL(2) && rsinfo && (rsinfo->allowedModes & SFRM_Materialize_Preferred))
            ereport(ERROR,
                    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                     errmsg("an unbounded subscription streams only from the select list"),
                     errdetail("In FROM, every row would be collected before the first is "
                               "returned, and an unbounded subscription never ends."),
                     errhint("DECLARE c CURSOR FOR SELECT (s).* FROM (SELECT "
                             "decoupled.subscribe(...) AS s) x; then FETCH from c. Or give "
                             "up_to.")));
        // A WITH HOLD cursor is run to its end at commit: COMMIT would never
        // return (nor could it be cancelled but by ending the backend).
        if (PG_ARGISNULL(2) && ActivePortal != nullptr &&
            (ActivePortal->cursorOptions & CURSOR_OPT_HOLD))
            ereport(ERROR,
                    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                     errmsg("an unbounded subscription cannot be read from a WITH HOLD cursor"),
                     errdetail("At commit such a cursor collects every row it has left, and an "
                               "unbounded subscription never ends."),
                     errhint("Declare the cursor without WITH HOLD, or give up_to.")));
        funcctx = SRF_FIRSTCALL_INIT();
        MemoryContext old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
        TupleDesc desc;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "subscribe must return a composite type");
        funcctx->tuple_desc = BlessTupleDesc(desc);
        auto* sub = static_cast<Subscription*>(palloc0(sizeof(Subscription)));
        funcctx->user_fctx = sub;
        // The hold goes with the subscription, however it ends.
        auto* callback =
            static_cast<MemoryContextCallback*>(palloc0(sizeof(MemoryContextCallback)));
        callback->func = release_hold;
        callback->arg = sub;
        MemoryContextRegisterResetCallback(funcctx->multi_call_memory_ctx, callback);
        MemoryContextSwitchTo(old);
        start(sub, PG_GETARG_DATUM(0), PG_ARGISNULL(1), PG_ARGISNULL(1) ? 0 : PG_GETARG_INT64(1),
              PG_ARGISNULL(2), PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2));
    }
    funcctx = SRF_PERCALL_SETUP();
    auto* sub = static_cast<Subscription*>(funcctx->user_fctx);

    ConditionVariable* cv = &decoupled::shared_state()->upper_cv;
    while (sub->pos >= sub->nrows) {
        if (finished(sub)) {
            release_hold(sub);
            SRF_RETURN_DONE(funcctx);
        }
        ConditionVariablePrepareToSleep(cv);
        bool got = fetch(sub, funcctx->multi_call_memory_ctx);
        if (got || finished(sub)) {
            ConditionVariableCancelSleep();
            continue;
        }
        (void)ConditionVariableTimedSleep(cv, kWaitMs, PG_WAIT_EXTENSION);
        ConditionVariableCancelSleep();
        CHECK_FOR_INTERRUPTS();
        end_if_client_gone();
    }
    Datum values[3] = {Int64GetDatum(sub->ts[sub->pos]), Int64GetDatum(sub->diff[sub->pos]),
                       sub->data[sub->pos]};
    bool nulls[3] = {false, false, false};
    sub->pos++;
    HeapTuple tuple = heap_form_tuple(funcctx->tuple_desc, values, nulls);
    SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum(tuple));
}
