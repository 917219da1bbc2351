// Writing a collection's history from C: see history_writes.hpp.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

#include <cstring>

#include "history_writes.hpp"

namespace {

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

// Whether `desc` holds, from `from` on, exactly the `n` columns of `like`
// from `like_from` (names and types).
bool same_columns(TupleDesc desc, int from, TupleDesc like, int like_from, int n) {
    if (desc->natts != from + n || like->natts < like_from + n) return false;
    for (int i = 0; i < n; i++) {
        Form_pg_attribute x = TupleDescAttr(desc, from + i);
        Form_pg_attribute y = TupleDescAttr(like, like_from + i);
        if (x->attisdropped || y->attisdropped || x->atttypid != y->atttypid ||
            strcmp(NameStr(x->attname), NameStr(y->attname)) != 0)
            return false;
    }
    return true;
}

bool written_by_us_only(Relation rel) {
    return rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relhastriggers &&
           !rel->rd_rel->relrowsecurity;
}

}  // namespace

namespace decoupled {

RangeTblEntry* relation_rte(Relation rel) {
    RangeTblEntry* rte = makeNode(RangeTblEntry);
    rte->rtekind = RTE_RELATION;
    rte->relid = RelationGetRelid(rel);
    rte->relkind = rel->rd_rel->relkind;
    rte->rellockmode = RowExclusiveLock;
    return rte;
}

TupleDesc columns_record(TupleDesc desc, int from, int ncols) {
    TupleDesc row = CreateTemplateTupleDesc(ncols);
    for (int i = 0; i < ncols; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, from + i);
        TupleDescInitEntry(row, (AttrNumber)(i + 1), NameStr(a->attname), a->atttypid,
                           a->atttypmod, 0);
    }
    return BlessTupleDesc(row);
}

char* record_text(TupleDesc record, FmgrInfo* record_out, const Datum* values, const bool* nulls) {
    HeapTuple tuple = heap_form_tuple(record, const_cast<Datum*>(values), const_cast<bool*>(nulls));
    char* text = OutputFunctionCall(record_out, HeapTupleGetDatum(tuple));
    heap_freetuple(tuple);
    return text;
}

bool starts_with_columns(TupleDesc desc, const char* const* names, const Oid* types, int n) {
    if (desc->natts < n) return false;
    for (int i = 0; i < n; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (a->attisdropped || a->atttypid != types[i] || strcmp(NameStr(a->attname), names[i]) != 0)
            return false;
    }
    return true;
}

ImageColumns image_columns(TupleDesc desc, int from, int n) {
    ImageColumns cols;
    cols.n = n;
    cols.typlen = (int16*)palloc(sizeof(int16) * Max(n, 1));
    cols.typbyval = (bool*)palloc(sizeof(bool) * Max(n, 1));
    for (int i = 0; i < n; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, from + i);
        cols.typlen[i] = a->attlen;
        cols.typbyval[i] = a->attbyval;
    }
    return cols;
}

void copy_images(const ImageColumns& cols, const Datum* values, const bool* nulls, Datum** out,
                 bool** out_nulls) {
    Datum* v = (Datum*)palloc(sizeof(Datum) * Max(cols.n, 1));
    bool* isnull = (bool*)palloc(sizeof(bool) * Max(cols.n, 1));
    for (int i = 0; i < cols.n; i++) {
        isnull[i] = nulls[i];
        if (nulls[i]) {
            v[i] = (Datum)0;
            continue;
        }
        Datum value = values[i];
        if (cols.typlen[i] == -1)
            value = PointerGetDatum(pg_detoast_datum_packed((struct varlena*)DatumGetPointer(value)));
        v[i] = datumCopy(value, cols.typbyval[i], cols.typlen[i]);
    }
    *out = v;
    *out_nulls = isnull;
}

// Column i of a row image: its hash folded into `hash`, and its order.
static inline uint32 column_hash(uint32 hash, const ImageColumns& cols, int i,
                                 const Datum* values, const bool* nulls) {
    return hash_combine(hash, nulls[i] ? 0x9e3779b9
                                       : value_hash(values[i], cols.typbyval[i], cols.typlen[i]));
}

static inline int column_cmp(const ImageColumns& cols, int i, const Datum* a, const bool* a_nulls,
                             const Datum* b, const bool* b_nulls) {
    if (a_nulls[i] != b_nulls[i]) return a_nulls[i] ? -1 : 1;
    if (a_nulls[i]) return 0;
    return value_cmp(a[i], b[i], cols.typbyval[i], cols.typlen[i]);
}

uint32 image_hash(const ImageColumns& cols, const Datum* values, const bool* nulls) {
    uint32 hash = 0;
    for (int i = 0; i < cols.n; i++) hash = column_hash(hash, cols, i, values, nulls);
    return hash;
}

int image_cmp(const ImageColumns& cols, const Datum* a, const bool* a_nulls, const Datum* b,
              const bool* b_nulls) {
    for (int i = 0; i < cols.n; i++) {
        int c = column_cmp(cols, i, a, a_nulls, b, b_nulls);
        if (c != 0) return c;
    }
    return 0;
}

bool same_images(const ImageColumns& cols, const Datum* values, const bool* nulls,
                 const Datum* copy, const bool* copy_nulls) {
    for (int i = 0; i < cols.n; i++) {
        if (nulls[i] != copy_nulls[i]) return false;
        if (!nulls[i] && !datum_image_eq(values[i], copy[i], cols.typbyval[i], cols.typlen[i]))
            return false;
    }
    return true;
}

bool history_laid_out(Relation cur, Relation dead, TupleDesc like, int like_from, int ncols) {
    static const char* const cur_names[] = {"mz_rowid", "mz_ts", "mz_hash"};
    static const Oid cur_types[] = {INT8OID, INT8OID, INT4OID};
    static const char* const dead_names[] = {"mz_rowid", "valid_from", "valid_to"};
    static const Oid dead_types[] = {INT8OID, INT8OID, INT8OID};
    TupleDesc c = RelationGetDescr(cur);
    TupleDesc d = RelationGetDescr(dead);
    return written_by_us_only(cur) && written_by_us_only(dead) &&
           starts_with_columns(c, cur_names, cur_types, kHistoryPrefix) &&
           starts_with_columns(d, dead_names, dead_types, kHistoryPrefix) &&
           same_columns(c, kHistoryPrefix, like, like_from, ncols) &&
           same_columns(d, kHistoryPrefix, like, like_from, ncols);
}

// A buffer holds at most this many rows, or about this many bytes of them:
// a page or a few, written by one table_multi_insert.  (COPY buffers 1,000
// rows, but makes their slots once per statement; a writer makes them per
// tick or step, and 1,000 of them cost a 1,000-row tick more than the
// batching saved.)
constexpr int kBufferedRows = 128;
constexpr Size kBufferedBytes = 65535;

namespace {

// Which of `target`'s columns its (opened) btree indexes hold as
// variable-length values an index tuple may compress; null when none (a
// hash index keeps only the hash).
bool* indexed_wide_columns(ResultRelInfo* target) {
    TupleDesc desc = RelationGetDescr(target->ri_RelationDesc);
    bool* columns = nullptr;
    for (int i = 0; i < target->ri_NumIndices; i++) {
        if (target->ri_IndexRelationDescs[i]->rd_rel->relam != BTREE_AM_OID) continue;
        IndexInfo* info = target->ri_IndexRelationInfo[i];
        for (int c = 0; c < info->ii_NumIndexKeyAttrs; c++) {
            AttrNumber a = info->ii_IndexAttrNumbers[c];
            if (a <= 0 || a > desc->natts) continue;
            Form_pg_attribute att = TupleDescAttr(desc, a - 1);
            if (att->attlen != -1 ||
                (att->attstorage != TYPSTORAGE_EXTENDED && att->attstorage != TYPSTORAGE_MAIN))
                continue;
            if (columns == nullptr) columns = static_cast<bool*>(palloc0(sizeof(bool) * desc->natts));
            columns[a - 1] = true;
        }
    }
    return columns;
}

// A wide value compressed as small as this server can.  Why: an index
// compresses a wide value with the writing session's
// default_toast_compression, and the registered table's own index took it
// compressed by its writer's.  The worker writing history may have another
// default that compresses it less (pglz gives up on a value whose first
// kilobyte does not compress, where lz4 does not), and its index on the
// key would then refuse a row the table holds.  Indexes and the heap keep
// a value that comes compressed as it is.
Datum smallest_compression(Datum value) {
    Datum best = toast_compress_datum(value, TOAST_PGLZ_COMPRESSION);
#ifdef USE_LZ4
    Datum lz4 = toast_compress_datum(value, TOAST_LZ4_COMPRESSION);
    if (DatumGetPointer(best) == nullptr ||
        (DatumGetPointer(lz4) != nullptr &&
         VARSIZE(DatumGetPointer(lz4)) < VARSIZE(DatumGetPointer(best))))
        best = lz4;
#endif
    return DatumGetPointer(best) != nullptr ? best : value;
}

// The wide indexed values of a slot's row (its values filled, not yet
// stored) compressed before an index would compress them its own way.
void compress_indexed_wide(TupleTableSlot* slot, const bool* columns) {
    if (columns == nullptr) return;
    for (int a = 0; a < slot->tts_tupleDescriptor->natts; a++) {
        if (!columns[a] || slot->tts_isnull[a]) continue;
        struct varlena* v = reinterpret_cast<struct varlena*>(DatumGetPointer(slot->tts_values[a]));
        if (!VARATT_IS_EXTENDED(v) && VARSIZE(v) > TOAST_INDEX_TARGET)
            slot->tts_values[a] = smallest_compression(slot->tts_values[a]);
    }
}

}  // namespace

void init_insert_buffer(InsertBuffer* b, ResultRelInfo* target) {
    b->target = target;
    b->slots = static_cast<TupleTableSlot**>(palloc0(sizeof(TupleTableSlot*) * kBufferedRows));
    b->made = 0;
    b->used = 0;
    b->bytes = 0;
    b->indexed_wide = indexed_wide_columns(target);
}

void flush_buffered(EState* estate, InsertBuffer* b) {
    if (b->used == 0) return;
    MemoryContext caller = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
    table_multi_insert(b->target->ri_RelationDesc, b->slots, b->used, estate->es_output_cid, 0,
                       nullptr);
    MemoryContextSwitchTo(caller);
    for (int i = 0; i < b->used; ++i) {
        if (b->target->ri_NumIndices > 0)
            (void)ExecInsertIndexTuples(b->target, b->slots[i], estate, false, false, nullptr,
                                        NIL);
        ResetPerTupleExprContext(estate);
        ExecClearTuple(b->slots[i]);
    }
    b->used = 0;
    b->bytes = 0;
}

TupleTableSlot* buffered_slot(EState* estate, InsertBuffer* b) {
    if (b->used == b->made) {
        // The slot, and the rows it copies, live as long as the writer,
        // whatever context the caller writes a row in.
        Relation rel = b->target->ri_RelationDesc;
        MemoryContext caller = MemoryContextSwitchTo(estate->es_query_cxt);
        b->slots[b->made++] =
            ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), table_slot_callbacks(rel));
        MemoryContextSwitchTo(caller);
    }
    TupleTableSlot* slot = b->slots[b->used];
    ExecClearTuple(slot);
    return slot;
}

void add_buffered(EState* estate, InsertBuffer* b, TupleTableSlot* slot) {
    compress_indexed_wide(slot, b->indexed_wide);
    ExecStoreVirtualTuple(slot);
    ExecMaterializeSlot(slot);
    Relation rel = b->target->ri_RelationDesc;
    if (rel->rd_att->constr) ExecConstraints(b->target, slot, estate);
    bool should_free = false;
    HeapTuple tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);
    b->bytes += tuple->t_len;
    if (should_free) heap_freetuple(tuple);
    b->used++;
    if (b->used == kBufferedRows || b->bytes >= kBufferedBytes) flush_buffered(estate, b);
}

bool pending_laid_out(Relation pending) {
    static const char* const names[] = {"mz_diff"};
    static const Oid types[] = {INT8OID};
    return pending->rd_rel->relkind == RELKIND_RELATION && !pending->rd_rel->relhastriggers &&
           !pending->rd_rel->relrowsecurity &&
           starts_with_columns(RelationGetDescr(pending), names, types, kPendingPrefix);
}

void begin_pending_writes(PendingWriter* w, Relation pending, Snapshot snapshot) {
    w->estate = CreateExecutorState();
    ExecInitRangeTable(w->estate, list_make1(relation_rte(pending)));
    w->estate->es_output_cid = GetCurrentCommandId(true);
    w->estate->es_snapshot = snapshot;
    w->target = makeNode(ResultRelInfo);
    InitResultRelInfo(w->target, pending, 1, nullptr, 0);
    ExecOpenIndices(w->target, false);
    init_insert_buffer(&w->rows, w->target);
}

TupleTableSlot* pending_slot(PendingWriter* w) { return buffered_slot(w->estate, &w->rows); }

void end_pending_writes(PendingWriter* w) {
    flush_buffered(w->estate, &w->rows);
    ExecCloseIndices(w->target);
    ExecResetTupleTable(w->estate->es_tupleTable, false);
    FreeExecutorState(w->estate);
}

void begin_history_writes(HistoryWriter* w, Relation cur, Relation dead, int ncols,
                          Snapshot snapshot) {
    w->cur_rel = cur;
    w->ncols = ncols;
    w->snapshot = snapshot;
    w->estate = CreateExecutorState();
    ExecInitRangeTable(w->estate, list_make2(relation_rte(cur), relation_rte(dead)));
    w->estate->es_output_cid = GetCurrentCommandId(true);
    w->estate->es_snapshot = snapshot;
    w->cur = makeNode(ResultRelInfo);
    InitResultRelInfo(w->cur, cur, 1, nullptr, 0);
    w->dead = makeNode(ResultRelInfo);
    InitResultRelInfo(w->dead, dead, 2, nullptr, 0);
    ExecOpenIndices(w->cur, false);
    ExecOpenIndices(w->dead, false);
    init_insert_buffer(&w->cur_rows, w->cur);
    init_insert_buffer(&w->dead_rows, w->dead);
    w->row_desc = nullptr;  // made by the first row_text_hash
    w->replacement = nullptr;  // made by the first replace_current
    w->rowid_seq = get_relname_relid("rowid_seq", get_namespace_oid("decoupled", false));
    if (!OidIsValid(w->rowid_seq)) elog(ERROR, "sequence decoupled.rowid_seq does not exist");
}

void end_history_writes(HistoryWriter* w) {
    flush_buffered(w->estate, &w->cur_rows);
    flush_buffered(w->estate, &w->dead_rows);
    ExecCloseIndices(w->cur);
    ExecCloseIndices(w->dead);
    ExecResetTupleTable(w->estate->es_tupleTable, false);
    FreeExecutorState(w->estate);
}

int32 row_text_hash(HistoryWriter* w, Datum* values, bool* nulls) {
    if (!w->row_desc) {
        // The collection's columns as an anonymous record, as ROW(...) is;
        // it and record_out's cache live as long as the writer, whatever
        // context the caller writes a row in.
        MemoryContext caller = MemoryContextSwitchTo(w->estate->es_query_cxt);
        w->row_desc = columns_record(RelationGetDescr(w->cur_rel), kHistoryPrefix, w->ncols);
        fmgr_info(F_RECORD_OUT, &w->record_out);
        MemoryContextSwitchTo(caller);
    }
    char* text = record_text(w->row_desc, &w->record_out, values, nulls);
    Datum hash = DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID, CStringGetTextDatum(text));
    pfree(text);
    return DatumGetInt32(hash);
}

// cur's row `tuple` into dead, retracted at ts: cur's (mz_rowid, mz_ts,
// mz_hash, columns) become dead's (mz_rowid, valid_from, valid_to, columns).
static void add_dead(HistoryWriter* w, HeapTuple tuple, int64 ts) {
    TupleTableSlot* slot = buffered_slot(w->estate, &w->dead_rows);
    heap_deform_tuple(tuple, RelationGetDescr(w->cur_rel), slot->tts_values, slot->tts_isnull);
    slot->tts_values[2] = Int64GetDatum(ts);
    add_buffered(w->estate, &w->dead_rows, slot);
}

// A row of cur at ts with a new row id, into `slot`'s values.
static void fill_current(HistoryWriter* w, TupleTableSlot* slot, const Datum* values,
                         const bool* nulls, int64 ts, int32 mz_hash) {
    slot->tts_values[0] = Int64GetDatum(nextval_internal(w->rowid_seq, true));
    slot->tts_values[1] = Int64GetDatum(ts);
    slot->tts_values[2] = Int32GetDatum(mz_hash);
    memset(slot->tts_isnull, 0, sizeof(bool) * kHistoryPrefix);
    memcpy(slot->tts_values + kHistoryPrefix, values, sizeof(Datum) * w->ncols);
    memcpy(slot->tts_isnull + kHistoryPrefix, nulls, sizeof(bool) * w->ncols);
}

void insert_current(HistoryWriter* w, const Datum* values, const bool* nulls, int64 ts,
                    int32 mz_hash) {
    TupleTableSlot* slot = buffered_slot(w->estate, &w->cur_rows);
    fill_current(w, slot, values, nulls, ts, mz_hash);
    add_buffered(w->estate, &w->cur_rows, slot);
}

bool in_place_columns(Relation cur, int ncols, int** cols, int* n) {
    Bitmapset* indexed = RelationGetIndexAttrBitmap(cur, INDEX_ATTR_BITMAP_ALL);
    *cols = (int*)palloc(sizeof(int) * (ncols > 0 ? ncols : 1));
    *n = 0;
    int member = -1;
    while ((member = bms_next_member(indexed, member)) >= 0) {
        AttrNumber attnum = member + FirstLowInvalidHeapAttributeNumber;
        if (attnum <= kHistoryPrefix || attnum > kHistoryPrefix + ncols) return false;
        (*cols)[(*n)++] = attnum - kHistoryPrefix - 1;
    }
    return true;
}

uint32 columns_hash(const ImageColumns& all, const int* cols, int n, const Datum* values,
                    const bool* nulls) {
    uint32 hash = 0;
    for (int k = 0; k < n; k++) hash = column_hash(hash, all, cols[k], values, nulls);
    return hash;
}

int columns_cmp(const ImageColumns& all, const int* cols, int n, const Datum* a,
                const bool* a_nulls, const Datum* b, const bool* b_nulls) {
    for (int k = 0; k < n; k++) {
        int c = column_cmp(all, cols[k], a, a_nulls, b, b_nulls);
        if (c != 0) return c;
    }
    return 0;
}

void replace_current(HistoryWriter* w, ItemPointer tid, HeapTuple tuple, const Datum* values,
                     const bool* nulls, int64 ts, int32 mz_hash) {
    if (w->replacement == nullptr) {
        MemoryContext caller = MemoryContextSwitchTo(w->estate->es_query_cxt);
        w->replacement = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(w->cur_rel),
                                                &TTSOpsVirtual);
        MemoryContextSwitchTo(caller);
    }
    // The old row to dead first: its tuple is a copy, the update below
    // leaves it alone.
    add_dead(w, tuple, ts);

    TupleTableSlot* slot = w->replacement;
    ExecClearTuple(slot);
    fill_current(w, slot, values, nulls, ts, mz_hash);
    compress_indexed_wide(slot, w->cur_rows.indexed_wide);
    ExecStoreVirtualTuple(slot);
    if (w->cur_rel->rd_att->constr) ExecConstraints(w->cur, slot, w->estate);
    bool update_indexes = false;
    simple_table_tuple_update(w->cur_rel, tid, slot, w->snapshot, &update_indexes);
    if (update_indexes && w->cur->ri_NumIndices > 0)
        (void)ExecInsertIndexTuples(w->cur, slot, w->estate, true, false, nullptr, NIL);
    ResetPerTupleExprContext(w->estate);
}

void retract_current(HistoryWriter* w, ItemPointer tid, HeapTuple tuple, int64 ts) {
    simple_table_tuple_delete(w->cur_rel, tid, w->snapshot);
    add_dead(w, tuple, ts);
}

bool holds_visible_row(Relation rel, Snapshot snapshot, BlockNumber* blocks) {
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    if (blocks) *blocks = reinterpret_cast<HeapScanDesc>(scan)->rs_nblocks;
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    bool any = table_scan_getnextslot(scan, ForwardScanDirection, slot);
    ExecDropSingleTupleTableSlot(slot);
    table_endscan(scan);
    return any;
}

bool next_stored_row(IndexScanDesc scan, TupleTableSlot* slot) {
    Relation rel = scan->heapRelation;
    if (rel->rd_rel->relam != HEAP_TABLE_AM_OID || !TTS_IS_BUFFERTUPLE(slot))
        return index_getnext_slot(scan, ForwardScanDirection, slot);
    // The slot keeps a pointer to the tuple header it stores: its own.
    HeapTuple tuple = &((BufferHeapTupleTableSlot*)slot)->base.tupdata;
    for (;;) {
        ItemPointer tid = index_getnext_tid(scan, ForwardScanDirection);
        if (tid == nullptr) return false;
        // What heapam's index fetch does, less heap_page_prune_opt.
        ExecClearTuple(slot);
        Buffer buffer = ReadBuffer(rel, ItemPointerGetBlockNumber(tid));
        LockBuffer(buffer, BUFFER_LOCK_SHARE);
        tuple->t_self = *tid;
        bool all_dead = false;
        bool found =
            heap_hot_search_buffer(tid, rel, buffer, scan->xs_snapshot, tuple, &all_dead, true);
        if (found) {
            // The slot takes a pin of its own; the tuple stays valid with it.
            ExecStoreBufferHeapTuple(tuple, slot, buffer);
            slot->tts_tableOid = RelationGetRelid(rel);
        }
        LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
        ReleaseBuffer(buffer);
        if (found) return true;
        // As index_fetch_heap: the index entry of a row dead to everyone
        // is marked, and later scans skip it.
        if (!scan->xactStartedInRecovery) scan->kill_prior_tuple = all_dead;
    }
}

}  // namespace decoupled
