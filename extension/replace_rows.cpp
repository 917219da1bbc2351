// A view step's replacement of rows in C (brief C13.2, C14.3).
//
// Why.  A step of a view that replaces rows (a sums or groups view's
// touched groups, or a recomputation) stages the rows the view now has
// there and calls _replace_staged, which ran one statement
// (append_core.cpp, kReplaceListed/kReplaceAll): it printed every staged
// row and every replaced row of cur as text, consolidated both by that
// text with sorts and a full join, and then wrote.  For a step after 1,000
// changes of a 1,000,000-row table in 1,000 groups (~630 groups replaced)
// that statement took 16 ms of a 22 ms step.
//
// What.  The staged rows (the stage's tuplestore) and the replaced rows
// (fetched at their ctids, or a scan of cur) go into one array sorted by
// the hash of their binary image, then the image, staged rows before old
// ones and old ones oldest first; per equal row, the staged multiplicity
// less the old copies is inserted (with the staged row's mz_hash) or
// retracted (the oldest copies, if older than the step).  How rows compare
// and are written: history_writes.hpp.  The step after 1,000 changes above:
// 5 ms in _replace_staged.
//
// In place.  A retraction and an insertion equal in every column an index
// of cur covers (a group's old and new row, by the view's key) are then
// paired, in the order of those columns, and written as one update of the
// old row (replace_current): with no time index on cur (a view's, until
// something reads its changes) and room on the page, a HOT update — no
// index entry, no new page, no dead entry for later lookups to walk.  The
// same step: 2.9-3.6 ms (docs/performance.md).
//
// C-style C++: nothing with a destructor lives in a frame that an ereport
// may leave.
extern "C" {
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

#include <cstring>

#include "history_writes.hpp"
#include "replace_rows.hpp"
#include "scratch.hpp"

namespace {

using decoupled::kHistoryPrefix;
constexpr int kStagePrefix = 4;  // the stage: mz_ts, mz_diff, mz_key, mz_hash, then the columns

// A staged row or a replaced one.
struct Entry {
    Datum* values;  // copied by copy_images
    bool* nulls;
    uint32 hash;
    bool staged;
    int64 diff;      // staged: its multiplicity
    int32 mz_hash;   // staged: its row text's hash
    ItemPointerData tid;  // replaced: where it is in cur
    int64 ts;             // replaced: its mz_ts and mz_rowid
    int64 rowid;
    HeapTuple tuple;      // replaced: cur's tuple
    uint32 key_hash;      // of its indexed columns, when pairing (below)
};

const decoupled::ImageColumns* sorting = nullptr;

// Equal rows adjacent: staged ones first, then the old copies, oldest
// first (the order in which they retract).
int entry_cmp(const void* x, const void* y) {
    const Entry* a = *(const Entry* const*)x;
    const Entry* b = *(const Entry* const*)y;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    int c = decoupled::image_cmp(*sorting, a->values, a->nulls, b->values, b->nulls);
    if (c != 0) return c;
    if (a->staged != b->staged) return a->staged ? -1 : 1;
    if (a->staged) return 0;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return a->rowid < b->rowid ? -1 : (a->rowid > b->rowid ? 1 : 0);
}

bool stage_laid_out(TupleDesc desc) {
    static const char* const names[] = {"mz_ts", "mz_diff", "mz_key", "mz_hash"};
    static const Oid types[] = {INT8OID, INT8OID, TEXTOID, INT4OID};
    return decoupled::starts_with_columns(desc, names, types, kStagePrefix);
}

// A growing array of entries.
struct Entries {
    Entry** items;
    int n;
    int capacity;
};

Entry* add_entry(Entries* e) {
    if (e->n == e->capacity) {
        e->capacity *= 2;
        e->items = (Entry**)repalloc_huge(e->items, sizeof(Entry*) * e->capacity);
    }
    Entry* entry = (Entry*)palloc0(sizeof(Entry));
    e->items[e->n++] = entry;
    return entry;
}

// A slot at the end of `e` for an entry that lives elsewhere.
Entry** add_slot(Entries* e) {
    if (e->n == e->capacity) {
        e->capacity *= 2;
        e->items = (Entry**)repalloc_huge(e->items, sizeof(Entry*) * e->capacity);
    }
    return &e->items[e->n++];
}

// Insertions and retractions in the order of their indexed columns.
struct Pairing {
    const decoupled::ImageColumns* cols;
    const int* columns;
    int n;
};
Pairing pairing;

uint32 key_hash(const Entry* e) {
    return decoupled::columns_hash(*pairing.cols, pairing.columns, pairing.n, e->values, e->nulls);
}

int key_cmp(const void* x, const void* y) {
    const Entry* a = *(const Entry* const*)x;
    const Entry* b = *(const Entry* const*)y;
    if (a->key_hash != b->key_hash) return a->key_hash < b->key_hash ? -1 : 1;
    return decoupled::columns_cmp(*pairing.cols, pairing.columns, pairing.n, a->values, a->nulls,
                                  b->values, b->nulls);
}

// The staged rows; counts those not at ts.
void add_staged(Entries* e, Oid stage, TupleDesc desc, const decoupled::ImageColumns& cols,
                int64 ts, int64* outside) {
    Tuplestorestate* store = decoupled::scratch_rows(stage);
    // Read pointer 0 is this reader's: scans of the exposed scratch read
    // through pointers of their own.
    tuplestore_select_read_pointer(store, 0);
    tuplestore_rescan(store);
    TupleTableSlot* slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
    while (tuplestore_gettupleslot(store, true, false, slot)) {
        slot_getallattrs(slot);
        if (DatumGetInt64(slot->tts_values[0]) != ts) (*outside)++;
        Entry* entry = add_entry(e);
        entry->staged = true;
        entry->diff = DatumGetInt64(slot->tts_values[1]);
        entry->mz_hash = DatumGetInt32(slot->tts_values[3]);
        decoupled::copy_images(cols, slot->tts_values + kStagePrefix,
                               slot->tts_isnull + kStagePrefix, &entry->values, &entry->nulls);
        entry->hash = decoupled::image_hash(cols, entry->values, entry->nulls);
    }
    ExecDropSingleTupleTableSlot(slot);
}

void add_old(Entries* e, TupleTableSlot* slot, const decoupled::ImageColumns& cols) {
    slot_getallattrs(slot);
    Entry* entry = add_entry(e);
    entry->staged = false;
    entry->tid = slot->tts_tid;
    entry->rowid = DatumGetInt64(slot->tts_values[0]);
    entry->ts = DatumGetInt64(slot->tts_values[1]);
    entry->tuple = ExecCopySlotHeapTuple(slot);
    decoupled::copy_images(cols, slot->tts_values + kHistoryPrefix,
                           slot->tts_isnull + kHistoryPrefix, &entry->values, &entry->nulls);
    entry->hash = decoupled::image_hash(cols, entry->values, entry->nulls);
}

// The rows of cur that `tids` name (as a TID scan would: those visible),
// or every row.
void add_replaced(Entries* e, Relation cur, Datum tids, Snapshot snap,
                  const decoupled::ImageColumns& cols) {
    TupleTableSlot* slot = table_slot_create(cur, nullptr);
    if (tids == (Datum)0) {
        TableScanDesc scan = table_beginscan(cur, snap, 0, nullptr);
        while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
            add_old(e, slot, cols);
            CHECK_FOR_INTERRUPTS();
        }
        table_endscan(scan);
    } else {
        Datum* items = nullptr;
        int n = 0;
        deconstruct_array(DatumGetArrayTypeP(tids), TIDOID, sizeof(ItemPointerData), false,
                          TYPALIGN_SHORT, &items, nullptr, &n);
        for (int i = 0; i < n; i++)
            if (table_tuple_fetch_row_version(cur, (ItemPointer)DatumGetPointer(items[i]), snap,
                                              slot))
                add_old(e, slot, cols);
    }
    ExecDropSingleTupleTableSlot(slot);
}

}  // namespace

namespace decoupled {

void replace_rows(const Replacement& r, int64* wanted, int64* moved, int64* outside) {
    *wanted = *moved = *outside = 0;
    Relation cur = table_open(r.cur, RowExclusiveLock);
    Relation dead = table_open(r.dead, RowExclusiveLock);
    Relation stage = relation_open(r.stage, AccessShareLock);
    TupleDesc stage_desc = RelationGetDescr(stage);
    if (!stage_laid_out(stage_desc) ||
        !history_laid_out(cur, dead, stage_desc, kStagePrefix, r.ncols))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the storage of \"%s\" is not laid out as the extension made it",
                               r.name),
                        errdetail("Its relations \"%s\", \"%s\" and \"%s\" were changed.",
                                  RelationGetRelationName(cur), RelationGetRelationName(dead),
                                  RelationGetRelationName(stage))));
    MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "decoupled replace rows",
                                                  ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(context);
    ImageColumns cols = image_columns(RelationGetDescr(cur), kHistoryPrefix, r.ncols);

    // Reads as the statement did: a snapshot of now that sees this
    // transaction's earlier writes.
    CommandCounterIncrement();
    PushActiveSnapshot(GetTransactionSnapshot());
    UpdateActiveSnapshotCommandId();
    Snapshot snap = GetActiveSnapshot();

    Entries e{(Entry**)palloc(sizeof(Entry*) * 1024), 0, 1024};
    add_staged(&e, r.stage, stage_desc, cols, r.ts, outside);
    add_replaced(&e, cur, r.tids, snap, cols);
    sorting = &cols;
    qsort(e.items, e.n, sizeof(Entry*), entry_cmp);

    // What the step writes: rows to insert (an entry, once per copy) and
    // old rows to retract.
    Entries inserts{(Entry**)palloc(sizeof(Entry*) * 1024), 0, 1024};
    Entries retracts{(Entry**)palloc(sizeof(Entry*) * 1024), 0, 1024};
    for (int i = 0; i < e.n;) {
        // One row: its staged entries, then its old copies.
        int64 net = 0;
        int j = i;
        for (; j < e.n && e.items[j]->staged && entry_cmp(&e.items[i], &e.items[j]) == 0; j++)
            net += e.items[j]->diff;
        int first_old = j;
        for (; j < e.n && image_cmp(cols, e.items[i]->values, e.items[i]->nulls,
                                    e.items[j]->values, e.items[j]->nulls) == 0 &&
               e.items[i]->hash == e.items[j]->hash;
             j++) {
        }
        int64 d = net - (j - first_old);
        for (int64 k = 0; k < d; k++) *add_slot(&inserts) = e.items[i];
        if (d < 0) {
            *wanted += -d;
            for (int k = first_old; k < first_old - d && k < j; k++)
                if (e.items[k]->ts < r.ts) *add_slot(&retracts) = e.items[k];
        }
        i = j;
        CHECK_FOR_INTERRUPTS();
    }
    sorting = nullptr;

    HistoryWriter w;
    begin_history_writes(&w, cur, dead, r.ncols, snap);
    // A retraction and an insertion equal in every indexed column (a
    // group's old and new row, by the view's key) are one update in place.
    int* in_place = nullptr;
    int nin_place = 0;
    if (inserts.n > 0 && retracts.n > 0 &&
        in_place_columns(cur, r.ncols, &in_place, &nin_place)) {
        pairing = {&cols, in_place, nin_place};
        for (int k = 0; k < inserts.n; k++) inserts.items[k]->key_hash = key_hash(inserts.items[k]);
        for (int k = 0; k < retracts.n; k++)
            retracts.items[k]->key_hash = key_hash(retracts.items[k]);
        qsort(inserts.items, inserts.n, sizeof(Entry*), key_cmp);
        qsort(retracts.items, retracts.n, sizeof(Entry*), key_cmp);
        for (int a = 0, b = 0; a < inserts.n && b < retracts.n;) {
            int c = key_cmp(&inserts.items[a], &retracts.items[b]);
            if (c < 0) {
                a++;
            } else if (c > 0) {
                b++;
            } else {
                Entry* in = inserts.items[a];
                Entry* out = retracts.items[b];
                replace_current(&w, &out->tid, out->tuple, in->values, in->nulls, r.ts,
                                in->mz_hash);
                inserts.items[a++] = nullptr;
                retracts.items[b++] = nullptr;
            }
            CHECK_FOR_INTERRUPTS();
        }
    }
    for (int k = 0; k < retracts.n; k++)
        if (retracts.items[k])
            retract_current(&w, &retracts.items[k]->tid, retracts.items[k]->tuple, r.ts);
    for (int k = 0; k < inserts.n; k++)
        if (inserts.items[k])
            insert_current(&w, inserts.items[k]->values, inserts.items[k]->nulls, r.ts,
                           inserts.items[k]->mz_hash);
    *moved = retracts.n;
    end_history_writes(&w);

    PopActiveSnapshot();
    CommandCounterIncrement();
    MemoryContextSwitchTo(caller);
    MemoryContextDelete(context);
    relation_close(stage, NoLock);
    table_close(dead, NoLock);
    table_close(cur, NoLock);
}

}  // namespace decoupled
