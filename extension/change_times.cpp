// decoupled._change_times(inputs bigint[], from_ts bigint, to_ts bigint,
//                         max_count integer) -> bigint[]
//
// The times in [from_ts, to_ts) at which any of `inputs` changed, ascending,
// at most `max_count`: a row inserted (cur.mz_ts, dead.valid_from) or
// retracted (dead.valid_to) then.  Every view step starts here (C5.3, C13),
// and every idle pass asks it whether a view has anything to do.
//
// Insertion and retraction times are found by skipping through the time
// indexes — one probe per distinct time, each the first visible row after
// the previous time — so a time at which 100,000 rows changed costs what a
// time with one row does.  A row retracted since from_ts that was inserted
// in the window too is found by reading the rows retracted since from_ts
// (dead has no index on valid_from: every retraction would pay for one),
// which the step then reads anyway.
//
// The probes walk the indexes themselves (index_beginscan), not a
// statement: a kept plan of the recursive statement this was chose, for
// its min(valid_to), a full scan of an arrangement's index on dead (keys,
// ..., valid_to) that its statistics, taken while dead was nearly empty,
// said was tiny — 100 to 250 ms per call after an UPDATE of 100,000 rows,
// at every view step and idle pass over the table.
//
// No C++ objects: this may longjmp.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include "storage_names.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_change_times);
}

namespace {

// The times found so far: sorted, distinct, at most `max` (the smallest).
struct Times {
    int64* values;
    int n;
    int max;
};

void add_time(Times* times, int64 t) {
    int lo = 0, hi = times->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (times->values[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < times->n && times->values[lo] == t) return;
    if (lo >= times->max) return;  // larger than the max smallest already found
    int last = Min(times->n, times->max - 1);
    memmove(&times->values[lo + 1], &times->values[lo], sizeof(int64) * (last - lo));
    times->values[lo] = t;
    if (times->n < times->max) times->n++;
}

// Whether a later time cannot enter the result any more.
bool full_below(const Times* times, int64 t) {
    return times->n == times->max && times->values[times->n - 1] <= t;
}

// A collection's storage relation, checked like the statement this replaced:
// the caller must be able to read it.
Relation open_storage(int64 id, const char* part) {
    Oid relid = decoupled::storage_relid(id, part);
    char* name = decoupled::storage_name(id, part);
    if (!OidIsValid(relid))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("collection " INT64_FORMAT " has no storage %s", id, name)));
    if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
        aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, name);
    return table_open(relid, AccessShareLock);
}

// The valid btree index of `heap` whose first key is column `first` (the
// one with the fewest keys), opened; nullptr if none.
Relation time_index(Relation heap, AttrNumber first) {
    Oid best = InvalidOid;
    int best_keys = 0;
    List* indexes = RelationGetIndexList(heap);
    ListCell* lc;
    foreach (lc, indexes) {
        Relation index = index_open(lfirst_oid(lc), AccessShareLock);
        Form_pg_index form = index->rd_index;
        // Ascending on the column, complete (no predicate) and usable by
        // this snapshot: an index made over rows updated in place (a view's
        // time index, made once something reads its changes) may miss the
        // older versions' times until every snapshot from before it is gone
        // (indcheckxmin), as the planner checks.
        bool visible = !form->indcheckxmin ||
                       TransactionIdPrecedes(HeapTupleHeaderGetXmin(index->rd_indextuple->t_data),
                                             TransactionXmin);
        bool usable = index->rd_rel->relam == BTREE_AM_OID && form->indisvalid &&
                      form->indisready && visible &&
                      heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr) &&
                      form->indnkeyatts >= 1 && form->indkey.values[0] == first &&
                      (index->rd_indoption[0] & INDOPTION_DESC) == 0;
        int keys = form->indnkeyatts;
        index_close(index, AccessShareLock);
        if (usable && (best_keys == 0 || keys < best_keys)) {
            best = lfirst_oid(lc);
            best_keys = keys;
        }
    }
    list_free(indexes);
    return OidIsValid(best) ? index_open(best, AccessShareLock) : nullptr;
}

struct Probe {
    Relation heap;
    Relation index;
    Snapshot snapshot;
    TupleTableSlot* slot;
};

// The first visible row of the index under `keys`; its column `att` in
// *value.  False if there is none.
bool first_row(const Probe& p, ScanKey keys, int nkeys, AttrNumber att, int64* value) {
    IndexScanDesc scan = index_beginscan(p.heap, p.index, p.snapshot, nkeys, 0);
    index_rescan(scan, keys, nkeys, nullptr, 0);
    bool found = index_getnext_slot(scan, ForwardScanDirection, p.slot);
    if (found) {
        bool isnull = false;
        Datum d = slot_getattr(p.slot, att, &isnull);
        found = !isnull;
        if (found) *value = DatumGetInt64(d);
    }
    index_endscan(scan);
    ExecClearTuple(p.slot);
    return found;
}

void key(ScanKey k, AttrNumber index_att, StrategyNumber strategy, int64 value) {
    RegProcedure proc = strategy == BTGreaterEqualStrategyNumber ? F_INT8GE
                        : strategy == BTGreaterStrategyNumber    ? F_INT8GT
                                                                 : F_INT8LT;
    ScanKeyInit(k, index_att, strategy, proc, Int64GetDatum(value));
}

// The distinct values of the index's first key (heap column `att`) in
// [from, to), by successive probes.
void skip_times(const Probe& p, AttrNumber att, int64 from, int64 to, Times* times) {
    int64 t = from;
    bool inclusive = true;
    for (;;) {
        ScanKeyData keys[2];
        key(&keys[0], 1, inclusive ? BTGreaterEqualStrategyNumber : BTGreaterStrategyNumber, t);
        key(&keys[1], 1, BTLessStrategyNumber, to);
        int64 found;
        if (!first_row(p, keys, 2, att, &found) || full_below(times, found)) return;
        add_time(times, found);
        t = found;
        inclusive = false;
    }
}

// The same from every row of the heap: a view whose time index is not
// made yet (its first reader's transaction has not committed, or the index
// is not usable by this snapshot yet).
void scanned_times(const Probe& p, AttrNumber att, int64 from, int64 to, Times* times) {
    TableScanDesc scan = table_beginscan(p.heap, p.snapshot, 0, nullptr);
    while (table_scan_getnextslot(scan, ForwardScanDirection, p.slot)) {
        bool isnull = false;
        Datum d = slot_getattr(p.slot, att, &isnull);
        if (!isnull && DatumGetInt64(d) >= from && DatumGetInt64(d) < to)
            add_time(times, DatumGetInt64(d));
        CHECK_FOR_INTERRUPTS();
    }
    table_endscan(scan);
    ExecClearTuple(p.slot);
}

// Insertion times in [from, to) of rows retracted since `from`, from
// those rows.
void inserted_and_retracted(const Probe& p, AttrNumber valid_from, int64 from, int64 to,
                                    Times* times) {
    ScanKeyData keys[1];
    key(&keys[0], 1, BTGreaterEqualStrategyNumber, from);
    IndexScanDesc scan = index_beginscan(p.heap, p.index, p.snapshot, 1, 0);
    index_rescan(scan, keys, 1, nullptr, 0);
    // heapam's own fetch (not next_stored_row): the walk reads many rows
    // of a page in a row, and heapam keeps that page pinned from one to
    // the next.  With next_stored_row a walk of 100,000 retracted rows
    // took twice as long (docs/performance.md).
    while (index_getnext_slot(scan, ForwardScanDirection, p.slot)) {
        bool isnull = false;
        Datum d = slot_getattr(p.slot, valid_from, &isnull);
        if (isnull) continue;
        int64 inserted = DatumGetInt64(d);
        if (inserted >= from && inserted < to) add_time(times, inserted);
    }
    index_endscan(scan);
    ExecClearTuple(p.slot);
}

AttrNumber column(Relation heap, const char* name) {
    AttrNumber att = get_attnum(RelationGetRelid(heap), name);
    if (att == InvalidAttrNumber)
        elog(ERROR, "storage %s has no column %s", RelationGetRelationName(heap), name);
    return att;
}

void times_of(int64 id, int64 from, int64 to, Snapshot snapshot, Times* times) {
    Relation cur = open_storage(id, "cur");
    Relation dead = open_storage(id, "dead");
    AttrNumber mz_ts = column(cur, "mz_ts");
    AttrNumber valid_to = column(dead, "valid_to");
    AttrNumber valid_from = column(dead, "valid_from");
    Relation cur_index = time_index(cur, mz_ts);
    Relation dead_index = time_index(dead, valid_to);
    if (dead_index == nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the storage of collection " INT64_FORMAT " has no time index", id)));

    Probe in_cur{cur, cur_index, snapshot, table_slot_create(cur, nullptr)};
    if (cur_index != nullptr)
        skip_times(in_cur, mz_ts, from, to, times);
    else
        scanned_times(in_cur, mz_ts, from, to, times);
    Probe in_dead{dead, dead_index, snapshot, table_slot_create(dead, nullptr)};
    skip_times(in_dead, valid_to, from, to, times);
    inserted_and_retracted(in_dead, valid_from, from, to, times);

    ExecDropSingleTupleTableSlot(in_cur.slot);
    ExecDropSingleTupleTableSlot(in_dead.slot);
    if (cur_index != nullptr) index_close(cur_index, AccessShareLock);
    index_close(dead_index, AccessShareLock);
    table_close(cur, AccessShareLock);
    table_close(dead, AccessShareLock);
}

}  // namespace

Datum decoupled_change_times(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 4; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "_change_times: argument %d must not be null", i + 1);
    ArrayType* inputs = PG_GETARG_ARRAYTYPE_P(0);
    int64 from = PG_GETARG_INT64(1);
    int64 to = PG_GETARG_INT64(2);
    int32 max_count = PG_GETARG_INT32(3);
    Datum* ids;
    bool* nulls;
    int n;
    deconstruct_array(inputs, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &ids, &nulls,
                      &n);
    if (n == 0 || max_count <= 0 || from >= to)
        PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));

    Times times{static_cast<int64*>(palloc(sizeof(int64) * max_count)), 0, max_count};
    Snapshot snapshot = RegisterSnapshot(ActiveSnapshotSet() ? GetActiveSnapshot()
                                                             : GetTransactionSnapshot());
    for (int i = 0; i < n; ++i) {
        if (nulls[i]) elog(ERROR, "_change_times: an input id is null");
        times_of(DatumGetInt64(ids[i]), from, to, snapshot, &times);
    }
    UnregisterSnapshot(snapshot);

    Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * Max(times.n, 1)));
    for (int i = 0; i < times.n; ++i) values[i] = Int64GetDatum(times.values[i]);
    PG_RETURN_ARRAYTYPE_P(construct_array(values, times.n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
                                          TYPALIGN_DOUBLE));
}
