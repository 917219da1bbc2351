// A registered table's tick in C (brief C14.3).
//
// Why.  The general tick (append_core.cpp, kTickProbe/kTickScan) is one SQL
// statement: it prints every captured row as text to consolidate it, sorts
// the rows by that text, and pairs each net retraction with its copy in cur
// by a join on the key (or the row hash) that prints the copy again to
// compare.  That text and those sorts were more than half of a tick of
// updates or deletes (auto_explain of a 100,000-row UPDATE's tick of a
// keyed table: 1.3 of 2.2 s).
//
// What.  One pass over pending with the tick's snapshot deletes each
// captured row it sees and keeps a copy in memory; the copies are sorted in
// the order of the index that finds a row's copies in cur — on the primary
// key's columns, or for a table without one on mz_hash, the hash of the row
// text — and then by their binary image, so that equal rows net out; each
// net retraction probes that index and moves the oldest copies with the
// same image, older than the tick, to dead; each net insertion is written
// to cur (history_writes.hpp: how rows compare and how they are written).
// A retraction by key (mz_diff 0, written by WAL capture for an old row it
// did not read) first becomes the retraction of the copy cur holds for
// the key, so that it nets with the rest: a row updated away and back
// before the tick moves nothing.
//
// Falls back to the statement (returns false before writing) when the
// storage is not laid out as _create_storage made it, has triggers or row
// security, has no plain btree index on exactly the key (or mz_hash), or
// pending is larger than maintenance_work_mem (consolidation here is in
// memory, two to three times pending's size; the statement's sorts spill
// to disk).
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/sortsupport.h"
}

#include <cstring>

#include "history_writes.hpp"
#include "index_tick.hpp"

namespace {

using decoupled::kPendingPrefix;  // pending: mz_diff, then the table's columns
using decoupled::kHistoryPrefix;

// One captured row, its values copied by copy_images.
struct Row {
    Datum* values;
    bool* nulls;
    int64 diff;
    uint32 hash;       // of its image
    int32 text_hash;   // of its text (mz_hash), for a table without a key
};

// mz_diff of a retraction by key (keyed_changes.hpp): the key's columns
// set, the others NULL; it retracts whichever copy cur holds for the key.
constexpr int64 kRetractByKey = 0;

// The index column that holds mz_hash rather than a table column (a table
// without a key finds a row's copies by the hash of its text).
constexpr int kTextHash = -1;

// A copy of a retracted row found in cur.
struct Copy {
    ItemPointerData tid;
    int64 ts;
    int64 rowid;
    HeapTuple tuple;
};

// A valid btree index on cur that finds a row's copies: its keys exactly
// the table's key columns (in any order), or mz_hash alone for a table
// without a key; without expressions or predicate; opened.
Relation probe_index(Relation cur, const bool* is_key, int ncols) {
    int nkeys = 0;
    for (int i = 0; i < ncols; i++) nkeys += is_key[i] ? 1 : 0;
    List* indexes = RelationGetIndexList(cur);
    Relation found = nullptr;
    ListCell* lc;
    foreach (lc, indexes) {
        Relation idx = index_open(lfirst_oid(lc), RowExclusiveLock);
        Form_pg_index form = idx->rd_index;
        bool ok = idx->rd_rel->relam == BTREE_AM_OID && form->indisvalid && form->indisready &&
                  form->indnkeyatts == Max(nkeys, 1) &&
                  heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, nullptr);
        if (ok && nkeys == 0) ok = form->indkey.values[0] == kHistoryPrefix;  // mz_hash
        for (int k = 0; ok && nkeys > 0 && k < nkeys; k++) {
            int col = form->indkey.values[k] - 1 - kHistoryPrefix;  // 0 is an expression
            ok = col >= 0 && col < ncols && is_key[col];
            for (int j = 0; ok && j < k; j++) ok = form->indkey.values[j] != form->indkey.values[k];
        }
        if (ok) {
            found = idx;
            break;
        }
        index_close(idx, RowExclusiveLock);
    }
    list_free(indexes);
    return found;
}

// The value of index column `col` (a table column, or kTextHash) for `row`.
Datum probe_value(const Row* row, int col, bool* isnull) {
    *isnull = col != kTextHash && row->nulls[col];
    return col == kTextHash ? Int32GetDatum(row->text_hash) : row->values[col];
}

// qsort's context: the columns of the rows being sorted and the order of
// the key index.
struct Sorting {
    const decoupled::ImageColumns* cols;
    int nkeys;
    const int* key_cols;    // the table column of each index column, or kTextHash
    SortSupport key_order;  // each index column's order
};
const Sorting* sorting = nullptr;

// The order of the probe index: rows with one key are adjacent.
int key_cmp(const Row* a, const Row* b) {
    for (int k = 0; k < sorting->nkeys; k++) {
        bool a_null = false, b_null = false;
        Datum av = probe_value(a, sorting->key_cols[k], &a_null);
        Datum bv = probe_value(b, sorting->key_cols[k], &b_null);
        int c = ApplySortComparator(av, a_null, bv, b_null, &sorting->key_order[k]);
        if (c != 0) return c;
    }
    return 0;
}

// Rows in the probe index's order, a key's retractions by key first, then
// by image: retractions probe the index, and insertions extend it, in its
// order (each probe finds the pages the one before it read), and equal
// rows are adjacent.
int row_cmp(const void* x, const void* y) {
    const Row* a = *(const Row* const*)x;
    const Row* b = *(const Row* const*)y;
    int c = key_cmp(a, b);
    if (c != 0) return c;
    bool a_by_key = a->diff == kRetractByKey, b_by_key = b->diff == kRetractByKey;
    if (a_by_key != b_by_key) return a_by_key ? -1 : 1;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    return decoupled::image_cmp(*sorting->cols, a->values, a->nulls, b->values, b->nulls);
}

int copy_cmp(const void* x, const void* y) {
    const Copy* a = (const Copy*)x;
    const Copy* b = (const Copy*)y;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return a->rowid < b->rowid ? -1 : (a->rowid > b->rowid ? 1 : 0);
}

// The captured row in `slot` (pending's), copied into the current memory
// context; with `w`, its text's hash too (a table without a key).
Row* keep_row(TupleTableSlot* slot, const decoupled::ImageColumns& cols,
              decoupled::HistoryWriter* w) {
    slot_getallattrs(slot);
    Row* r = (Row*)palloc(sizeof(Row));
    r->diff = DatumGetInt64(slot->tts_values[0]);
    decoupled::copy_images(cols, slot->tts_values + kPendingPrefix,
                           slot->tts_isnull + kPendingPrefix, &r->values, &r->nulls);
    r->hash = decoupled::image_hash(cols, r->values, r->nulls);
    r->text_hash = w ? decoupled::row_text_hash(w, r->values, r->nulls) : 0;
    return r;
}

// What probing cur and writing history need, for the tick at `ts`.
struct Net {
    decoupled::HistoryWriter* w;
    IndexScanDesc scan;  // of the probe index, with `keys` in its column order
    ScanKey keys;
    const int* key_cols;
    int nkeys;
    TupleTableSlot* slot;  // cur's
    int64 ts;
    const decoupled::ImageColumns* cols;
    bool by_text_hash;
    bool appended;  // its owner appended history the table does not hold
    int64* wanted;
    int64* moved;
};

// Probes cur through the probe index for the copies older than ts of
// `row` (with `same_image`) or of its key, oldest first; returns how many
// there are, in *out (palloc'd in the current context).
int find_copies(const Net* n, const Row* row, bool same_image, Copy** out) {
    *out = nullptr;
    for (int k = 0; k < n->nkeys; k++) {
        bool isnull = false;
        n->keys[k].sk_argument = probe_value(row, n->key_cols[k], &isnull);
        if (isnull) return 0;  // a key is never null: no copy
    }
    // The scan allocates as it goes (dead items it marks): in its own
    // context, which outlives the row's.
    IndexScanDesc scan = n->scan;
    TupleTableSlot* slot = n->slot;
    MemoryContext row_context = MemoryContextSwitchTo(GetMemoryChunkContext(scan));
    index_rescan(scan, n->keys, n->nkeys, nullptr, 0);
    MemoryContextSwitchTo(row_context);
    int ncopies = 0, capacity = 4;
    Copy* copies = (Copy*)palloc(sizeof(Copy) * capacity);
    for (;;) {
        MemoryContextSwitchTo(GetMemoryChunkContext(scan));
        bool found = decoupled::next_stored_row(scan, slot);
        MemoryContextSwitchTo(row_context);
        if (!found) break;
        slot_getallattrs(slot);
        int64 copy_ts = DatumGetInt64(slot->tts_values[1]);
        if (copy_ts >= n->ts ||
            (same_image && !decoupled::same_images(*n->cols, slot->tts_values + kHistoryPrefix,
                                                   slot->tts_isnull + kHistoryPrefix,
                                                   row->values, row->nulls)))
            continue;
        if (ncopies == capacity) {
            capacity *= 2;
            copies = (Copy*)repalloc(copies, sizeof(Copy) * capacity);
        }
        Copy* c = &copies[ncopies++];
        c->tid = slot->tts_tid;
        c->ts = copy_ts;
        c->rowid = DatumGetInt64(slot->tts_values[0]);
        c->tuple = ExecCopySlotHeapTuple(slot);
    }
    if (ncopies > 1) qsort(copies, ncopies, sizeof(Copy), copy_cmp);
    *out = copies;
    return ncopies;
}

// Moves a copy found in cur to dead.
void retract_copy(const Net* n, Copy* copy) {
    decoupled::retract_current(n->w, &copy->tid, copy->tuple, n->ts);
    *n->moved += 1;
}

// The copies cur holds for the key of a retraction by key, older than the
// tick: how many (one, as the table's key is unique at every commit,
// unless its owner appended), and the newest of them in *copy, deformed
// into `values`/`nulls` (all of cur's columns) in the current context.
int copy_of_key(const Net* n, const Row* row, Copy* copy, Datum* values, bool* nulls) {
    Copy* copies = nullptr;
    int found = find_copies(n, row, false, &copies);
    if (found == 0) return 0;
    *copy = copies[found - 1];
    heap_deform_tuple(copy->tuple, n->slot->tts_tupleDescriptor, values, nulls);
    return found;
}

// A row's net change: retractions move its oldest copies to dead,
// insertions write it to cur.  `key_free`: no retraction by key of the
// row's key in this tick (which takes the key's current row itself).
void write_net(const Net* n, const Row* row, int64 net, bool key_free = true) {
    if (net < 0) {
        *n->wanted += -net;
        Copy* copies = nullptr;
        int ncopies = find_copies(n, row, true, &copies);
        for (int i = 0; i < ncopies && i < -net; i++) retract_copy(n, &copies[i]);
        // Trigger capture retracts the old row itself, not its key.  Where
        // an append already retracted that row, the key's current row is
        // what the owner appended in its place: it goes instead, as a
        // retraction by key (WAL capture's) would take it, so that the key
        // keeps one current row, the table's.  A table without a key has
        // no such row to find.
        if (ncopies == 0 && net == -1 && key_free && n->appended && !n->by_text_hash) {
            Copy copy;
            int found = find_copies(n, row, false, &copies);
            if (found > 0) {
                copy = copies[found - 1];  // the newest
                retract_copy(n, &copy);
            }
        }
    } else if (net > 0) {
        int32 hash = n->by_text_hash ? row->text_hash
                                     : decoupled::row_text_hash(n->w, row->values, row->nulls);
        for (int64 k = 0; k < net; k++)
            decoupled::insert_current(n->w, row->values, row->nulls, n->ts, hash);
    }
}

}  // namespace

namespace decoupled {

bool tick_by_index(const IndexedTick& tick, int64* wanted, int64* moved) {
    *wanted = 0;
    *moved = 0;
    Relation pending = table_open(tick.pending, RowExclusiveLock);
    Relation cur = table_open(tick.cur, RowExclusiveLock);
    Relation dead = table_open(tick.dead, RowExclusiveLock);
    Relation index = nullptr;
    // A tick is maintenance: what it holds in memory is bounded as VACUUM's
    // and CREATE INDEX's are (64 MB by default: about a million captured
    // rows of a narrow table).
    Size bytes = (Size)RelationGetNumberOfBlocks(pending) * BLCKSZ;
    bool fits = bytes <= (Size)maintenance_work_mem * 1024;
    if (!fits)
        elog(DEBUG1, "tick of \"%s\" by statement: its captured rows take %zu kB, more than "
             "maintenance_work_mem", tick.name, bytes / 1024);
    if (fits && decoupled::pending_laid_out(pending) &&
        decoupled::history_laid_out(cur, dead, RelationGetDescr(pending), kPendingPrefix, tick.ncols))
        index = probe_index(cur, tick.is_key, tick.ncols);
    if (!index) {
        table_close(dead, NoLock);
        table_close(cur, NoLock);
        table_close(pending, NoLock);
        return false;
    }

    MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "decoupled tick",
                                                  ALLOCSET_DEFAULT_SIZES);
    MemoryContext per_row = AllocSetContextCreate(context, "decoupled tick row",
                                                  ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(context);

    decoupled::ImageColumns cols =
        decoupled::image_columns(RelationGetDescr(cur), kHistoryPrefix, tick.ncols);

    // Reads as the tick's statements did (SPI_execute_snapshot): the tick's
    // snapshot, seeing this transaction's earlier writes.
    CommandCounterIncrement();
    PushCopiedSnapshot(tick.snapshot ? tick.snapshot : GetTransactionSnapshot());
    UpdateActiveSnapshotCommandId();
    Snapshot snap = GetActiveSnapshot();
    decoupled::HistoryWriter w;
    decoupled::begin_history_writes(&w, cur, dead, tick.ncols, snap);
    bool by_text_hash = index->rd_index->indkey.values[0] == kHistoryPrefix;

    // Take the captured rows this snapshot sees.
    int nrows = 0, capacity = 1024;
    Row** rows = (Row**)palloc(sizeof(Row*) * capacity);
    TableScanDesc pscan = table_beginscan(pending, snap, 0, nullptr);
    TupleTableSlot* pslot = table_slot_create(pending, nullptr);
    while (table_scan_getnextslot(pscan, ForwardScanDirection, pslot)) {
        if (nrows == capacity) {
            capacity *= 2;
            rows = (Row**)repalloc_huge(rows, sizeof(Row*) * capacity);
        }
        Row* row = keep_row(pslot, cols, by_text_hash ? &w : nullptr);
        if (row->diff == kRetractByKey && by_text_hash)
            elog(ERROR, "captured changes of \"%s\" retract by a key it does not have",
                 tick.name);
        rows[nrows++] = row;
        simple_table_tuple_delete(pending, &pslot->tts_tid, snap);
        CHECK_FOR_INTERRUPTS();
    }
    ExecDropSingleTupleTableSlot(pslot);
    table_endscan(pscan);

    // Scan keys of the probe index, in its column order.
    Form_pg_index form = index->rd_index;
    int nkeys = form->indnkeyatts;
    ScanKey keys = (ScanKey)palloc(sizeof(ScanKeyData) * nkeys);
    int* key_cols = (int*)palloc(sizeof(int) * nkeys);
    SortSupport key_order = (SortSupport)palloc0(sizeof(SortSupportData) * nkeys);
    for (int k = 0; k < nkeys; k++) {
        Oid op = get_opfamily_member(index->rd_opfamily[k], index->rd_opcintype[k],
                                     index->rd_opcintype[k], BTEqualStrategyNumber);
        if (!OidIsValid(op))
            elog(ERROR, "no equality operator for column %d of index \"%s\"", k + 1,
                 RelationGetRelationName(index));
        ScanKeyInit(&keys[k], (AttrNumber)(k + 1), BTEqualStrategyNumber, get_opcode(op), (Datum)0);
        keys[k].sk_collation = index->rd_indcollation[k];
        key_cols[k] = by_text_hash ? kTextHash : form->indkey.values[k] - 1 - kHistoryPrefix;
        SortSupport order = &key_order[k];
        order->ssup_cxt = context;
        order->ssup_collation = index->rd_indcollation[k];
        order->ssup_nulls_first = false;
        order->ssup_attno = (AttrNumber)(k + 1);
        PrepareSortSupportFromIndexRel(index, BTLessStrategyNumber, order);
    }

    Sorting order{&cols, nkeys, key_cols, key_order};
    sorting = &order;
    IndexScanDesc iscan = index_beginscan(cur, index, snap, nkeys, 0);
    TupleTableSlot* islot = table_slot_create(cur, nullptr);

    // Consolidate: equal rows are adjacent, and a key's rows too.
    qsort(rows, nrows, sizeof(Row*), row_cmp);
    const Net probe{&w,   iscan,        keys,          key_cols, nkeys, islot, tick.ts,
                    &cols, by_text_hash, tick.appended, wanted,   moved};
    TupleDesc cur_desc = RelationGetDescr(cur);
    Datum* copy_values = (Datum*)palloc(sizeof(Datum) * cur_desc->natts);
    bool* copy_nulls = (bool*)palloc(sizeof(bool) * cur_desc->natts);
    for (int i = 0; i < nrows;) {
        MemoryContextSwitchTo(per_row);
        if (rows[i]->diff != kRetractByKey) {
            int64 net = 0;
            int j = i;
            for (; j < nrows && row_cmp(&rows[i], &rows[j]) == 0; j++) net += rows[j]->diff;
            write_net(&probe, rows[i], net);
            i = j;
        } else {
            // A retraction by key, first among its key's rows: it retracts
            // the copy cur holds for the key, which nets with the key's
            // rows of the same image (a row updated away and back moves
            // nothing) or is moved as found, without a second probe.
            int n = 1, end = i + 1;
            while (end < nrows && key_cmp(rows[i], rows[end]) == 0) {
                if (rows[end]->diff == kRetractByKey) n++;
                end++;
            }
            Copy copy;
            int found = n == 1 ? copy_of_key(&probe, rows[i], &copy, copy_values, copy_nulls) : 0;
            // Where the owner appended history the table does not hold, a
            // key may have no current row (retracted by an append) or two
            // (one appended, one captured later): the retraction takes the
            // newest, the table's, or nothing.
            bool have_copy = found == 1 || (tick.appended && found > 1);
            if (n != 1 || (!have_copy && !(tick.appended && found == 0)))
                ereport(ERROR,
                        (errcode(ERRCODE_DATA_CORRUPTED),
                         errmsg("captured changes of registered table \"%s\" retract a key "
                                "whose current row its history does not hold",
                                tick.name),
                         errdetail("%d retractions by one key, which finds other than one "
                                   "current row.", n)));
            bool paired = false;
            for (int g = i + n; g < end;) {
                int64 net = 0;
                int j = g;
                for (; j < end && row_cmp(&rows[g], &rows[j]) == 0; j++) net += rows[j]->diff;
                if (have_copy && !paired &&
                    decoupled::same_images(cols, copy_values + kHistoryPrefix,
                                                      copy_nulls + kHistoryPrefix, rows[g]->values,
                                                      rows[g]->nulls)) {
                    // The retraction by key nets with the rows of its
                    // copy's image: when they insert it again, the copy
                    // stays.  Otherwise it goes, and any further
                    // retraction of it (a capture gone wrong) is wanted,
                    // never moved: the tick fails.
                    paired = true;
                    net -= 1;
                    if (net < 0) {
                        retract_copy(&probe, &copy);
                        *wanted += -net;
                        net = 0;
                    }
                }
                write_net(&probe, rows[g], net, false);
                g = j;
            }
            if (have_copy && !paired) {
                retract_copy(&probe, &copy);
                *wanted += 1;
            }
            i = end;
        }
        MemoryContextSwitchTo(context);
        MemoryContextReset(per_row);
        CHECK_FOR_INTERRUPTS();
    }
    sorting = nullptr;
    ExecDropSingleTupleTableSlot(islot);
    index_endscan(iscan);
    decoupled::end_history_writes(&w);

    elog(DEBUG1, "tick of \"%s\" in C, by %s: %d captured rows, " INT64_FORMAT " retractions",
         tick.name, by_text_hash ? "row hash" : "key", nrows, *wanted);
    PopActiveSnapshot();
    CommandCounterIncrement();
    MemoryContextSwitchTo(caller);
    MemoryContextDelete(context);
    index_close(index, NoLock);
    table_close(dead, NoLock);
    table_close(cur, NoLock);
    table_close(pending, NoLock);
    return true;
}

}  // namespace decoupled
