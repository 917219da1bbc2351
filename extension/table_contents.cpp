// A registered table's rows into its collection's storage, read without a
// query (brief C5.2, C14.1).
//
// Why.  Registration, the TRUNCATE capture trigger and capture's taking a
// table again from its contents read the table with the extension's
// rights (a SECURITY DEFINER function, the capture worker).  A statement
// over the table is planned first, and the planner runs its owner's code:
// it folds the constant calls of the table's index expressions and
// predicates and of its extended statistics' expressions
// (RelationGetIndexExpressions, get_relation_statistics), so an IMMUTABLE
// function a role wrote into an index of its own table ran as a superuser.
// A scan of the heap plans nothing and evaluates nothing: no code of the
// table's owner runs, whatever the table carries or later gets.
//
// What.  Every row the active snapshot sees in the table itself (ONLY),
// written into the collection's pending changes with a given mz_diff, or
// into cur at a time (registration), with the storage's indexes and
// constraints maintained as an INSERT would (history_writes.hpp).  The
// table's columns are the collection's, in order (a registered table has
// no dropped column, and its columns' changes are refused: README); they
// are checked anyway, by type.
//
// Written in PostgreSQL's C style: no C++ object with a destructor lives
// in these frames.
extern "C" {
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include "history_writes.hpp"
#include "storage_names.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_take_table_rows);
}

namespace {

// The storage relation c<id>_<part>, opened for writes.
Relation open_storage(int64 id, const char* part) {
    Oid relid = decoupled::storage_relid(id, part);
    if (!OidIsValid(relid))
        elog(ERROR, "storage %s of collection " INT64_FORMAT " does not exist", part, id);
    return table_open(relid, RowExclusiveLock);
}

// Which attribute of `source` (0-based) holds each of the `ncols` columns
// `target` has from position `from`: its live columns in order, of the
// same types.
int* column_map(Relation source, Relation target, int from, int ncols) {
    TupleDesc s = RelationGetDescr(source);
    TupleDesc t = RelationGetDescr(target);
    int* map = (int*)palloc(sizeof(int) * Max(ncols, 1));
    int k = 0;
    for (int i = 0; i < s->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(s, i);
        if (a->attisdropped) continue;
        if (k == ncols || TupleDescAttr(t, from + k)->atttypid != a->atttypid)
            ereport(ERROR,
                    (errcode(ERRCODE_DATA_CORRUPTED),
                     errmsg("registered table \"%s\" no longer has its collection's columns",
                            RelationGetRelationName(source)),
                     errdetail("Column \"%s\" of type %s is not the collection's column %d.",
                               NameStr(a->attname), format_type_be(a->atttypid), k + 1)));
        map[k++] = i;
    }
    if (k != ncols)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
                        errmsg("registered table \"%s\" no longer has its collection's columns",
                               RelationGetRelationName(source)),
                        errdetail("It has %d columns, the collection %d.", k, ncols)));
    return map;
}

// The live columns of `target` from position `from`.
int columns_from(Relation target, int from) {
    TupleDesc t = RelationGetDescr(target);
    int n = 0;
    for (int i = from; i < t->natts; i++)
        if (!TupleDescAttr(t, i)->attisdropped) n++;
    return n;
}

}  // namespace

// decoupled._take_table_rows(id bigint, source oid, diff bigint, ts bigint)
//   -> bigint
// The rows of ordinary table `source` into collection `id`'s pending
// changes with mz_diff `diff` (ts null), or into its cur at `ts`; returns
// how many.
extern "C" Datum decoupled_take_table_rows(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
        elog(ERROR, "_take_table_rows: id, source and diff must not be null");
    int64 id = PG_GETARG_INT64(0);
    Oid source_oid = PG_GETARG_OID(1);
    int64 diff = PG_GETARG_INT64(2);
    bool into_cur = !PG_ARGISNULL(3);
    int64 ts = into_cur ? PG_GETARG_INT64(3) : 0;

    Relation source = table_open(source_oid, AccessShareLock);
    // A view's rows would be its owner's query; a table of another kind
    // has no heap of its own to read.
    if (source->rd_rel->relkind != RELKIND_RELATION)
        ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                        errmsg("registered table \"%s\" is no longer an ordinary table",
                               RelationGetRelationName(source))));

    MemoryContext per_row = AllocSetContextCreate(CurrentMemoryContext, "decoupled table row",
                                                  ALLOCSET_DEFAULT_SIZES);
    Snapshot snap = GetActiveSnapshot();
    decoupled::PendingWriter p;
    decoupled::HistoryWriter w;
    Relation target, dead = nullptr;
    int from, ncols;
    if (into_cur) {
        target = open_storage(id, "cur");
        dead = open_storage(id, "dead");
        from = decoupled::kHistoryPrefix;
        ncols = columns_from(target, from);
        if (!decoupled::history_laid_out(target, dead, RelationGetDescr(target), from, ncols))
            elog(ERROR, "storage of collection " INT64_FORMAT " is not laid out as made", id);
        decoupled::begin_history_writes(&w, target, dead, ncols, snap);
    } else {
        target = open_storage(id, "pending");
        from = decoupled::kPendingPrefix;
        ncols = columns_from(target, from);
        if (!decoupled::pending_laid_out(target))
            elog(ERROR, "pending changes of collection " INT64_FORMAT " are not laid out as made",
                 id);
        decoupled::begin_pending_writes(&p, target, snap);
    }
    int* map = column_map(source, target, from, ncols);

    Datum* values = (Datum*)palloc(sizeof(Datum) * Max(ncols, 1));
    bool* nulls = (bool*)palloc(sizeof(bool) * Max(ncols, 1));
    int64 rows = 0;
    TableScanDesc scan = table_beginscan(source, snap, 0, nullptr);
    TupleTableSlot* slot = table_slot_create(source, nullptr);
    while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
        MemoryContext caller = MemoryContextSwitchTo(per_row);
        slot_getallattrs(slot);
        for (int k = 0; k < ncols; k++) {
            values[k] = slot->tts_values[map[k]];
            nulls[k] = slot->tts_isnull[map[k]];
        }
        if (into_cur) {
            decoupled::insert_current(&w, values, nulls, ts,
                                      decoupled::row_text_hash(&w, values, nulls));
        } else {
            TupleTableSlot* out = decoupled::pending_slot(&p);
            out->tts_values[0] = Int64GetDatum(diff);
            out->tts_isnull[0] = false;
            memcpy(out->tts_values + 1, values, sizeof(Datum) * ncols);
            memcpy(out->tts_isnull + 1, nulls, sizeof(bool) * ncols);
            decoupled::add_buffered(p.estate, &p.rows, out);
        }
        MemoryContextSwitchTo(caller);
        MemoryContextReset(per_row);
        rows++;
        CHECK_FOR_INTERRUPTS();
    }
    ExecDropSingleTupleTableSlot(slot);
    table_endscan(scan);
    if (into_cur) {
        decoupled::end_history_writes(&w);
        table_close(dead, NoLock);
    } else {
        decoupled::end_pending_writes(&p);
    }
    table_close(target, NoLock);
    table_close(source, NoLock);
    MemoryContextDelete(per_row);
    PG_RETURN_INT64(rows);
}
