// Compaction permission (brief C3): the commit-time validation of bounds,
// requirements and holds, and the bound proposal used by publication.
//
// _permission_trigger() is a deferred constraint trigger on
// catalog_bounds, catalog_requirements and catalog_holds.  At commit it
// locks the collection's bound row — so concurrent transactions touching one
// collection's permission serialize — and reads requirements and holds with
// the latest snapshot, so that a transaction at REPEATABLE READ or
// SERIALIZABLE cannot miss a peer that committed meanwhile.  The rules
// themselves are the pure check_permission() in core/admission.
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

#include "core/admission.hpp"
#include "core/frontier.hpp"
#include "catalog_access.hpp"
#include "kept_statements.hpp"
#include "pg_guard.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_permission_trigger);
PG_FUNCTION_INFO_V1(decoupled_propose_bound);
PG_FUNCTION_INFO_V1(decoupled_compacted_since);
}

namespace {

// What the catalog says about one collection's permission: plain data read
// by PostgreSQL code, handed to the pure rules afterwards.
struct RawPermission {
    bool exists = false;
    char* name = nullptr;
    int64 bound = 0;
    int64 committed_bound = 0;
    bool has_requirement = false;
    int64 min_requirement = 0;
    char* requirement_owner = nullptr;
    bool has_hold = false;
    int64 min_hold = 0;
    char* hold_owner = nullptr;
};

constexpr const char* kLockBound =
    "SELECT b.bound, b.committed_bound, o.name::text "
    "  FROM decoupled.catalog_bounds b JOIN decoupled.catalog_objects o USING (lifetime_id) "
    " WHERE b.lifetime_id = $1 AND o.dropped_at IS NULL FOR UPDATE OF b";
constexpr const char* kMinRequirement =
    "SELECT r.frontier, o.kind || ' \"' || o.name || '\"' "
    "  FROM decoupled.catalog_requirements r "
    "  JOIN decoupled.catalog_objects o ON o.lifetime_id = r.required_by "
    " WHERE r.lifetime_id = $1 ORDER BY r.frontier LIMIT 1";
constexpr const char* kMinHold =
    "SELECT h.frontier, format('adapter \"%s\" (deployment \"%s\", incarnation %s)', "
    "                          h.adapter, h.deployment, h.incarnation) "
    "  FROM decoupled.catalog_holds h WHERE h.lifetime_id = $1 ORDER BY h.frontier LIMIT 1";

// The plan of `sql` (one bigint parameter), kept: every step of a view
// moves a requirement and so runs this trigger.
SPIPlanPtr plan_of(const char* sql) {
    Oid types[1] = {INT8OID};
    return decoupled::statement_plan(sql, 1, types);
}

// Runs `sql` with the latest snapshot; returns whether a row came back and
// copies its (bigint, text) pair.
bool latest_min(const char* sql, int64 lifetime_id, int64* frontier, char** owner,
                MemoryContext into) {
    Datum args[1] = {Int64GetDatum(lifetime_id)};
    SPIPlanPtr plan = plan_of(sql);
    int rc = SPI_execute_snapshot(plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot,
                                  true, false, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "permission check query failed");
    if (SPI_processed == 0) return false;
    bool isnull;
    *frontier = DatumGetInt64(
        SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    *owner = MemoryContextStrdup(into, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
    return true;
}

// Strings land in `into`, which outlives SPI's own memory.
void read_permission(int64 lifetime_id, RawPermission* out, MemoryContext into) {
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    Datum args[1] = {Int64GetDatum(lifetime_id)};
    if (SPI_execute_plan(plan_of(kLockBound), args, nullptr, false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not lock the compaction bound");
    if (SPI_processed == 1) {
        bool isnull;
        HeapTuple tup = SPI_tuptable->vals[0];
        TupleDesc desc = SPI_tuptable->tupdesc;
        out->exists = true;
        out->bound = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
        out->committed_bound = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
        if (isnull) out->committed_bound = out->bound;
        out->name = MemoryContextStrdup(into, SPI_getvalue(tup, desc, 3));
        out->has_requirement = latest_min(kMinRequirement, lifetime_id, &out->min_requirement,
                                          &out->requirement_owner, into);
        out->has_hold = latest_min(kMinHold, lifetime_id, &out->min_hold, &out->hold_owner, into);
    }
    SPI_finish();
    decoupled::restore_user(saved);
}

decoupled::PermissionChange change_of(const char* table) {
    if (strcmp(table, "catalog_requirements") == 0) return decoupled::PermissionChange::Requirement;
    if (strcmp(table, "catalog_holds") == 0) return decoupled::PermissionChange::Hold;
    return decoupled::PermissionChange::Bound;
}

// Checks this transaction already made, so that each collection's
// permission is checked once per firing of the deferred triggers rather
// than once per row: a replica's transaction that steps ten views over one
// table moves ten requirements on it, and each fired this trigger at
// commit.  A check reads the final state as of its command (all earlier
// writes), so a row written before a check of its collection and kind
// was covered by it; a row written after has a later command id and is
// checked again.  A subtransaction's abort forgets them all: the bound
// row's lock a check took inside it went with it, and events it fired are
// fired again.
struct Checked {
    int64 lifetime_id;
    decoupled::PermissionChange change;
    CommandId at;  // the command id when the check ran
};
LocalTransactionId checked_in = InvalidLocalTransactionId;
Checked* checked = nullptr;  // in TopTransactionContext
int nchecked = 0, checked_size = 0;
bool forget_registered = false;

void forget_checks(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB) checked_in = InvalidLocalTransactionId;
}

// And at the end of the transaction, whose context holds them: a local
// transaction id can come round again in a long-lived worker.
void forget_checks_at_end(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            checked_in = InvalidLocalTransactionId;
            checked = nullptr;
            nchecked = checked_size = 0;
            break;
        default:
            break;
    }
}

Checked* find_check(int64 lifetime_id, decoupled::PermissionChange change) {
    if (checked_in != MyProc->lxid) return nullptr;
    for (int i = 0; i < nchecked; ++i)
        if (checked[i].lifetime_id == lifetime_id && checked[i].change == change) return &checked[i];
    return nullptr;
}

void remember_check(int64 lifetime_id, decoupled::PermissionChange change, CommandId at) {
    if (!forget_registered) {
        RegisterSubXactCallback(forget_checks, nullptr);
        RegisterXactCallback(forget_checks_at_end, nullptr);
        forget_registered = true;
    }
    if (checked_in != MyProc->lxid) {
        checked = nullptr;  // went with the last transaction's context
        nchecked = checked_size = 0;
        checked_in = MyProc->lxid;
    }
    if (Checked* c = find_check(lifetime_id, change)) {
        c->at = at;
        return;
    }
    if (nchecked == checked_size) {
        checked_size = checked_size == 0 ? 8 : checked_size * 2;
        checked = static_cast<Checked*>(
            checked == nullptr
                ? MemoryContextAlloc(TopTransactionContext, sizeof(Checked) * checked_size)
                : repalloc(checked, sizeof(Checked) * checked_size));
    }
    checked[nchecked++] = {lifetime_id, change, at};
}

}  // namespace

Datum decoupled_permission_trigger(PG_FUNCTION_ARGS) {
    if (!CALLED_AS_TRIGGER(fcinfo)) elog(ERROR, "must be called as a trigger");
    TriggerData* trigdata = reinterpret_cast<TriggerData*>(fcinfo->context);
    HeapTuple tuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple
                                                                  : trigdata->tg_trigtuple;
    TupleDesc desc = trigdata->tg_relation->rd_att;
    int attnum = SPI_fnumber(desc, "lifetime_id");
    bool isnull;
    int64 lifetime_id = DatumGetInt64(heap_getattr(tuple, attnum, desc, &isnull));
    decoupled::PermissionChange change = change_of(RelationGetRelationName(trigdata->tg_relation));
    // The row was written in this transaction (an INSERT's or UPDATE's new
    // row), so its cmin is the command that wrote it.
    Checked* done = find_check(lifetime_id, change);
    if (done != nullptr && HeapTupleHeaderGetCmin(tuple->t_data) < done->at)
        return PointerGetDatum(nullptr);
    CommandId at = GetCurrentCommandId(false);

    RawPermission raw;
    read_permission(lifetime_id, &raw, CurrentMemoryContext);

    Datum result = decoupled::cpp_entry([&]() -> Datum {
        if (!raw.exists) return PointerGetDatum(nullptr);
        decoupled::PermissionState state;
        state.bound = raw.bound;
        state.committed_bound = raw.committed_bound;
        if (raw.has_requirement) {
            state.min_requirement = raw.min_requirement;
            state.min_requirement_owner = raw.requirement_owner ? raw.requirement_owner : "";
        }
        if (raw.has_hold) {
            state.min_hold = raw.min_hold;
            state.min_hold_owner = raw.hold_owner ? raw.hold_owner : "";
        }
        if (auto v = decoupled::check_permission(raw.name ? raw.name : "?", change, state))
            throw decoupled::UserError(ERRCODE_CHECK_VIOLATION, v->message, v->detail,
                                       "Nothing of this transaction was committed.");
        return PointerGetDatum(nullptr);
    });
    // Only a check that found the collection took its bound row's lock.
    if (raw.exists) remember_check(lifetime_id, change, at);
    return result;
}

// decoupled._propose_bound(upper, retain_ms, current_bound, min_requirement,
// min_hold) -> the next bound; NULL caps mean none.
Datum decoupled_propose_bound(PG_FUNCTION_ARGS) {
    int64 upper = PG_GETARG_INT64(0);
    int64 retain = PG_GETARG_INT64(1);
    int64 current = PG_GETARG_INT64(2);
    std::optional<int64_t> req, hold;
    if (!PG_ARGISNULL(3)) req = PG_GETARG_INT64(3);
    if (!PG_ARGISNULL(4)) hold = PG_GETARG_INT64(4);
    PG_RETURN_INT64(decoupled::propose_bound(upper, retain, current, req, hold));
}

// decoupled._compacted_since(since, bound, upper) -> where compaction may
// move since: up to the bound, not past upper, never backwards.
Datum decoupled_compacted_since(PG_FUNCTION_ARGS) {
    PG_RETURN_INT64(
        decoupled::compacted_since(PG_GETARG_INT64(0), PG_GETARG_INT64(1), PG_GETARG_INT64(2)));
}
