// The capture worker's pre-filter (brief C14.1): WAL records that change the
// extension's own relations are not decoded at all.
//
// Logical decoding looks at every row change of the database, and most row
// changes in a busy database with pg_decoupled are the extension's own: a
// tick moves every captured row from pending into cur, every view step
// writes its storage, compaction deletes history, and the catalog's rows
// (frontiers, holds) change with all of them.  The append core's writes
// carry the origin decoding drops before queuing (not_decoded.hpp), but
// each still went through decoding's per-record work (the snapshot
// builder, the transaction's lookup, the plugin's origin filter), and the
// rest — compaction, catalog rows — was queued, replayed at commit and
// only then dropped by the plugin.  So the worker reads each record's
// relation file before handing it to decoding, and a row change (insert,
// update, delete, multi-insert or speculative confirmation) of a relation
// in `decoupled` or `decoupled_storage` — never registered, never
// captured: register_table refuses them — only has its transaction noted,
// as decoding does for records it has nothing to decode in.
//
// The set of relation files is read from the current catalog before each
// decoding (never while it runs: decoding reads the catalog as it was).  A
// file the set does not know (a relation created or rewritten since) is
// decoded as before, so a stale set costs time, never a change.  Every
// decoded record was written before the set was read (decoding stops at
// the flush position of before), so a skipped record could only have been
// a registered table's if that table had used the file number before the
// extension's relation did — which PostgreSQL does not do before the OID
// counter wraps around (and a dropped relation's first file segment stays
// until the next checkpoint).  User catalog tables (capture_relations) are
// decoded: decoding reads their history.
//
// PostgreSQL's C style: no C++ object with a destructor lives in these
// frames (the capture worker's errors longjmp through them).
extern "C" {
#include "postgres.h"

#include "access/heapam_xlog.h"
#include "access/rmgr.h"
#include "access/xact.h"
#include "access/xlogreader.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/logical.h"
#include "replication/reorderbuffer.h"
#include "storage/relfilenode.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include "capture_skip.hpp"

namespace {

HTAB* skipped = nullptr;  // RelFileNode -> (itself): relation files not decoded

HTAB* new_set() {
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(RelFileNode);
    info.entrysize = sizeof(RelFileNode);
    info.hcxt = TopMemoryContext;
    return hash_create("pg_decoupled capture skipped relations", 256, &info,
                       HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

// The row changes decoding would queue: those of heap relations.
bool is_row_change(XLogReaderState* record) {
    uint8 info = XLogRecGetInfo(record);
    switch (XLogRecGetRmid(record)) {
        case RM_HEAP_ID:
            switch (info & XLOG_HEAP_OPMASK) {
                case XLOG_HEAP_INSERT:
                case XLOG_HEAP_DELETE:
                case XLOG_HEAP_UPDATE:
                case XLOG_HEAP_HOT_UPDATE:
                // A speculative insertion's confirmation goes with it: decoding
                // refuses one whose insertion it did not see.
                case XLOG_HEAP_CONFIRM:
                    return true;
                default:
                    return false;
            }
        case RM_HEAP2_ID:
            return (info & XLOG_HEAP_OPMASK) == XLOG_HEAP2_MULTI_INSERT;
        default:
            return false;
    }
}

}  // namespace

namespace decoupled {

void capture_skip_refresh() {
    HTAB* set = new_set();
    // The extension's tables and materialized relations and their TOAST
    // tables; unlogged and temporary ones write no row changes.
    const char* sql =
        "WITH r AS (SELECT c.oid, c.reltoastrelid FROM pg_catalog.pg_class c "
        "             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "            WHERE n.nspname IN ('decoupled', 'decoupled_storage') "
        "              AND c.relkind IN ('r', 'm') AND c.relpersistence = 'p' "
        "              AND NOT EXISTS (SELECT FROM pg_catalog.unnest(c.reloptions) o "
        "                               WHERE o LIKE 'user_catalog_table=%'))"
        "SELECT c.reltablespace, pg_catalog.pg_relation_filenode(c.oid) "
        "  FROM (SELECT oid FROM r UNION ALL "
        "        SELECT reltoastrelid FROM r WHERE reltoastrelid <> 0) o "
        "  JOIN pg_catalog.pg_class c ON c.oid = o.oid";
    if (SPI_execute(sql, true, 0) != SPI_OK_SELECT) {
        hash_destroy(set);
        elog(ERROR, "could not read the extension's relations");
    }
    for (uint64 i = 0; i < SPI_processed; ++i) {
        bool spc_null = false, file_null = false;
        Oid spc = DatumGetObjectId(
            SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &spc_null));
        Oid file = DatumGetObjectId(
            SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &file_null));
        if (file_null || !OidIsValid(file)) continue;
        RelFileNode node;
        memset(&node, 0, sizeof(node));
        node.spcNode = OidIsValid(spc) ? spc : MyDatabaseTableSpace;
        node.dbNode = MyDatabaseId;
        node.relNode = file;
        (void)hash_search(set, &node, HASH_ENTER, nullptr);
    }
    if (skipped != nullptr) hash_destroy(skipped);
    skipped = set;
}

void capture_skip_forget() {
    if (skipped != nullptr) hash_destroy(skipped);
    skipped = nullptr;
}

bool capture_skip_record(LogicalDecodingContext* ctx, XLogReaderState* record) {
    if (skipped == nullptr || !is_row_change(record)) return false;
    RelFileNode node;
    if (!XLogRecGetBlockTagExtended(record, 0, &node, nullptr, nullptr, nullptr)) return false;
    if (hash_search(skipped, &node, HASH_FIND, nullptr) == nullptr) return false;
    // What LogicalDecodingProcessRecord does with a record it does not
    // decode: the transaction (and its place under its top transaction) is
    // known from it, so where decoding may restart stays right.
    XLogRecPtr at = record->ReadRecPtr;
    TransactionId top = XLogRecGetTopXid(record);
    if (TransactionIdIsValid(top))
        ReorderBufferAssignChild(ctx->reorder, top, XLogRecGetXid(record), at);
    ReorderBufferProcessXid(ctx->reorder, XLogRecGetXid(record), at);
    return true;
}

}  // namespace decoupled
