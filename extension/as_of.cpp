// decoupled.as_of: read every collection in a statement at one time (C2.2).
//
// The GUC holds the time; decoupled.as_of() exposes it to the read paths.
// Each collection's history branch is gated by _history_gate(lifetime_id),
// which the planner evaluates once per execution as a one-time filter: it
// is false without as_of (the latest-state branch runs alone) and otherwise
// checks privilege and readability, failing with a clear error.  Reads of
// registered tables are also planned for whether as_of is set
// (read_rewrite.cpp): a change between set and unset invalidates the plans
// made for the other state.
extern "C" {
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

#include <cerrno>
#include <cstdlib>

#include "core/frontier.hpp"
#include "catalog_access.hpp"
#include "kept_statements.hpp"
#include "gucs.hpp"
#include "read_rewrite.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_as_of);
PG_FUNCTION_INFO_V1(decoupled_history_gate);
PG_FUNCTION_INFO_V1(decoupled_history_gate_before);
}

namespace decoupled {

char* guc_as_of = nullptr;
static bool as_of_is_set = false;
static int64 as_of_value = 0;

static bool parse_timestamp(const char* text, int64* out) {
    if (text == nullptr || *text == '\0') return false;
    errno = 0;
    char* end = nullptr;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) return false;
    *out = v;
    return true;
}

static bool check_as_of(char** newval, void**, GucSource) {
    int64 ignored;
    if (*newval == nullptr || **newval == '\0' || parse_timestamp(*newval, &ignored)) return true;
    GUC_check_errdetail("decoupled.as_of must be a timestamp in milliseconds since the Unix "
                        "epoch (a non-negative integer), or empty for the latest state.");
    return false;
}

// Plans of reads of registered tables depend on whether as_of is set
// (read_rewrite.cpp): a change between set and unset invalidates those of
// the other kind.  Called at SET, RESET, function SET clauses and the GUC
// rollback at abort alike; the invalidation touches no catalog.
static void assign_as_of(const char* newval, void*) {
    bool was_set = as_of_is_set;
    as_of_is_set = parse_timestamp(newval, &as_of_value);
    if (as_of_is_set != was_set) as_of_mode_changed(as_of_is_set);
}

bool as_of_set() { return as_of_is_set; }

void define_as_of_guc() {
    DefineCustomStringVariable(
        "decoupled.as_of", "Reads every collection at this timestamp (milliseconds).",
        "Empty reads the latest state. A time must lie in [since, upper) of every collection "
        "the statement reads.",
        &guc_as_of, "", PGC_USERSET, 0, check_as_of, assign_as_of, nullptr);
}

}  // namespace decoupled

Datum decoupled_as_of(PG_FUNCTION_ARGS) {
    if (!decoupled::as_of_is_set) PG_RETURN_NULL();
    PG_RETURN_INT64(decoupled::as_of_value);
}

// decoupled._history_gate(lifetime_id bigint) -> boolean
static bool history_gate(int64 lifetime_id, int64 t);

Datum decoupled_history_gate(PG_FUNCTION_ARGS) {
    if (!decoupled::as_of_is_set) PG_RETURN_BOOL(false);
    PG_RETURN_BOOL(history_gate(PG_GETARG_INT64(0), decoupled::as_of_value));
}

// decoupled._history_gate_before(lifetime_id bigint) -> boolean: the gate of
// the state just before decoupled.as_of (an incremental join step reads the
// inputs after the changed one there: c<id>_before).
Datum decoupled_history_gate_before(PG_FUNCTION_ARGS) {
    if (!decoupled::as_of_is_set || decoupled::as_of_value == 0) PG_RETURN_BOOL(false);
    PG_RETURN_BOOL(history_gate(PG_GETARG_INT64(0), decoupled::as_of_value - 1));
}

static bool history_gate(int64 lifetime_id, int64 t) {

    MemoryContext caller = CurrentMemoryContext;
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    Oid argtypes[1] = {INT8OID};
    Datum args[1] = {Int64GetDatum(lifetime_id)};
    // Read-only: the frontiers come from the statement's own snapshot, the
    // same one its data scans use, so the check and the read agree.
    // A kept plan: every AS OF read, and every step of a view over views,
    // passes here once per collection it reads.
    SPIPlanPtr plan = decoupled::statement_plan(
        "SELECT f.since, f.upper, o.name::pg_catalog.text, o.kind, o.relation, "
        "       o.dropped_at IS NOT NULL "
        "  FROM decoupled.catalog_objects o "
        "  LEFT JOIN decoupled.catalog_frontiers f "
        "         ON f.lifetime_id OPERATOR(pg_catalog.=) o.lifetime_id "
        " WHERE o.lifetime_id OPERATOR(pg_catalog.=) $1",
        1, argtypes);
    int rc = SPI_execute_plan(plan, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "could not read frontiers");
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("collection with lifetime id " INT64_FORMAT " does not exist",
                               lifetime_id)));
    HeapTuple tup = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool since_null, upper_null, rel_null, isnull;
    int64 since = DatumGetInt64(SPI_getbinval(tup, desc, 1, &since_null));
    int64 upper = DatumGetInt64(SPI_getbinval(tup, desc, 2, &upper_null));
    char* name = MemoryContextStrdup(caller, SPI_getvalue(tup, desc, 3));
    char* kind = MemoryContextStrdup(caller, SPI_getvalue(tup, desc, 4));
    Oid relation = DatumGetObjectId(SPI_getbinval(tup, desc, 5, &rel_null));
    bool dropped = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
    SPI_finish();
    decoupled::restore_user(saved);

    if (dropped || since_null || upper_null)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("%s \"%s\" was dropped", kind, name)));
    // History is read with the extension's rights: the reader — the
    // effective user, as whom this function runs — must be allowed to read
    // the collection's own relation, which gates every path to its history.
    if (rel_null || !OidIsValid(relation) ||
        !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relation)) ||
        pg_class_aclcheck(relation, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
        aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, name);

    switch (decoupled::readability(t, since, upper)) {
        case decoupled::Readability::Readable:
            break;
        case decoupled::Readability::Compacted:
            ereport(ERROR,
                    (errcode(ERRCODE_SNAPSHOT_TOO_OLD),
                     errmsg("%s \"%s\" is not readable at decoupled.as_of: its history there "
                            "is compacted",
                            kind, name),
                     errdetail("decoupled.as_of is " INT64_FORMAT "; readable times are ["
                               INT64_FORMAT ", " INT64_FORMAT ").",
                               t, since, upper),
                     errhint("Protect history you will read with decoupled.acquire_hold().")));
        case decoupled::Readability::NotYetReadable:
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("%s \"%s\" is not yet readable at decoupled.as_of", kind, name),
                     errdetail("decoupled.as_of is " INT64_FORMAT "; readable times are ["
                               INT64_FORMAT ", " INT64_FORMAT ").",
                               t, since, upper),
                     errhint("Updates at a time are final only once the upper has passed it; "
                             "retry later.")));
    }
    return true;
}
