// The logical-decoding output plugin of WAL capture (brief C14.1).
//
// The capture worker (bgworker/capture_worker.cpp) reads the extension's
// slot through pg_logical_slot_peek_changes with this plugin, which is the
// extension's own library: the slot names "pg_decoupled" as its plugin.  It
// emits only committed changes of the tables listed in
// decoupled.capture_relations, one text line each:
//
//   B <commit lsn>          a transaction with captured changes begins
//   <id> (<diff>,<v1>,...)   a row of collection <id>, as a record literal of
//                           its pending table (mz_diff first)
//   <id> T                  collection <id>'s table was truncated
//
// Whether a table is captured is read from decoupled.capture_relations (a
// user catalog table) under the decoding's historic snapshot, so a change is
// captured exactly when the table was captured from WAL at that point of
// the commit order: adoption and release are ordinary transactions.  The
// answer is cached per relation, with the columns' output functions; every
// change to capture_relations comes with a relcache invalidation of its
// table (the capture triggers it creates or drops), which decoding replays
// at the right point.
//
// Retractions (brief C14.2).  A registered table with a primary key keeps
// REPLICA IDENTITY DEFAULT: the WAL carries an UPDATE's and a DELETE's old
// key only, and an UPDATE leaves its unchanged TOASTed values out.  For such
// a table the plugin emits the key, and the worker finds the row it names
// (extension/core/keyed_changes.hpp):
//
//   <id> K (<k1>,...)        the live row with this key is retracted
//   <id> U <f>,... (1,...)   an inserted row whose fields f (positions in
//                           the record, mz_diff being 0) were not in the
//                           WAL: they are the retracted row's, the line
//                           before
//
// A table without one has REPLICA IDENTITY FULL: the old row is complete in
// the WAL and retracted as it is, and an UPDATE's unchanged TOASTed values
// are taken from it.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/bitmapset.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
}

#include "capture.hpp"
#include "core/record_text.hpp"
#include "gucs.hpp"

extern "C" {
PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks* cb);
}

namespace {

struct CaptureEntry {
    Oid relid;  // hash key
    bool valid;
    int64 lifetime_id;  // 0: not captured
    // The output function of each column (natts of them), looked up at the
    // first captured row instead of at every value; in CacheMemoryContext,
    // freed at the first lookup after the entry was invalidated.
    int natts;
    FmgrInfo* out;
    // Retractions by key: the key's attribute numbers, ascending (nkeys = 0:
    // the old row is in the WAL).  Looked up with the output functions.
    int nkeys;
    AttrNumber* keys;
};

// Process-wide, like pgoutput's relation cache: relcache callbacks cannot
// be unregistered, so they are registered once and find the cache here.
HTAB* capture_cache = nullptr;
bool callback_registered = false;

struct PluginState {
    MemoryContext change_context;  // reset after every change
    bool begun;                    // this transaction's B line is out
};

// What an entry allocated for its rows (an invalidation only marks it: it
// may arrive while a row is being written with them).
void free_entry(CaptureEntry* entry) {
    if (entry->out != nullptr) pfree(entry->out);
    if (entry->keys != nullptr) pfree(entry->keys);
    entry->out = nullptr;
    entry->keys = nullptr;
    entry->nkeys = 0;
}

void invalidate(Datum, Oid relid) {
    if (capture_cache == nullptr) return;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, capture_cache);
    CaptureEntry* entry;
    while ((entry = static_cast<CaptureEntry*>(hash_seq_search(&seq))) != nullptr)
        if (relid == InvalidOid || entry->relid == relid) entry->valid = false;
}

// The entries' allocations, then the cache.
void destroy_cache() {
    if (capture_cache == nullptr) return;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, capture_cache);
    CaptureEntry* entry;
    while ((entry = static_cast<CaptureEntry*>(hash_seq_search(&seq))) != nullptr)
        free_entry(entry);
    hash_destroy(capture_cache);
    capture_cache = nullptr;
}

// decoupled.capture_relations under the historic snapshot: the collection
// `relid` is captured into, or 0.
int64 read_capture(Oid relid) {
    Oid nsp = get_namespace_oid("decoupled", true);
    Oid table = OidIsValid(nsp) ? get_relname_relid("capture_relations", nsp) : InvalidOid;
    Oid index = OidIsValid(nsp) ? get_relname_relid("capture_relations_pkey", nsp) : InvalidOid;
    if (!OidIsValid(table) || !OidIsValid(index)) return 0;
    Relation rel = table_open(table, AccessShareLock);
    if (!RelationIsUsedAsCatalogTable(rel))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("decoupled.capture_relations is not a user catalog table")));
    ScanKeyData key;
    ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(rel, index, true, nullptr, 1, &key);
    int64 id = 0;
    HeapTuple tuple = systable_getnext(scan);
    if (HeapTupleIsValid(tuple)) {
        bool isnull = false;
        Datum d = heap_getattr(tuple, 2, RelationGetDescr(rel), &isnull);
        if (!isnull) id = DatumGetInt64(d);
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return id;
}

// The capture entry of `relation` when it is captured, else nullptr.
CaptureEntry* captured(Relation relation) {
    Oid relid = RelationGetRelid(relation);
    // Only ordinary tables of users can be registered.
    if (relation->rd_rel->relkind != RELKIND_RELATION || IsCatalogRelation(relation))
        return nullptr;
    bool found = false;
    auto* entry = static_cast<CaptureEntry*>(hash_search(capture_cache, &relid, HASH_ENTER, &found));
    if (!found) {
        entry->out = nullptr;
        entry->keys = nullptr;
        entry->nkeys = 0;
    }
    if (!found || !entry->valid) {
        entry->valid = false;
        free_entry(entry);
        entry->lifetime_id = read_capture(relid);
        entry->valid = true;
    }
    return entry->lifetime_id != 0 ? entry : nullptr;
}

// The columns' output functions of a captured relation's entry, and its
// key when its retractions are located by key.
FmgrInfo* output_functions(CaptureEntry* entry, Relation relation) {
    TupleDesc desc = RelationGetDescr(relation);
    if (entry->out != nullptr && entry->natts == desc->natts) return entry->out;
    free_entry(entry);  // not in use: called before a row
    if (relation->rd_rel->relreplident == REPLICA_IDENTITY_DEFAULT) {
        Bitmapset* key = RelationGetIdentityKeyBitmap(relation);
        entry->keys = static_cast<AttrNumber*>(MemoryContextAlloc(
            CacheMemoryContext, sizeof(AttrNumber) * Max(bms_num_members(key), 1)));
        int member = -1;
        while ((member = bms_next_member(key, member)) >= 0)
            entry->keys[entry->nkeys++] = member + FirstLowInvalidHeapAttributeNumber;
        bms_free(key);
    }
    auto* out = static_cast<FmgrInfo*>(
        MemoryContextAllocZero(CacheMemoryContext, sizeof(FmgrInfo) * Max(desc->natts, 1)));
    for (int i = 0; i < desc->natts; ++i) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        Oid output;
        bool varlena;
        getTypeOutputInfo(att->atttypid, &output, &varlena);
        fmgr_info_cxt(output, &out[i], CacheMemoryContext);
    }
    entry->natts = desc->natts;
    entry->out = out;
    return out;
}

void startup(LogicalDecodingContext* ctx, OutputPluginOptions* opt, bool) {
    auto* state = static_cast<PluginState*>(MemoryContextAllocZero(ctx->context, sizeof(PluginState)));
    state->change_context =
        AllocSetContextCreate(ctx->context, "pg_decoupled capture", ALLOCSET_DEFAULT_SIZES);
    ctx->output_plugin_private = state;
    opt->output_type = OUTPUT_PLUGIN_TEXTUAL_OUTPUT;
    opt->receive_rewrites = false;
    if (ctx->output_plugin_options != NIL)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("the pg_decoupled output plugin takes no options")));

    // A new decoding may start before where the cache was filled: start over.
    destroy_cache();
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(Oid);
    info.entrysize = sizeof(CaptureEntry);
    info.hcxt = CacheMemoryContext;
    capture_cache = hash_create("pg_decoupled capture relations", 64, &info,
                                HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(invalidate, (Datum)0);
        callback_registered = true;
    }
}

void shutdown(LogicalDecodingContext*) { destroy_cache(); }

void begin(LogicalDecodingContext* ctx, ReorderBufferTXN*) {
    static_cast<PluginState*>(ctx->output_plugin_private)->begun = false;
}

void commit(LogicalDecodingContext*, ReorderBufferTXN*, XLogRecPtr) {}

void emit_begin(LogicalDecodingContext* ctx, ReorderBufferTXN* txn) {
    auto* state = static_cast<PluginState*>(ctx->output_plugin_private);
    if (state->begun) return;
    OutputPluginPrepareWrite(ctx, true);
    appendStringInfo(ctx->out, "B " UINT64_FORMAT, (uint64)txn->final_lsn);
    OutputPluginWrite(ctx, true);
    state->begun = true;
}

// The name of the relation whose change is being turned into a line.
const char* decoding_relation = nullptr;

// A line is one text value: it cannot pass 1 GB, and its row may be held
// to less (decoupled.capture_max_row_size).  Some room is kept for the
// punctuation appended after a field.
[[noreturn]] void row_too_large() {
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("a changed row of registered table \"%s\" is too large to capture",
                           decoding_relation ? decoding_relation : "?"),
                    errdetail("Its text as a record passes decoupled.capture_max_row_size "
                              "(%d kB).",
                              decoupled::guc_capture_max_row_size)));
}

void append_field(StringInfo out, FmgrInfo* output, Datum value) {
    char* text = OutputFunctionCall(output, value);
    size_t size = decoupled::record_field_size(text);
    const size_t limit =
        Min((size_t)decoupled::guc_capture_max_row_size * 1024, (size_t)MaxAllocSize - 1024);
    if ((size_t)out->len >= limit || size >= limit - (size_t)out->len) row_too_large();
    enlargeStringInfo(out, (int)size);
    decoupled::record_field_write(text, out->data + out->len);
    out->len += (int)size;
    out->data[out->len] = '\0';
}

// An unchanged TOASTed value of an UPDATE's new row: the WAL has only a
// pointer into the table's TOAST relation, which decoding cannot read.
bool unchanged_toast(Form_pg_attribute att, Datum value, bool isnull) {
    return !isnull && att->attlen == -1 && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(value));
}

[[noreturn]] void toast_not_in_wal(Form_pg_attribute att) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("an unchanged TOASTed value of \"%s\" is not in the WAL",
                           NameStr(att->attname)),
                    errhint("Registered tables need a primary key or REPLICA IDENTITY FULL.")));
}

// One row as a record literal of the pending table: (diff,v1,...).  A value
// the WAL does not carry (an UPDATE's unchanged TOASTed value) comes from
// `fallback`, the complete old row, or is left out and its position added
// to `masked`.
void append_row(StringInfo out, int diff, TupleDesc desc, FmgrInfo* outputs,
                HeapTuple tuple, HeapTuple fallback, StringInfo masked) {
    appendStringInfo(out, "(%d", diff);
    int field = 0;
    for (int i = 0; i < desc->natts; ++i) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        ++field;
        appendStringInfoChar(out, ',');
        bool isnull = false;
        Datum value = heap_getattr(tuple, i + 1, desc, &isnull);
        if (unchanged_toast(att, value, isnull)) {
            if (fallback != nullptr) {
                value = heap_getattr(fallback, i + 1, desc, &isnull);
            } else if (masked != nullptr) {
                if (masked->data == nullptr) initStringInfo(masked);  // rare: made when needed
                appendStringInfo(masked, "%s%d", masked->len > 0 ? "," : "", field);
                continue;
            } else {
                toast_not_in_wal(att);
            }
        }
        if (!isnull) append_field(out, &outputs[i], value);
    }
    appendStringInfoChar(out, ')');
}

void emit_row(LogicalDecodingContext* ctx, int64 id, int diff, TupleDesc desc,
              FmgrInfo* outputs, HeapTuple tuple, HeapTuple fallback) {
    OutputPluginPrepareWrite(ctx, true);
    appendStringInfo(ctx->out, INT64_FORMAT " ", id);
    append_row(ctx->out, diff, desc, outputs, tuple, fallback, nullptr);
    OutputPluginWrite(ctx, true);
}

// The key of `tuple` (an old key from the WAL, or a new row whose key did
// not change): "<id> K (k1,...)".
void emit_key(LogicalDecodingContext* ctx, int64 id, CaptureEntry* entry, TupleDesc desc,
              FmgrInfo* outputs, HeapTuple tuple) {
    OutputPluginPrepareWrite(ctx, true);
    appendStringInfo(ctx->out, INT64_FORMAT " K (", id);
    for (int k = 0; k < entry->nkeys; ++k) {
        int i = entry->keys[k] - 1;
        Form_pg_attribute att = TupleDescAttr(desc, i);
        bool isnull = false;
        Datum value = heap_getattr(tuple, i + 1, desc, &isnull);
        if (unchanged_toast(att, value, isnull)) toast_not_in_wal(att);
        if (k > 0) appendStringInfoChar(ctx->out, ',');
        if (!isnull) append_field(ctx->out, &outputs[i], value);
    }
    appendStringInfoChar(ctx->out, ')');
    OutputPluginWrite(ctx, true);
}

// An UPDATE's new row after its key: "<id> (1,...)", or "<id> U <f>,...
// (1,...)" when values were left out.
// The row is written in place; the rare mask goes in front of it after.
void emit_new_row(LogicalDecodingContext* ctx, int64 id, TupleDesc desc, FmgrInfo* outputs,
                  HeapTuple tuple) {
    StringInfoData masked;
    masked.data = nullptr;
    OutputPluginPrepareWrite(ctx, true);
    appendStringInfo(ctx->out, INT64_FORMAT " ", id);
    int at = ctx->out->len;
    append_row(ctx->out, 1, desc, outputs, tuple, nullptr, &masked);
    if (masked.data != nullptr) {
        char* prefix = psprintf("U %s ", masked.data);
        int n = (int)strlen(prefix);
        enlargeStringInfo(ctx->out, n);
        memmove(ctx->out->data + at + n, ctx->out->data + at, ctx->out->len - at + 1);
        memcpy(ctx->out->data + at, prefix, n);
        ctx->out->len += n;
    }
    OutputPluginWrite(ctx, true);
}

[[noreturn]] void missing_old_row(Relation relation) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("the old row of a change to \"%s\" is not in the WAL",
                           RelationGetRelationName(relation)),
                    errhint("Registered tables need a primary key or REPLICA IDENTITY FULL.")));
}

void change(LogicalDecodingContext* ctx, ReorderBufferTXN* txn, Relation relation,
            ReorderBufferChange* change) {
    CaptureEntry* entry = captured(relation);
    if (entry == nullptr) return;
    int64 id = entry->lifetime_id;
    if (decoupled::capture_leaves_out != nullptr &&
        decoupled::capture_leaves_out(id, (uint64_t)txn->final_lsn))
        return;
    // Until the line is written: an error here is this table's.
    decoupled::capture_decoding_table = id;
    decoding_relation = RelationGetRelationName(relation);
    TupleDesc desc = RelationGetDescr(relation);
    FmgrInfo* outputs = output_functions(entry, relation);
    auto* state = static_cast<PluginState*>(ctx->output_plugin_private);
    MemoryContext old = MemoryContextSwitchTo(state->change_context);
    emit_begin(ctx, txn);
    ReorderBufferTupleBuf* oldtuple = change->data.tp.oldtuple;
    ReorderBufferTupleBuf* newtuple = change->data.tp.newtuple;
    bool by_key = entry->nkeys > 0;
    switch (change->action) {
        case REORDER_BUFFER_CHANGE_INSERT:
            if (newtuple) emit_row(ctx, id, 1, desc, outputs, &newtuple->tuple, nullptr);
            break;
        case REORDER_BUFFER_CHANGE_UPDATE:
            if (by_key) {
                // Without a key change the WAL has no old key: the new row's is it.
                if (oldtuple == nullptr && newtuple == nullptr) missing_old_row(relation);
                emit_key(ctx, id, entry, desc, outputs,
                         oldtuple ? &oldtuple->tuple : &newtuple->tuple);
                if (newtuple) emit_new_row(ctx, id, desc, outputs, &newtuple->tuple);
                break;
            }
            if (oldtuple == nullptr) missing_old_row(relation);
            emit_row(ctx, id, -1, desc, outputs, &oldtuple->tuple, nullptr);
            if (newtuple) emit_row(ctx, id, 1, desc, outputs, &newtuple->tuple, &oldtuple->tuple);
            break;
        case REORDER_BUFFER_CHANGE_DELETE:
            if (oldtuple == nullptr) missing_old_row(relation);
            if (by_key)
                emit_key(ctx, id, entry, desc, outputs, &oldtuple->tuple);
            else
                emit_row(ctx, id, -1, desc, outputs, &oldtuple->tuple, nullptr);
            break;
        default:
            break;
    }
    MemoryContextSwitchTo(old);
    MemoryContextReset(state->change_context);
    decoupled::capture_decoding_table = 0;
    decoding_relation = nullptr;
}

void truncate(LogicalDecodingContext* ctx, ReorderBufferTXN* txn, int nrelations,
              Relation relations[], ReorderBufferChange*) {
    for (int i = 0; i < nrelations; ++i) {
        CaptureEntry* entry = captured(relations[i]);
        if (entry == nullptr) continue;
        int64 id = entry->lifetime_id;
        emit_begin(ctx, txn);
        OutputPluginPrepareWrite(ctx, true);
        appendStringInfo(ctx->out, INT64_FORMAT " T", id);
        OutputPluginWrite(ctx, true);
    }
}

// The capture worker writes pending changes marked "do not replicate":
// decoding drops them before queuing, so it never decodes its own output.
bool filter_by_origin(LogicalDecodingContext*, RepOriginId origin) {
    return origin == DoNotReplicateId;
}

}  // namespace

namespace decoupled {
int64_t capture_decoding_table = 0;
bool (*capture_leaves_out)(int64_t id, uint64_t commit_lsn) = nullptr;
}  // namespace decoupled

void _PG_output_plugin_init(OutputPluginCallbacks* cb) {
    cb->filter_by_origin_cb = filter_by_origin;
    cb->startup_cb = startup;
    cb->begin_cb = begin;
    cb->change_cb = change;
    cb->truncate_cb = truncate;
    cb->commit_cb = commit;
    cb->shutdown_cb = shutdown;
}
