// The live rows of a keyed table's retracted keys, by index probes (brief
// C14.2).
//
// Why.  Under single-row UPDATE writers nearly every captured update needs
// its old row (the WAL carries only its key), and the statement that found
// them (decoupled._capture_key_lookup: the keys unnested from text arrays,
// a lateral index scan per key into cur and into pending, each row printed
// and the rows grouped) was most of the capture worker's time: 12 us a key
// with everything cached, 200 ms of every second at 9,000 updates/s.
//
// What.  The same answer with the probes made here: the key's values read
// by their base types' input functions, one scan of cur's and one of
// pending's index on exactly the key (the indexes the statement used),
// rescanned per key under one snapshot, each row printed as the statement
// printed it (record_out of a record of the table's columns) and netted
// per key with pending's signs.  Storage not laid out so — no such index —
// falls back to the statement.
//
// Most old rows are not needed at all: an update's or a delete's
// retraction only has to name the row, and the tick that moves it probes
// cur by the key anyway.  So pending is read first, and a key nothing
// pending touches is answered "current" without reading cur: the worker
// writes a retraction by key (a pending row with mz_diff 0), and under
// random updates of a large table — whose cur holds a dead copy of most
// rows until vacuum — the probe that read those pages is gone.  A key
// pending touches is answered from pending alone when a retraction by key
// is among its rows (cur's row is retracted by it), else from both.
//
// Written in PostgreSQL's C style: no C++ object with a destructor lives
// in these frames.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include "../extension/history_writes.hpp"
#include "../extension/storage_names.hpp"
#include "capture_lookup.hpp"

namespace {

using decoupled::kPendingPrefix;  // mz_diff, then the table's columns
constexpr int kCurPrefix = decoupled::kHistoryPrefix;  // mz_rowid, mz_ts, mz_hash, then the table's

// One of the two relations probed: the heap, its index on the key, and
// for each index column the key column it holds.
struct Side {
    Relation heap = nullptr;
    Relation index = nullptr;
    int prefix = 0;
    int key_of[INDEX_MAX_KEYS];
    ScanKeyData keys[INDEX_MAX_KEYS];
};

// A valid plain btree index of `s->heap` whose key columns are exactly the
// key's, in any order; opened into s->index.
bool open_key_index(Side* s, const int* key_fields, int nkeys) {
    List* indexes = RelationGetIndexList(s->heap);
    ListCell* lc;
    foreach (lc, indexes) {
        Relation idx = index_open(lfirst_oid(lc), AccessShareLock);
        Form_pg_index form = idx->rd_index;
        // As the planner would: an index made over broken HOT chains is
        // usable only by snapshots that postdate it (indcheckxmin).
        bool ok = idx->rd_rel->relam == BTREE_AM_OID && form->indisvalid && form->indisready &&
                  form->indislive && form->indnkeyatts == nkeys &&
                  heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, nullptr) &&
                  (!form->indcheckxmin ||
                   TransactionIdPrecedes(HeapTupleHeaderGetXmin(idx->rd_indextuple->t_data),
                                         TransactionXmin));
        for (int c = 0; ok && c < nkeys; c++) {
            int field = form->indkey.values[c] - s->prefix;  // an expression: <= 0
            s->key_of[c] = -1;
            for (int k = 0; k < nkeys; k++)
                if (key_fields[k] == field) s->key_of[c] = k;
            ok = s->key_of[c] >= 0;
            for (int d = 0; ok && d < c; d++) ok = s->key_of[d] != s->key_of[c];
        }
        if (ok) {
            s->index = idx;
            break;
        }
        index_close(idx, AccessShareLock);
    }
    list_free(indexes);
    if (s->index == nullptr) return false;
    for (int c = 0; c < nkeys; c++) {
        Oid op = get_opfamily_member(s->index->rd_opfamily[c], s->index->rd_opcintype[c],
                                     s->index->rd_opcintype[c], BTEqualStrategyNumber);
        if (!OidIsValid(op)) return false;
        ScanKeyInit(&s->keys[c], (AttrNumber)(c + 1), BTEqualStrategyNumber, get_opcode(op),
                    (Datum)0);
        s->keys[c].sk_collation = s->index->rd_indcollation[c];
    }
    return true;
}

// cur and pending as _create_storage made them: plain tables, the same
// table columns after their own, read through an index on the key.
bool open_sides(int64 id, const int* key_fields, int nkeys, Side* cur, Side* pending) {
    static const char* const cur_names[] = {"mz_rowid", "mz_ts", "mz_hash"};
    static const Oid cur_types[] = {INT8OID, INT8OID, INT4OID};
    static const char* const pending_names[] = {"mz_diff"};
    static const Oid pending_types[] = {INT8OID};
    Oid cur_id = decoupled::storage_relid(id, "cur");
    Oid pending_id = decoupled::storage_relid(id, "pending");
    if (!OidIsValid(cur_id) || !OidIsValid(pending_id)) return false;
    cur->heap = table_open(cur_id, AccessShareLock);
    cur->prefix = kCurPrefix;
    pending->heap = table_open(pending_id, AccessShareLock);
    pending->prefix = kPendingPrefix;
    TupleDesc c = RelationGetDescr(cur->heap), p = RelationGetDescr(pending->heap);
    bool ok = cur->heap->rd_rel->relkind == RELKIND_RELATION &&
              pending->heap->rd_rel->relkind == RELKIND_RELATION &&
              decoupled::starts_with_columns(c, cur_names, cur_types, kCurPrefix) &&
              decoupled::starts_with_columns(p, pending_names, pending_types, kPendingPrefix) &&
              c->natts - kCurPrefix == p->natts - kPendingPrefix;
    for (int i = 0; ok && i < c->natts - kCurPrefix; i++) {
        Form_pg_attribute a = TupleDescAttr(c, kCurPrefix + i);
        Form_pg_attribute b = TupleDescAttr(p, kPendingPrefix + i);
        ok = !a->attisdropped && !b->attisdropped && a->atttypid == b->atttypid &&
             a->atttypmod == b->atttypmod;
    }
    for (int k = 0; ok && k < nkeys; k++)
        ok = key_fields[k] >= 1 && key_fields[k] <= c->natts - kCurPrefix;
    return ok && open_key_index(cur, key_fields, nkeys) &&
           open_key_index(pending, key_fields, nkeys);
}

void close_side(Side* s) {
    if (s->index != nullptr) index_close(s->index, NoLock);
    if (s->heap != nullptr) table_close(s->heap, NoLock);
}

// A row found for the current key: its text and sign.
struct Found {
    char* row;
    int64 diff;
};

int found_cmp(const void* a, const void* b) {
    return strcmp(static_cast<const Found*>(a)->row, static_cast<const Found*>(b)->row);
}

// Prints the table's columns of the row in `slot` as ROW(...)::text does.
char* row_text(TupleTableSlot* slot, int prefix, TupleDesc row_desc, FmgrInfo* record_out) {
    slot_getallattrs(slot);
    return decoupled::record_text(row_desc, record_out, slot->tts_values + prefix,
                                  slot->tts_isnull + prefix);
}

// Every row of the key set in s->keys, into found[*n] (grown as needed),
// printed in `rows`' context; the scan allocates in the caller's.  Returns
// whether a retraction by key (mz_diff 0, in pending) was among them; it
// is not printed (its diff nets nothing).
bool probe(Side* s, IndexScanDesc scan, TupleTableSlot* slot, int nkeys, TupleDesc row_desc,
           FmgrInfo* record_out, MemoryContext rows, Found** found, int* n, int* capacity) {
    bool by_key = false;
    index_rescan(scan, s->keys, nkeys, nullptr, 0);
    while (decoupled::next_stored_row(scan, slot)) {
        int64 diff = 1;
        if (s->prefix == kPendingPrefix) {
            bool isnull = false;
            diff = DatumGetInt64(slot_getattr(slot, 1, &isnull));
        }
        if (diff == 0) {
            by_key = true;
            continue;
        }
        MemoryContext scan_context = MemoryContextSwitchTo(rows);
        if (*n == *capacity) {
            *capacity *= 2;
            *found = (Found*)repalloc(*found, sizeof(Found) * *capacity);
        }
        Found* f = &(*found)[(*n)++];
        f->row = row_text(slot, s->prefix, row_desc, record_out);
        f->diff = diff;
        MemoryContextSwitchTo(scan_context);
        CHECK_FOR_INTERRUPTS();
    }
    return by_key;
}

}  // namespace

namespace decoupled {

bool probe_live_rows(int64 id, const int* key_fields, int nkeys, int nlookups, char** texts,
                     const bool* need_row, KeyRowFound found, KeyRowCurrent current, void* arg) {
    if (nkeys < 1 || nkeys > INDEX_MAX_KEYS) return false;
    MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "pg_decoupled key lookup",
                                                  ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(context);
    Side cur, pending;
    if (!open_sides(id, key_fields, nkeys, &cur, &pending)) {
        close_side(&cur);
        close_side(&pending);
        MemoryContextSwitchTo(caller);
        MemoryContextDelete(context);
        return false;
    }

    // The key's values, read by their base types (a domain's checks are
    // the writer's business, not a lookup's).
    TupleDesc cur_desc = RelationGetDescr(cur.heap);
    FmgrInfo input[INDEX_MAX_KEYS];
    Oid ioparam[INDEX_MAX_KEYS];
    int32 typmod[INDEX_MAX_KEYS];
    for (int k = 0; k < nkeys; k++) {
        Form_pg_attribute a = TupleDescAttr(cur_desc, kCurPrefix + key_fields[k] - 1);
        typmod[k] = a->atttypmod;
        Oid base = getBaseTypeAndTypmod(a->atttypid, &typmod[k]);
        Oid fn;
        getTypeInputInfo(base, &fn, &ioparam[k]);
        fmgr_info(fn, &input[k]);
    }
    // The rows are printed as a record of the table's columns.
    TupleDesc row_desc =
        decoupled::columns_record(cur_desc, kCurPrefix, cur_desc->natts - kCurPrefix);
    FmgrInfo record_out;
    fmgr_info(F_RECORD_OUT, &record_out);

    // One snapshot for both, after this transaction's earlier writes to
    // pending: a tick moving rows from pending to cur meanwhile is seen
    // whole or not at all.
    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    PushActiveSnapshot(snapshot);
    IndexScanDesc cur_scan = index_beginscan(cur.heap, cur.index, snapshot, nkeys, 0);
    IndexScanDesc pending_scan = index_beginscan(pending.heap, pending.index, snapshot, nkeys, 0);
    TupleTableSlot* cur_slot = table_slot_create(cur.heap, nullptr);
    TupleTableSlot* pending_slot = table_slot_create(pending.heap, nullptr);
    MemoryContext per_key =
        AllocSetContextCreate(context, "pg_decoupled key lookup row", ALLOCSET_DEFAULT_SIZES);

    for (int i = 0; i < nlookups; i++) {
        MemoryContextSwitchTo(per_key);
        Datum values[INDEX_MAX_KEYS];
        for (int k = 0; k < nkeys; k++)
            values[k] = InputFunctionCall(&input[k], texts[i * nkeys + k], ioparam[k], typmod[k]);
        for (int c = 0; c < nkeys; c++) {
            cur.keys[c].sk_argument = values[cur.key_of[c]];
            pending.keys[c].sk_argument = values[pending.key_of[c]];
        }
        int n = 0, capacity = 4;
        Found* rows = (Found*)palloc(sizeof(Found) * capacity);
        // The scans allocate as they go (dead items they mark): in the
        // lookup's context, which outlives the key's.
        MemoryContextSwitchTo(context);
        bool by_key = probe(&pending, pending_scan, pending_slot, nkeys, row_desc, &record_out,
                            per_key, &rows, &n, &capacity);
        if (n == 0 && !by_key && !need_row[i]) {
            MemoryContextSwitchTo(per_key);
            current(i, arg);
            MemoryContextReset(per_key);
            continue;
        }
        // cur's row counts unless pending retracts it by its key.
        if (!by_key)
            probe(&cur, cur_scan, cur_slot, nkeys, row_desc, &record_out, per_key, &rows, &n,
                  &capacity);
        MemoryContextSwitchTo(per_key);
        // Net per row: a row pending retracts is no longer live.  Sorted,
        // equal rows are adjacent (a hot key can have many copies pending).
        qsort(rows, n, sizeof(Found), found_cmp);
        for (int a = 0; a < n;) {
            int64 net = 0;
            int b = a;
            for (; b < n && strcmp(rows[a].row, rows[b].row) == 0; b++) net += rows[b].diff;
            if (net > 0) found(i, rows[a].row, arg);
            a = b;
        }
        MemoryContextReset(per_key);
        CHECK_FOR_INTERRUPTS();
    }

    MemoryContextSwitchTo(context);
    ExecDropSingleTupleTableSlot(cur_slot);
    ExecDropSingleTupleTableSlot(pending_slot);
    index_endscan(cur_scan);
    index_endscan(pending_scan);
    PopActiveSnapshot();
    UnregisterSnapshot(snapshot);
    close_side(&cur);
    close_side(&pending);
    MemoryContextSwitchTo(caller);
    MemoryContextDelete(context);
    return true;
}

}  // namespace decoupled
