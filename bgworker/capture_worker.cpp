// The WAL capture worker (brief C14.1): one per server, started and
// restarted by the controller.  The design is in
// control/parts/34_wal_capture.sql; this file is its loop.
//
// A pass, each step in transactions of its own:
//   1. read what to do: the setting, the slot, the tables captured from the
//      WAL and those still captured by triggers;
//   2. create the slot `pg_decoupled` when a table is to be captured from
//      the WAL and there is none (or resynchronise the tables, if the slot
//      was lost under them);
//   3. capture: decode up to a WAL position, write the changes into the
//      tables' pending changes and that position into capture_progress,
//      commit, then confirm the position to the slot;
//   4. adopt trigger-captured tables, or release WAL-captured ones when WAL
//      capture is off; drop the slot once nothing is captured from it.
//
// Written in PostgreSQL's C style: no C++ object with a destructor lives in
// these frames, so an error's longjmp to the loop's PG_CATCH skips nothing.
extern "C" {
#include "postgres.h"

#include "access/table.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/tuptable.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/sinval.h"
#include "storage/latch.h"
#include "storage/standby.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include "../extension/capture.hpp"
#include "capture_lookup.hpp"
#include "capture_skip.hpp"
#include "pending_writes.hpp"
#include "../extension/core/keyed_changes.hpp"
#include "../extension/gucs.hpp"
#include "../extension/history_writes.hpp"
#include "../extension/kept_statements.hpp"
#include "../extension/owner_errors.hpp"
#include "../extension/storage_names.hpp"
#include "../extension/wait_points.hpp"
#include "../extension/shmem.hpp"

extern "C" {
PGDLLEXPORT void decoupled_capture_main(Datum);
}

namespace {

constexpr const char* kSlot = "pg_decoupled";
// Rows fetched from the decoded changes at a time, and rows of one table
// written by one statement.
constexpr int kBatchRows = 10000;
// WAL decoded by one capture transaction at most: a long outage catches up
// in several.
constexpr uint64 kMaxBatchWal = 64 * 1024 * 1024;
// Between looks at the WAL when nothing happened; a session's tick wakes
// the worker at once.
constexpr long kIdleMs = 10;
// At least this long between passes that only follow writers' WAL: each
// decoding has a fixed cost (its context, the WAL since the restart
// point), which batches of 50 ms of writes amortise.
constexpr long kBatchMs = 50;

// Kept INSERT plans into each collection's pending table, and the rows of
// the transaction being written, per collection.
struct Target {
    int64 lifetime_id;  // hash key
    SPIPlanPtr parse;   // kept across passes: text rows -> pending[]
    SPIPlanPtr insert;  // kept across passes: pending[] -> pending
    bool checked;       // in this capture transaction: liveness and owner known
    bool live;
    Oid owner;          // the table's owner
    // Its changes in transactions that committed before this position are
    // skipped: the table was taken again from its contents there, or is set
    // aside until it is (all of them: kSetAside; capture_resyncs).
    XLogRecPtr resynced_before;
    // In this pass, a truncation left it holding nothing and no change of
    // it came after: another truncation retracts nothing.
    bool emptied;
    char name[NAMEDATALEN];  // the collection's, for error context
    int nrows;
    Datum* rows;        // text, in the batch context
    // A table whose retractions are located by its primary key: the lines
    // of the batch (outside PostgreSQL's memory, emptied at every flush and
    // pass), and the lookup of old rows; both kept for the worker's life.
    bool key_known;     // keyed/lookup below are read
    decoupled::KeyedChanges* keyed;
    SPIPlanPtr lookup;  // key values (text[] per column) -> (n, old row)
    int nkeys;
    int key_fields[INDEX_MAX_KEYS];  // the key columns' positions among the table's
};

HTAB* targets = nullptr;
MemoryContext batch_context = nullptr;
MemoryContext pass_context = nullptr;  // reset after every pass

decoupled::SharedState* shared() { return decoupled::shared_state(); }

void clear_error() {
    decoupled::SharedState* s = shared();
    SpinLockAcquire(&s->capture_mutex);
    s->capture.error_at = 0;
    s->capture.error_lifetime_id = 0;
    s->capture.last_error[0] = '\0';
    SpinLockRelease(&s->capture_mutex);
}

void publish_progress(XLogRecPtr through) {
    decoupled::SharedState* s = shared();
    SpinLockAcquire(&s->capture_mutex);
    if (through > s->capture.captured_through) s->capture.captured_through = through;
    s->capture.progress_at = GetCurrentTimestamp();
    SpinLockRelease(&s->capture_mutex);
    clear_error();
    ConditionVariableBroadcast(&s->capture_cv);
}

// The table whose changes the pass is working on (0: none): an error
// there may quote its data (a domain's CHECK, say), so the error is shown
// only to those who may read that table (decoupled.capture).
int64 working_on = 0;

// A change of one table that capture cannot write must not stop capture of
// every table: after kSetAsideAfterFailures passes in a row failed writing
// the same table's changes (a backoff of 1.4 s, past what is transient),
// the next pass sets that table aside — it skips all its changes, and
// commits that with its progress (_capture_set_aside) — and the table is
// taken again from its contents as soon as its writers let it
// (resync_set_aside, before each pass's capture; capture_resyncs).
constexpr int kSetAsideAfterFailures = 3;
bool writing_changes = false;  // the pass is writing decoded changes
int64 failing_table = 0;       // whose changes the last passes failed to write
int failures_of_table = 0;     // how many passes in a row
// The tables the next capture pass sets aside, each with its error: they
// accumulate (a pass that skips one may fail on another) until a pass
// succeeds and commits them all.
constexpr int kMaxSetAside = 32;
struct SetAside {
    int64 id;
    char error[256];
    char name[NAMEDATALEN];  // set by the pass that set it aside, to log after it
};
SetAside set_aside[kMaxSetAside];
int nset_aside = 0;
int nset_aside_logged = 0;   // those the last pass set aside, to log after it

bool being_set_aside(int64 id) {
    for (int i = 0; i < nset_aside; i++)
        if (set_aside[i].id == id) return true;
    return false;
}
bool resyncs_waiting = true;   // capture_resyncs may hold rows (read at start)
bool has_resyncs = false;      // the catalog has capture_resyncs (1.1), seen at each pass
TimestampTz last_resync_attempt = 0;

void publish_error(const char* message) {
    decoupled::SharedState* s = shared();
    SpinLockAcquire(&s->capture_mutex);
    s->capture.error_at = GetCurrentTimestamp();
    s->capture.error_lifetime_id = working_on;
    strlcpy(s->capture.last_error, message ? message : "unknown error",
            sizeof(s->capture.last_error));
    SpinLockRelease(&s->capture_mutex);
    ConditionVariableBroadcast(&s->capture_cv);
}

void detach(int, Datum) {
    decoupled::SharedState* s = shared();
    SpinLockAcquire(&s->capture_mutex);
    if (s->capture.pid == MyProcPid) {
        s->capture.pid = 0;
        s->capture.latch = nullptr;
    }
    SpinLockRelease(&s->capture_mutex);
    ConditionVariableBroadcast(&s->capture_cv);
}

void attach() {
    decoupled::SharedState* s = shared();
    SpinLockAcquire(&s->capture_mutex);
    s->capture.pid = MyProcPid;
    s->capture.latch = MyLatch;
    s->capture.progress_at = GetCurrentTimestamp();
    SpinLockRelease(&s->capture_mutex);
    on_shmem_exit(detach, 0);
}

// --- transactions and SPI ---------------------------------------------------

void begin(const char* activity) {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    SPI_connect();
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, activity);
}

void commit() {
    PopActiveSnapshot();
    SPI_finish();
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
}

// Runs `sql` (no parameters); returns the first column of the first row as
// int64 (0 when NULL or no row).
int64 query_int8(const char* sql) {
    if (SPI_execute(sql, false, 0) < 0) elog(ERROR, "could not run: %s", sql);
    if (SPI_processed == 0) return 0;
    bool isnull = false;
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull) return 0;
    Oid type = SPI_gettypeid(SPI_tuptable->tupdesc, 1);
    if (type == BOOLOID) return DatumGetBool(d) ? 1 : 0;
    if (type == LSNOID) return (int64)DatumGetLSN(d);
    if (type == INT4OID) return DatumGetInt32(d);
    return DatumGetInt64(d);
}

// Every value of the first column, as int64 ids (palloc'd in the caller's
// context).
int64* query_ids(const char* sql, int* n) {
    if (SPI_execute(sql, true, 0) != SPI_OK_SELECT) elog(ERROR, "could not run: %s", sql);
    *n = (int)SPI_processed;
    int64* ids = (int64*)SPI_palloc(sizeof(int64) * Max(*n, 1));
    for (int i = 0; i < *n; ++i) {
        bool isnull = false;
        ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
    }
    return ids;
}

// Runs `sql` with one pg_lsn parameter; it must end with `expected`.
void run_with_lsn(const char* sql, XLogRecPtr lsn, int expected) {
    Datum arg = LSNGetDatum(lsn);
    Oid type = LSNOID;
    if (SPI_execute_plan(decoupled::statement_plan(sql, 1, &type), &arg, nullptr, false, 0) !=
        expected)
        elog(ERROR, "could not run: %s", sql);
}

// Runs `sql` with one pg_lsn parameter; returns the first column of its
// first row as int64 (0 when NULL or no row).
int64 query_int8_with_lsn(const char* sql, XLogRecPtr lsn) {
    Datum arg = LSNGetDatum(lsn);
    Oid type = LSNOID;
    if (SPI_execute_with_args(sql, 1, &type, &arg, nullptr, false, 0) != SPI_OK_SELECT)
        elog(ERROR, "could not run: %s", sql);
    if (SPI_processed == 0) return 0;
    bool isnull = false;
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    return isnull ? 0 : DatumGetInt64(d);
}

// Every transaction committed before `lsn` is captured (in this one).
void record_progress(XLogRecPtr lsn) {
    run_with_lsn("INSERT INTO decoupled.capture_progress AS p (slot_name, captured_lsn) "
                 "VALUES ('pg_decoupled', $1) ON CONFLICT (only_row) DO UPDATE "
                 "SET captured_lsn = EXCLUDED.captured_lsn, captured_at = now()",
                 lsn, SPI_OK_INSERT);
}

// --- unlogged pending relations ---------------------------------------------
//
// A WAL-captured table's pending relation is unlogged once a tick left it
// empty (extension/append_core.cpp, record_ticked), so the slot is confirmed
// only up to what ticks moved into history, and a crash, which empties
// unlogged relations, is followed by a pass that decodes those tables again
// from there (34_wal_capture.sql, capture_ticked).

// Whether capture_unlogged_intact was seen holding its row in this
// worker's life: the unlogged relations have held what capture wrote into
// them since (a crash would have ended this process).
bool unlogged_intact = false;

// A table and a WAL position, as the pass reads them from the catalog (in
// the pass's memory).
struct TablePosition {
    int64 id;
    XLogRecPtr lsn;
};

// The (lifetime_id, pg_lsn) rows of `sql`, in pass_context; *n of them.
TablePosition* read_positions(const char* sql, const char* what, int* n) {
    if (SPI_execute(sql, true, 0) != SPI_OK_SELECT) elog(ERROR, "could not read %s", what);
    *n = (int)SPI_processed;
    auto* rows = (TablePosition*)MemoryContextAlloc(pass_context,
                                                    sizeof(TablePosition) * Max(*n, 1));
    for (int i = 0; i < *n; i++) {
        bool isnull = false;
        rows[i].id =
            DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
        rows[i].lsn =
            DatumGetLSN(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
    }
    return rows;
}

// For the pass after a crash: each unlogged table's ticked position, below
// which its changes are in history.
TablePosition* replays = nullptr;
int nreplays = 0;

// Reads the unlogged tables' ticked positions; returns the least, or
// `recorded` if that is less.
XLogRecPtr load_replays(XLogRecPtr recorded) {
    replays = read_positions("SELECT lifetime_id, ticked_lsn FROM decoupled._unlogged_pending()",
                             "the ticked positions of unlogged pending changes", &nreplays);
    XLogRecPtr least = recorded;
    for (int i = 0; i < nreplays; i++) least = Min(least, replays[i].lsn);
    return least;
}

// Where the changes of table `id` are captured from in the pass after a
// crash: its ticked position if its pending relation is unlogged, else the
// recorded one.
XLogRecPtr replay_from(int64 id, XLogRecPtr recorded) {
    for (int i = 0; i < nreplays; i++)
        if (replays[i].id == id) return replays[i].lsn;
    return recorded;
}

// The tables set aside and not taken again since (capture_resyncs), each
// with the position its changes count from again: the worker skips their
// earlier changes, and the plugin leaves them out of decoding altogether
// (decoupled::capture_leaves_out), since turning one of them into a line
// may be what failed.  Read before each pass's decoding.
TablePosition* left_out = nullptr;
int nleft_out = 0;

void load_left_out() {
    nleft_out = 0;
    if (!has_resyncs || !resyncs_waiting) return;  // none (resync_set_aside)
    left_out = read_positions("SELECT lifetime_id, coalesce(resynced_lsn, 'FFFFFFFF/FFFFFFFF') "
                              "  FROM decoupled.capture_resyncs",
                              "the tables capture set aside", &nleft_out);
}

bool leaves_out(int64_t id, uint64_t commit_lsn) {
    if (being_set_aside(id)) return true;
    for (int i = 0; i < nleft_out; i++)
        if (left_out[i].id == id && commit_lsn < left_out[i].lsn) return true;
    return false;
}

// Whether pending relation `relid` holds a row the latest snapshot sees
// (this transaction's own writes included).  One another transaction holds
// exclusively (a tick unlogging or compacting it) counts as holding rows.
bool pending_has_rows(Oid relid) {
    if (!ConditionalLockRelationOid(relid, AccessShareLock)) return true;
    Relation rel = try_relation_open(relid, NoLock);
    if (rel == nullptr) {
        UnlockRelationOid(relid, AccessShareLock);
        return false;  // dropped with its table: nothing of it to decode again
    }
    bool any = decoupled::holds_visible_row(rel, GetLatestSnapshot());
    relation_close(rel, AccessShareLock);
    return any;
}

// How far the slot may be confirmed: the least ticked position of the
// unlogged tables that have pending rows (false: none has, no limit).
// Read after the pass's writes, in a snapshot of its own: a tick that
// unlogged a table while the pass waited to write into it is seen, and so
// are the rows this pass wrote.  A table whose pending relation is empty
// then has every change captured so far in history: the slot need not
// deliver any of them again, and confirming past its ticked position —
// which moves only with ticks, while capture follows every other table's
// WAL too — keeps a decoding made anew from reading it all again.
bool unticked_limit(XLogRecPtr* limit) {
    if (SPI_execute("SELECT lifetime_id, ticked_lsn FROM decoupled._unlogged_pending()", false,
                    0) != SPI_OK_SELECT)
        elog(ERROR, "could not read the ticked positions of unlogged pending changes");
    uint64 n = SPI_processed;
    SPITupleTable* rows = SPI_tuptable;
    bool limited = false;
    for (uint64 i = 0; i < n; i++) {
        bool isnull = false;
        int64 id = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
        XLogRecPtr ticked = DatumGetLSN(SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &isnull));
        if (limited && ticked >= *limit) continue;
        Oid relid = decoupled::storage_relid(id, "pending");
        if (!OidIsValid(relid) || !pending_has_rows(relid)) continue;
        *limit = ticked;
        limited = true;
    }
    return limited;
}

// The slot keeps the WAL back to the least ticked position.  Returns how
// many tables it made logged (the caller says so: the log is quiet while
// the worker decodes).  A table no
// tick moves for long (its ticks fail, or nothing ticks) would keep it all:
// once the slot is more than decoupled.capture_unticked_wal_limit behind
// `upto`, the unlogged tables whose ticked position is that far behind are
// made logged — their pending rows then stand on their own, as the
// recorded position says — and the slot moves on.  At most once a second;
// a table another transaction holds is tried again then.
void changed_here();

int64 log_lagging_pending(XLogRecPtr upto, XLogRecPtr limit) {
    static TimestampTz last = 0;
    uint64 allowed = (uint64)decoupled::guc_capture_unticked_wal_limit * 1024 * 1024;
    if (limit >= upto || upto - limit <= allowed) return 0;
    TimestampTz now = GetCurrentTimestamp();
    if (decoupled::guc_capture_unticked_wal_limit > 0 &&
        !TimestampDifferenceExceeds(last, now, 1000))
        return 0;
    last = now;
    begin("pg_decoupled capture: logging pending changes no tick moved");
    int64 logged = query_int8_with_lsn(
        "SELECT count(*) FILTER (WHERE decoupled._set_pending_logged(u.lifetime_id, true, true)) "
        "  FROM decoupled._unlogged_pending() u WHERE u.ticked_lsn < $1",
        upto - allowed);
    commit();
    if (logged > 0) changed_here();
    return logged;
}

// --- the capture transaction ------------------------------------------------

// --- retractions by key ---------------------------------------------------
//
// A table with a primary key is captured with REPLICA IDENTITY DEFAULT: an
// update's and a delete's old row is found by its key (brief C14.2, the
// line format in extension/capture_plugin.cpp).  KeyedChanges finds it
// among the batch's earlier rows or asks for a lookup in storage, which the
// probes of each flush (capture_lookup.cpp) answer from the collection's
// current and pending rows — the state before the batch — or, for a row
// that is current and not needed, with a retraction by key for the tick
// to pair (resolve_current).  KeyedChanges is C++ with standard
// containers: every call into it is wrapped so that no exception reaches
// these frames, and its errors become PostgreSQL errors after the call.

enum class KeyedOp { kInsert, kInsertMasked, kRetractKey, kRetractRow };

[[noreturn]] void keyed_failed(Target* t, const char* problem) {
    elog(ERROR, "could not capture a change of registered table \"%s\": %s", t->name, problem);
}

// Runs `call` on the target's KeyedChanges, PostgreSQL-free code: returns
// nullptr, or what went wrong (its error, in `message`, or out of memory),
// for the caller to raise once nothing of C++ is left in its frames.
template <typename Call>
const char* keyed_try(Target* t, Call call, char* message, size_t size) {
    try {
        if (call(*t->keyed)) return nullptr;
        strlcpy(message, t->keyed->error().c_str(), size);
        return message;
    } catch (const std::exception&) {
        return "out of memory";
    }
}

// Whether the collection's retractions are located by key, and the lookup.
// (A 1.0 catalog has no _capture_key_lookup: its tables are all FULL.)
void know_key(Target* t) {
    if (query_int8("SELECT count(*) FROM pg_catalog.to_regprocedure("
                   "'decoupled._capture_key_lookup(bigint)') f WHERE f IS NOT NULL") == 0) {
        t->key_known = true;
        return;
    }
    Datum arg = Int64GetDatum(t->lifetime_id);
    Oid type = INT8OID;
    if (SPI_execute_with_args("SELECT key_fields, statement FROM decoupled._capture_key_lookup($1)",
                              1, &type, &arg, nullptr, true, 1) != SPI_OK_SELECT ||
        SPI_processed != 1)
        elog(ERROR, "could not read the key of collection " INT64_FORMAT, t->lifetime_id);
    bool isnull = false;
    Datum fields = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull) {
        t->key_known = true;
        return;
    }
    ArrayType* array = DatumGetArrayTypeP(fields);
    Datum* elems = nullptr;
    int n = 0;
    deconstruct_array(array, INT4OID, 4, true, TYPALIGN_INT, &elems, nullptr, &n);
    int positions[INDEX_MAX_KEYS];
    if (n < 1 || n > INDEX_MAX_KEYS)
        elog(ERROR, "collection " INT64_FORMAT " has a bad key", t->lifetime_id);
    for (int i = 0; i < n; ++i) positions[i] = DatumGetInt32(elems[i]);
    char* sql = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    Oid types[INDEX_MAX_KEYS];
    for (int i = 0; i < n; ++i) types[i] = TEXTARRAYOID;
    SPIPlanPtr lookup = SPI_prepare(sql, n, types);
    if (lookup == nullptr)
        elog(ERROR, "could not prepare the key lookup of collection " INT64_FORMAT, t->lifetime_id);
    SPI_keepplan(lookup);
    // Retractions by key leave the other columns NULL, which a domain's
    // input may refuse: a table with a domain column outside its key
    // retracts whole rows, as before.
    // (A catalog whose readers of pending predate them gets none either.)
    size_t columns = 0;
    Oid pending = decoupled::storage_relid(t->lifetime_id, "pending");
    bool readers_know =
        query_int8("SELECT count(*) FROM pg_catalog.to_regprocedure("
                   "'decoupled._capture_held_negated(bigint)') f WHERE f IS NOT NULL") > 0;
    if (readers_know && OidIsValid(pending)) {
        Relation rel = table_open(pending, AccessShareLock);
        TupleDesc desc = RelationGetDescr(rel);
        columns = (size_t)desc->natts - 1;
        for (int a = 1; a < desc->natts; ++a) {
            bool in_key = false;
            for (int i = 0; i < n; ++i) in_key = in_key || positions[i] == a;
            Form_pg_attribute att = TupleDescAttr(desc, a);
            if (att->attisdropped || (!in_key && get_typtype(att->atttypid) == TYPTYPE_DOMAIN))
                columns = 0;
        }
        table_close(rel, AccessShareLock);
    }
    bool failed = false;
    try {
        t->keyed =
            new decoupled::KeyedChanges(std::vector<int>(positions, positions + n), columns);
    } catch (const std::exception&) {
        failed = true;
    }
    if (failed) {
        SPI_freeplan(lookup);
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
    }
    t->lookup = lookup;
    t->nkeys = n;
    memcpy(t->key_fields, positions, sizeof(int) * n);
    t->key_known = true;
}

// One decoded line of a keyed table into its batch.
void keyed_add(Target* t, KeyedOp op, const char* text, const char* masked) {
    char message[256];
    const char* problem = keyed_try(
        t,
        [&](decoupled::KeyedChanges& k) {
            std::vector<int> fields;
            for (const char* p = masked; p != nullptr && *p;) {
                fields.push_back((int)strtol(p, const_cast<char**>(&p), 10));
                if (*p == ',') ++p;
            }
            switch (op) {
                case KeyedOp::kInsert:
                case KeyedOp::kInsertMasked: return k.insert(text, fields);
                case KeyedOp::kRetractKey: return k.retract_key(text);
                case KeyedOp::kRetractRow: return k.retract_row(text);
            }
            return false;
        },
        message, sizeof(message));
    if (problem) keyed_failed(t, problem);
}

// A live row found for lookup `i` (probe_live_rows).
void resolve_lookup(int i, const char* row, void* arg) {
    auto* t = static_cast<Target*>(arg);
    char message[256];
    const char* problem = keyed_try(
        t, [&](decoupled::KeyedChanges& k) { return k.resolve((size_t)i, row); }, message,
        sizeof(message));
    if (problem) keyed_failed(t, problem);
}

// A lookup's row is current in history, retracted by its key.
void resolve_current(int i, void* arg) {
    auto* t = static_cast<Target*>(arg);
    char message[256];
    const char* problem = keyed_try(
        t, [&](decoupled::KeyedChanges& k) { return k.mark((size_t)i); }, message,
        sizeof(message));
    if (problem) keyed_failed(t, problem);
}

// The batch's old rows that were not in it, from storage: index probes
// (bgworker/capture_lookup.cpp), or one statement where storage has no
// index to probe.
void keyed_lookups(Target* t) {
    const std::vector<std::vector<std::string>>* lookups = &t->keyed->lookups();
    int nlookups = (int)lookups->size();
    if (nlookups == 0) return;
    // The key values as C strings, lookup by lookup (copied out of the
    // C++ containers: the probes may raise an error).
    char** texts = (char**)palloc(sizeof(char*) * nlookups * t->nkeys);
    bool* need_row = (bool*)palloc(sizeof(bool) * nlookups);
    for (int i = 0; i < nlookups; ++i) {
        need_row[i] = t->keyed->needs_row((size_t)i) || !t->keyed->marks();
        for (int k = 0; k < t->nkeys; ++k) {
            const std::string& v = (*lookups)[i][k];
            texts[i * t->nkeys + k] = pnstrdup(v.data(), v.size());
        }
    }
    // The probes run as the table's owner, in a security-restricted
    // operation, like the reading of its rows (parse_as_owner): the key's
    // input and the rows' output are the table's types'.  (The statement
    // below runs as the worker, as it always has: registration refuses
    // domains whose checks a role that is no superuser wrote.)
    Oid user;
    int sec_context;
    GetUserIdAndSecContext(&user, &sec_context);
    SetUserIdAndSecContext(t->owner, sec_context | SECURITY_RESTRICTED_OPERATION);
    int owner_level = NewGUCNestLevel();  // what the owner's code sets goes with it
    decoupled::OwnerErrors errors;
    decoupled::mark_owner_errors(&errors);
    bool probed = decoupled::probe_live_rows(t->lifetime_id, t->key_fields, t->nkeys, nlookups,
                                             texts, need_row, resolve_lookup, resolve_current, t);
    decoupled::unmark_owner_errors(&errors);
    AtEOXact_GUC(false, owner_level);
    SetUserIdAndSecContext(user, sec_context);
    pfree(need_row);
    if (probed) {
        for (int i = 0; i < nlookups * t->nkeys; ++i) pfree(texts[i]);
        pfree(texts);
        return;
    }
    Datum args[INDEX_MAX_KEYS];
    Datum* values = (Datum*)palloc(sizeof(Datum) * nlookups);
    for (int k = 0; k < t->nkeys; ++k) {
        for (int i = 0; i < nlookups; ++i)
            values[i] = CStringGetTextDatum(texts[i * t->nkeys + k]);
        args[k] = PointerGetDatum(
            construct_array(values, nlookups, TEXTOID, -1, false, TYPALIGN_INT));
    }
    // Each key an index probe into cur and pending, whatever their sizes
    // were when the plan was made: the plan is kept for the worker's life
    // (and made again at any run), and one made while pending was empty
    // and freshly vacuumed scanned all of pending once per key — a
    // 100,000-row UPDATE then took minutes to capture.  So the plan is
    // made and run without sequential or bitmap scans.
    static const char* const probes_only[] = {"enable_seqscan", "enable_bitmapscan", nullptr};
    int level = decoupled::planner_settings_off(probes_only);
    // Not read-only: the rows this transaction's earlier flushes wrote to
    // pending must be seen (a read-only execution keeps the snapshot of
    // before them).
    if (SPI_execute_plan(t->lookup, args, nullptr, false, 0) != SPI_OK_SELECT)
        elog(ERROR, "could not look up the old rows of collection " INT64_FORMAT, t->lifetime_id);
    AtEOXact_GUC(true, level);
    for (uint64 r = 0; r < SPI_processed; ++r) {
        bool isnull = false;
        int64 n = DatumGetInt64(
            SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
        resolve_lookup((int)(n - 1),
                       SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2), t);
    }
}

// The batch's rows, complete, into t->rows (batch memory), and the batch
// emptied.
void keyed_rows(Target* t) {
    keyed_lookups(t);
    char message[512];
    std::vector<std::string>* rows = nullptr;
    const char* problem = keyed_try(
        t,
        [&](decoupled::KeyedChanges& k) {
            rows = new std::vector<std::string>();
            return k.rows(rows);
        },
        message, sizeof(message));
    if (problem == nullptr) {
        // (An error in palloc would leak the vector: out of memory only.)
        MemoryContext old = MemoryContextSwitchTo(batch_context);
        t->rows = (Datum*)palloc(sizeof(Datum) * Max(rows->size(), (size_t)1));
        for (const std::string& r : *rows)
            t->rows[t->nrows++] =
                PointerGetDatum(cstring_to_text_with_len(r.data(), (int)r.size()));
        MemoryContextSwitchTo(old);
    }
    delete rows;
    t->keyed->clear();
    if (problem) keyed_failed(t, problem);
}

// The live rows the worker's own writes left keyed tables (KeyedChanges)
// hold only while nothing else changed them and those writes committed:
// they are forgotten after a failed pass, a truncation and whatever this
// worker switched or resynchronised (changed_here).
void forget_known_rows() {
    if (targets == nullptr) return;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, targets);
    while (Target* t = static_cast<Target*>(hash_seq_search(&seq)))
        if (t->keyed != nullptr) t->keyed->forget_known();
}

// The extension was dropped: what the worker kept for its collections goes
// (a new one numbers its collections from 1 again).
void forget_targets() {
    if (targets == nullptr) return;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, targets);
    while (Target* t = static_cast<Target*>(hash_seq_search(&seq))) {
        if (t->parse != nullptr) SPI_freeplan(t->parse);
        if (t->insert != nullptr) SPI_freeplan(t->insert);
        if (t->lookup != nullptr) SPI_freeplan(t->lookup);
        delete t->keyed;
        int64 id = t->lifetime_id;
        hash_search(targets, &id, HASH_REMOVE, nullptr);
    }
    decoupled::capture_skip_forget();
}

Target* target(int64 id) {
    bool found = false;
    auto* t = static_cast<Target*>(hash_search(targets, &id, HASH_ENTER, &found));
    if (!found) {
        t->parse = nullptr;
        t->insert = nullptr;
        t->checked = false;
        t->emptied = false;
        t->nrows = 0;
        t->rows = nullptr;
        t->key_known = false;
        t->keyed = nullptr;
        t->lookup = nullptr;
        t->nkeys = 0;
    }
    if (!t->checked) {
        // A collection dropped meanwhile takes no more rows; the row lock
        // keeps a drop from committing under this transaction.
        Datum arg = Int64GetDatum(id);
        Oid type = INT8OID;
        // Kept: a statement planned at every pass was a seventh of what the
        // worker spent under single-row writers.
        // (capture_resyncs: not in a catalog not updated to 1.1 yet.)
        const char* check =
            has_resyncs
                ? "SELECT c.relowner, "
                  "       format_type(c2.reltype, NULL) || '[]', "
                  "       (format_type(c2.reltype, NULL) || '[]')::regtype::oid, o.name, "
                  "       CASE WHEN r.lifetime_id IS NULL THEN '0/0' "
                  "            ELSE coalesce(r.resynced_lsn, 'FFFFFFFF/FFFFFFFF') END "
                  "  FROM decoupled.catalog_objects o "
                  "  JOIN pg_catalog.pg_class c ON c.oid = o.relation "
                  "  JOIN pg_catalog.pg_class c2 "
                  "    ON c2.oid = ('decoupled_storage.c' || o.lifetime_id || '_pending')::regclass "
                  "  LEFT JOIN decoupled.capture_resyncs r ON r.lifetime_id = o.lifetime_id "
                  " WHERE o.lifetime_id = $1 AND o.kind = 'table' AND o.dropped_at IS NULL "
                  "   FOR SHARE OF o"
                : "SELECT c.relowner, "
                  "       format_type(c2.reltype, NULL) || '[]', "
                  "       (format_type(c2.reltype, NULL) || '[]')::regtype::oid, o.name, "
                  "       '0/0'::pg_catalog.pg_lsn "
                  "  FROM decoupled.catalog_objects o "
                  "  JOIN pg_catalog.pg_class c ON c.oid = o.relation "
                  "  JOIN pg_catalog.pg_class c2 "
                  "    ON c2.oid = ('decoupled_storage.c' || o.lifetime_id || '_pending')::regclass "
                  " WHERE o.lifetime_id = $1 AND o.kind = 'table' AND o.dropped_at IS NULL "
                  "   FOR SHARE OF o";
        int rc = SPI_execute_plan(decoupled::statement_plan(check, 1, &type), &arg, nullptr,
                                  false, 1);
        if (rc != SPI_OK_SELECT) elog(ERROR, "could not check collection " INT64_FORMAT, id);
        t->live = SPI_processed == 1;
        t->checked = true;
        t->resynced_before = InvalidXLogRecPtr;
        if (t->live) {
            bool isnull = false;
            t->owner = DatumGetObjectId(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
            strlcpy(t->name, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4),
                    sizeof(t->name));
            t->resynced_before = DatumGetLSN(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
        }
        if (t->live && t->insert == nullptr) {
            char* array_type = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
            bool isnull = false;
            Oid array_oid = DatumGetObjectId(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
            char* pending = psprintf("decoupled_storage.c" INT64_FORMAT "_pending", id);
            Oid text_array = TEXTARRAYOID;
            // No alias in these statements can meet a column's name: the
            // composite array unnests into the pending table's columns.
            SPIPlanPtr parse = SPI_prepare(
                psprintf("SELECT array_agg(decoupled_text::%s) FROM unnest($1) decoupled_text",
                         pending),
                1, &text_array);
            SPIPlanPtr insert = SPI_prepare(
                psprintf("INSERT INTO %s SELECT * FROM unnest($1::%s)", pending, array_type), 1,
                &array_oid);
            if (parse == nullptr || insert == nullptr)
                elog(ERROR, "could not prepare the writes of collection " INT64_FORMAT, id);
            SPI_keepplan(parse);
            SPI_keepplan(insert);
            t->parse = parse;
            t->insert = insert;
        }
        if (t->live && !t->key_known) know_key(t);
    }
    return t;
}

// The rows' text is read as the table's owner, in a security-restricted
// operation: a domain's CHECK may call functions, and they must not run
// with this worker's rights.  The values then go into pending as they are
// (same types: nothing is checked or converted again).
Datum parse_as_owner(Target* t, Datum text_rows) {
    Oid user;
    int context;
    GetUserIdAndSecContext(&user, &context);
    SetUserIdAndSecContext(t->owner, context | SECURITY_RESTRICTED_OPERATION);
    // Whatever the owner's code sets in this session goes with it, as
    // after REFRESH MATERIALIZED VIEW.
    int level = NewGUCNestLevel();
    decoupled::OwnerErrors errors;
    decoupled::mark_owner_errors(&errors);
    int rc = SPI_execute_plan(t->parse, &text_rows, nullptr, true, 1);
    decoupled::unmark_owner_errors(&errors);
    AtEOXact_GUC(false, level);
    SetUserIdAndSecContext(user, context);
    if (rc != SPI_OK_SELECT || SPI_processed != 1)
        elog(ERROR, "could not read captured rows of collection " INT64_FORMAT, t->lifetime_id);
    bool isnull = false;
    return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
}

void flush_context(void* arg) {
    errcontext("capturing changes of registered table \"%s\"", static_cast<Target*>(arg)->name);
}

void flush(Target* t) {
    if (t->keyed != nullptr && t->keyed->size() > 0) {
        if (t->live)
            keyed_rows(t);
        else
            t->keyed->clear();
    }
    if (t->nrows == 0) return;
    if (t->live) {
        ErrorContextCallback context;
        context.callback = flush_context;
        context.arg = t;
        context.previous = error_context_stack;
        error_context_stack = &context;
        if (!decoupled::write_pending_rows(t->lifetime_id, t->owner, t->rows, t->nrows)) {
            ArrayType* array =
                construct_array(t->rows, t->nrows, TEXTOID, -1, false, TYPALIGN_INT);
            Datum arg = parse_as_owner(t, PointerGetDatum(array));
            if (SPI_execute_plan(t->insert, &arg, nullptr, false, 0) != SPI_OK_INSERT)
                elog(ERROR, "could not write captured rows of collection " INT64_FORMAT,
                     t->lifetime_id);
        }
        error_context_stack = context.previous;
    }
    if (t->keyed != nullptr) {
        // Its rows were made for this flush alone.
        for (int i = 0; i < t->nrows; ++i) pfree(DatumGetPointer(t->rows[i]));
        pfree(t->rows);
        t->rows = nullptr;
    }
    t->nrows = 0;
}

void add_row(Target* t, const char* record) {
    if (t->rows == nullptr)
        t->rows = (Datum*)MemoryContextAlloc(batch_context, sizeof(Datum) * kBatchRows);
    MemoryContext old = MemoryContextSwitchTo(batch_context);
    t->rows[t->nrows++] = CStringGetTextDatum(record);
    MemoryContextSwitchTo(old);
    if (t->nrows == kBatchRows) flush(t);
}

// "K (k1,...)", "U f,... (1,...)", "(d,...)" of a table captured by key.
void add_keyed_line(Target* t, char* line) {
    if (!t->live) return;  // dropped: its lines are skipped (flush)
    if (t->keyed == nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("registered table \"%s\" has no key to locate its retractions",
                               t->name),
                        errhint("Registered tables need a primary key or REPLICA IDENTITY FULL.")));
    // A full batch is flushed before the next line, never between an
    // update's retraction and its new row ("U"), which may take values
    // from the retracted row.
    if (line[0] != 'U' && t->keyed->size() >= (size_t)kBatchRows) flush(t);
    if (line[0] == 'K') {
        keyed_add(t, KeyedOp::kRetractKey, line + 2, nullptr);
    } else if (line[0] == 'U') {
        char* masked = line + 2;
        char* row = strchr(masked, ' ');
        if (row == nullptr) elog(ERROR, "unexpected decoded line: %s", line);
        *row++ = '\0';
        keyed_add(t, KeyedOp::kInsertMasked, row, masked);
    } else {
        keyed_add(t, strncmp(line, "(-", 2) == 0 ? KeyedOp::kRetractRow : KeyedOp::kInsert, line,
                  nullptr);
    }
}

void truncated(Target* t) {
    flush(t);
    if (t->keyed != nullptr) t->keyed->forget_known();
    // Each retraction of everything held reads all of cur and pending: a
    // run of TRUNCATEs with nothing between, in one pass, reads it once.
    if (!t->live || t->emptied) return;
    t->emptied = true;
    Datum arg = Int64GetDatum(t->lifetime_id);
    Oid type = INT8OID;
    if (SPI_execute_with_args("SELECT decoupled._capture_truncate($1)", 1, &type, &arg, nullptr,
                              false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not capture a truncation");
}

// --- decoding -----------------------------------------------------------------
//
// The worker decodes its slot itself, as pg_logical_slot_peek_changes does
// but without going through SQL: that function's result passed through a
// statement planned at every pass, and confirming through
// pg_replication_slot_advance decoded the same WAL a second time.

// The decoded lines of the pass, one text column, in commit order: a
// tuplestore, so that a transaction of millions of rows spills to disk
// instead of filling memory.  Both live in the pass's memory.
Tuplestorestate* decoded_lines = nullptr;
TupleDesc line_desc = nullptr;
// The decoding, kept from pass to pass while the worker captures: each
// pass reads on from where the last one stopped, with the transactions
// still open then in its reorder buffer.  A decoding made anew starts at
// the slot's restart point, which only moves past a snapshot of running
// transactions with none older open; under writers, ticks and steps one
// nearly always is, and the restart point lagged 10-45 MB behind the
// confirmed position: every pass read all of that again to take in ~1 MB.
// The slot is held as long as the decoding lives; an error frees both
// (forget_decoding), and a second without a captured change gives the
// slot back (close_decoding), so that it can be dropped by hand while
// registered tables are idle.
LogicalDecodingContext* decoding = nullptr;
TimestampTz last_capture = 0;  // the last pass of this decoding that captured a change
constexpr long kHoldIdleMs = 1000;

void prepare_line(LogicalDecodingContext* ctx, XLogRecPtr, TransactionId, bool) {
    resetStringInfo(ctx->out);
}

void store_line(LogicalDecodingContext* ctx, XLogRecPtr, TransactionId, bool) {
    Datum value = PointerGetDatum(cstring_to_text_with_len(ctx->out->data, ctx->out->len));
    bool isnull = false;
    tuplestore_putvalues(decoded_lines, line_desc, &value, &isnull);
}

// Decoding reads the catalog as it was when each change was written:
// caches filled before must not serve it, and what it filled must not serve
// the statements after it.  PostgreSQL's own decoding functions clear every
// cache on both sides; after that, each statement of the pass rebuilt what
// it needed, which was most of a pass's work under writers.  Clearing is
// needed only while a catalog change lies at or after the decoding's start:
// an entry built after the change was received reflects it, which is wrong
// for a record written before it, and an entry decoding built for a record
// before it is wrong for the statements after.  A change committed before
// the decoded range was received (and its entries invalidated) at the
// latest when this pass's transaction began; one committed inside it is
// either received later (invalidating what it touches) or decoded, and
// decoding applies its invalidations.  So: note the WAL position whenever
// an invalidation reached this backend (SharedInvalidMessageCounter counts
// them) or this worker changed the catalog itself (changed_here), and
// clear on both sides while the range starts before that position.  With
// the decoding kept from pass to pass, the range a pass may replay starts
// at the first record of the oldest transaction still open in it (queued
// by an earlier pass), or else at the next record to read.
uint64 seen_invalidations = 0;
XLogRecPtr last_catalog_change = InvalidXLogRecPtr;  // set at start: clear until passed

void note_catalog_changes() {
    if (SharedInvalidMessageCounter == seen_invalidations) return;
    seen_invalidations = SharedInvalidMessageCounter;
    last_catalog_change = GetXLogInsertRecPtr();
}

// This worker changed the catalog (triggers, a slot, a resynchronisation)
// and committed, or failed: the situation is read again (situation()) and
// the next decoding clears the caches on both sides.
bool seen_valid = false;  // situation(): what look() saw still holds
// The skipped relation files are read again before the next decoding: a
// table this worker adopted is decoded from its adoption on.
bool skipped_stale = true;

void changed_here() {
    seen_valid = false;
    skipped_stale = true;
    last_catalog_change = GetXLogInsertRecPtr();
    forget_known_rows();
}

void clear_caches_if_changed(XLogRecPtr start) {
    note_catalog_changes();
    if (start < last_catalog_change) InvalidateSystemCaches();
}

// The relation files not decoded (capture_skip.cpp), read again when the
// catalog epoch moves (tables are registered, views come and go) or this
// worker changed the catalog, and otherwise at most every 250 ms once
// invalidations say relations may have changed (a tick compacting pending
// gives it a new file): until then a new file is decoded, which costs time
// and loses nothing.
void refresh_skipped_relations() {
    static uint64 at_epoch = 0;
    static uint64 at_invalidation = 0;
    static TimestampTz at = 0;
    uint64 epoch = pg_atomic_read_u64(&shared()->catalog_epoch);
    TimestampTz now = GetCurrentTimestamp();
    if (at != 0 && epoch == at_epoch && !skipped_stale &&
        (SharedInvalidMessageCounter == at_invalidation ||
         !TimestampDifferenceExceeds(at, now, 250)))
        return;
    decoupled::capture_skip_refresh();
    skipped_stale = false;
    at_epoch = epoch;
    at_invalidation = SharedInvalidMessageCounter;
    at = now;
}

// The WAL a decoding reads, flushed first.  A pass decodes up to the
// flushed position, but its last record may cross it: the WAL writer
// flushes whole pages, and under asynchronous commits nothing else flushes
// for up to wal_writer_delay.  read_local_xlog_page waited for it in 1 ms
// sleeps — under 800 single-row inserts a second the worker woke 800
// times a second and a pass's changes reached pending up to 200 ms late.
// The rest of a record that started before the flushed position is
// inserted (or being inserted: XLogFlush waits for that), so flushing it
// is what a synchronous commit does, and never asks for WAL beyond it.
int read_flushed_wal_page(XLogReaderState* state, XLogRecPtr page, int length, XLogRecPtr record,
                          char* buffer) {
    XLogRecPtr needed = page + length;
    if (!RecoveryInProgress() && needed > GetFlushRecPtr(nullptr))
        XLogFlush(Min(needed, GetXLogInsertRecPtr()));
    return read_local_xlog_page(state, page, length, record, buffer);
}

// A decoding of the acquired slot from its restart point, living beyond
// the pass (its memory under TopMemoryContext).
void open_decoding() {
    static XLogReaderRoutine local_wal = {};
    local_wal.page_read = read_flushed_wal_page;
    local_wal.segment_open = wal_segment_open;
    local_wal.segment_close = wal_segment_close;
    MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
    decoding = CreateDecodingContext(InvalidXLogRecPtr, NIL, false, &local_wal, prepare_line,
                                     store_line, nullptr);
    MemoryContextSwitchTo(old);
    XLogBeginRead(decoding->reader, MyReplicationSlot->data.restart_lsn);
}

// The decoding ends and the slot is given back (outside any error).
void close_decoding() {
    if (decoding != nullptr) {
        FreeDecodingContext(decoding);
        decoding = nullptr;
    }
    if (MyReplicationSlot != nullptr) ReplicationSlotRelease();
    last_capture = 0;
}

// After a pass: a decoding that captured nothing in it and for kHoldIdleMs
// before (the server's own background writes keep the WAL moving) gives
// the slot back.
void note_capture(bool captured_any) {
    TimestampTz now = GetCurrentTimestamp();
    if (captured_any)
        last_capture = now;
    else if (last_capture == 0 || TimestampDifferenceExceeds(last_capture, now, kHoldIdleMs))
        close_decoding();
}

// Decodes the acquired slot on through `upto` into decoded_lines: from its
// restart point if no decoding is open, else from where the last pass
// stopped.
void decode_through(XLogRecPtr upto) {
    refresh_skipped_relations();
    MemoryContext old = MemoryContextSwitchTo(pass_context);
    line_desc = CreateTemplateTupleDesc(1);
    TupleDescInitEntry(line_desc, 1, "data", TEXTOID, -1, 0);
    decoded_lines = tuplestore_begin_heap(false, false, work_mem);
    MemoryContextSwitchTo(old);
    if (decoding == nullptr) open_decoding();
    // The oldest record this pass may replay: the first of the oldest
    // transaction still open, or the next one to read.
    XLogRecPtr start = decoding->reader->EndRecPtr;
    ReorderBufferTXN* oldest = ReorderBufferGetOldestTXN(decoding->reorder);
    if (oldest != nullptr && oldest->first_lsn < start) start = oldest->first_lsn;
    clear_caches_if_changed(start);
    while (decoding->reader->EndRecPtr < upto) {
        char* problem = nullptr;
        // The reader's buffers (allocated at its first reads) must outlive
        // the pass: they go in the decoding's own memory.
        MemoryContext pass_memory = MemoryContextSwitchTo(decoding->context);
        XLogRecord* record = XLogReadRecord(decoding->reader, &problem);
        MemoryContextSwitchTo(pass_memory);
        if (problem) elog(ERROR, "could not read the WAL to capture: %s", problem);
        if (record != nullptr && !decoupled::capture_skip_record(decoding, decoding->reader))
            LogicalDecodingProcessRecord(decoding, decoding->reader);
        CHECK_FOR_INTERRUPTS();
    }
    clear_caches_if_changed(start);
}

// The lines were written; their spill files go before the transaction ends.
void end_lines() {
    tuplestore_end(decoded_lines);
    decoded_lines = nullptr;
}

// After an error (the transaction aborted): the decoding's WAL file, spill
// files and the slot are given back, and whatever decoding cached goes.
void forget_decoding() {
    if (decoding != nullptr) {
        LogicalDecodingContext* ctx = decoding;
        decoding = nullptr;
        PG_TRY();
        {
            FreeDecodingContext(ctx);
        }
        PG_CATCH();
        {
            FlushErrorState();
        }
        PG_END_TRY();
    }
    decoded_lines = nullptr;  // its memory goes with the pass's
    if (MyReplicationSlot != nullptr) ReplicationSlotRelease();
    last_capture = 0;
    InvalidateSystemCaches();
    changed_here();
}

// Decodes the slot up to a position F, writes every captured transaction
// committed before F and not yet captured (capture_progress), and F with
// them; then confirms F to the slot.  Returns whether WAL is left beyond
// what one capture transaction takes (then the next pass comes at once;
// otherwise it waits for the next wake-up, so that writers' changes are
// taken in batches rather than one decoding per commit).
// A decoding opened anew (at start, after an error or an idle second)
// starts at the slot's restart point, and the WAL from there on is kept
// for it.  The restart point only moves past a snapshot of running
// transactions in the WAL — the background writer logs one every 15 s —
// so the worker logs one itself: a later confirmation moves the restart
// point up to it.  Every kRestartPointMs while passes capture changes:
// decoding such a snapshot writes the snapshot builder's state to a file
// and the confirmation after it saves the slot, each with an fsync — a
// fifth of the worker's CPU at one every 100 ms — while the decoding, kept
// from pass to pass, starts at the restart point only when it is made
// anew.  Every kIdleRestartPointMs while they capture nothing: a second of
// that ends the decoding, and one made anew soon after (writers of tables
// nobody registered keep the WAL moving) reads again everything from the
// restart point.
constexpr long kRestartPointMs = 1000;
constexpr long kIdleRestartPointMs = 100;

void keep_restart_point_close(bool captured_any) {
    static TimestampTz last = 0;
    TimestampTz now = GetCurrentTimestamp();
    if (!TimestampDifferenceExceeds(last, now,
                                    captured_any ? kRestartPointMs : kIdleRestartPointMs))
        return;
    last = now;
    (void)LogStandbySnapshot();
}

// Decoding logs at LOG each time it starts ("starting logical decoding for
// slot ..."): a line per pass of this worker.  LOG lines go to the server
// log unless log_min_messages is above ERROR, so it is FATAL while this
// worker decodes (restored after every pass, and before the pass's errors
// are reported).
int saved_log_min_messages = WARNING;

void quiet_decoding() { log_min_messages = Max(saved_log_min_messages, FATAL); }

bool capture() {
    working_on = 0;
    begin("pg_decoupled capture: decoding");
    // Tests hold capture here (capture lagging, a switch between passes).
    decoupled::wait_point("capture:decoding");
    has_resyncs = decoupled::catalog_has_capture_resyncs();
    quiet_decoding();
    if (SearchNamedReplicationSlot(kSlot, true) == nullptr) {
        close_decoding();
        commit();
        return false;
    }
    // Held while the decoding lives (an error releases it): meanwhile
    // nobody else decodes, advances or drops the slot.
    if (decoding == nullptr) ReplicationSlotAcquire(kSlot, true);
    XLogRecPtr confirmed = MyReplicationSlot->data.confirmed_flush;
    XLogRecPtr upto = GetFlushRecPtr(nullptr);
    decoupled::SharedState* s = shared();
    SpinLockAcquire(&s->capture_mutex);
    XLogRecPtr through = s->capture.captured_through;
    SpinLockRelease(&s->capture_mutex);
    // Where this pass starts reading: a live decoding reads on from where
    // the last pass stopped, which may lie past the confirmed position (the
    // slot is confirmed only up to what ticks moved).
    XLogRecPtr from = confirmed;
    if (decoding != nullptr) from = Max(from, decoding->reader->EndRecPtr);
    if (confirmed == InvalidXLogRecPtr || (upto <= from && upto <= through)) {
        if (decoding == nullptr)
            close_decoding();  // the slot, acquired for nothing
        else
            note_capture(false);
        commit();
        if (confirmed != InvalidXLogRecPtr) publish_progress(confirmed);
        return false;
    }
    // A pass reads at most kMaxBatchWal past what capture has already
    // taken in.  A decoding opened afresh starts at the confirmed position,
    // which unticked pending changes hold back (the slot is confirmed only
    // as far as ticks moved), so it first decodes again what it captured
    // before: a window counted from there ended where capture already was
    // whenever more than kMaxBatchWal of WAL lay between, and such a pass,
    // capturing nothing, closed the decoding for the next to start at the
    // same place — capture never caught up, and no table ticked again.
    const XLogRecPtr window_from = Max(from, through);
    bool more = upto > window_from + kMaxBatchWal;
    if (more) upto = window_from + kMaxBatchWal;
    XLogRecPtr recorded =
        (XLogRecPtr)query_int8("SELECT captured_lsn FROM decoupled.capture_progress");
    // After a crash the unlogged pending relations are empty: the first
    // pass captures their tables' changes again from their ticked positions
    // (the slot was confirmed no further), and records that the relations
    // hold what capture wrote (capture_unlogged_intact).
    const bool unlogged_catalog = decoupled::catalog_has_unlogged_pending();
    bool replaying = false;
    XLogRecPtr skip_before = recorded;
    nreplays = 0;
    if (unlogged_catalog && !unlogged_intact) {
        if (query_int8("SELECT count(*) FROM decoupled.capture_unlogged_intact") > 0) {
            unlogged_intact = true;
        } else {
            replaying = true;
            skip_before = load_replays(recorded);
        }
    }

    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, targets);
    while (Target* t = static_cast<Target*>(hash_seq_search(&seq))) {
        t->checked = false;
        t->emptied = false;
        t->nrows = 0;
        t->rows = nullptr;
        if (t->keyed != nullptr) t->keyed->clear();
    }
    MemoryContextReset(batch_context);
    // What this transaction writes is marked not to be decoded (the
    // plugin's origin filter): capture never decodes its own output.  The
    // mark ends with the pass (also when it fails).
    replorigin_session_origin = DoNotReplicateId;

    load_left_out();
    decoupled::capture_leaves_out = leaves_out;
    decoupled::capture_decoding_table = 0;
    decode_through(upto);
    TupleTableSlot* slot = MakeSingleTupleTableSlot(line_desc, &TTSOpsMinimalTuple);
    bool skip = true;
    XLogRecPtr commit_lsn = InvalidXLogRecPtr;
    int64 captured = 0;
    writing_changes = true;
    while (tuplestore_gettupleslot(decoded_lines, true, false, slot)) {
        bool isnull = false;
        Datum value = slot_getattr(slot, 1, &isnull);
        if (isnull) continue;
        char* line = TextDatumGetCString(value);
        if (line[0] == 'B') {
            commit_lsn = (XLogRecPtr)strtoull(line + 2, nullptr, 10);
            skip = commit_lsn < skip_before;
        } else if (!skip) {
            char* rest = nullptr;
            int64 id = strtoll(line, &rest, 10);
            if (rest == nullptr || *rest != ' ') elog(ERROR, "unexpected decoded line: %s", line);
            working_on = id;
            Target* t = target(id);
            if (being_set_aside(id) || commit_lsn < t->resynced_before ||
                (replaying && commit_lsn < replay_from(id, recorded))) {
                // Set aside, in the contents the table was taken again from,
                // or, after a crash, already in history or pending.
            } else if (rest[1] == 'T') {
                truncated(t);
            } else if (t->keyed != nullptr || rest[1] == 'K' || rest[1] == 'U') {
                t->emptied = false;
                add_keyed_line(t, rest + 1);
            } else {
                t->emptied = false;
                add_row(t, rest + 1);
            }
            ++captured;
        }
        pfree(line);
        ExecClearTuple(slot);
    }
    ExecDropSingleTupleTableSlot(slot);

    hash_seq_init(&seq, targets);
    while (Target* t = static_cast<Target*>(hash_seq_search(&seq))) {
        working_on = t->lifetime_id;
        flush(t);
    }
    working_on = 0;
    writing_changes = false;
    for (int i = 0; i < nset_aside; i++) {
        Datum args[2] = {Int64GetDatum(set_aside[i].id),
                         CStringGetTextDatum(set_aside[i].error)};
        Oid types[2] = {INT8OID, TEXTOID};
        if (SPI_execute_with_args("SELECT decoupled._capture_set_aside($1, $2)", 2, types, args,
                                  nullptr, false, 1) != SPI_OK_SELECT)
            elog(ERROR, "could not set a registered table aside");
        char* name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        strlcpy(set_aside[i].name, name ? name : "?", sizeof(set_aside[i].name));
    }
    if (captured > 0) record_progress(upto);
    if (resyncs_waiting && has_resyncs && captured > 0) {
        // Rows of tables taken again before what capture passed are done.
        run_with_lsn("DELETE FROM decoupled.capture_resyncs WHERE resynced_lsn <= $1", upto,
                     SPI_OK_DELETE);
    }
    if (unlogged_catalog && !unlogged_intact)
        query_int8("WITH i AS (INSERT INTO decoupled.capture_unlogged_intact DEFAULT VALUES "
                   "           ON CONFLICT DO NOTHING RETURNING 1) "
                   "SELECT count(*) FROM i");
    XLogRecPtr limit = InvalidXLogRecPtr;
    bool limited = unlogged_catalog && unticked_limit(&limit);
    // The commits of the ticks it saw were inserted before this point.
    XLogRecPtr ticks_inserted = (XLogRecPtr)decoupled::inserted_position();
    end_lines();
    commit();
    replorigin_session_origin = InvalidRepOriginId;
    if (unlogged_catalog) unlogged_intact = true;
    if (replaying && nreplays > 0) {
        log_min_messages = saved_log_min_messages;
        ereport(LOG, (errmsg_plural("pg_decoupled capture decoded again the changes of %d "
                                    "registered table whose unlogged pending changes a crash "
                                    "emptied",
                                    "pg_decoupled capture decoded again the changes of %d "
                                    "registered tables whose unlogged pending changes a crash "
                                    "emptied",
                                    nreplays, nreplays),
                      errdetail("Each from the last tick that moved its changes into history.")));
        quiet_decoding();
    }
    nreplays = 0;

    // Confirmed only now that what it covers is durable: a crash before
    // this line decodes these transactions again and skips them.  The
    // decoding found where the slot may restart; confirming moves it there.
    // What sits in unlogged pending relations is durable only once a tick
    // moved it: the slot is confirmed no further than that.
    XLogRecPtr confirm = limited ? Min(upto, limit) : upto;
    if (confirm > confirmed) {
        // Durable first — this pass's commit, and the ticks' whose position
        // it confirms: under synchronous_commit = off a commit may still be
        // in WAL buffers, and a crash after the slot saved the confirmation
        // would lose what it covers.
        XLogFlush(Max(XactLastCommitEnd, limited ? ticks_inserted : InvalidXLogRecPtr));
        LogicalConfirmReceivedLocation(confirm);
        ReplicationSlotMarkDirty();
    }
    if (nset_aside > 0) {
        // Said once the pass is over: decoding quiets the log until then.
        nset_aside_logged = nset_aside;
        nset_aside = 0;
        failing_table = 0;
        failures_of_table = 0;
        resyncs_waiting = true;
        last_resync_attempt = 0;  // tried at the next pass
    }
    publish_progress(upto);
    keep_restart_point_close(captured > 0);
    // Catching up is not idle: the decoding stays open for the next window.
    note_capture(captured > 0 || more);
    int64 logged = limited ? log_lagging_pending(upto, limit) : 0;
    if (logged > 0) {
        log_min_messages = saved_log_min_messages;
        ereport(LOG, (errmsg("pg_decoupled capture made the pending changes of " INT64_FORMAT
                             " registered tables logged",
                             logged),
                      errdetail("No tick moved their changes for more than "
                                "decoupled.capture_unticked_wal_limit of WAL.")));
        quiet_decoding();
    }
    return more;
}

// Counts a failed pass against the table whose changes it was writing, and
// has the next pass set that table aside once it failed
// kSetAsideAfterFailures times in a row.
void note_failed_pass(const char* message) {
    int64 culprit = writing_changes ? working_on : decoupled::capture_decoding_table;
    writing_changes = false;
    decoupled::capture_decoding_table = 0;
    if (culprit == 0 || culprit != failing_table) {
        failing_table = culprit;
        failures_of_table = 0;
    }
    if (culprit == 0 || !has_resyncs) return;
    if (++failures_of_table >= kSetAsideAfterFailures && !being_set_aside(culprit) &&
        nset_aside < kMaxSetAside) {
        set_aside[nset_aside].id = culprit;
        strlcpy(set_aside[nset_aside].error, message, sizeof(set_aside[nset_aside].error));
        nset_aside++;
        failing_table = 0;
        failures_of_table = 0;
    }
}

// Takes the tables set aside again from their contents (at most once a
// second), each in a subtransaction: one that cannot be taken now (a
// writer holds it) or fails stays aside, and this pass's capture goes on.
void resync_set_aside() {
    TimestampTz now = GetCurrentTimestamp();
    if (!TimestampDifferenceExceeds(last_resync_attempt, now, 1000)) return;
    last_resync_attempt = now;
    begin("pg_decoupled capture: taking set-aside tables again");
    if (!decoupled::catalog_has_capture_resyncs()) {  // not updated to 1.1 yet
        resyncs_waiting = false;
        commit();
        return;
    }
    int n = 0;
    int64* ids = query_ids("SELECT lifetime_id FROM decoupled.capture_resyncs "
                           " WHERE resynced_lsn IS NULL ORDER BY lifetime_id",
                           &n);
    if (n == 0 && query_int8("SELECT count(*) FROM decoupled.capture_resyncs") == 0)
        resyncs_waiting = false;
    bool any = false;
    for (int i = 0; i < n; ++i) {
        MemoryContext context = CurrentMemoryContext;
        ResourceOwner owner = CurrentResourceOwner;
        BeginInternalSubTransaction(nullptr);
        PG_TRY();
        {
            Datum arg = Int64GetDatum(ids[i]);
            Oid type = INT8OID;
            if (SPI_execute_with_args("SELECT decoupled._capture_resync_table($1), "
                                      "       (SELECT o.name::text FROM decoupled.catalog_objects o "
                                      "         WHERE o.lifetime_id = $1)",
                                      1, &type, &arg, nullptr, false, 1) != SPI_OK_SELECT)
                elog(ERROR, "could not take registered table " INT64_FORMAT " again", ids[i]);
            bool isnull = true;
            SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
            if (!isnull) {
                any = true;
                ereport(LOG, (errmsg("pg_decoupled capture took registered table \"%s\" again "
                                     "from its contents",
                                     SPI_getvalue(SPI_tuptable->vals[0],
                                                  SPI_tuptable->tupdesc, 2))));
            }
            ReleaseCurrentSubTransaction();
        }
        PG_CATCH();
        {
            MemoryContextSwitchTo(context);
            ErrorData* error = CopyErrorData();
            FlushErrorState();
            RollbackAndReleaseCurrentSubTransaction();
            ereport(WARNING, (errmsg("pg_decoupled capture could not take registered table "
                                     INT64_FORMAT " again: %s",
                                     ids[i], error->message)));
            FreeErrorData(error);
        }
        PG_END_TRY();
        MemoryContextSwitchTo(context);
        CurrentResourceOwner = owner;
    }
    commit();
    if (any) changed_here();
}

// --- the slot and the switches ----------------------------------------------

// What look() saw, while nothing says it changed.  Under writers a pass
// comes every 50 ms, and each statement after a decoding finds the caches
// cleared: reading the tables again at every pass was a large part of the
// worker's work.  They change only with the catalog — registration,
// adoption, release, drops and restores bump the catalog epoch — so they
// are read again when the epoch moves, once a second anyway, and after
// anything this worker switched or failed; the slot, in shared memory, is
// looked at every time.
uint64 seen_at_epoch = 0;
TimestampTz seen_at = 0;

// `resynchronising`: the tables captured from the slot are taken again from
// their contents right after (resynchronise), which records the position.
// Until that has committed the catalog holds no position at all, so a
// worker that died between the two (or a server crash) finds, at its
// start, a slot without one: it drops it and starts over, slot and
// resynchronisation, instead of decoding from a slot that missed the
// writes made while there was none.
void create_slot(bool resynchronising) {
    if (resynchronising) {
        begin("pg_decoupled capture: forgetting the lost slot's position");
        query_int8("WITH d AS (DELETE FROM decoupled.capture_progress RETURNING 1) "
                   "SELECT count(*) FROM d");
        commit();
    }
    // PostgreSQL makes a logical slot only once every transaction that has
    // an id now has ended, a prepared one too, which may stay for days: the
    // worker would wait there saying nothing while the slot being made kept
    // WAL.  A prepared transaction fails the pass instead, saying why
    // (decoupled.capture shows it), and a later pass tries again.
    begin("pg_decoupled capture: looking for prepared transactions");
    int64 prepared = query_int8("SELECT count(*) FROM pg_catalog.pg_prepared_xacts");
    if (prepared > 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("cannot make replication slot \"%s\" while " INT64_FORMAT
                        " prepared transactions are open",
                        kSlot, prepared),
                 errdetail("A logical slot starts only once every transaction open when it is "
                           "made has ended."),
                 errhint("End them with COMMIT PREPARED or ROLLBACK PREPARED "
                         "(pg_prepared_xacts).")));
    commit();
    // Its own transaction: PostgreSQL creates a logical slot only in one
    // that has written nothing.
    begin("pg_decoupled capture: creating the slot");
    XLogRecPtr lsn = (XLogRecPtr)query_int8(
        "SELECT lsn FROM pg_catalog.pg_create_logical_replication_slot('pg_decoupled', "
        "'pg_decoupled')");
    commit();
    if (!resynchronising) {
        begin("pg_decoupled capture: recording the slot");
        record_progress(lsn);
        commit();
    }
    log_min_messages = saved_log_min_messages;
    changed_here();
    ereport(LOG, (errmsg("pg_decoupled capture created replication slot \"%s\" at %X/%X", kSlot,
                         (uint32)(lsn >> 32), (uint32)lsn)));
}

void drop_slot() {
    close_decoding();
    begin("pg_decoupled capture: dropping the slot");
    query_int8("SELECT pg_catalog.pg_drop_replication_slot('pg_decoupled') "
               "  FROM pg_catalog.pg_replication_slots "
               " WHERE slot_name = 'pg_decoupled' AND NOT active");
    commit();
    log_min_messages = saved_log_min_messages;
    changed_here();
    ereport(LOG, (errmsg("pg_decoupled capture dropped replication slot \"%s\": nothing is "
                         "captured from it", kSlot)));
}

// The slot is gone while tables are captured from it: what they wrote
// since is lost to decoding, so each is taken again from its contents.
void resynchronise() {
    begin("pg_decoupled capture: resynchronising");
    int64 n = query_int8("SELECT count(*) FROM decoupled.capture_relations");
    query_int8("SELECT decoupled._capture_resync()");
    commit();
    changed_here();
    ereport(WARNING,
            (errmsg("pg_decoupled capture found replication slot \"%s\" missing", kSlot),
             errdetail("The " INT64_FORMAT " tables captured from it were taken again from their "
                       "contents; their history shows what changed meanwhile as one change.",
                       n)));
}

// A table whose writers keep it busy is left for a later attempt to
// switch it — at most one a second, or at once after a catalog change,
// since each attempt briefly queues the table's users behind it.
struct SwitchAttempts {
    TimestampTz last = 0;
    uint64 epoch = 0;
};

// The tables `ids_sql` lists, copied into TopMemoryContext (the caller
// frees them), or nullptr when it is too early for another attempt.
int64* tables_to_switch(SwitchAttempts* attempts, const char* ids_sql, int* n) {
    uint64 epoch = pg_atomic_read_u64(&shared()->catalog_epoch);
    TimestampTz now = GetCurrentTimestamp();
    if (epoch == attempts->epoch && !TimestampDifferenceExceeds(attempts->last, now, 1000))
        return nullptr;
    attempts->last = now;
    attempts->epoch = epoch;
    begin("pg_decoupled capture: reading the tables to switch");
    int64* ids = query_ids(ids_sql, n);
    int64* copy = (int64*)MemoryContextAlloc(TopMemoryContext, sizeof(int64) * Max(*n, 1));
    memcpy(copy, ids, sizeof(int64) * *n);
    commit();
    return copy;
}

// One switch per transaction.  Returns whether any switched.
bool switch_tables(const char* ids_sql, const char* switch_sql) {
    static SwitchAttempts attempts;
    int n = 0;
    int64* copy = tables_to_switch(&attempts, ids_sql, &n);
    if (copy == nullptr) return false;
    bool any = false;
    for (int i = 0; i < n; ++i) {
        working_on = copy[i];
        begin(switch_sql);
        Datum arg = Int64GetDatum(copy[i]);
        Oid type = INT8OID;
        if (SPI_execute_with_args(switch_sql, 1, &type, &arg, nullptr, false, 1) != SPI_OK_SELECT)
            elog(ERROR, "could not run %s", switch_sql);
        bool isnull = false;
        any |= DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        commit();
    }
    working_on = 0;
    pfree(copy);
    if (any) changed_here();
    return any;
}

// Captures every change committed before the lock this session holds on
// table `id`, then releases it to trigger capture.  Returns whether the
// release switched it.
bool drain_and_release(int64 id) {
    // Every commit before the lock, flushed and then captured.
    (void)decoupled::flush_inserted();
    while (capture()) {
    }
    begin("SELECT decoupled._capture_release($1)");
    Datum arg = Int64GetDatum(id);
    Oid type = INT8OID;
    if (SPI_execute_with_args("SELECT decoupled._capture_release($1)", 1, &type, &arg, nullptr,
                              false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not release a table to trigger capture");
    bool isnull = false;
    bool released =
        DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    commit();
    return released;
}

// drain_and_release with the session's lock on `table` given back
// whatever happens (a transaction's end does not release it).
bool release_holding(int64 id, LockRelId table) {
    volatile bool released = false;
    PG_TRY();
    { released = drain_and_release(id); }
    PG_CATCH();
    {
        UnlockRelationIdForSession(&table, AccessExclusiveLock);
        PG_RE_THROW();
    }
    PG_END_TRY();
    UnlockRelationIdForSession(&table, AccessExclusiveLock);
    return released;
}

// WAL capture -> trigger capture, table by table (decoupled.capture set
// to 'trigger').  The table's writers are held off from before its last
// WAL-captured change is decoded until its triggers exist: the switch's
// own lock is kept as a session lock (it outlives transactions), a
// capture pass then writes every change committed before it into
// pending, and the release installs the triggers.  Releasing first and
// draining the WAL afterwards left a window in which later transactions'
// trigger rows were already pending: a tick took their retractions of
// rows whose insertion was still in the WAL (the table stalled), and the
// drain's lookups of old rows found those later rows live (its capture
// failed at every pass).  Returns whether any table was released.
bool release_tables() {
    static SwitchAttempts attempts;
    int n = 0;
    int64* copy = tables_to_switch(
        &attempts,
        // A table set aside is released once it was taken again: until then
        // its changes in the WAL are not in its pending changes.
        "SELECT c.lifetime_id FROM decoupled.capture_relations c "
        " WHERE NOT EXISTS (SELECT FROM decoupled.capture_resyncs r "
        "                    WHERE r.lifetime_id = c.lifetime_id AND r.resynced_lsn IS NULL) "
        " ORDER BY c.lifetime_id",
        &n);
    if (copy == nullptr) return false;
    bool any = false;
    for (int i = 0; i < n; ++i) {
        working_on = copy[i];
        begin("pg_decoupled capture: locking a table to release");
        Datum arg = Int64GetDatum(copy[i]);
        Oid type = INT8OID;
        if (SPI_execute_with_args("SELECT c.relation, decoupled._lock_for_switch(c.relation) "
                                  "  FROM decoupled.capture_relations c WHERE c.lifetime_id = $1",
                                  1, &type, &arg, nullptr, false, 1) != SPI_OK_SELECT)
            elog(ERROR, "could not lock a table to release");
        bool isnull = false;
        bool locked = SPI_processed == 1 &&
                      DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
                                                 &isnull));
        LockRelId table = {InvalidOid, MyDatabaseId};
        if (locked) {
            table.relId = DatumGetObjectId(
                SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
            LockRelationIdForSession(&table, AccessExclusiveLock);
        }
        commit();
        if (!locked) {
            elog(DEBUG1, "pg_decoupled capture: table " INT64_FORMAT " stays captured from the WAL "
                 "for now (its writers or readers hold it)", copy[i]);
            continue;
        }
        bool released = release_holding(copy[i], table);
        if (!released)
            elog(DEBUG1, "pg_decoupled capture: table " INT64_FORMAT " stays captured from the WAL "
                 "for now (its registration or pending changes are in use)", copy[i]);
        any |= released;
    }
    working_on = 0;
    pfree(copy);
    if (any) changed_here();
    return any;
}

struct Situation {
    bool extension;
    Oid extension_oid;  // which CREATE EXTENSION made the catalog read
    bool restoring;  // pg_restore is loading the catalog: nothing to do yet
    bool slot;
    int64 wal_tables;      // captured from the WAL
    int64 trigger_tables;  // live, captured by triggers
    int64 progress_rows;   // capture_progress: a slot made under this catalog has one
};

Situation look() {
    Situation now{};
    begin("pg_decoupled capture: reading the catalog");
    now.extension_oid = get_extension_oid("pg_decoupled", true);
    now.extension = OidIsValid(now.extension_oid);
    now.slot = SearchNamedReplicationSlot(kSlot, true) != nullptr;
    Oid nsp = get_namespace_oid("decoupled", true);
    now.restoring = now.extension && OidIsValid(nsp) &&
                    OidIsValid(get_relname_relid("catalog_restore", nsp)) &&
                    query_int8("SELECT count(*) FROM decoupled.catalog_restore") > 0;
    // Right as CREATE EXTENSION commits, the extension can be seen before
    // its tables (a pass failed, and said so in the log, now and then):
    // nothing to do until they are there, as while a restore loads them.
    if (now.extension && !now.restoring &&
        (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("capture_progress", nsp)) ||
         !OidIsValid(get_relname_relid("capture_relations", nsp))))
        now.restoring = true;
    if (now.extension && !now.restoring) {
        now.progress_rows = query_int8("SELECT count(*) FROM decoupled.capture_progress");
        now.wal_tables = query_int8("SELECT count(*) FROM decoupled.capture_relations");
        now.trigger_tables = query_int8(
            "SELECT count(*) FROM decoupled.catalog_objects o "
            " WHERE o.kind = 'table' AND o.dropped_at IS NULL AND o.relation IS NOT NULL "
            "   AND NOT EXISTS (SELECT FROM decoupled.capture_relations c "
            "                    WHERE c.lifetime_id = o.lifetime_id)");
    }
    commit();
    return now;
}

Situation seen{};

Situation situation() {
    uint64 epoch = pg_atomic_read_u64(&shared()->catalog_epoch);
    TimestampTz now = GetCurrentTimestamp();
    if (!seen_valid || epoch != seen_at_epoch || TimestampDifferenceExceeds(seen_at, now, 1000)) {
        seen = look();
        seen_valid = true;
        seen_at_epoch = epoch;
        seen_at = now;
    }
    Situation current = seen;
    current.slot = SearchNamedReplicationSlot(kSlot, true) != nullptr;
    return current;
}

// The extension whose tables the slot's changes were captured for: the
// one this worker created the slot under, or the first it saw with it.
Oid slot_extension = InvalidOid;

// Whether the slot named pg_decoupled, if there is one, is this worker's:
// decoded by this library's plugin, for this database.  Anyone with the
// REPLICATION attribute may make a slot of that name; decoding through
// another plugin would confirm WAL whose changes nobody captured, and
// dropping it would take away someone else's slot.
bool slot_is_foreign(char* plugin, size_t plugin_size, Oid* database) {
    bool foreign = false;
    LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
    ReplicationSlot* slot = SearchNamedReplicationSlot(kSlot, false);
    if (slot != nullptr) {
        strlcpy(plugin, NameStr(slot->data.plugin), plugin_size);
        *database = slot->data.database;
        foreign = strcmp(plugin, "pg_decoupled") != 0 || *database != MyDatabaseId;
    }
    LWLockRelease(ReplicationSlotControlLock);
    return foreign;
}

// A foreign slot stops capture, visibly (decoupled.capture is `stalled`
// with this error, registered tables too), until it is dropped: then the
// next pass makes the worker's own and takes the captured tables again
// from their contents, as for a lost slot.  Logged once per episode.
bool refuse_foreign_slot() {
    static bool reported = false;
    char plugin[NAMEDATALEN];
    Oid database = InvalidOid;
    if (!slot_is_foreign(plugin, sizeof(plugin), &database)) {
        reported = false;
        return false;
    }
    char* message = psprintf(
        "replication slot \"%s\" is not pg_decoupled's: it decodes with plugin \"%s\" for "
        "database %u; drop it (pg_drop_replication_slot) to let capture go on",
        kSlot, plugin, database);
    publish_error(message);
    if (!reported)
        ereport(WARNING, (errmsg("pg_decoupled capture cannot use replication slot \"%s\"", kSlot),
                          errdetail("It decodes with plugin \"%s\" for database %u; capture needs "
                                    "its own slot of that name, made by the extension.",
                                    plugin, database),
                          errhint("Drop it with pg_drop_replication_slot('%s'); the registered "
                                  "tables are then taken again from their contents.",
                                  kSlot)));
    reported = true;
    return true;
}

bool pass_over(Situation now);

// One pass; returns whether it did anything (then the next comes at once).
// A pass that ends without an error clears the last one, also when it had
// nothing to capture (no table left, or the extension dropped mid-pass and
// made again): decoupled.capture shows no error that no longer stands.
bool pass() {
    Situation now = situation();
    if (now.slot && refuse_foreign_slot()) return false;
    bool busy = pass_over(now);
    clear_error();
    return busy;
}

bool pass_over(Situation now) {
    if (!now.extension) {
        forget_targets();
        if (now.slot) drop_slot();
        slot_extension = InvalidOid;
        return false;
    }
    if (now.slot && OidIsValid(slot_extension) && slot_extension != now.extension_oid) {
        // The extension was dropped and created again between two looks: the
        // slot's changes are the dropped one's tables', which the new
        // catalog knows nothing of (decoding them opened its relations in
        // the past, where they do not exist yet, and failed at every pass).
        // Its registered tables, if any, are taken again from their
        // contents (create_slot, resynchronise).
        forget_targets();
        drop_slot();
        now.slot = false;
    }
    if (now.slot && !now.restoring && now.progress_rows == 0) {
        // A slot made under this catalog has its position in
        // capture_progress (recorded right after the slot is made, or by
        // the resynchronisation that follows it); one the dropped extension
        // left has not — nor one whose resynchronisation failed or never
        // committed, in this worker or one before it (create_slot).
        forget_targets();
        drop_slot();
        now.slot = false;
    }
    slot_extension = now.extension_oid;
    // A restore brings captured tables without a slot: once it is over,
    // the next pass creates one and resynchronises them.
    if (now.restoring) return false;
    bool busy = false;
    if (decoupled::capture_from_wal_wanted()) {
        if (!now.slot && now.wal_tables > 0) {
            create_slot(true);
            resynchronise();
            now.slot = true;
        } else if (!now.slot && now.trigger_tables > 0) {
            create_slot(false);
            now.slot = true;
        }
        if (now.slot && resyncs_waiting) resync_set_aside();
        if (now.slot) busy |= capture();
        if (now.trigger_tables > 0)
            busy |= switch_tables(
                "SELECT o.lifetime_id FROM decoupled.catalog_objects o "
                " WHERE o.kind = 'table' AND o.dropped_at IS NULL AND o.relation IS NOT NULL "
                "   AND NOT EXISTS (SELECT FROM decoupled.capture_relations c "
                "                    WHERE c.lifetime_id = o.lifetime_id) "
                " ORDER BY o.lifetime_id",
                "SELECT decoupled._capture_adopt($1)");
        if (now.slot && now.wal_tables == 0 && now.trigger_tables == 0) {
            // The last registered table went: drain what it committed, then
            // give the WAL back.
            capture();
            if (look().wal_tables == 0 && look().trigger_tables == 0) drop_slot();
        }
        return busy;
    }
    // A table set aside is released once it was taken again.
    if (now.slot && resyncs_waiting) resync_set_aside();
    if (now.wal_tables > 0) busy |= release_tables();
    if (now.slot) {
        // Released tables' last changes are in the WAL before the release.
        if (wal_level >= WAL_LEVEL_LOGICAL) busy |= capture();
        if (look().wal_tables == 0) drop_slot();
    }
    return busy;
}

void set_session_settings() {
    // Values go through text: both ends must print and read them alike,
    // exactly (floats in full, times in UTC).
    decoupled::pin_worker_settings();
    SetConfigOption("TimeZone", "UTC", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("DateStyle", "ISO, YMD", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("IntervalStyle", "postgres", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("extra_float_digits", "1", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("bytea_output", "hex", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("lc_monetary", "C", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("decoupled.as_of", "", PGC_SUSET, PGC_S_OVERRIDE);
    // Newer minor releases list the libraries a slot may name as its
    // output plugin; this session's own slot names the extension.
    const char* plugins = GetConfigOption("output_plugin_libraries", true, false);
    if (plugins != nullptr && strstr(plugins, "pg_decoupled") == nullptr)
        SetConfigOption("output_plugin_libraries",
                        *plugins ? psprintf("%s, pg_decoupled", plugins) : "pg_decoupled",
                        PGC_SUSET, PGC_S_OVERRIDE);
}

}  // namespace

void decoupled_capture_main(Datum arg) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    // A shutdown ends the worker wherever it is: reading the WAL it may wait
    // for a flush that a server shutting down never makes, and only
    // die()'s interrupt ends that wait.  A pass cut short commits nothing,
    // and the next worker decodes it again.
    pqsignal(SIGTERM, die);
    // A query cancel is an ordinary error here (no C++ frames to cross),
    // and lock_timeout works through it: the capture switches rely on it.
    pqsignal(SIGINT, StatementCancelHandler);
    BackgroundWorkerUnblockSignals();

    decoupled::SpecSlot spec;
    decoupled::claim_own_slot(arg, &spec);
    BackgroundWorkerInitializeConnection(decoupled::guc_database, nullptr, 0);
    pgstat_report_appname("pg_decoupled capture");
    set_session_settings();
    attach();
    changed_here();  // caches filled before the worker knew: cleared at first

    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(int64);
    info.entrysize = sizeof(Target);
    info.hcxt = TopMemoryContext;
    targets = hash_create("pg_decoupled capture targets", 64, &info,
                          HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    batch_context = AllocSetContextCreate(TopMemoryContext, "pg_decoupled capture batch",
                                          ALLOCSET_DEFAULT_SIZES);
    pass_context = AllocSetContextCreate(TopMemoryContext, "pg_decoupled capture",
                                         ALLOCSET_DEFAULT_SIZES);
    // Changed under PG_TRY and read after it.
    volatile long failures = 0;
    volatile bool due = true;
    XLogRecPtr seen_flush = InvalidXLogRecPtr;
    uint64 seen_epoch = 0;
    TimestampTz last_pass = 0;
    for (;;) {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
            due = true;
        }
        CHECK_FOR_INTERRUPTS();
        // A pass when asked (a waiting tick), when the catalog moved, once a
        // second anyway, and when the WAL moved, 50 ms after the last one;
        // an idle server costs a few reads of shared memory.
        XLogRecPtr flush = GetFlushRecPtr(nullptr);
        uint64 epoch = pg_atomic_read_u64(&shared()->catalog_epoch);
        TimestampTz now = GetCurrentTimestamp();
        due = due || epoch != seen_epoch || TimestampDifferenceExceeds(last_pass, now, 1000) ||
              (flush != seen_flush && TimestampDifferenceExceeds(last_pass, now, kBatchMs));
        volatile long sleep_ms = kIdleMs;
        if (due) {
            seen_flush = flush;
            seen_epoch = epoch;
            last_pass = now;
            due = false;
            MemoryContextSwitchTo(pass_context);
            saved_log_min_messages = log_min_messages;
            PG_TRY();
            {
                due = pass();
                failures = 0;
                failing_table = 0;
                failures_of_table = 0;
            }
            PG_CATCH();
            {
                log_min_messages = saved_log_min_messages;
                MemoryContextSwitchTo(pass_context);
                ErrorData* error = CopyErrorData();
                FlushErrorState();
                AbortCurrentTransaction();
                forget_decoding();
                pgstat_report_activity(STATE_IDLE, nullptr);
                // An error while decoding a table's change is that table's
                // (shown only to its readers, counted against it).
                if (!writing_changes && decoupled::capture_decoding_table != 0)
                    working_on = decoupled::capture_decoding_table;
                // The outermost context line says which table failed.
                const char* where = error->context ? strrchr(error->context, '\n') : nullptr;
                where = where ? where + 1 : error->context;
                char* message = where ? psprintf("%s (%s)", error->message, where)
                                      : pstrdup(error->message);
                publish_error(message);
                note_failed_pass(message);
                working_on = 0;
                ereport(LOG, (errmsg("pg_decoupled capture pass failed: %s", message),
                              error->detail ? errdetail("%s", error->detail) : 0));
                FreeErrorData(error);
                // Plans of dropped collections may be what failed.
                forget_targets();
                failures = Min(failures + 1, 7L);
                sleep_ms = 100L << failures;
                due = true;  // retried after the backoff
            }
            PG_END_TRY();
            log_min_messages = saved_log_min_messages;
            for (int i = 0; i < nset_aside_logged; i++)
                ereport(WARNING,
                        (errmsg("pg_decoupled capture set registered table \"%s\" aside",
                                set_aside[i].name),
                         errdetail("Capture could not write one of its changes: %s",
                                   set_aside[i].error),
                         errhint("Capture of the other tables goes on; this one is taken again "
                                 "from its contents as soon as its writers let it.")));
            nset_aside_logged = 0;
            replorigin_session_origin = InvalidRepOriginId;
            MemoryContextSwitchTo(TopMemoryContext);
            MemoryContextReset(pass_context);
            if (due && failures == 0) continue;
        }
        int rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms,
                           PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        if (rc & WL_LATCH_SET) due = true;
        CHECK_FOR_INTERRUPTS();
    }
    proc_exit(1);
}
