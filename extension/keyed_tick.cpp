// A keyed registered table's tick in C (brief C14.3).
//
// Why.  The general tick (append_core.cpp, kTickProbe/kTickScan) is one SQL
// statement: it prints every captured row as text to consolidate it, sorts
// the rows by that text, and pairs each net retraction with its copy in cur
// by a join on the key that prints the copy again to compare.  For a table
// with a primary key — what WAL capture registers by default — that text
// and those sorts were more than half of a tick of updates or deletes
// (auto_explain of a 100,000-row UPDATE's tick: 1.3 of 2.2 s).
//
// What.  One pass over pending with the tick's snapshot deletes each
// captured row it sees and keeps a copy in memory; the copies are
// consolidated per row by their binary image (sorted by a hash of the image,
// then the bytes); each net retraction probes cur through the index on the
// key and moves the oldest copies with the same image, older than the tick,
// to dead; each net insertion is written to cur.  Writes go through the
// executor's simple-relation routines (ExecSimpleRelationInsert: the
// relation's constraints and every index, as the logical replication apply
// worker writes), so indexes made after registration (a view's
// arrangements) are maintained as by an INSERT.
//
// Equality.  The statement compared rows by their text; this path by their
// binary image (datum_image_eq).  Equal images print equally; a captured
// retraction is the row as read from the table or from cur, byte for byte
// the copy it names.  mz_hash is the hash of the row's text as everywhere.
//
// Falls back to the statement (returns false before writing) when the
// storage is not laid out as _create_storage made it, has triggers or row
// security, has no plain btree index on exactly the key, or pending is
// larger than kMaxPendingBytes (consolidation here is in memory; the
// statement's sorts spill to disk).
//
// C-style C++ like append_core.cpp: nothing with a destructor lives in a
// frame that an ereport may leave.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/sortsupport.h"
}

#include <cstdlib>
#include <cstring>

#include "keyed_tick.hpp"

namespace {

// What pending may hold for its rows to be consolidated in memory: about
// a million captured rows of a narrow table.
constexpr Size kMaxPendingBytes = Size(64) * 1024 * 1024;

// The columns before a table's own in each storage relation.
constexpr int kPendingPrefix = 1;  // mz_diff
constexpr int kHistoryPrefix = 3;  // cur: mz_rowid, mz_ts, mz_hash; dead: mz_rowid, valid_from, valid_to

// One captured row, its values detoasted and copied.
struct Row {
    Datum* values;
    bool* nulls;
    int64 diff;
    uint32 hash;
};

// The table's columns as stored.
struct Columns {
    int n;
    int16* typlen;
    bool* typbyval;
};

// A copy of a retracted row found in cur.
struct Copy {
    ItemPointerData tid;
    int64 ts;
    int64 rowid;
    HeapTuple tuple;
};

bool prefix_is(TupleDesc desc, const char* const* names, const Oid* types, int n) {
    for (int i = 0; i < n; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (a->attisdropped || a->atttypid != types[i] || strcmp(NameStr(a->attname), names[i]) != 0)
            return false;
    }
    return true;
}

// Whether `a` from column `a_from` and `b` from `b_from` hold the same
// `n` columns (names and types) and nothing else.
bool same_columns(TupleDesc a, int a_from, TupleDesc b, int b_from, int n) {
    if (a->natts != a_from + n || b->natts != b_from + n) return false;
    for (int i = 0; i < n; i++) {
        Form_pg_attribute x = TupleDescAttr(a, a_from + i);
        Form_pg_attribute y = TupleDescAttr(b, b_from + i);
        if (x->attisdropped || y->attisdropped || x->atttypid != y->atttypid ||
            strcmp(NameStr(x->attname), NameStr(y->attname)) != 0)
            return false;
    }
    return true;
}

// Whether the three relations are plain tables laid out as _create_storage
// and register_table made them, written by nothing but their statements.
bool laid_out(Relation pending, Relation cur, Relation dead, int ncols) {
    static const char* const pending_names[] = {"mz_diff"};
    static const Oid pending_types[] = {INT8OID};
    static const char* const cur_names[] = {"mz_rowid", "mz_ts", "mz_hash"};
    static const Oid cur_types[] = {INT8OID, INT8OID, INT4OID};
    static const char* const dead_names[] = {"mz_rowid", "valid_from", "valid_to"};
    static const Oid dead_types[] = {INT8OID, INT8OID, INT8OID};
    Relation rels[] = {pending, cur, dead};
    for (Relation r : rels)
        if (r->rd_rel->relkind != RELKIND_RELATION || r->rd_rel->relhastriggers ||
            r->rd_rel->relrowsecurity)
            return false;
    TupleDesc p = RelationGetDescr(pending);
    TupleDesc c = RelationGetDescr(cur);
    TupleDesc d = RelationGetDescr(dead);
    return prefix_is(p, pending_names, pending_types, kPendingPrefix) &&
           prefix_is(c, cur_names, cur_types, kHistoryPrefix) &&
           prefix_is(d, dead_names, dead_types, kHistoryPrefix) &&
           same_columns(p, kPendingPrefix, c, kHistoryPrefix, ncols) &&
           same_columns(p, kPendingPrefix, d, kHistoryPrefix, ncols);
}

// A valid btree index on cur whose keys are exactly the table's key
// columns (in any order), without expressions or predicate; opened.
Relation key_index(Relation cur, const bool* is_key, int ncols) {
    int nkeys = 0;
    for (int i = 0; i < ncols; i++) nkeys += is_key[i] ? 1 : 0;
    List* indexes = RelationGetIndexList(cur);
    Relation found = nullptr;
    ListCell* lc;
    foreach (lc, indexes) {
        Relation idx = index_open(lfirst_oid(lc), RowExclusiveLock);
        Form_pg_index form = idx->rd_index;
        bool ok = idx->rd_rel->relam == BTREE_AM_OID && form->indisvalid && form->indisready &&
                  form->indnkeyatts == nkeys &&
                  heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, nullptr);
        for (int k = 0; ok && k < nkeys; k++) {
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

uint32 value_hash(Datum value, bool byval, int16 len) {
    if (byval) {
        uint64 v = (uint64)value;
        return hash_combine(hash_bytes_uint32((uint32)v), hash_bytes_uint32((uint32)(v >> 32)));
    }
    if (len == -1)
        return hash_bytes((const unsigned char*)VARDATA_ANY(DatumGetPointer(value)),
                          VARSIZE_ANY_EXHDR(DatumGetPointer(value)));
    if (len == -2)
        return hash_bytes((const unsigned char*)DatumGetCString(value),
                          strlen(DatumGetCString(value)));
    return hash_bytes((const unsigned char*)DatumGetPointer(value), len);
}

// A total order on the images of two values of one type (both as copied
// by keep_row: no varlena compressed or external).
int value_cmp(Datum a, Datum b, bool byval, int16 len) {
    if (byval) return a < b ? -1 : (a > b ? 1 : 0);
    if (len == -1) {
        Size la = VARSIZE_ANY_EXHDR(DatumGetPointer(a));
        Size lb = VARSIZE_ANY_EXHDR(DatumGetPointer(b));
        if (la != lb) return la < lb ? -1 : 1;
        return memcmp(VARDATA_ANY(DatumGetPointer(a)), VARDATA_ANY(DatumGetPointer(b)), la);
    }
    if (len == -2) return strcmp(DatumGetCString(a), DatumGetCString(b));
    return memcmp(DatumGetPointer(a), DatumGetPointer(b), len);
}

// qsort's context: the columns of the rows being sorted and the order of
// the key index.
struct Sorting {
    const Columns* cols;
    int nkeys;
    const int* key_cols;    // the table column of each index column
    SortSupport key_order;  // each index column's order
};
const Sorting* sorting = nullptr;

// Rows in the key index's order, then by image: retractions probe the
// index, and insertions extend it, in its order (each probe finds the
// pages the one before it read), and equal rows are adjacent.
int row_cmp(const void* x, const void* y) {
    const Row* a = *(const Row* const*)x;
    const Row* b = *(const Row* const*)y;
    for (int k = 0; k < sorting->nkeys; k++) {
        int col = sorting->key_cols[k];
        int c = ApplySortComparator(a->values[col], a->nulls[col], b->values[col], b->nulls[col],
                                    &sorting->key_order[k]);
        if (c != 0) return c;
    }
    const Columns* cols = sorting->cols;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    for (int i = 0; i < cols->n; i++) {
        if (a->nulls[i] != b->nulls[i]) return a->nulls[i] ? -1 : 1;
        if (a->nulls[i]) continue;
        int c = value_cmp(a->values[i], b->values[i], cols->typbyval[i], cols->typlen[i]);
        if (c != 0) return c;
    }
    return 0;
}

int copy_cmp(const void* x, const void* y) {
    const Copy* a = (const Copy*)x;
    const Copy* b = (const Copy*)y;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return a->rowid < b->rowid ? -1 : (a->rowid > b->rowid ? 1 : 0);
}

// The captured row in `slot` (pending's), copied into the current memory
// context with its varlenas detoasted, so that images compare by bytes.
Row* keep_row(TupleTableSlot* slot, const Columns& cols) {
    slot_getallattrs(slot);
    Row* r = (Row*)palloc(sizeof(Row));
    r->values = (Datum*)palloc(sizeof(Datum) * cols.n);
    r->nulls = (bool*)palloc(sizeof(bool) * cols.n);
    r->diff = DatumGetInt64(slot->tts_values[0]);
    uint32 hash = 0;
    for (int i = 0; i < cols.n; i++) {
        Datum v = slot->tts_values[kPendingPrefix + i];
        r->nulls[i] = slot->tts_isnull[kPendingPrefix + i];
        if (r->nulls[i]) {
            r->values[i] = (Datum)0;
            hash = hash_combine(hash, 0x9e3779b9);
            continue;
        }
        if (cols.typlen[i] == -1)
            v = PointerGetDatum(pg_detoast_datum_packed((struct varlena*)DatumGetPointer(v)));
        r->values[i] = datumCopy(v, cols.typbyval[i], cols.typlen[i]);
        hash = hash_combine(hash, value_hash(r->values[i], cols.typbyval[i], cols.typlen[i]));
    }
    r->hash = hash;
    return r;
}

// Whether the table columns of cur's tuple in `slot` have `row`'s images.
bool same_image(TupleTableSlot* slot, const Row* row, const Columns& cols) {
    for (int i = 0; i < cols.n; i++) {
        bool isnull = slot->tts_isnull[kHistoryPrefix + i];
        if (isnull != row->nulls[i]) return false;
        if (!isnull && !datum_image_eq(slot->tts_values[kHistoryPrefix + i], row->values[i],
                                       cols.typbyval[i], cols.typlen[i]))
            return false;
    }
    return true;
}

// Everything the writes of one tick share.
struct Writer {
    EState* estate;
    ResultRelInfo* cur;
    ResultRelInfo* dead;
    TupleTableSlot* cur_slot;   // a row to insert into cur
    TupleTableSlot* dead_slot;  // a row to insert into dead
    TupleDesc row_desc;         // the table's columns as an anonymous record
    FmgrInfo record_out;
    Oid rowid_seq;
};

RangeTblEntry* relation_rte(Relation rel) {
    RangeTblEntry* rte = makeNode(RangeTblEntry);
    rte->rtekind = RTE_RELATION;
    rte->relid = RelationGetRelid(rel);
    rte->relkind = rel->rd_rel->relkind;
    rte->rellockmode = RowExclusiveLock;
    return rte;
}

void begin_writes(Writer* w, Relation cur, Relation dead, const Columns& cols, Snapshot snap) {
    w->estate = CreateExecutorState();
    ExecInitRangeTable(w->estate, list_make2(relation_rte(cur), relation_rte(dead)));
    w->estate->es_output_cid = GetCurrentCommandId(true);
    w->estate->es_snapshot = snap;
    w->cur = makeNode(ResultRelInfo);
    InitResultRelInfo(w->cur, cur, 1, nullptr, 0);
    w->dead = makeNode(ResultRelInfo);
    InitResultRelInfo(w->dead, dead, 2, nullptr, 0);
    ExecOpenIndices(w->cur, false);
    ExecOpenIndices(w->dead, false);
    w->cur_slot = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(cur), &TTSOpsVirtual);
    w->dead_slot = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(dead), &TTSOpsVirtual);
    TupleDesc cur_desc = RelationGetDescr(cur);
    w->row_desc = CreateTemplateTupleDesc(cols.n);
    for (int i = 0; i < cols.n; i++) {
        Form_pg_attribute a = TupleDescAttr(cur_desc, kHistoryPrefix + i);
        TupleDescInitEntry(w->row_desc, (AttrNumber)(i + 1), NameStr(a->attname), a->atttypid,
                           a->atttypmod, 0);
    }
    w->row_desc = BlessTupleDesc(w->row_desc);
    fmgr_info(F_RECORD_OUT, &w->record_out);
    w->rowid_seq = get_relname_relid("rowid_seq", get_namespace_oid("decoupled", false));
    if (!OidIsValid(w->rowid_seq)) elog(ERROR, "sequence decoupled.rowid_seq does not exist");
}

void end_writes(Writer* w) {
    ExecCloseIndices(w->cur);
    ExecCloseIndices(w->dead);
    ExecResetTupleTable(w->estate->es_tupleTable, false);
    FreeExecutorState(w->estate);
}

// hashtext(ROW(columns)::text), what every other write stores as mz_hash.
int32 row_text_hash(Writer* w, const Row* row) {
    HeapTuple tuple = heap_form_tuple(w->row_desc, row->values, row->nulls);
    char* text = OutputFunctionCall(&w->record_out, HeapTupleGetDatum(tuple));
    Datum hash = DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID, CStringGetTextDatum(text));
    return DatumGetInt32(hash);
}

void insert_row(Writer* w, const Row* row, int64 ts, int32 hash, const Columns& cols) {
    TupleTableSlot* slot = w->cur_slot;
    ExecClearTuple(slot);
    slot->tts_values[0] = Int64GetDatum(nextval_internal(w->rowid_seq, true));
    slot->tts_values[1] = Int64GetDatum(ts);
    slot->tts_values[2] = Int32GetDatum(hash);
    memset(slot->tts_isnull, 0, sizeof(bool) * kHistoryPrefix);
    memcpy(slot->tts_values + kHistoryPrefix, row->values, sizeof(Datum) * cols.n);
    memcpy(slot->tts_isnull + kHistoryPrefix, row->nulls, sizeof(bool) * cols.n);
    ExecStoreVirtualTuple(slot);
    ExecSimpleRelationInsert(w->cur, w->estate, slot);
    ResetPerTupleExprContext(w->estate);
}

// Moves `copy` from cur to dead, retracted at ts.
void retract_copy(Writer* w, Relation cur, const Copy* copy, int64 ts, Snapshot snap) {
    simple_table_tuple_delete(cur, const_cast<ItemPointer>(&copy->tid), snap);
    TupleTableSlot* slot = w->dead_slot;
    ExecClearTuple(slot);
    heap_deform_tuple(copy->tuple, RelationGetDescr(cur), slot->tts_values, slot->tts_isnull);
    slot->tts_values[0] = Int64GetDatum(copy->rowid);
    slot->tts_values[1] = Int64GetDatum(copy->ts);
    slot->tts_values[2] = Int64GetDatum(ts);
    ExecStoreVirtualTuple(slot);
    ExecSimpleRelationInsert(w->dead, w->estate, slot);
    ResetPerTupleExprContext(w->estate);
}

// Probes cur through the key index for the copies of `row` older than ts
// and moves the oldest `n` of them to dead; returns how many moved.
int64 retract_row(Writer* w, Relation cur, IndexScanDesc scan, ScanKey keys, const int* key_cols,
                  int nkeys, TupleTableSlot* slot, const Row* row, int64 n, int64 ts,
                  Snapshot snap, const Columns& cols) {
    for (int k = 0; k < nkeys; k++) {
        if (row->nulls[key_cols[k]]) return 0;  // a key is never null: no copy
        keys[k].sk_argument = row->values[key_cols[k]];
    }
    // The scan allocates as it goes (dead items it marks): in its own
    // context, which outlives the row's.
    MemoryContext row_context = MemoryContextSwitchTo(GetMemoryChunkContext(scan));
    index_rescan(scan, keys, nkeys, nullptr, 0);
    MemoryContextSwitchTo(row_context);
    int ncopies = 0, capacity = 4;
    Copy* copies = (Copy*)palloc(sizeof(Copy) * capacity);
    for (;;) {
        MemoryContextSwitchTo(GetMemoryChunkContext(scan));
        bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
        MemoryContextSwitchTo(row_context);
        if (!found) break;
        slot_getallattrs(slot);
        int64 copy_ts = DatumGetInt64(slot->tts_values[1]);
        if (copy_ts >= ts || !same_image(slot, row, cols)) continue;
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
    if (ncopies > n) qsort(copies, ncopies, sizeof(Copy), copy_cmp);
    int64 moved = 0;
    for (int i = 0; i < ncopies && moved < n; i++, moved++) retract_copy(w, cur, &copies[i], ts, snap);
    return moved;
}

}  // namespace

namespace decoupled {

bool tick_by_key(const KeyedTick& tick, int64* wanted, int64* moved) {
    *wanted = 0;
    *moved = 0;
    Relation pending = table_open(tick.pending, RowExclusiveLock);
    Relation cur = table_open(tick.cur, RowExclusiveLock);
    Relation dead = table_open(tick.dead, RowExclusiveLock);
    Relation index = nullptr;
    bool fits = (Size)RelationGetNumberOfBlocks(pending) * BLCKSZ <= kMaxPendingBytes;
    if (fits && laid_out(pending, cur, dead, tick.ncols))
        index = key_index(cur, tick.is_key, tick.ncols);
    if (!index) {
        table_close(dead, NoLock);
        table_close(cur, NoLock);
        table_close(pending, NoLock);
        return false;
    }

    MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "decoupled keyed tick",
                                                  ALLOCSET_DEFAULT_SIZES);
    MemoryContext per_row = AllocSetContextCreate(context, "decoupled keyed tick row",
                                                  ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(context);

    Columns cols;
    cols.n = tick.ncols;
    cols.typlen = (int16*)palloc(sizeof(int16) * cols.n);
    cols.typbyval = (bool*)palloc(sizeof(bool) * cols.n);
    for (int i = 0; i < cols.n; i++) {
        Form_pg_attribute a = TupleDescAttr(RelationGetDescr(cur), kHistoryPrefix + i);
        cols.typlen[i] = a->attlen;
        cols.typbyval[i] = a->attbyval;
    }

    // Reads as the tick's statements did (SPI_execute_snapshot): the tick's
    // snapshot, seeing this transaction's earlier writes.
    CommandCounterIncrement();
    PushCopiedSnapshot(tick.snapshot ? tick.snapshot : GetTransactionSnapshot());
    UpdateActiveSnapshotCommandId();
    Snapshot snap = GetActiveSnapshot();

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
        rows[nrows++] = keep_row(pslot, cols);
        simple_table_tuple_delete(pending, &pslot->tts_tid, snap);
    }
    ExecDropSingleTupleTableSlot(pslot);
    table_endscan(pscan);

    // Scan keys of the key index, in its column order.
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
        key_cols[k] = form->indkey.values[k] - 1 - kHistoryPrefix;
        SortSupport order = &key_order[k];
        order->ssup_cxt = context;
        order->ssup_collation = index->rd_indcollation[k];
        order->ssup_nulls_first = false;
        order->ssup_attno = (AttrNumber)(k + 1);
        PrepareSortSupportFromIndexRel(index, BTLessStrategyNumber, order);
    }

    // Consolidate: equal rows are adjacent.
    Sorting order{&cols, nkeys, key_cols, key_order};
    sorting = &order;
    qsort(rows, nrows, sizeof(Row*), row_cmp);

    Writer w;
    begin_writes(&w, cur, dead, cols, snap);
    IndexScanDesc iscan = index_beginscan(cur, index, snap, nkeys, 0);
    TupleTableSlot* islot = table_slot_create(cur, nullptr);
    for (int i = 0; i < nrows;) {
        int64 net = 0;
        int j = i;
        for (; j < nrows && row_cmp(&rows[i], &rows[j]) == 0; j++) net += rows[j]->diff;
        const Row* row = rows[i];
        i = j;
        if (net == 0) continue;
        MemoryContextSwitchTo(per_row);
        if (net < 0) {
            *wanted += -net;
            *moved += retract_row(&w, cur, iscan, keys, key_cols, nkeys, islot, row, -net,
                                  tick.ts, snap, cols);
        } else {
            int32 hash = row_text_hash(&w, row);
            for (int64 k = 0; k < net; k++) insert_row(&w, row, tick.ts, hash, cols);
        }
        MemoryContextSwitchTo(context);
        MemoryContextReset(per_row);
        CHECK_FOR_INTERRUPTS();
    }
    sorting = nullptr;
    ExecDropSingleTupleTableSlot(islot);
    index_endscan(iscan);
    end_writes(&w);

    elog(DEBUG1, "tick of \"%s\" by key: %d captured rows, " INT64_FORMAT " retractions",
         tick.name, nrows, *wanted);
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
