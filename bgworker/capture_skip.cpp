// The capture worker's pre-filter (brief C14.1): WAL records that change a
// relation no registered table is captured from are not decoded at all.
//
// Logical decoding looks at every row change of the database, and the
// capture worker needs only those of registered tables.  The rest came in
// two kinds.  The extension's own: a tick moves every captured row from
// pending into cur, every view step writes its storage, compaction deletes
// history, and the catalog's rows (frontiers, holds) change with all of
// them.  And every other table's: a bulk load or a pgbench run on a table
// nobody registered was decoded row by row, queued (spilled to disk past
// logical_decoding_work_mem), replayed at commit and only then dropped by
// the plugin — 17% of the machine's CPU under eight writers of an
// unregistered table on the 2-core machine, more than the replica
// maintaining ten views.  So the worker reads each record's relation file
// before handing it to decoding, and a row change (insert, update, delete,
// multi-insert or speculative confirmation) of a user relation that is
// not a registered table, or of its TOAST table, only has its transaction
// noted, as decoding does for records it has nothing to decode in.
//
// The set of relation files is read from the current catalog before each
// decoding (never while it runs: decoding reads the catalog as it was).  A
// file the set does not know (a relation created or rewritten since) is
// decoded as before, so a set that misses a file costs time, never a
// change.  A file the set names is that of a relation that was not
// registered when the set was read: the set is read again when the
// catalog epoch moves (a registration bumps it) and after the worker
// switches a table to WAL capture itself (capture_worker.cpp,
// changed_here), and a table is WAL-captured only from its adoption, which
// excludes its writers: no change the worker must capture was written
// before a set that skips it was read.  (A table unregistered or dropped
// since its last captured change is skipped from then on: its collection
// is gone, and takes no more rows.)  Every decoded record was written
// before the set was read (decoding stops at the flush position of before),
// so a skipped record could only have been a registered table's if that
// table had used the file number before the skipped relation did — which
// PostgreSQL does not do before the OID counter wraps around (and a dropped
// relation's first file segment stays until the next checkpoint).  System
// catalogs and user catalog tables (capture_relations) are decoded:
// decoding reads their history.
//
// PostgreSQL's C style: no C++ object with a destructor lives in these
// frames (the capture worker's errors longjmp through them).
extern "C" {
#include "postgres.h"

#include "access/heapam_xlog.h"
#include "access/rmgr.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlogreader.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/logical.h"
#include "replication/reorderbuffer.h"
#include "storage/relfilenode.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
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
    // User tables and materialized views (the extension's included) and
    // their TOAST tables, but registered tables and user catalog tables;
    // unlogged and temporary ones write no row changes.  Without the
    // extension's catalog (being dropped) nothing is skipped.
    Oid nsp = get_namespace_oid("decoupled", true);
    if (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("catalog_objects", nsp)) ||
        !OidIsValid(get_relname_relid("capture_relations", nsp))) {
        if (skipped != nullptr) hash_destroy(skipped);
        skipped = set;
        return;
    }
    const char* sql = psprintf(
        "WITH r AS (SELECT c.oid, c.reltoastrelid FROM pg_catalog.pg_class c "
        "            WHERE c.oid >= %u AND c.relkind IN ('r', 'm') AND c.relpersistence = 'p' "
        "              AND NOT EXISTS (SELECT FROM pg_catalog.unnest(c.reloptions) o "
        "                               WHERE o LIKE 'user_catalog_table=%%') "
        "              AND NOT EXISTS (SELECT FROM decoupled.catalog_objects g "
        "                               WHERE g.relation = c.oid AND g.kind = 'table' "
        "                                 AND g.dropped_at IS NULL) "
        "              AND NOT EXISTS (SELECT FROM decoupled.capture_relations w "
        "                               WHERE w.relation = c.oid)) "
        "SELECT c.reltablespace, pg_catalog.pg_relation_filenode(c.oid) "
        "  FROM (SELECT oid FROM r UNION ALL "
        "        SELECT reltoastrelid FROM r WHERE reltoastrelid <> 0) o "
        "  JOIN pg_catalog.pg_class c ON c.oid = o.oid",
        FirstNormalObjectId);
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
