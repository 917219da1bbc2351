// The collection write path with kept plans (brief C2.1, C14.3).
//
// Every write into a collection — decoupled.append() and replica_append()
// (_compare_and_append), a view's step (_append_staged) and a registered
// table's tick (tick_tables) — runs the statements below.  Each names the
// collection's own storage, so PL/pgSQL could only run it as dynamic SQL,
// parsed and planned again on every call: most of what a small append or a
// tick of a few rows cost.  Here each statement is prepared once per
// backend, collection and kind (SPI_prepare + SPI_keepplan, as pg_ivm keeps
// its plans per view and query kind) and executed from the plan cache.
//
// Validity.  PostgreSQL's plan cache already re-plans a kept plan when a
// relation it reads changes (DDL, ANALYZE) and re-resolves its names if one
// was dropped.  What it cannot know is that a lifetime id now names other
// storage: after DROP EXTENSION and CREATE EXTENSION lifetime ids start
// again, with other columns.  So an entry remembers the OID of its `cur`
// relation and is rebuilt when the relation with that name has another.
// Within one lifetime id the columns never change (ALTER TABLE of a
// registered table is refused; a table re-registered after changing its
// columns is a new collection).
//
// Memory.  A kept plan of these statements takes 10 to 200 kB (the
// one-statement writes with their CTEs are the large ones), a collection
// uses two to five kinds.  At most kMaxPlans are kept in a backend; when a
// new one needs room, the least recently used collection forgets all of
// its plans (a tick of more busy tables than fit prepares some again, as
// every tick did before).  An entry is pinned while a write uses its plans,
// so none is freed under a running statement; pins are cleared at the end
// of the transaction (an error skips the unpin).
//
// Ticks.  tick_tables() takes one snapshot after locking the tables'
// frontiers and moves, for every table, exactly the captured rows that
// snapshot sees: a writer's transaction that changed several tables lands
// in one tick for all of them.  A table with no visible pending row is
// idle; that is a scan that stops at the first visible tuple, not a
// statement, and one statement advances the uppers of all idle (and
// successfully ticked) tables and queues them for publication.  Busy tables
// tick one by one in a subtransaction each, as before: one that fails keeps
// its pending rows and upper and is reported stalled.
//
// This file is C-style C++: no object with a destructor lives in a frame
// that PostgreSQL may leave by longjmp, so errors are plain ereports.
extern "C" {
#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "storage/bufmgr.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "caller.hpp"
#include "capture.hpp"
#include "domain_types.hpp"
#include "gucs.hpp"
#include "history_writes.hpp"
#include "index_tick.hpp"
#include "replace_rows.hpp"
#include "kept_statements.hpp"
#include "not_decoded.hpp"
#include "plan_growth.hpp"
#include "scratch.hpp"
#include "storage_names.hpp"
#include "write_locks.hpp"
#include "core/write_path.hpp"
#include "oracle.hpp"
#include "wait_functions.hpp"
#include "written_plan.hpp"
#include "wait_points.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_append_staged);
PG_FUNCTION_INFO_V1(decoupled_compare_and_append);
PG_FUNCTION_INFO_V1(decoupled_tick_tables);
PG_FUNCTION_INFO_V1(decoupled_replace_staged);
}

namespace {

// What one append may write (brief C2.1; see 31_append.sql): a multiplicity
// is stored as that many rows.
constexpr int64 kMaxDiff = 1000000;
// How long a session's tick, and the controller's, wait for WAL capture
// (decoupled_tick_tables).
constexpr int kCaptureWaitMs = 10000;
constexpr int kControllerCaptureWaitMs = 250;
// How long the controller's tick tries to hold off the writers of the
// trigger-captured tables of a mixed tick (all of them, together).
constexpr int kControllerHoldOffMs = 100;
constexpr int64 kMaxUnits = 10000000;
// Per-collection plans kept in a backend: at most about 25 MB, typically
// 10 MB (what a tick, a view step or an append of about 50 collections
// uses).
constexpr int kMaxPlans = 128;

enum PlanKind {
    kStageShape,         // what a caller (a view step) staged
    kStageCopies,        // cur <- stage, every multiplicity 1
    kStageMultiplied,    // cur <- stage, every multiplicity positive
    kStageConsolidated,  // cur <- stage, net positive multiplicities
    kOneTimeProbe,       // stage -> cur, dead at one time; retracted rows by index probes
    kOneTimeScan,        // the same; retracted rows by one hash join over cur
    kRetractGeneral,     // cur -> dead, net retractions at several times
    kDrainStageTable,    // rows a 1.0 catalog's step put in the stage's table
    kJsonToCur,          // JSON updates that only insert, straight into cur
    kJsonToStage,
    kPendingShape,       // a registered table's captured rows
    kPendingToCur,       // captured rows that only insert, straight into cur
    kTickProbe,          // captured rows -> cur, dead (as kOneTimeProbe, without the stage)
    kTickScan,           // the same as kOneTimeScan
    kPlanKinds
};

struct Collection {
    int64 lifetime_id;  // hash key
    Oid cur_relid;      // the storage these plans were made for
    Oid stage_relid;    // its stage: a scratch relation (scratch.hpp)
    int pins;
    char* name;
    int ncols;
    char** names;        // column names, in order
    char** quoted;       // the same, quoted as identifiers
    bool* is_key;        // whether each column is in the table's primary key
    int nkeys;           // how many are: a registered table with a key pairs by it
    Datum column_names;  // text[] of the names, for _update_problem
    // The relation's owner when a column's type reaches a domain (through
    // arrays, composites, ranges), else InvalidOid: a domain's CHECK is
    // code its author wrote, so values are converted as that owner, in a
    // security-restricted operation, never with the extension's rights.
    Oid converts_as;
    SPIPlanPtr plans[kPlanKinds];
    uint64 last_used;    // a tick of use_clock
};

HTAB* collections = nullptr;
uint64 use_clock = 0;
int nplans = 0;  // kept per-collection plans
MemoryContext cache_context = nullptr;
bool xact_callback_registered = false;

// Collection-independent statements, kept for the backend's life.
SPIPlanPtr lock_frontier_plan = nullptr;
SPIPlanPtr columns_plan = nullptr;
SPIPlanPtr advance_plan = nullptr;
SPIPlanPtr tick_lock_plan[2] = {nullptr, nullptr};       // without, with capture_resyncs
SPIPlanPtr tick_lock_skip_plan[2] = {nullptr, nullptr};
SPIPlanPtr tick_held_plan[2] = {nullptr, nullptr};        // the frontiers it skipped
SPIPlanPtr wal_tables_plan = nullptr;
SPIPlanPtr trigger_tables_plan = nullptr;
SPIPlanPtr wal_signature_plan = nullptr;
SPIPlanPtr stalled_plan = nullptr;
SPIPlanPtr table_health_plan = nullptr;
SPIPlanPtr ticked_plan = nullptr;
SPIPlanPtr unlog_plan = nullptr;

void clear_pins(XactEvent event, void*) {
    if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
        event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT &&
        event != XACT_EVENT_PREPARE)
        return;
    if (!collections) return;
    HASH_SEQ_STATUS status;
    hash_seq_init(&status, collections);
    while (Collection* c = (Collection*)hash_seq_search(&status)) c->pins = 0;
}

void ensure_cache() {
    if (collections) return;
    cache_context = AllocSetContextCreate(TopMemoryContext, "decoupled write plans",
                                          ALLOCSET_SMALL_SIZES);
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = sizeof(int64);
    ctl.entrysize = sizeof(Collection);
    ctl.hcxt = cache_context;
    collections = hash_create("decoupled write plans", 64, &ctl,
                              HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    if (!xact_callback_registered) {
        RegisterXactCallback(clear_pins, nullptr);
        xact_callback_registered = true;
    }
}

void free_plans(Collection* c) {
    for (int k = 0; k < kPlanKinds; k++) {
        if (c->plans[k]) {
            SPI_freeplan(c->plans[k]);
            nplans--;
        }
        c->plans[k] = nullptr;
    }
}

void forget(Collection* c) {
    free_plans(c);
    if (c->name) pfree(c->name);
    for (int i = 0; i < c->ncols; i++) {
        pfree(c->names[i]);
        pfree(c->quoted[i]);
    }
    if (c->names) pfree(c->names);
    if (c->quoted) pfree(c->quoted);
    if (c->is_key) pfree(c->is_key);
    if (c->column_names) pfree(DatumGetPointer(c->column_names));
    int64 key = c->lifetime_id;
    hash_search(collections, &key, HASH_REMOVE, nullptr);
}

// Least recently used collections forget their plans until one more plan
// fits; pinned ones (in use by this transaction) keep them, so the limit
// may be passed while every collection with plans is in use.  A scan of the
// entries, only when the plans are at the limit.
void make_room() {
    while (nplans >= kMaxPlans) {
        Collection* oldest = nullptr;
        HASH_SEQ_STATUS status;
        hash_seq_init(&status, collections);
        while (Collection* c = (Collection*)hash_seq_search(&status))
            if (c->pins == 0 && (!oldest || c->last_used < oldest->last_used)) oldest = c;
        if (!oldest) return;
        forget(oldest);
    }
}

// A generic plan, always: with parameters the plan cache would otherwise
// compare custom plans with the generic one and, when a custom plan looks
// cheaper (a one-element id array, a known time), plan every call again.
SPIPlanPtr prepare_kept(const char* sql, int nargs, Oid* types) {
    SPIPlanPtr plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);
    if (!plan)
        elog(ERROR, "could not prepare a write statement: %s", SPI_result_code_string(SPI_result));
    if (SPI_keepplan(plan) != 0) elog(ERROR, "could not keep a write statement's plan");
    return plan;
}

SPIPlanPtr global_plan(SPIPlanPtr* slot, const char* sql, int nargs, Oid* types) {
    if (!*slot) *slot = prepare_kept(sql, nargs, types);
    return *slot;
}

// Executes `plan`; with `snapshot`, reads as of it (its command id advanced
// past this transaction's earlier statements).
void run(SPIPlanPtr plan, Datum* values, Snapshot snapshot = nullptr) {
    int rc = snapshot ? SPI_execute_snapshot(plan, values, nullptr, snapshot, InvalidSnapshot,
                                             false, true, 0)
                      : SPI_execute_plan(plan, values, nullptr, false, 0);
    if (rc < 0) elog(ERROR, "write statement failed: %s", SPI_result_code_string(rc));
}

// Executes `plan` (see execute_into), sending its rows to `dest`.
void run_into(SPIPlanPtr plan, const Datum* value, Oid type, DestReceiver* dest) {
    int rc = decoupled::execute_into(plan, value, type, dest);
    if (rc < 0) elog(ERROR, "write statement failed: %s", SPI_result_code_string(rc));
}

// Runs the statement kept in *slot (prepared from `sql` on first use) with
// a lifetime id as $1.
void run_for_id(SPIPlanPtr* slot, const char* sql, int64 id) {
    Oid types[1] = {INT8OID};
    Datum args[1] = {Int64GetDatum(id)};
    run(global_plan(slot, sql, 1, types), args);
}

bool get_int8(int row, int col, int64* out) {
    bool isnull = false;
    Datum d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
    if (!isnull) *out = DatumGetInt64(d);
    return !isnull;
}

std::optional<int64> opt_int8(int row, int col) {
    int64 v = 0;
    if (get_int8(row, col, &v)) return v;
    return std::nullopt;
}

char* get_text(int row, int col) {
    return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

using decoupled::storage_relid;

// ", p.a, p.b" (leading) or "p.a, p.b": the columns, each with `prefix`.
char* column_list(const Collection* c, const char* prefix, bool leading) {
    StringInfoData s;
    initStringInfo(&s);
    for (int i = 0; i < c->ncols; i++)
        appendStringInfo(&s, "%s%s%s", (leading || i > 0) ? ", " : "", prefix, c->quoted[i]);
    return s.data;
}

// ", p.a" (leading) or "p.a": the key columns, each with `prefix`.
char* key_list(const Collection* c, const char* prefix, bool leading) {
    StringInfoData s;
    initStringInfo(&s);
    for (int i = 0, n = 0; i < c->ncols; i++)
        if (c->is_key[i])
            appendStringInfo(&s, "%s%s%s", (leading || n++ > 0) ? ", " : "", prefix, c->quoted[i]);
    return s.data;
}

// "c.a = r.a AND c.b = r.b": the key columns of `left` and `right` equal
// (a primary key's columns are never null; a table is keyed only where
// they are of built-in types, whose equality is pg_catalog's).
char* key_equal(const Collection* c, const char* left, const char* right) {
    StringInfoData s;
    initStringInfo(&s);
    for (int i = 0; i < c->ncols; i++)
        if (c->is_key[i])
            appendStringInfo(&s, "%s%s.%s OPERATOR(pg_catalog.=) %s.%s", s.len ? " AND " : "",
                             left, c->quoted[i], right, c->quoted[i]);
    return s.data;
}

// The collection's entry, pinned: built (columns from the catalog) if this
// backend has none, or none for the storage that now has this id.
// The owner `c`'s values are converted as (Collection::converts_as): a
// registered table's owner, or a view's (or source's) creator — never the
// owner of its public relation, which is the extension's.
Oid conversion_owner(Oid cur, Oid owner) {
    Relation rel = relation_open(cur, AccessShareLock);
    TupleDesc desc = RelationGetDescr(rel);
    bool domains = false;
    for (int i = 0; i < desc->natts && !domains; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        domains = !a->attisdropped && decoupled::reaches_domain(a->atttypid);
    }
    relation_close(rel, AccessShareLock);
    if (!domains) return InvalidOid;
    if (!OidIsValid(owner) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner)))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("collection storage %u has a domain column but no owner", cur)));
    return owner;
}

Collection* collection(int64 id) {
    ensure_cache();
    Oid cur = storage_relid(id, "cur");
    Oid stage = storage_relid(id, "stage");
    if (!OidIsValid(cur) || !OidIsValid(stage))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("storage of collection " INT64_FORMAT " does not exist", id)));
    bool found = false;
    Collection* c = (Collection*)hash_search(collections, &id, HASH_FIND, &found);
    if (found && c->cur_relid == cur) {
        c->last_used = ++use_clock;
        c->pins++;
        return c;
    }
    if (found) {
        if (c->pins > 0)
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("storage of collection " INT64_FORMAT
                                   " changed during a write to it", id)));
        forget(c);
    }

    // Everything that can fail comes before the entry exists.
    run_for_id(&columns_plan,
               "SELECT o.name::text, c->>'name', "
               "       coalesce(c->>'name' = ANY (ARRAY(SELECT jsonb_array_elements_text( "
               "                                            o.definition->'key'))), false), "
               "       CASE WHEN o.kind = 'table' "
               "            THEN (SELECT c.relowner FROM pg_catalog.pg_class c "
               "                   WHERE c.oid = o.relation) "
               "            ELSE (o.definition->>'owner')::oid END "
               "  FROM decoupled.catalog_objects o "
               "  LEFT JOIN LATERAL jsonb_array_elements(o.definition->'columns') "
               "       WITH ORDINALITY AS x(c, ord) ON true "
               " WHERE o.lifetime_id = $1 ORDER BY x.ord",
               id);
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("collection " INT64_FORMAT " does not exist", id)));
    // Built in this call's memory, then copied into the cache's: nothing
    // of the building stays there.
    uint64 rows = SPI_processed;
    bool no_owner = false;
    Oid owner = DatumGetObjectId(
        SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &no_owner));
    Oid converts_as = conversion_owner(cur, no_owner ? InvalidOid : owner);
    char* name = MemoryContextStrdup(cache_context, get_text(0, 1));
    int ncols = 0;
    char** raw = (char**)MemoryContextAllocZero(cache_context, sizeof(char*) * rows);
    char** quoted = (char**)MemoryContextAllocZero(cache_context, sizeof(char*) * rows);
    bool* is_key = (bool*)MemoryContextAllocZero(cache_context, sizeof(bool) * rows);
    int nkeys = 0;
    Datum* texts = (Datum*)palloc0(sizeof(Datum) * rows);
    for (uint64 r = 0; r < rows; r++) {
        char* col = get_text(r, 2);
        if (!col) continue;  // no columns at all
        raw[ncols] = MemoryContextStrdup(cache_context, col);
        quoted[ncols] = MemoryContextStrdup(cache_context, quote_identifier(col));
        bool isnull = false;
        is_key[ncols] = DatumGetBool(
            SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 3, &isnull));
        if (is_key[ncols]) nkeys++;
        texts[ncols] = CStringGetTextDatum(col);
        ncols++;
    }
    MemoryContext old = MemoryContextSwitchTo(cache_context);
    ArrayType* array = construct_array(texts, ncols, TEXTOID, -1, false, TYPALIGN_INT);
    MemoryContextSwitchTo(old);

    c = (Collection*)hash_search(collections, &id, HASH_ENTER, &found);
    c->cur_relid = cur;
    c->stage_relid = stage;
    c->pins = 1;
    c->name = name;
    c->ncols = ncols;
    c->names = raw;
    c->quoted = quoted;
    c->is_key = is_key;
    c->nkeys = nkeys;
    c->column_names = PointerGetDatum(array);
    c->converts_as = converts_as;
    for (int k = 0; k < kPlanKinds; k++) c->plans[k] = nullptr;
    c->last_used = ++use_clock;
    return c;
}

void unpin(Collection* c) {
    if (c->pins > 0) c->pins--;
}

// The text of statement `kind` for collection `c`.
char* statement(const Collection* c, PlanKind kind, int* nargs, Oid* types) {
    int64 id = c->lifetime_id;
    char* cur = decoupled::storage_name(id, "cur");
    char* dead = decoupled::storage_name(id, "dead");
    // The stage is read as the scratch it is (in memory); it is written
    // by receivers, not statements.
    char* stage = decoupled::scratch_name(c->stage_relid);
    char* pending = decoupled::storage_name(id, "pending");
    char* cols = column_list(c, "", true);        // ", a, b"
    char* s_cols = column_list(c, "s.", true);    // ", s.a, s.b"
    char* m_row = column_list(c, "m.", false);    // "m.a, m.b"
    char* r_row = column_list(c, "r.", false);
    char* c_row = column_list(c, "c.", false);
    // The copies of retracted row r present in cur, found through the row
    // hash index and nothing else: OFFSET 0 keeps the ordering and limit
    // of the caller out of this scan, so no plan walks an index on mz_ts or
    // mz_rowid for them (which, once per retracted row, is quadratic).
    char* copies = psprintf(
        "SELECT c.ctid, c.mz_ts, c.mz_rowid FROM %s c "
        " WHERE c.mz_hash = r.mz_hash AND ROW(%s)::text = r.mz_key OFFSET 0",
        cur, c_row);
    // A registered table with a primary key finds them through the index
    // on its key instead (r carries the key columns), so its cur needs no
    // row hash index (register_table drops it): with random hashes every
    // inserted row landed on another leaf page, 40% of a tick's inserts.
    bool keyed = c->nkeys > 0;
    const char* r_keys = keyed ? key_list(c, "", true) : "";
    if (keyed)
        copies = psprintf(
            "SELECT c.ctid, c.mz_ts, c.mz_rowid FROM %s c "
            " WHERE %s AND ROW(%s)::text = r.mz_key OFFSET 0",
            cur, key_equal(c, "c", "r"), c_row);
    *nargs = 0;
    switch (kind) {
        case kStageShape:
            *nargs = 2;
            types[0] = INT8OID;
            types[1] = INT8OID;
            return psprintf(
                "SELECT count(*) FILTER (WHERE mz_ts < $1 OR mz_ts >= $2), min(mz_diff), "
                "       max(mz_diff), min(mz_ts), max(mz_ts), "
                "       coalesce(-sum(mz_diff) FILTER (WHERE mz_diff < 0), 0)::bigint "
                "  FROM %s",
                stage);
        case kStageCopies:
            return psprintf(
                "INSERT INTO %s (mz_rowid, mz_ts, mz_hash%s) "
                "SELECT nextval('decoupled.rowid_seq'), s.mz_ts, s.mz_hash%s FROM %s s",
                cur, cols, s_cols, stage);
        case kStageMultiplied:
            return psprintf(
                "INSERT INTO %s (mz_rowid, mz_ts, mz_hash%s) "
                "SELECT nextval('decoupled.rowid_seq'), s.mz_ts, s.mz_hash%s "
                "  FROM %s s, generate_series(1, s.mz_diff)",
                cur, cols, s_cols, stage);
        case kStageConsolidated:
            // One sort by (time, row text), in byte order: equality of text
            // is byte equality, and the "C" order is the cheapest.
            return psprintf(
                "INSERT INTO %s (mz_rowid, mz_ts, mz_hash%s) "
                "SELECT nextval('decoupled.rowid_seq'), s.mz_ts, s.mz_hash%s "
                "  FROM (SELECT DISTINCT ON (mz_ts, mz_key COLLATE \"C\") *, "
                "               sum(mz_diff) OVER (PARTITION BY mz_ts, mz_key COLLATE \"C\") "
                "                 AS mz_net "
                "          FROM %s ORDER BY mz_ts, mz_key COLLATE \"C\") s, "
                "       generate_series(1, s.mz_net) "
                " WHERE s.mz_net > 0",
                cur, cols, s_cols, stage);
        case kOneTimeProbe:
        case kOneTimeScan:
        case kTickProbe:
        case kTickScan: {
            // Everything written at time $1, with retractions: one sort
            // consolidates it per row; positive nets are inserted and
            // negative ones paired with the oldest copies of their row,
            // which must be older than $1 (so no row this statement inserts
            // can be one: the insert and the retraction share a statement).
            // The probe form finds each row's copies through the row hash
            // index, keeping the ones it needs; the scan form joins all
            // retracted rows with cur at once (run with nested loops off: a
            // hash join).  Rows leave cur by ctid (a TID scan, whatever the
            // estimates say).  A tick's captured rows are read as they are
            // deleted, so no second scan empties them (the stage, in
            // memory, is emptied by the caller).  Returns how many
            // retractions there were and how many moved.
            *nargs = 1;
            types[0] = INT8OID;
            bool probe = kind == kOneTimeProbe || kind == kTickProbe;
            bool tick = kind == kTickProbe || kind == kTickScan;
            // A keyed table's retractions by key (mz_diff 0, written by WAL
            // capture: index_tick.cpp) become retractions of the copy cur
            // holds for the key; with none, an all-NULL row that pairs
            // with nothing, and the tick fails as for any unpaired one.
            const char* captured =
                keyed ? psprintf("(SELECT m.mz_diff%2$s FROM m WHERE m.mz_diff <> 0 "
                                 " UNION ALL "
                                 " SELECT -1::bigint%3$s FROM m LEFT JOIN LATERAL "
                                 "        (SELECT c.* FROM %1$s c WHERE %4$s AND c.mz_ts < $1 "
                                 "          OFFSET 0) y ON true "
                                 "  WHERE m.mz_diff = 0)",
                                 cur, column_list(c, "m.", true), column_list(c, "y.", true),
                                 key_equal(c, "c", "m"))
                      : "m";
            const char* source =
                tick ? psprintf("m AS (DELETE FROM %s RETURNING *), "
                                "src AS (SELECT $1::bigint AS mz_ts, x.mz_diff, x.mz_key, "
                                "               hashtext(x.mz_key) AS mz_hash%s "
                                "          FROM (SELECT m.*, ROW(%s)::text AS mz_key "
                                "                  FROM %s m OFFSET 0) x), ",
                                pending, column_list(c, "x.", true), m_row, captured)
                     : psprintf("src AS (SELECT * FROM %s), ", stage);
            const char* pairs =
                probe ? psprintf("SELECT x.ctid FROM r CROSS JOIN LATERAL "
                                 "       (SELECT c.ctid, c.mz_ts FROM (%s) c "
                                 "         ORDER BY c.mz_ts, c.mz_rowid LIMIT r.mz_n) x "
                                 " WHERE x.mz_ts < $1",
                                 copies)
                      : psprintf("SELECT x.ctid FROM "
                                 "       (SELECT c.ctid, c.mz_ts, r.mz_n, "
                                 "               row_number() OVER (PARTITION BY r.mz_key "
                                 "                   ORDER BY c.mz_ts, c.mz_rowid) AS k "
                                 "          FROM r JOIN %s c ON %s "
                                 "                          AND (ROW(%s)::text = r.mz_key) IS TRUE) x "
                                 " WHERE x.k <= x.mz_n AND x.mz_ts < $1",
                                 cur, keyed ? key_equal(c, "c", "r") : "c.mz_hash = r.mz_hash",
                                 c_row);
            return psprintf(
                "WITH %3$s"
                "     net AS MATERIALIZED ( "
                "       SELECT DISTINCT ON (mz_key COLLATE \"C\") *, "
                "              sum(mz_diff) OVER (PARTITION BY mz_key COLLATE \"C\") AS mz_net "
                "         FROM src ORDER BY mz_key COLLATE \"C\"), "
                "     inserted AS (INSERT INTO %1$s (mz_rowid, mz_ts, mz_hash%5$s) "
                "                  SELECT nextval('decoupled.rowid_seq'), $1, s.mz_hash%6$s "
                "                    FROM net s, generate_series(1, s.mz_net) "
                "                   WHERE s.mz_net > 0), "
                "     r AS (SELECT mz_key, mz_hash%7$s, (-mz_net)::bigint AS mz_n FROM net "
                "            WHERE mz_net < 0), "
                "     moved AS (DELETE FROM %1$s c WHERE c.ctid = ANY (ARRAY(%4$s)) "
                "               RETURNING c.*), "
                "     written AS (INSERT INTO %2$s (mz_rowid, valid_from, valid_to%5$s) "
                "                 SELECT mz_rowid, mz_ts, $1%5$s FROM moved RETURNING 1) "
                "SELECT (SELECT coalesce(sum(mz_n), 0) FROM r)::bigint, "
                "       (SELECT count(*) FROM written)",
                cur, dead, source, pairs, cols, s_cols, r_keys);
        }
        case kRetractGeneral:
            // The k-th retraction of a row (by time) pairs with its k-th
            // oldest copy, which must be older than the retraction.
            return psprintf(
                "WITH net AS (SELECT mz_ts, mz_key COLLATE \"C\" AS mz_key, mz_hash%6$s, "
                "                    sum(mz_diff) AS mz_net "
                "               FROM %3$s GROUP BY mz_ts, 2, mz_hash%6$s "
                "             HAVING sum(mz_diff) < 0), "
                "     keys AS (SELECT mz_key, mz_hash%6$s, (-sum(mz_net))::bigint AS mz_n "
                "                FROM net GROUP BY mz_key, mz_hash%6$s), "
                "     del AS (SELECT n.mz_ts, n.mz_key, "
                "                    row_number() OVER (PARTITION BY n.mz_key "
                "                                       ORDER BY n.mz_ts) AS k "
                "               FROM net n, generate_series(1, -n.mz_net)), "
                "     cand AS (SELECT x.ctid AS row_ctid, x.mz_ts, r.mz_key, "
                "                     row_number() OVER (PARTITION BY r.mz_key "
                "                                        ORDER BY x.mz_ts, x.mz_rowid) AS k "
                "                FROM keys r CROSS JOIN LATERAL "
                "                     (SELECT c.ctid, c.mz_ts, c.mz_rowid FROM (%4$s) c "
                "                       ORDER BY c.mz_ts, c.mz_rowid LIMIT r.mz_n) x), "
                "     pairs AS (SELECT c.row_ctid, d.mz_ts AS valid_to FROM del d "
                "                 JOIN cand c ON c.mz_key = d.mz_key AND c.k = d.k "
                "                            AND c.mz_ts < d.mz_ts), "
                "     moved AS (DELETE FROM %1$s c USING pairs p WHERE c.ctid = p.row_ctid "
                "               RETURNING c.*, p.valid_to), "
                "     written AS (INSERT INTO %2$s (mz_rowid, valid_from, valid_to%5$s) "
                "                 SELECT mz_rowid, mz_ts, valid_to%5$s FROM moved RETURNING 1) "
                "SELECT (SELECT coalesce(sum(mz_n), 0) FROM keys)::bigint, "
                "       (SELECT count(*) FROM written)",
                cur, dead, stage, copies, cols, r_keys);
        case kDrainStageTable:
            return psprintf("DELETE FROM %s RETURNING *", decoupled::storage_name(id, "stage"));
        case kJsonToCur:
            *nargs = 1;
            types[0] = JSONBOID;
            return psprintf(
                "INSERT INTO %1$s (mz_rowid, mz_ts, mz_hash%2$s) "
                "SELECT nextval('decoupled.rowid_seq'), (u->'mz_timestamp')::numeric::bigint, "
                "       hashtext(ROW(%3$s)::text)%4$s "
                "  FROM jsonb_array_elements($1) u, "
                "       LATERAL jsonb_populate_record(NULL::%1$s, u->'data') r, "
                "       generate_series(1, (u->'mz_diff')::numeric::bigint) "
                " WHERE (u->'mz_diff')::numeric::bigint <> 0",
                cur, cols, r_row, column_list(c, "r.", true));
        case kJsonToStage:
            // The row text is computed once (OFFSET 0 keeps the subquery
            // from being flattened, which would compute it twice).
            *nargs = 1;
            types[0] = JSONBOID;
            // Its rows go to the stage through a receiver (convert()).
            return psprintf(
                "SELECT s.mz_ts, s.mz_diff, s.mz_key, hashtext(s.mz_key)%2$s "
                "  FROM (SELECT (u->'mz_timestamp')::numeric::bigint AS mz_ts, "
                "               (u->'mz_diff')::numeric::bigint AS mz_diff, "
                "               ROW(%3$s)::text AS mz_key%4$s "
                "          FROM jsonb_array_elements($1) u, "
                "               LATERAL jsonb_populate_record(NULL::%1$s, u->'data') r "
                "         WHERE (u->'mz_diff')::numeric::bigint <> 0 OFFSET 0) s",
                cur, s_cols, r_row, column_list(c, "r.", true));
        case kPendingShape:
            return psprintf(
                "SELECT min(mz_diff), max(mz_diff), "
                "       (coalesce(-sum(mz_diff) FILTER (WHERE mz_diff < 0), 0) "
                "        + count(*) FILTER (WHERE mz_diff = 0))::bigint FROM %s",
                pending);
        case kPendingToCur:
            *nargs = 1;
            types[0] = INT8OID;
            return psprintf(
                "WITH m AS (DELETE FROM %s RETURNING *) "
                "INSERT INTO %s (mz_rowid, mz_ts, mz_hash%s) "
                "SELECT nextval('decoupled.rowid_seq'), $1, hashtext(ROW(%s)::text)%s FROM m",
                pending, cur, cols, m_row, column_list(c, "m.", true));
        case kPlanKinds:
            break;
    }
    elog(ERROR, "unknown write statement %d", (int)kind);
}

SPIPlanPtr plan(Collection* c, PlanKind kind) {
    if (!c->plans[kind]) {
        int nargs = 0;
        Oid types[2];
        char* sql = statement(c, kind, &nargs, types);
        make_room();
        c->plans[kind] = prepare_kept(sql, nargs, types);
        nplans++;
        pfree(sql);
    }
    return c->plans[kind];
}

Datum int8_array(const int64* ids, int n) {
    Datum* d = (Datum*)palloc(sizeof(Datum) * Max(n, 1));
    for (int i = 0; i < n; i++) d[i] = Int64GetDatum(ids[i]);
    return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

// Moves the uppers of `ids` (whose frontier rows the caller holds) to
// `upper` and queues them for bound publication — one statement however
// many.  The queue is never waited on (see 30_storage.sql): a row a
// publication is draining is skipped and a new one inserted.
void advance(int64* ids, int n, int64 upper) {
    if (n == 0) return;
    Oid types[2] = {INT8ARRAYOID, INT8OID};
    Datum args[2] = {int8_array(ids, n), Int64GetDatum(upper)};
    run(global_plan(&advance_plan,
                    "WITH up AS (UPDATE decoupled.catalog_frontiers f "
                    "               SET upper = $2, changed_at = now() "
                    "             WHERE f.lifetime_id = ANY ($1) RETURNING f.lifetime_id) "
                    "INSERT INTO decoupled.catalog_bound_queue (lifetime_id) "
                    "SELECT u.lifetime_id FROM up u "
                    " WHERE NOT EXISTS (SELECT FROM decoupled.catalog_bound_queue q "
                    "                    WHERE q.lifetime_id = u.lifetime_id "
                    "                      FOR KEY SHARE SKIP LOCKED)",
                    2, types),
        args);
    decoupled::notify_upper_at_commit();
}

// About how many rows `relid` holds: the planner's estimate, or its size
// in pages if it was never analyzed.
double estimated_rows(Oid relid) {
    Relation rel = relation_open(relid, AccessShareLock);
    double rows = rel->rd_rel->reltuples;
    if (rows < 0) rows = (double)RelationGetNumberOfBlocks(rel) * 50;
    relation_close(rel, AccessShareLock);
    return rows;
}

// The append core (brief C2.1) over what is staged, of `shape`: inserts
// positive multiplicities (consolidated per (time, row) if signs are mixed),
// retracts negative ones oldest copy first, and empties the stage.  The
// caller holds the frontier lock and checked the interval.  Any violation
// is an error: the transaction then changes nothing.
// Runs the one-time write `probe` or `scan` at time t, whichever finds
// `retractions` rows in c's cur faster.  Each form's plan is made (and
// kept) with the planner settings that force its shape, and run with them
// (the plan cache may plan again at any run): the probe form a plain index
// scan per retracted row (a bitmap scan, which the planner picks while cur
// has no statistics, costs twice as much for the one row a probe finds),
// the scan form a hash join (no nested loop, no merge join sorting cur).
// Nor a sequential scan per retracted row: a plan made while a view's cur
// was a page or two chose one, and kept it while cur grew to hundreds of
// pages of retracted rows' space — every step then read all of them once
// per touched group.
void write_one_time(Collection* c, PlanKind probe, PlanKind scan, int64 retractions, int64 t,
                    Snapshot snapshot) {
    Datum arg = Int64GetDatum(t);
    bool by_scan = decoupled::retract_by_scan(retractions, estimated_rows(c->cur_relid));
    static const char* const scan_off[] = {"enable_nestloop", "enable_mergejoin", nullptr};
    static const char* const probe_off[] = {"enable_bitmapscan", "enable_seqscan", nullptr};
    int level = decoupled::planner_settings_off(by_scan ? scan_off : probe_off);
    run(plan(c, by_scan ? scan : probe), &arg, snapshot);
    AtEOXact_GUC(true, level);
}

// The count of retractions and of rows moved, as the last write returned:
// equal, or a retraction had no copy to pair with.
void check_paired(int64 wanted, int64 moved) {
    if (moved != wanted)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("append would make a multiplicity negative"),
                 errdetail(INT64_FORMAT " of " INT64_FORMAT
                           " retractions match no copy of their row present before their time.",
                           wanted - moved, wanted)));
}

void check_retracted() {
    int64 wanted = 0, moved = 0;
    get_int8(0, 1, &wanted);
    get_int8(0, 2, &moved);
    check_paired(wanted, moved);
}

void write_staged(Collection* c, const decoupled::WriteShape& shape) {
    decoupled::RetractPath retract = decoupled::retract_path(shape);
    if (retract == decoupled::RetractPath::OneTime) {
        write_one_time(c, kOneTimeProbe, kOneTimeScan, shape.retractions, *shape.min_ts, nullptr);
    } else {
        switch (decoupled::insert_path(shape)) {
            case decoupled::InsertPath::None:
                break;
            case decoupled::InsertPath::Copies:
                run(plan(c, kStageCopies), nullptr);
                break;
            case decoupled::InsertPath::Multiplied:
                run(plan(c, kStageMultiplied), nullptr);
                break;
            case decoupled::InsertPath::Consolidated:
                run(plan(c, kStageConsolidated), nullptr);
                break;
        }
        if (retract == decoupled::RetractPath::General) run(plan(c, kRetractGeneral), nullptr);
    }
    if (retract != decoupled::RetractPath::None) check_retracted();
    decoupled::clear_scratch(c->stage_relid);
}

// A 1.0 catalog's step (replica_maintain in SQL, which a server keeps
// running until ALTER EXTENSION UPDATE) stages its retractions with an
// INSERT into the stage's table; they join the rows staged in memory.
// Since 1.1 nothing writes the table, so it has no page to read but what
// an older version left until a vacuum truncates it.
void drain_stage_table(Collection* c) {
    Relation table = relation_open(c->stage_relid, RowExclusiveLock);
    if (RelationGetNumberOfBlocks(table) > 0) {
        uint64 drained = 0;
        run_into(plan(c, kDrainStageTable), nullptr, InvalidOid,
                 decoupled::scratch_receiver(table, &drained));
    }
    relation_close(table, NoLock);
}

void check_interval(int64 outside, int64 expected_upper, int64 new_upper) {
    if (outside > 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("update times must lie in the appended interval"),
                        errdetail(INT64_FORMAT " update(s) lie outside [" INT64_FORMAT
                                  ", " INT64_FORMAT ").",
                                  outside, expected_upper, new_upper)));
}

// Runs `body` in a subtransaction of its own (as a PL/pgSQL block with an
// exception handler does): on success the subtransaction is released and
// nullptr returned; on error it is rolled back and the error returned,
// copied into the caller's memory context.  `body` owns nothing with a
// destructor: an error leaves it by longjmp.  A cancel or statement timeout
// is the session's, not the body's: like PL/pgSQL's OTHERS, it is never
// returned but raised again once the subtransaction is rolled back.
template <typename Body>
ErrorData* in_subtransaction(const Body& body) {
    MemoryContext caller_context = CurrentMemoryContext;
    ResourceOwner caller_owner = CurrentResourceOwner;
    ErrorData* volatile failed = nullptr;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(caller_context);
    PG_TRY();
    {
        body();
        ReleaseCurrentSubTransaction();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_context);
        failed = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
    }
    PG_END_TRY();
    MemoryContextSwitchTo(caller_context);
    CurrentResourceOwner = caller_owner;
    if (failed && failed->sqlerrcode == ERRCODE_QUERY_CANCELED) ReThrowError(failed);
    return failed;
}

// Runs `kind` (converting JSON updates to the columns' types) in a
// subtransaction: if a value does not convert, the error names the update,
// the column and the value (_diagnose_values, a subtransaction per value),
// or else says that the updates as a whole do not convert.  One
// subtransaction per append, none per row.  kJsonToStage's rows go to the
// stage (in memory) through a receiver.
//
// Values of a collection whose columns reach a domain are converted as the
// collection's owner in a security-restricted operation (the domain's
// CHECK is its author's code), into the stage only: the owner may not
// write storage.  So is a failure diagnosed.
void diagnose(Collection* c, Datum updates);

void convert(Collection* c, PlanKind kind, Datum updates) {
    Assert(kind == kJsonToStage || !OidIsValid(c->converts_as));
    SPIPlanPtr p = plan(c, kind);  // prepared outside: its errors are ours
    Relation stage = kind == kJsonToStage ? relation_open(c->stage_relid, AccessShareLock) : nullptr;
    uint64 staged = 0;
    ErrorData* failed = in_subtransaction([&] {
        // The subtransaction's abort restores the user on an error.
        Oid user;
        int sec_context;
        GetUserIdAndSecContext(&user, &sec_context);
        decoupled::OwnerErrors errors;
        if (OidIsValid(c->converts_as)) {
            SetUserIdAndSecContext(c->converts_as, sec_context | SECURITY_RESTRICTED_OPERATION);
            decoupled::mark_owner_errors(&errors);
        }
        if (stage)
            run_into(p, &updates, JSONBOID, decoupled::scratch_receiver(stage, &staged));
        else
            run(p, &updates);
        if (OidIsValid(c->converts_as)) decoupled::unmark_owner_errors(&errors);
        SetUserIdAndSecContext(user, sec_context);
    });
    if (stage) relation_close(stage, NoLock);
    if (!failed) return;
    int category = ERRCODE_TO_CATEGORY(failed->sqlerrcode);
    if (category != ERRCODE_DATA_EXCEPTION && category != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
        ReThrowError(failed);
    diagnose(c, updates);
    // No value fails on its own (a domain refuses a missing one's NULL).
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("the updates of the append to \"%s\" do not convert to its columns", c->name),
             errdetail_internal("%s", failed->message),
             errhint("A column missing from \"data\" is NULL.")));
}

// Converts each value of a failed conversion on its own
// (_diagnose_values), as convert() converted them all: raises 22023 naming
// the update, the column and the value that fails.  Returns if none fails
// alone, or under catalogs of 1.0, whose _diagnose_values read the catalog
// (the caller then reports the updates as a whole).
void diagnose(Collection* c, Datum updates) {
    Oid argtypes[3] = {JSONBOID, TEXTOID, JSONBOID};
    List* name = list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup("_diagnose_values")));
    if (!OidIsValid(LookupFuncName(name, 3, argtypes, true))) return;
    // The columns' types by OID, read with the extension's rights.
    Oid id_type = INT8OID;
    Datum id = Int64GetDatum(c->lifetime_id);
    if (SPI_execute_with_args("SELECT jsonb_object_agg(c->>'name', decoupled._column_type(c)) "
                              "  FROM decoupled.catalog_objects o, "
                              "       jsonb_array_elements(o.definition->'columns') c "
                              " WHERE o.lifetime_id = $1",
                              1, &id_type, &id, nullptr, true, 1) != SPI_OK_SELECT ||
        SPI_processed != 1)
        elog(ERROR, "could not read the column types of collection " INT64_FORMAT, c->lifetime_id);
    bool isnull = false;
    Datum types = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull) return;
    Datum args[3] = {types, CStringGetTextDatum(c->name), updates};
    // An error leaves with the owner's identity; the (sub)transaction's
    // abort restores the caller's, as after any error in a restricted
    // operation.
    Oid user;
    int sec_context;
    GetUserIdAndSecContext(&user, &sec_context);
    decoupled::OwnerErrors errors;
    if (OidIsValid(c->converts_as)) {
        SetUserIdAndSecContext(c->converts_as, sec_context | SECURITY_RESTRICTED_OPERATION);
        decoupled::mark_owner_errors(&errors);
    }
    if (SPI_execute_with_args("SELECT decoupled._diagnose_values($1, $2, $3)", 3, argtypes, args,
                              nullptr, false, 0) < 0)
        elog(ERROR, "could not diagnose the values of an append");
    if (OidIsValid(c->converts_as)) decoupled::unmark_owner_errors(&errors);
    SetUserIdAndSecContext(user, sec_context);
}

// The integer a JSON number spells, if it is one within int64: what
// numeric_normalize prints without a point or exponent (5.0 is 5).
bool json_integer(const JsonbValue* v, int64* out) {
    if (!v || v->type != jbvNumeric) return false;
    char* text = numeric_normalize(v->val.numeric);
    char* end = nullptr;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    bool ok = errno == 0 && end != text && *end == '\0';
    pfree(text);
    if (ok) *out = value;
    return ok;
}

JsonbValue* object_field(JsonbContainer* object, const char* key) {
    JsonbValue k;
    k.type = jbvString;
    k.val.string.val = (char*)key;
    k.val.string.len = strlen(key);
    return findJsonbValueFromContainer(object, JB_FOBJECT, &k);
}

bool is_object(const JsonbValue* v) {
    return v && v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

// Whether `update` is {"mz_timestamp": t, "mz_diff": d, "data": {...}} with
// nothing else, t an integer in [0, 2^63), d an integer in
// [-kMaxDiff, kMaxDiff] and every key of data a column of `c` (the checks of
// _update_problem, which names what is wrong).
bool update_fields(const Collection* c, const JsonbValue* update, int64* ts, int64* diff) {
    if (!is_object(update)) return false;
    JsonbContainer* object = update->val.binary.data;
    JsonbValue* t = object_field(object, "mz_timestamp");
    JsonbValue* d = object_field(object, "mz_diff");
    JsonbValue* data = object_field(object, "data");
    if (!t || !d || !is_object(data) || JsonContainerSize(object) != 3) return false;
    if (!json_integer(t, ts) || *ts < 0) return false;
    if (!json_integer(d, diff) || *diff < -kMaxDiff || *diff > kMaxDiff) return false;
    JsonbIterator* it = JsonbIteratorInit(data->val.binary.data);
    JsonbValue v;
    JsonbIteratorToken token;
    bool known = true;
    while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
        if (token != WJB_KEY || !known) continue;
        known = false;
        for (int i = 0; i < c->ncols && !known; i++)
            known = strlen(c->names[i]) == (size_t)v.val.string.len &&
                    memcmp(c->names[i], v.val.string.val, v.val.string.len) == 0;
    }
    return known;
}

// Checks JSON updates [{"mz_timestamp", "mz_diff", "data"}] for an append
// to `c` at [expected_upper, new_upper) and returns their shape and how
// many lie outside the interval.  Every bad input is 22023 naming the
// update and the collection: an update's shape, a time that is not a bigint
// >= 0, a multiplicity that is not an integer within +-kMaxDiff, a key of
// "data" that names no column, or multiplicities adding up to more than
// kMaxUnits rows.  The checks compare numerics, so no cast fails with
// another SQLSTATE.
decoupled::WriteShape check_updates(Collection* c, Jsonb* updates, int64 expected_upper,
                                    int64 new_upper, int64* outside) {
    if (!updates || !JB_ROOT_IS_ARRAY(updates) || JB_ROOT_IS_SCALAR(updates))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("updates must be a JSON array of {\"mz_timestamp\", \"mz_diff\", "
                               "\"data\"} objects")));
    // One pass in C over the updates: is every one well formed, how many
    // rows would they write, and what is their shape?  Only if one is not
    // well formed does _update_problem (SQL) say which and why.
    decoupled::WriteShape shape;
    int64 units = 0;
    bool ok = true;
    JsonbIterator* it = JsonbIteratorInit(&updates->root);
    JsonbValue v;
    JsonbIteratorToken token;
    while (ok && (token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
        if (token != WJB_ELEM) continue;
        int64 ts = 0, diff = 0;
        ok = update_fields(c, &v, &ts, &diff);
        if (!ok) break;
        units += diff < 0 ? -diff : diff;
        if (diff == 0) continue;  // written nowhere
        if (diff < 0) shape.retractions -= diff;
        if (ts < expected_upper || ts >= new_upper) (*outside)++;
        shape.min_diff = shape.min_diff ? Min(*shape.min_diff, diff) : diff;
        shape.max_diff = shape.max_diff ? Max(*shape.max_diff, diff) : diff;
        shape.min_ts = shape.min_ts ? Min(*shape.min_ts, ts) : ts;
        shape.max_ts = shape.max_ts ? Max(*shape.max_ts, ts) : ts;
    }
    Datum args[3] = {JsonbPGetDatum(updates), c->column_names, Int64GetDatum(kMaxDiff)};
    if (!ok) {
        // Only now say which update and why.
        Oid ptypes[3] = {JSONBOID, TEXTARRAYOID, INT8OID};
        if (SPI_execute_with_args(
                "SELECT u.n, decoupled._update_problem(u.v, $2, $3) "
                "  FROM jsonb_array_elements($1) WITH ORDINALITY u(v, n) "
                " WHERE decoupled._update_problem(u.v, $2, $3) IS NOT NULL "
                " ORDER BY u.n LIMIT 1",
                3, ptypes, args, nullptr, true, 1) != SPI_OK_SELECT)
            elog(ERROR, "could not describe a bad update");
        StringInfoData columns;
        initStringInfo(&columns);
        for (int i = 0; i < c->ncols; i++)
            appendStringInfo(&columns, "%s%s", i > 0 ? ", " : "", c->names[i]);
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("update %s of the append to \"%s\" %s",
                        SPI_processed > 0 ? get_text(0, 1) : "?", c->name,
                        SPI_processed > 0 ? get_text(0, 2) : "is malformed"),
                 errdetail("Updates are {\"mz_timestamp\": t, \"mz_diff\": d, \"data\": "
                           "{column: value, ...}}."),
                 errhint("Columns of \"%s\": %s.  A multiplicity is stored as that many rows: "
                         "put a count in a column rather than in mz_diff.",
                         c->name, columns.data)));
    }
    if (units > kMaxUnits)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("the append to \"%s\" would write " INT64_FORMAT " rows", c->name, units),
                 errdetail("The multiplicities (|mz_diff|) of one append add up to at most "
                           INT64_FORMAT ".", kMaxUnits),
                 errhint("Append in smaller steps, or put a count in a column rather than in "
                         "mz_diff.")));
    return shape;
}

// One busy table's tick at `ts`: its captured rows visible to `snapshot`
// go into history at ts (the caller advances the upper).
// `appended`: its owner appended history the table does not hold; then a
// captured retraction may find no copy (an append retracted it) and
// retracts nothing — the two differ by what was appended.  Otherwise
// history is the table's own, and a retraction without a copy is a capture
// gone wrong: the tick fails.
void tick_busy(int64 id, int64 ts, Snapshot snapshot, bool appended) {
    Collection* c = collection(id);
    Datum t = Int64GetDatum(ts);
    Oid dead = storage_relid(id, "dead");
    decoupled::not_decoded([&] {
        // A tick runs in C (index_tick.cpp), whatever its captured rows'
        // signs; the statements below are its fallback.
        int64 wanted = 0, moved = 0;
        decoupled::IndexedTick tick{c->name, storage_relid(id, "pending"), c->cur_relid, dead,
                                    c->ncols, c->is_key, ts, snapshot, appended};
        if (decoupled::tick_by_index(tick, &wanted, &moved)) {
            if (!appended) check_paired(wanted, moved);
            return;
        }
        run(plan(c, kPendingShape), nullptr, snapshot);
        decoupled::WriteShape shape{opt_int8(0, 1), opt_int8(0, 2), ts, ts,
                                    opt_int8(0, 3).value_or(0)};
        if (shape.min_diff && *shape.min_diff == 1 && *shape.max_diff == 1) {
            run(plan(c, kPendingToCur), &t, snapshot);
        } else if (shape.min_diff) {
            write_one_time(c, kTickProbe, kTickScan, shape.retractions, ts, snapshot);
            if (!appended) check_retracted();
        }
    });
    decoupled::replan_if_storage_grew(c->cur_relid, dead);
    unpin(c);
}

// The controller's ticks skipped because what they need was locked: since
// when (0: they tick), the last skip, and whether the episode was logged.
TimestampTz tick_skipped_since = 0;
TimestampTz tick_last_skipped = 0;
bool tick_skip_logged = false;

// A skipped tick is normal for a moment (a view's creation builds its
// arrangements); an episode of them that lasts 10 s is said in the log,
// once.  Skips more than 5 s apart are separate episodes.
void note_tick_skipped(const char* what) {
    TimestampTz now = GetCurrentTimestamp();
    if (tick_skipped_since == 0 || TimestampDifferenceExceeds(tick_last_skipped, now, 5000)) {
        tick_skipped_since = now;
        tick_skip_logged = false;
    } else if (!tick_skip_logged && TimestampDifferenceExceeds(tick_skipped_since, now, 10000)) {
        tick_skip_logged = true;
        ereport(LOG, (errmsg("registered tables have not ticked for 10 s: %s is locked by another "
                             "transaction",
                             what),
                      errdetail("A transaction creating views over a table holds its storage "
                                "until it ends; the controller tries again at every tick.")));
    }
    tick_last_skipped = now;
}

// How long each table has been held by another transaction, as the
// controller's ticks found it: the tables a tick could not lock, each from
// the first tick that found it so until a tick that locked it (or none
// looked for 5 s).  A fixed array of the backend (no destructors): tables
// held at once are few; when it is full, a table counts as held from now.
struct HeldTable {
    int64 id;
    TimestampTz since;
    TimestampTz seen;
    bool logged;
};
constexpr int kHeldSlots = 64;
HeldTable held_tables[kHeldSlots];
int nheld_tables = 0;

// Table `id` (`name`) is held at this tick: whether that has lasted 10 s,
// from when the controller's tick leaves it behind and ticks the others
// (said in the log once per episode of that table).  Each table's own
// time: one held for long never shortens another's 10 s.
bool held_for_long(int64 id, const char* name) {
    TimestampTz now = GetCurrentTimestamp();
    HeldTable* entry = nullptr;
    for (int i = 0; i < nheld_tables; i++)
        if (held_tables[i].id == id) entry = &held_tables[i];
    if (entry != nullptr && TimestampDifferenceExceeds(entry->seen, now, 5000)) {
        entry->since = now;  // a new episode
        entry->logged = false;
    }
    if (entry == nullptr && nheld_tables < kHeldSlots) {
        entry = &held_tables[nheld_tables++];
        *entry = HeldTable{id, now, now, false};
    }
    if (entry == nullptr) return false;
    entry->seen = now;
    if (!TimestampDifferenceExceeds(entry->since, now, 10000)) return false;
    if (!entry->logged) {
        entry->logged = true;
        ereport(LOG,
                (errmsg("registered table \"%s\" is left out of ticks while another "
                        "transaction holds it",
                        name),
                 errdetail("It has been held for 10 s; the other registered tables tick on. "
                           "Its changes land in its history when it ticks again, after those "
                           "of other tables written in the same transactions.")));
    }
    return true;
}

// Tables a tick locked, or that were not looked at for 5 s, are no longer
// held.
void forget_held(const int64* ticked, int nticked) {
    TimestampTz now = GetCurrentTimestamp();
    for (int i = 0; i < nheld_tables;) {
        bool gone = TimestampDifferenceExceeds(held_tables[i].seen, now, 5000);
        for (int j = 0; !gone && j < nticked; j++) gone = ticked[j] == held_tables[i].id;
        if (gone)
            held_tables[i] = held_tables[--nheld_tables];
        else
            i++;
    }
}

// The tick's statement that locks its tables' frontiers ($1: whether it
// covers WAL-captured tables too), leaving out tables capture set aside
// (`not_aside`, a condition on the alias it is formatted with).  The
// controller's form skips frontiers another transaction holds and counts
// every table it should have locked, to tell a partial lock from none.
char* tick_lock_sql(bool skip_locked, const char* not_aside) {
    const char* covered = "($1 OR NOT EXISTS (SELECT FROM decoupled.capture_relations c "
                          "                     WHERE c.lifetime_id = %s.lifetime_id))";
    char* counted =
        skip_locked
            ? psprintf(", (SELECT count(*) FROM decoupled.catalog_objects t "
                       "   WHERE t.kind = 'table' AND t.dropped_at IS NULL AND %s %s)",
                       psprintf(covered, "t"), psprintf(not_aside, "t"))
            : pstrdup("");
    return psprintf("SELECT f.lifetime_id, f.upper, o.name::text, o.relation::oid, "
                    "       coalesce((o.definition->>'appended')::boolean, false)%s "
                    "  FROM decoupled.catalog_frontiers f "
                    "  JOIN decoupled.catalog_objects o USING (lifetime_id) "
                    " WHERE o.kind = 'table' AND o.dropped_at IS NULL AND %s %s"
                    " ORDER BY f.lifetime_id FOR UPDATE OF f%s",
                    counted, psprintf(covered, "o"), psprintf(not_aside, "o"),
                    skip_locked ? " SKIP LOCKED" : "");
}

// The tables the controller's tick should have locked ($1 as above) other
// than those it did ($2): the frontiers another transaction holds.
char* tick_held_sql(const char* not_aside) {
    const char* covered = "($1 OR NOT EXISTS (SELECT FROM decoupled.capture_relations c "
                          "                     WHERE c.lifetime_id = o.lifetime_id))";
    return psprintf("SELECT o.lifetime_id, o.name::text FROM decoupled.catalog_objects o "
                    " WHERE o.kind = 'table' AND o.dropped_at IS NULL AND %s %s"
                    "   AND NOT (o.lifetime_id OPERATOR(pg_catalog.=) ANY ($2))",
                    covered, psprintf(not_aside, "o"));
}

// Whether `relid` holds a row visible to `snapshot`: a scan that stops at
// the first one.  A relation that cannot be opened counts as busy, so that
// its tick fails (and says why) in its own subtransaction.
bool has_visible_rows(Oid relid, Snapshot snapshot, BlockNumber* blocks = nullptr) {
    if (!OidIsValid(relid)) return true;
    Relation rel = try_relation_open(relid, AccessShareLock);
    if (!rel) return true;
    if (rel->rd_rel->relkind != RELKIND_RELATION) {
        relation_close(rel, AccessShareLock);
        return true;
    }
    // Its size, as the scan read it (no second look at the file).
    bool any = decoupled::holds_visible_row(rel, snapshot, blocks);
    // Nothing was written: the lock need not outlive the look.
    relation_close(rel, AccessShareLock);
    return any;
}

// The pages of `relid` (a pending relation the tick holds a lock on).
BlockNumber relation_blocks(Oid relid) {
    Relation rel = try_relation_open(relid, AccessShareLock);
    if (!rel) return 0;
    BlockNumber blocks = RelationGetNumberOfBlocks(rel);
    relation_close(rel, AccessShareLock);
    return blocks;
}

// Gives pending relation `relid`, which this tick left empty, a new and
// empty file (decoupled::compacts_pending says when and why).  Only if no
// other transaction holds any lock on it — never waited for, so a tick
// cannot deadlock or wait here — and the latest snapshot sees no row:
// with that lock no writer is in progress, and every insert that committed
// is visible to it, so the TRUNCATE loses nothing.  TRUNCATE is
// transactional: a tick that aborts keeps the old file and its rows.
// Whatever fails leaves pending as it was (the next tick tries again).
void compact_pending(int64 id, Oid relid) {
    ErrorData* failed = in_subtransaction([&] {
        if (!ConditionalLockRelationOid(relid, AccessExclusiveLock)) return;
        if (has_visible_rows(relid, GetLatestSnapshot())) {
            UnlockRelationOid(relid, AccessExclusiveLock);
            return;
        }
        decoupled::not_decoded([&] {
            if (SPI_execute(psprintf("TRUNCATE ONLY %s", decoupled::storage_name(id, "pending")),
                            false, 0) != SPI_OK_UTILITY)
                elog(ERROR, "could not truncate the pending changes of collection " INT64_FORMAT,
                     id);
        });
    });
    if (failed)
        ereport(DEBUG1, (errmsg("pending changes of collection " INT64_FORMAT " not compacted: %s",
                                id, failed->message)));
}

// After a tick that moved the WAL-captured tables' changes (all those
// this snapshot saw pending): capture's position as the tick's snapshot
// saw it becomes the tables' ticked position (capture_ticked) — the
// position recorded with the last rows it sees, or the one the worker
// published before the snapshot was taken (`published`: passes that
// captured nothing record none), whichever is later — except for
// those it did not move, which keep the position of the last tick that
// did (capture_lagging).  Of `candidates` (tables this tick moved rows of
// whose pending relation is logged), returns in *unlog those whose
// pending relation may be unlogged now: captured from the WAL, not taken
// again from their contents lately (capture_resyncs), and the unlogged
// relations intact (capture_unlogged_intact).
void record_ticked(const int64* ticked, int nticked, const int64* candidates, int ncandidates,
                   Snapshot snapshot, XLogRecPtr published, int64** unlog, int* nunlog) {
    Oid types[3] = {INT8ARRAYOID, INT8ARRAYOID, LSNOID};
    Datum args[3] = {int8_array(ticked, nticked), int8_array(candidates, ncandidates),
                     LSNGetDatum(published)};
    run(global_plan(
            &ticked_plan,
            "WITH old AS (SELECT k.ticked_lsn FROM decoupled.capture_ticked k), "
            "     lagging AS ( "
            "       INSERT INTO decoupled.capture_lagging AS l (lifetime_id, ticked_lsn) "
            "       SELECT c.lifetime_id, old.ticked_lsn "
            "         FROM decoupled.capture_relations c CROSS JOIN old "
            "        WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest($1) t(id) "
            "                           WHERE t.id = c.lifetime_id) "
            "       ON CONFLICT (lifetime_id) DO NOTHING), "
            "     caught_up AS ( "
            "       DELETE FROM decoupled.capture_lagging l "
            "        WHERE l.lifetime_id = ANY ($1)), "
            "     moved AS ( "
            "       INSERT INTO decoupled.capture_ticked AS k (only_row, ticked_lsn) "
            "       SELECT true, GREATEST(p.captured_lsn, $3) "
            "         FROM decoupled.capture_progress p "
            "       ON CONFLICT (only_row) DO UPDATE "
            "          SET ticked_lsn = EXCLUDED.ticked_lsn, ticked_at = now()) "
            "SELECT c.lifetime_id FROM decoupled.capture_relations c "
            " WHERE c.lifetime_id = ANY ($2) "
            "   AND NOT EXISTS (SELECT FROM decoupled.capture_resyncs r "
            "                    WHERE r.lifetime_id = c.lifetime_id) "
            "   AND EXISTS (SELECT FROM decoupled.capture_unlogged_intact) "
            "   AND EXISTS (SELECT FROM decoupled.capture_progress) "
            " ORDER BY 1",
            3, types),
        args, snapshot);
    *nunlog = (int)SPI_processed;
    *unlog = (int64*)palloc(sizeof(int64) * Max(*nunlog, 1));
    for (int i = 0; i < *nunlog; i++) get_int8(i, 1, &(*unlog)[i]);
}

// Makes pending relation `relid` of WAL-captured collection `id`, which
// this tick left empty, unlogged: on the terms of compact_pending (no lock
// waited for, no row the latest snapshot sees), which it does too (the
// rewrite gives it a new, empty file).  Whatever fails leaves it logged.
bool unlog_pending(int64 id, Oid relid) {
    bool done = false;
    ErrorData* failed = in_subtransaction([&] {
        if (!ConditionalLockRelationOid(relid, AccessExclusiveLock)) return;
        if (has_visible_rows(relid, GetLatestSnapshot())) {
            UnlockRelationOid(relid, AccessExclusiveLock);
            return;
        }
        run_for_id(&unlog_plan, "SELECT decoupled._set_pending_logged($1, false, true)", id);
        done = true;
    });
    if (failed) {
        ereport(DEBUG1, (errmsg("pending changes of collection " INT64_FORMAT " not unlogged: %s",
                                id, failed->message)));
        return false;
    }
    return done;
}

// The ctids of the rows of c's cur that pass `filter` (a step's touched
// groups), as a tid[] in the caller's memory.  A statement of its own, so
// that the replacement's text (and kept plan) is the same at every step
// whatever names the groups.  A filter that reads the groups from dstate
// runs from a kept plan with index probes only: a view's cur is rewritten
// at every step, and the generic plan's sequential scan (the planner
// cannot know how many groups dstate will hold) read all the dead space
// autovacuum had not yet reclaimed, a third of a 1,000-change step of a
// join view in one profile.  One that names the groups by literals is
// planned for them: with most of a small view's groups touched, a scan is
// the cheaper.
Datum replaced_rows(const Collection* c, const char* filter) {
    // A filter with literals names this step's touched groups (a new text
    // every time); one without may read them from a `sums` view's dstate.
    bool literals = decoupled::names_literals(filter);
    Oid dstate = literals ? InvalidOid : storage_relid(c->lifetime_id, "dstate");
    if (OidIsValid(dstate) && decoupled::is_scratch(dstate)) decoupled::expose_scratch(dstate);
    char* sql = psprintf("SELECT pg_catalog.array_agg(c.ctid) FROM %s c WHERE %s",
                         decoupled::storage_name(c->lifetime_id, "cur"), filter);
    static const char* const probes_only[] = {"enable_seqscan", "enable_bitmapscan",
                                              "enable_hashjoin", "enable_mergejoin", nullptr};
    int level = literals ? -1 : decoupled::planner_settings_off(probes_only);
    if (SPI_execute_plan(decoupled::statement_plan(sql, 0, nullptr, !literals), nullptr, nullptr,
                         true, 1) != SPI_OK_SELECT ||
        SPI_processed != 1)
        elog(ERROR, "could not find the rows a step replaces");
    if (level >= 0) AtEOXact_GUC(true, level);
    bool isnull = false;
    Datum ctids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull) return PointerGetDatum(construct_empty_array(TIDOID));
    return SPI_datumTransfer(ctids, false, -1);
}

void table_health(int64 id, const char* status, const char* error) {
    Oid types[3] = {INT8OID, TEXTOID, TEXTOID};
    Datum args[3] = {Int64GetDatum(id), CStringGetTextDatum(status),
                     error ? CStringGetTextDatum(error) : (Datum)0};
    char nulls[3] = {' ', ' ', error ? ' ' : 'n'};
    SPIPlanPtr p = global_plan(&table_health_plan,
                               "SELECT decoupled._table_health($1, $2, $3)", 3, types);
    if (SPI_execute_plan(p, args, nulls, false, 0) < 0)
        elog(ERROR, "could not record a registered table's health");
}

}  // namespace

// decoupled._append_staged(lifetime_id, expected_upper, new_upper): the
// append core over what the caller staged in c<id>_stage (a view's step).
// The caller holds the collection's frontier row lock and has checked
// upper = expected_upper < new_upper.
Datum decoupled_append_staged(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("lifetime id and uppers must not be null")));
    int64 id = PG_GETARG_INT64(0);
    int64 expected_upper = PG_GETARG_INT64(1);
    int64 new_upper = PG_GETARG_INT64(2);
    SPI_connect();
    Collection* c = collection(id);
    decoupled::expose_scratch(c->stage_relid);
    drain_stage_table(c);
    Datum args[2] = {Int64GetDatum(expected_upper), Int64GetDatum(new_upper)};
    run(plan(c, kStageShape), args);
    int64 outside = 0;
    get_int8(0, 1, &outside);
    decoupled::WriteShape shape{opt_int8(0, 2), opt_int8(0, 3), opt_int8(0, 4), opt_int8(0, 5),
                                opt_int8(0, 6).value_or(0)};
    check_interval(outside, expected_upper, new_upper);
    decoupled::not_decoded([&] { write_staged(c, shape); });
    decoupled::replan_if_storage_grew(c->cur_relid, storage_relid(id, "dead"));
    advance(&id, 1, new_upper);
    unpin(c);
    SPI_finish();
    PG_RETURN_VOID();
}

// decoupled._replace_staged(lifetime_id, expected_upper, new_upper, ts,
// filter text DEFAULT NULL): the append core for a view's step that
// replaces rows (brief C13.2): every row of the view's cur passing `filter`
// (a condition on its columns, built by the extension: the step's touched
// groups; every row if NULL) is retracted at ts, and what the caller staged
// at ts is inserted, consolidated per row as _append_staged would.  The
// rows it retracts are the ones the filter finds (through the view's key
// index), so no retraction is staged and looked up again by its row hash:
// replace_rows (C, no statement) reads them by ctid, pairs them with the
// staged rows (a row that stays is neither retracted nor written again),
// inserts the other staged rows and moves the other old ones to dead.  The
// caller holds the collection's frontier row lock and has checked upper =
// expected_upper <= ts < new_upper.
Datum decoupled_replace_staged(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 4; ++i)
        if (PG_ARGISNULL(i))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("lifetime id, uppers and time must not be null")));
    int64 id = PG_GETARG_INT64(0);
    int64 expected_upper = PG_GETARG_INT64(1);
    int64 new_upper = PG_GETARG_INT64(2);
    int64 ts = PG_GETARG_INT64(3);
    char* filter = PG_ARGISNULL(4) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(4));
    check_interval(ts < expected_upper || ts >= new_upper ? 1 : 0, expected_upper, new_upper);
    SPI_connect();
    Collection* c = collection(id);
    // No stage table to drain (drain_stage_table): only a 1.0 catalog's
    // step writes it, and that step never calls this.  The stage is read
    // from its tuplestore (replace_rows), not exposed to statements.
    Datum replaced = filter ? replaced_rows(c, filter) : (Datum)0;
    Oid dead = storage_relid(id, "dead");
    decoupled::not_decoded([&] {
        int64 wanted = 0, moved = 0, outside = 0;
        decoupled::Replacement replacement{c->name, c->stage_relid, c->cur_relid, dead,
                                           c->ncols, replaced, ts};
        decoupled::replace_rows(replacement, &wanted, &moved, &outside);
        check_interval(outside, ts, ts + 1);
        check_paired(wanted, moved);
        decoupled::clear_scratch(c->stage_relid);
    });
    decoupled::replan_if_storage_grew(c->cur_relid, dead);
    advance(&id, 1, new_upper);
    unpin(c);
    SPI_finish();
    PG_RETURN_VOID();
}

// decoupled._compare_and_append(lifetime_id, updates, expected_upper,
// new_upper, OUT appended, OUT upper): the one compare-and-append core
// (C2.1) for every writer of JSON updates.  The frontier row lock orders
// racing writers; unless the upper is still expected_upper nothing is
// appended and the actual upper is returned.  A collection dropped
// meanwhile appends nothing and returns upper NULL: each caller reports
// that in its own terms (42704 to a user, ZD002 to a replica).
Datum decoupled_compare_and_append(PG_FUNCTION_ARGS) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "_compare_and_append must return a record");
    desc = BlessTupleDesc(desc);
    if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("expected_upper and new_upper must not be null")));
    Datum values[2] = {BoolGetDatum(false), (Datum)0};
    bool nulls[2] = {false, true};
    if (PG_ARGISNULL(0)) PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
    int64 id = PG_GETARG_INT64(0);
    Jsonb* updates = PG_ARGISNULL(1) ? nullptr : PG_GETARG_JSONB_P(1);
    int64 expected_upper = PG_GETARG_INT64(2);
    int64 new_upper = PG_GETARG_INT64(3);

    SPI_connect();
    run_for_id(&lock_frontier_plan,
               "SELECT f.upper FROM decoupled.catalog_frontiers f "
               "  JOIN decoupled.catalog_objects o USING (lifetime_id) "
               " WHERE f.lifetime_id = $1 AND o.dropped_at IS NULL "
               "   FOR UPDATE OF f",
               id);
    int64 upper = 0;
    if (SPI_processed == 1 && get_int8(0, 1, &upper)) {
        nulls[1] = false;
        values[1] = Int64GetDatum(upper);
        if (upper == expected_upper) {
            if (new_upper <= expected_upper)
                ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                                errmsg("new upper must be beyond the expected upper"),
                                errdetail("Expected upper " INT64_FORMAT ", new upper " INT64_FORMAT
                                          ".",
                                          expected_upper, new_upper)));
            Collection* c = collection(id);
            decoupled::expose_scratch(c->stage_relid);
            int64 outside = 0;
            decoupled::WriteShape shape =
                check_updates(c, updates, expected_upper, new_upper, &outside);
            if (outside == 0 && decoupled::writes_directly(shape) && !OidIsValid(c->converts_as)) {
                decoupled::not_decoded([&] { convert(c, kJsonToCur, JsonbPGetDatum(updates)); });
            } else if (shape.min_diff) {
                convert(c, kJsonToStage, JsonbPGetDatum(updates));
                check_interval(outside, expected_upper, new_upper);
                decoupled::not_decoded([&] { write_staged(c, shape); });
            }
            decoupled::replan_if_storage_grew(c->cur_relid, storage_relid(id, "dead"));
            advance(&id, 1, new_upper);
            unpin(c);
            values[0] = BoolGetDatum(true);
            values[1] = Int64GetDatum(new_upper);
        }
    }
    SPI_finish();
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

// decoupled.tick_tables(): moves the committed captured changes of every
// registered table into its collection at one new timestamp and advances
// every upper, idle tables' too.  Returns the number of tables ticked.
static int int64_order(const void* a, const void* b) {
    int64 x = *static_cast<const int64*>(a), y = *static_cast<const int64*>(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

// An episode in which the controller's tick would tick some tables
// without others (a transaction that wrote one of each would land in two
// ticks), so it ticks none: for up to kCaptureWaitMs, then it ticks those
// it can (a capture that stalls, or writers that never pause, must not stop
// every table's ticks), said once in the log.
struct SkipEpisode {
    TimestampTz since = 0;
    bool logged = false;
};

// Whether the tick may go on: `on` says whether the episode lasts.
static bool episode_over(SkipEpisode* e, bool on, const char* message, const char* detail) {
    if (!on) {
        *e = SkipEpisode();
        return true;
    }
    TimestampTz now = GetCurrentTimestamp();
    if (e->since == 0) e->since = now;
    if (!TimestampDifferenceExceeds(e->since, now, kCaptureWaitMs)) return false;
    if (!e->logged)
        ereport(LOG, (errmsg("%s", message), errdetail("%s", detail)));
    e->logged = true;
    return true;
}

// Tables captured from the WAL are not covered (`lagging`) while others
// are captured by triggers (decoupled_tick_tables says why).
static bool mixed_capture_may_tick(bool lagging) {
    static SkipEpisode episode;
    return episode_over(&episode, lagging,
                        "tables captured by triggers tick without those captured from the WAL, "
                        "whose capture has lagged for 10 s",
                        "A transaction that wrote tables of both kinds lands in two ticks until "
                        "capture catches up (see decoupled.capture).");
}

// The writers of some trigger-captured table of a mixed tick could not be
// held off (`unheld`): leaving that table out stamps a transaction that
// wrote it and a ticked table at two times.
static bool unheld_may_tick(bool unheld) {
    static SkipEpisode episode;
    return episode_over(&episode, unheld,
                        "registered tables tick without some captured by triggers, whose writers "
                        "have not paused for 10 s while others are captured from the WAL",
                        "A transaction that wrote one of those and a ticked table lands in two "
                        "ticks until they pause.");
}

// Set by a tick that found a table switched during it (below).
static bool tick_again = false;

// Whether a table this tick knew switched between trigger and WAL capture
// since it read how each is captured (`known`, in lifetime_id order, of
// which `wal_ids` were captured from the WAL; without `from_wal`, none was
// and every live table is ticked).  A table registered since does not
// count (the tick leaves it alone); one dropped since counts as switched
// (rare: the tick is tried again).  Only capture_relations is read, a row
// per WAL-captured table.  Read after the tick's snapshot: a switch this
// statement does not see did not commit before it either.
static bool capture_switched(bool from_wal, const int64* known, int nknown,
                             const int64* wal_ids, int nwal) {
    run(global_plan(&wal_signature_plan,
                    "SELECT lifetime_id FROM decoupled.capture_relations ORDER BY 1", 0, nullptr),
        nullptr);
    if (!from_wal) return SPI_processed > 0;
    int still = 0;  // of wal_ids, those still captured from the WAL
    for (uint64 i = 0; i < SPI_processed; i++) {
        int64 id = 0;
        get_int8((int)i, 1, &id);
        if (bsearch(&id, wal_ids, nwal, sizeof(int64), int64_order) != nullptr)
            still++;
        else if (bsearch(&id, known, nknown, sizeof(int64), int64_order) != nullptr)
            return true;  // adopted
    }
    return still != nwal;  // released (or dropped)
}

static Datum tick_once(PG_FUNCTION_ARGS);

// A session's tick during which a table switched between trigger and WAL
// capture starts again: it would have ticked that table by the wrong rule
// (one just released to triggers neither held off nor waited for), and a
// transaction that wrote it and another table would land in two ticks.
Datum decoupled_tick_tables(PG_FUNCTION_ARGS) {
    for (int attempt = 1;; attempt++) {
        tick_again = false;
        Datum ticked = tick_once(fcinfo);
        if (!tick_again) return ticked;
        if (attempt == 10) {
            ereport(WARNING,
                    (errmsg("tables kept switching between trigger and WAL capture during this "
                            "tick: nothing was ticked"),
                     errhint("Call decoupled.tick_tables() again.")));
            return ticked;
        }
    }
}

static Datum tick_once(PG_FUNCTION_ARGS) {
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot tick registered tables on a hot standby"),
                        errhint("The primary ticks them; the standby receives their history.")));
    SPI_connect();
    // A tick's time covers every write committed before it: a write is
    // never stamped with a later tick's time, where AS OF this one would
    // miss it.  So tables captured from the WAL tick only once capture has
    // taken in everything committed before the tick; until then (capture
    // lags, or stalls) their uppers stay where they are — their lag shows
    // in decoupled.frontiers — and the others tick.  A session's tick waits
    // up to 10 s for capture, the controller's a moment (its next tick is
    // near).
    // Whatever decoupled.capture says: while a switch to triggers releases
    // them, tables are still captured from the WAL.
    bool wal_covered = true;
    run(global_plan(&wal_tables_plan, "SELECT FROM decoupled.capture_relations LIMIT 1", 0,
                    nullptr),
        nullptr);
    bool session = MyBackendType == B_BACKEND;
    const bool from_wal = SPI_processed > 0;
    // Which tables are captured from the WAL, as this tick saw it, in
    // lifetime_id order (checked again once its snapshot is taken: a switch
    // between would make it tick one table by the wrong rule).
    int64* wal_ids = nullptr;
    int nwal = 0;
    const bool never_wait = decoupled::ticks_never_wait;
    // Some tables captured by triggers while others are from the WAL (one
    // not adopted yet, a switch under way): one tick must be one cut of
    // both, a transaction that wrote one of each in it or in neither.  The
    // trigger-captured tables' writers are held off (SHARE) from before the
    // WAL position waited for below until the tick's snapshot: a
    // transaction that wrote one of them committed before that position,
    // so capture has it, or commits after the snapshot.  One whose writers
    // cannot be held off is left out of this tick, its upper where it is:
    // at once for the controller's tick, after trying for up to 10 s for a
    // session's (which never waits in the lock manager there: holding one
    // of these locks, it would wait for another table's, or later for the
    // frontiers' rows, which an append in a transaction that writes the
    // table may hold — a deadlock).
    Oid* held_off = nullptr;
    int nheld_off = 0;
    int64* left_out = nullptr;
    int nleft_out = 0;
    int64* known = nullptr;  // with from_wal: the live tables when the tick began
    int nknown = 0;
    if (from_wal) {
        // Every live table, and whether triggers capture it.  A table
        // registered after this look is left to the next tick: it is
        // captured by triggers, and neither held off nor waited for here.
        run(global_plan(&trigger_tables_plan,
                        "SELECT o.lifetime_id, o.relation::oid, "
                        "       NOT EXISTS (SELECT FROM decoupled.capture_relations c "
                        "                    WHERE c.lifetime_id = o.lifetime_id) "
                        "  FROM decoupled.catalog_objects o "
                        " WHERE o.kind = 'table' AND o.dropped_at IS NULL "
                        "   AND o.relation IS NOT NULL "
                        " ORDER BY o.lifetime_id",
                        0, nullptr),
            nullptr);
        nknown = (int)SPI_processed;
        known = (int64*)palloc(sizeof(int64) * Max(nknown, 1));
        wal_ids = (int64*)palloc(sizeof(int64) * Max(nknown, 1));
        held_off = (Oid*)palloc(sizeof(Oid) * Max(nknown, 1));
        left_out = (int64*)palloc(sizeof(int64) * Max(nknown, 1));
        int ntrigger = 0;
        Oid* trigger_rels = (Oid*)palloc(sizeof(Oid) * Max(nknown, 1));
        int64* trigger_ids = (int64*)palloc(sizeof(int64) * Max(nknown, 1));
        for (int i = 0; i < nknown; i++) {
            int64 id = 0;
            get_int8(i, 1, &id);
            known[i] = id;
            bool isnull = true;
            if (!DatumGetBool(
                    SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull))) {
                wal_ids[nwal++] = id;  // captured from the WAL
                continue;
            }
            trigger_ids[ntrigger] = id;
            trigger_rels[ntrigger++] = DatumGetObjectId(
                SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
        }
        // All of them together, tried again as a whole until the deadline
        // (the controller's next tick is near): holding some while trying
        // another kept a writer that had written that one waiting for a
        // held one — and the tick failing for as long as writers ran.
        const TimestampTz until = TimestampTzPlusMilliseconds(
            GetCurrentTimestamp(), session ? kCaptureWaitMs : kControllerHoldOffMs);
        for (;;) {
            int got = 0;
            while (got < ntrigger && ConditionalLockRelationOid(trigger_rels[got], ShareLock))
                got++;
            if (got == ntrigger) {
                for (int i = 0; i < ntrigger; i++) held_off[nheld_off++] = trigger_rels[i];
                break;
            }
            for (int i = 0; i < got; i++) UnlockRelationOid(trigger_rels[i], ShareLock);
            if (GetCurrentTimestamp() >= until) {
                // What can be held now is; the rest is left out (below:
                // the controller then ticks nothing, for a while).
                for (int i = 0; i < ntrigger; i++) {
                    if (ConditionalLockRelationOid(trigger_rels[i], ShareLock))
                        held_off[nheld_off++] = trigger_rels[i];
                    else
                        left_out[nleft_out++] = trigger_ids[i];
                }
                break;
            }
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 2,
                            PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
            CHECK_FOR_INTERRUPTS();
        }
        if (session && nleft_out > 0)
            ereport(WARNING,
                    (errmsg("%d registered tables captured by triggers left out of this tick",
                            nleft_out),
                     errdetail("Their writers did not pause for 10 s while other tables are "
                               "captured from the WAL: a transaction that wrote one of them and "
                               "a ticked table lands in two ticks.")));
        // One cut or none: a trigger-captured table left out would stamp a
        // transaction that wrote it and a ticked table at two times.
        if (!session && !unheld_may_tick(nleft_out > 0)) {
            for (int i = 0; i < nheld_off; i++) UnlockRelationOid(held_off[i], ShareLock);
            SPI_finish();
            PG_RETURN_INT32(0);
        }
        wal_covered =
            decoupled::wait_for_capture(session ? kCaptureWaitMs : kControllerCaptureWaitMs);
        // Tables captured from the WAL tick only once capture has caught
        // up; a trigger-captured one ticked without them would stamp a
        // transaction that wrote one of each at two times.  So while
        // capture lags, the controller ticks neither — for 10 s, as a
        // session's tick waits for capture; past that the trigger-captured
        // tables tick on (logged once): a capture that stalls must not stop
        // them.
        if (!session && !mixed_capture_may_tick(ntrigger > 0 && !wal_covered)) {
            for (int i = 0; i < nheld_off; i++) UnlockRelationOid(held_off[i], ShareLock);
            SPI_finish();
            PG_RETURN_INT32(0);
        }
    }
    if (!wal_covered && session)
        ereport(WARNING,
                (errmsg("WAL capture has not caught up with this tick"),
                 errdetail("Tables captured from the WAL were not ticked: their uppers stay "
                           "until capture has taken in what committed before a tick."),
                 errhint("See decoupled.capture.")));
    Oid covered_type[1] = {BOOLOID};
    Datum covered[1] = {BoolGetDatum(wal_covered)};
    // Leaving without a tick, or once its snapshot is taken: the writers
    // held off go on.
    auto let_writers_go = [&] {
        for (int i = 0; i < nheld_off; i++) UnlockRelationOid(held_off[i], ShareLock);
        nheld_off = 0;
    };
    // Every live table's frontier, locked in one fixed order.  A table WAL
    // capture set aside (capture_resyncs) is left alone: its changes since
    // are not in its pending changes until it is taken again.  The
    // controller's tick never waits for them (a session's tick holds them
    // while it waits for a view's creation, below): it skips those another
    // transaction holds and ticks nothing unless it got them all.
    // Tables WAL capture set aside (capture_resyncs, which a catalog not
    // updated to 1.1 yet has not) are left alone.
    const bool resyncs = decoupled::catalog_has_capture_resyncs();
    const char* not_aside =
        resyncs ? "   AND NOT EXISTS (SELECT FROM decoupled.capture_resyncs r "
                  "                    WHERE r.lifetime_id = %s.lifetime_id "
                  "                      AND r.resynced_lsn IS NULL) "
                : "";
    // The text is made only for the first tick of the backend.
    SPIPlanPtr* lock_plan = never_wait ? &tick_lock_skip_plan[resyncs] : &tick_lock_plan[resyncs];
    if (*lock_plan == nullptr)
        global_plan(lock_plan, tick_lock_sql(never_wait, not_aside), 1, covered_type);
    run(*lock_plan, covered);
    int n = (int)SPI_processed;
    // Tests stop a tick here: its tables' frontiers are locked, nothing is
    // read or written yet (a DROP TABLE racing it, say).
    decoupled::wait_point("tick:locked");
    if (n == 0) {
        let_writers_go();
        SPI_finish();
        PG_RETURN_INT32(0);
    }
    // The controller's tick skipped frontiers another transaction holds
    // (one that appended, say): which tables, below, once it knows what
    // its snapshot sees of them.
    int64 live_tables = n;
    const bool frontiers_held = never_wait && get_int8(0, 6, &live_tables) && live_tables > n;
    int64* ids = (int64*)palloc(sizeof(int64) * n);
    char** names = (char**)palloc(sizeof(char*) * n);
    Oid* relations = (Oid*)palloc(sizeof(Oid) * n);
    bool* appended = (bool*)palloc(sizeof(bool) * n);
    int64 max_upper = 0;
    int kept = 0;  // the tables left out above are not ticked
    Datum* locked = (Datum*)palloc(sizeof(Datum) * n);  // every frontier locked
    const int nlocked = n;
    for (int i = 0; i < n; i++) {
        int64 id = 0, upper = 0;
        get_int8(i, 1, &id);
        locked[i] = Int64GetDatum(id);
        bool out = false;
        for (int j = 0; j < nleft_out; j++) out |= left_out[j] == id;
        // (known is in lifetime_id order: ORDER BY of its statement)
        if (from_wal) out |= bsearch(&id, known, nknown, sizeof(int64), int64_order) == nullptr;
        if (out) continue;
        ids[kept] = id;
        get_int8(i, 2, &upper);
        names[kept] = get_text(i, 3);
        bool isnull = true;
        Datum rel = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull);
        relations[kept] = isnull ? InvalidOid : DatumGetObjectId(rel);
        appended[kept] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
                                                    5, &isnull));
        max_upper = Max(max_upper, upper);
        kept++;
    }
    n = kept;
    int64 ts = decoupled::next_timestamp(max_upper);

    run(global_plan(&stalled_plan,
                    "SELECT h.lifetime_id FROM decoupled.table_health h "
                    " WHERE h.status = 'stalled'",
                    0, nullptr),
        nullptr);
    int nstalled = (int)SPI_processed;
    int64* stalled = (int64*)palloc(sizeof(int64) * Max(nstalled, 1));
    for (int i = 0; i < nstalled; i++) get_int8(i, 1, &stalled[i]);
    auto was_stalled = [&](int64 id) {
        for (int i = 0; i < nstalled; i++)
            if (stalled[i] == id) return true;
        return false;
    };

    // The tables whose frontier the tick could not lock.
    int64* held_ids = nullptr;
    char** held_names = nullptr;
    int nheld = 0;
    if (frontiers_held) {
        Oid held_types[2] = {BOOLOID, INT8ARRAYOID};
        Datum held_args[2] = {BoolGetDatum(wal_covered),
                              PointerGetDatum(construct_array(locked, nlocked, INT8OID,
                                                              sizeof(int64), true,
                                                              TYPALIGN_DOUBLE))};
        SPIPlanPtr* held_plan = &tick_held_plan[resyncs];
        if (*held_plan == nullptr)
            global_plan(held_plan, tick_held_sql(not_aside), 2, held_types);
        run(*held_plan, held_args);
        nheld = (int)SPI_processed;
        held_ids = (int64*)palloc(sizeof(int64) * Max(nheld, 1));
        held_names = (char**)palloc(sizeof(char*) * Max(nheld, 1));
        for (int i = 0; i < nheld; i++) {
            get_int8(i, 1, &held_ids[i]);
            held_names[i] = get_text(i, 2);
        }
    }

    // What this tick moves: the captured rows this snapshot sees, for every
    // table alike.
    // Read before the snapshot: every pass it covers has committed.
    XLogRecPtr published = from_wal ? (XLogRecPtr)decoupled::captured_through() : InvalidXLogRecPtr;
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    // A switch that committed since the tick read how each table is
    // captured: a table released to triggers then was neither held off nor
    // waited for, and a transaction that wrote it (by its new triggers) and
    // a table still captured from the WAL after the position waited for
    // would land in two ticks.  Nothing ticks; the next tick reads again.
    // (Read after the snapshot: a switch this statement does not see did
    // not commit before the snapshot either.)
    if (wal_level >= WAL_LEVEL_LOGICAL && capture_switched(from_wal, known, nknown, wal_ids, nwal)) {
        let_writers_go();
        UnregisterSnapshot(snapshot);
        SPI_finish();
        // A session's tick starts again (decoupled_tick_tables); the
        // controller's next tick is near.
        tick_again = session;
        PG_RETURN_INT32(0);
    }
    let_writers_go();
    int64* ticked = (int64*)palloc(sizeof(int64) * n);
    int nticked = 0;
    // Tables whose pending relation the tick leaves empty but large.
    int64* large = (int64*)palloc(sizeof(int64) * n);
    Oid* large_relids = (Oid*)palloc(sizeof(Oid) * n);
    int nlarge = 0;
    // Tables this tick moved rows of whose pending relation is logged: it
    // may be unlogged now (record_ticked).
    const bool records_ticked =
        from_wal && wal_covered && decoupled::catalog_has_unlogged_pending();
    const bool unlogged_pending = records_ticked && decoupled::guc_capture_unticked_wal_limit > 0;
    int64* logged = (int64*)palloc(sizeof(int64) * n);
    int nlogged = 0;
    bool* busy = (bool*)palloc(sizeof(bool) * n);
    BlockNumber* blocks = (BlockNumber*)palloc0(sizeof(BlockNumber) * n);
    for (int i = 0; i < n; i++)
        busy[i] = has_visible_rows(storage_relid(ids[i], "pending"), snapshot, &blocks[i]);
    // A table whose frontier another transaction holds is left behind (its
    // upper stays) when this snapshot sees none of its changes: the tick
    // moves nothing of it, so every transaction lands whole.  One with
    // changes holds the tick back, as a table's held storage does below —
    // a transaction that wrote it and another table lands in one tick — for
    // 10 s; then the others tick without it (note_left_behind).
    bool left_behind = false;
    for (int i = 0; i < nheld; i++) {
        if (!has_visible_rows(storage_relid(held_ids[i], "pending"), snapshot)) continue;
        note_tick_skipped("a table's frontier");
        if (!held_for_long(held_ids[i], held_names[i])) {
            UnregisterSnapshot(snapshot);
            SPI_finish();
            PG_RETURN_INT32(0);
        }
        left_behind = true;
    }
    // The busy tables' storage, all at once or none: a transaction creating
    // views over a table may hold its storage and then wait for this tick,
    // so a tick never waits holding any of it (write_locks.hpp).  The
    // controller's tick then ticks nothing (a writer's changes to several
    // tables land in one tick) and tries again at the next tick; a
    // session's waits for the busy relation holding none of the storage,
    // and tries again.
    int64* busy_ids = (int64*)palloc(sizeof(int64) * n);
    int nbusy = 0;
    for (int i = 0; i < n; i++)
        if (busy[i]) busy_ids[nbusy++] = ids[i];
    bool* behind = (bool*)palloc0(sizeof(bool) * n);  // busy, its storage held: not ticked
    while (nbusy > 0) {
        int k = -1;  // the busy table whose storage is held
        Oid held = decoupled::lock_all_storage_for_writes(busy_ids, nbusy, &k);
        if (!OidIsValid(held)) break;
        if (never_wait) {
            note_tick_skipped(psprintf("\"%s\"", get_rel_name(held)));
            int at = -1;  // its place in ids
            for (int i = 0; k >= 0 && i < n; i++)
                if (ids[i] == busy_ids[k]) at = i;
            if (at < 0 || !held_for_long(ids[at], names[at])) {
                UnregisterSnapshot(snapshot);
                SPI_finish();
                PG_RETURN_INT32(0);
            }
            // Held for 10 s: the others tick without it.
            behind[at] = true;
            left_behind = true;
            busy_ids[k] = busy_ids[--nbusy];
            continue;
        }
        LockRelationOid(held, RowExclusiveLock);
        UnlockRelationOid(held, RowExclusiveLock);
    }
    if (!left_behind) tick_skipped_since = 0;
    for (int i = 0; i < n; i++) {
        if (behind[i]) continue;
        Oid pending = storage_relid(ids[i], "pending");
        if (!busy[i]) {
            ticked[nticked++] = ids[i];
            if (decoupled::compacts_pending(blocks[i])) {
                large[nlarge] = ids[i];
                large_relids[nlarge++] = pending;
            }
            continue;
        }
        int64 id = ids[i];
        bool owner_appended = appended[i];
        ErrorData* failed =
            in_subtransaction([&] { tick_busy(id, ts, snapshot, owner_appended); });
        if (!failed) {
            ticked[nticked++] = ids[i];
            if (unlogged_pending && get_rel_persistence(pending) == RELPERSISTENCE_PERMANENT)
                logged[nlogged++] = ids[i];
            if (decoupled::compacts_pending(relation_blocks(pending))) {
                large[nlarge] = ids[i];
                large_relids[nlarge++] = pending;
            }
            continue;
        }
        // Its captured changes stay pending and its upper stays; the
        // others tick.
        char* message = (failed->detail && failed->detail[0])
                            ? psprintf("%s (%s)", failed->message, failed->detail)
                            : pstrdup(failed->message ? failed->message : "unknown error");
        // The error may quote the table's rows: shown to a caller who may
        // read it, as object_statuses shows it (_visible_error).
        if (!was_stalled(ids[i])) {
            if (decoupled::caller_can_select(relations[i]))
                ereport(WARNING,
                        (errmsg("registered table \"%s\" stalled: %s", names[i], message),
                         errhint("Its captured changes stay pending and every tick retries it.")));
            else
                ereport(WARNING,
                        (errmsg("registered table \"%s\" stalled", names[i]),
                         errdetail("Its error is shown to roles that may read the table, in "
                                   "decoupled.object_statuses."),
                         errhint("Its captured changes stay pending and every tick retries it.")));
        }
        table_health(ids[i], "stalled", message);
    }
    // The WAL-captured tables' ticked positions move with their changes
    // (when this tick moved them: captured from the WAL, all tables are
    // ticked or none, wal_covered).
    int64* unlog = nullptr;
    int nunlog = 0;
    if (records_ticked)
        record_ticked(ticked, nticked, logged, nlogged, snapshot, published, &unlog, &nunlog);
    UnregisterSnapshot(snapshot);

    advance(ticked, nticked, ts + 1);
    forget_held(ticked, nticked);
    for (int i = 0; i < nticked; i++)
        if (was_stalled(ticked[i])) table_health(ticked[i], "running", nullptr);
    // Last, holding nothing more to wait for: whoever waits for a pending
    // relation compacted here waits only for this tick's commit.
    for (int i = 0; i < nunlog; i++) {
        Oid pending = storage_relid(unlog[i], "pending");
        if (!unlog_pending(unlog[i], pending)) continue;
        for (int j = 0; j < nlarge; j++)
            if (large[j] == unlog[i]) large_relids[j] = InvalidOid;  // a new file already
    }
    for (int i = 0; i < nlarge; i++)
        if (OidIsValid(large_relids[i])) compact_pending(large[i], large_relids[i]);
    SPI_finish();
    PG_RETURN_INT32(nticked);
}
