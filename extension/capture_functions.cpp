// WAL capture's SQL-callable side: the worker's shared state, the switch
// flag that lets adoption and release touch capture triggers, relcache
// invalidation for the output plugin's cache, and the wait a session's
// tick_tables() makes for capture to take in what committed before it.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
}

#include "capture.hpp"
#include "gucs.hpp"
#include "shmem.hpp"
#include "storage_stats.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_capture_state);
PG_FUNCTION_INFO_V1(decoupled_capture_error);
PG_FUNCTION_INFO_V1(decoupled_capture_switching);
PG_FUNCTION_INFO_V1(decoupled_set_capture_switching);
PG_FUNCTION_INFO_V1(decoupled_invalidate_relation);
PG_FUNCTION_INFO_V1(decoupled_wait_captured);
}

namespace {

bool switching = false;
bool callback_registered = false;

void reset_switching(XactEvent event, void*) {
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
        event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
        event == XACT_EVENT_PREPARE)
        switching = false;
}

}  // namespace

namespace decoupled {

bool capture_from_wal_wanted() {
    return guc_capture == kCaptureWal && wal_level >= WAL_LEVEL_LOGICAL;
}

bool catalog_has_capture_resyncs() {
    Oid ns = get_namespace_oid("decoupled", true);
    return OidIsValid(ns) && OidIsValid(get_relname_relid("capture_resyncs", ns));
}

uint64_t captured_through() {
    SharedState* s = shared_state();
    SpinLockAcquire(&s->capture_mutex);
    XLogRecPtr through = s->capture.captured_through;
    SpinLockRelease(&s->capture_mutex);
    return through;
}

bool catalog_has_unlogged_pending() {
    Oid ns = get_namespace_oid("decoupled", true);
    return OidIsValid(ns) && OidIsValid(get_relname_relid("capture_unlogged_intact", ns));
}

uint64_t inserted_position() {
    XLogRecPtr target = GetXLogInsertRecPtr();
    // Right after a page header nothing is inserted on the page yet: what
    // was inserted ends at the page's start (and a flush request past it
    // could never be satisfied).
    uint32 offset = (uint32)(target % XLOG_BLCKSZ);
    if (offset == SizeOfXLogShortPHD || offset == SizeOfXLogLongPHD) target -= offset;
    return target;
}

uint64_t flush_inserted() {
    XLogRecPtr target = inserted_position();
    XLogFlush(target);
    return target;
}

bool wait_for_capture(int timeout_ms) {
    // Not the setting: tables still captured from the WAL while a switch to
    // triggers releases them are captured by the worker until then, and a
    // tick must wait for them as for any (the callers ask only when some
    // table is captured from the WAL).
    if (wal_level < WAL_LEVEL_LOGICAL || RecoveryInProgress()) return true;
    SharedState* s = shared_state();
    // Every commit before this point must be captured.
    XLogRecPtr target = flush_inserted();
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
    Latch* woken = nullptr;
    bool reached = false;
    ConditionVariablePrepareToSleep(&s->capture_cv);
    for (;;) {
        SpinLockAcquire(&s->capture_mutex);
        reached = s->capture.captured_through >= target;
        Latch* latch = s->capture.pid != 0 ? s->capture.latch : nullptr;
        SpinLockRelease(&s->capture_mutex);
        if (reached) break;
        // Ask the worker (a restarted one too) for a pass now.
        if (latch != nullptr && latch != woken) {
            SetLatch(latch);
            woken = latch;
        }
        long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (left <= 0) break;
        ConditionVariableTimedSleep(&s->capture_cv, Min(left, 100L), PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    return reached;
}

}  // namespace decoupled

namespace {

// The capture worker's error as the current user may read it (docs/
// architecture.md, "Security model", rule 7): one that came from a table's
// changes may quote its rows, so its text goes only to roles that may
// SELECT the table (one dropped since: to nobody); others read that there
// is one.  Both functions that return it are PUBLIC: decoupled.capture
// reads them as its reader.
char* visible_capture_error(const char* text, int64 lifetime_id) {
    if (lifetime_id == 0) return pstrdup(text);
    Oid relid = decoupled::collection_relation(lifetime_id);
    if (OidIsValid(relid) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid))) {
        if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK)
            return pstrdup(text);
        return psprintf("an error (shown to roles that may read \"%s\")", get_rel_name(relid));
    }
    return pstrdup("an error (shown to roles that may read \"a dropped table\")");
}

}  // namespace

// decoupled._capture_error(OUT last_error text, OUT lifetime_id bigint):
// the capture worker's last error and the registered table whose changes
// it came from (NULL: not from one table), read together — the view shows
// the text only to those who may read that table.
Datum decoupled_capture_error(PG_FUNCTION_ARGS) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "return type must be a row type");
    decoupled::SharedState* s = decoupled::shared_state();
    char text[sizeof(s->capture.last_error)];
    SpinLockAcquire(&s->capture_mutex);
    bool failed = s->capture.error_at != 0;
    int64 id = s->capture.error_lifetime_id;
    memcpy(text, s->capture.last_error, sizeof(text));
    SpinLockRelease(&s->capture_mutex);
    text[sizeof(text) - 1] = '\0';
    Datum values[2] = {failed ? CStringGetTextDatum(visible_capture_error(text, id)) : 0,
                       Int64GetDatum(id)};
    bool nulls[2] = {!failed, !failed || id == 0};
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

Datum decoupled_capture_state(PG_FUNCTION_ARGS) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "return type must be a row type");
    decoupled::SharedState* s = decoupled::shared_state();
    decoupled::CaptureShared c;
    SpinLockAcquire(&s->capture_mutex);
    c = s->capture;
    SpinLockRelease(&s->capture_mutex);
    Datum values[5];
    bool nulls[5] = {c.pid == 0, c.captured_through == 0, c.progress_at == 0, c.error_at == 0,
                     c.error_at == 0};
    values[0] = Int32GetDatum(c.pid);
    values[1] = LSNGetDatum(c.captured_through);
    values[2] = TimestampTzGetDatum(c.progress_at);
    c.last_error[sizeof(c.last_error) - 1] = '\0';
    values[3] = c.error_at == 0 ? 0
                                : CStringGetTextDatum(
                                      visible_capture_error(c.last_error, c.error_lifetime_id));
    values[4] = TimestampTzGetDatum(c.error_at);
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

Datum decoupled_capture_switching(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(switching); }

Datum decoupled_set_capture_switching(PG_FUNCTION_ARGS) {
    if (!callback_registered) {
        RegisterXactCallback(reset_switching, nullptr);
        callback_registered = true;
    }
    switching = PG_GETARG_BOOL(0);
    PG_RETURN_VOID();
}

Datum decoupled_invalidate_relation(PG_FUNCTION_ARGS) {
    CacheInvalidateRelcacheByRelid(PG_GETARG_OID(0));
    PG_RETURN_VOID();
}

Datum decoupled_wait_captured(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(decoupled::wait_for_capture(Max(PG_GETARG_INT32(0), 0)));
}
