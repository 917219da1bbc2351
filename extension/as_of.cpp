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

#include "access/genam.h"
#include "access/parallel.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include <cerrno>
#include <cstdlib>

#include "core/frontier.hpp"
#include "gucs.hpp"
#include "shmem.hpp"
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
// The role that set the value in effect (InvalidOid: the server's
// configuration).  Kept in the value's GUC "extra", so that a value
// restored at the end of a function or transaction brings its own setter
// back.
struct AsOfExtra {
    Oid setter;
};
static Oid as_of_setter = InvalidOid;

static bool parse_timestamp(const char* text, int64* out) {
    if (text == nullptr || *text == '\0') return false;
    errno = 0;
    char* end = nullptr;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) return false;
    *out = v;
    return true;
}

static bool check_as_of(char** newval, void** extra, GucSource) {
    int64 ignored;
    if (*newval != nullptr && **newval != '\0' && !parse_timestamp(*newval, &ignored)) {
        GUC_check_errdetail("decoupled.as_of must be a timestamp in milliseconds since the Unix "
                            "epoch (a non-negative integer), or empty for the latest state.");
        return false;
    }
    // GUC frees it with free().
    auto* e = static_cast<AsOfExtra*>(malloc(sizeof(AsOfExtra)));
    if (e == nullptr) {
        GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
        GUC_check_errmsg("out of memory");
        return false;
    }
    e->setter = OidIsValid(MyDatabaseId) ? GetUserId() : InvalidOid;
    *extra = e;
    return true;
}

// Plans of reads of registered tables depend on whether as_of is set
// (read_rewrite.cpp): a change between set and unset invalidates those of
// the other kind.  Called at SET, RESET, function SET clauses and the GUC
// rollback at abort alike; the invalidation touches no catalog.
static void assign_as_of(const char* newval, void* extra) {
    bool was_set = as_of_is_set;
    as_of_is_set = parse_timestamp(newval, &as_of_value);
    as_of_setter = extra ? static_cast<AsOfExtra*>(extra)->setter : InvalidOid;
    if (as_of_is_set != was_set) as_of_mode_changed(as_of_is_set);
}

bool as_of_set() { return as_of_is_set; }

// Whether reads here see decoupled.as_of.  Inside a SECURITY DEFINER
// function or another role's security-restricted operation, only a value
// that role set itself counts (the function's SET clause, its own
// set_config): a caller must not choose the time of what a function reads
// with its owner's rights — say an access list as it was before the caller
// was taken off it.  Reads there see the latest state.  A parallel worker
// runs the leader's plan, which the leader makes parallel only where the
// value counts (read_rewrite.cpp).
bool as_of_applies() {
    if (!as_of_is_set) return false;
    if (!InLocalUserIdChange() && !InSecurityRestrictedOperation()) return true;
    if (IsParallelWorker()) return true;
    return as_of_setter == GetUserId();
}

void define_as_of_guc() {
    DefineCustomStringVariable(
        "decoupled.as_of", "Reads every collection at this timestamp (milliseconds).",
        "Empty reads the latest state. A time must lie in [since, upper) of every collection "
        "the statement reads.",
        &guc_as_of, "", PGC_USERSET, 0, check_as_of, assign_as_of, nullptr);
}

}  // namespace decoupled

Datum decoupled_as_of(PG_FUNCTION_ARGS) {
    if (!decoupled::as_of_applies()) PG_RETURN_NULL();
    PG_RETURN_INT64(decoupled::as_of_value);
}

// decoupled._history_gate(lifetime_id bigint) -> boolean
static bool history_gate(int64 lifetime_id, int64 t);

Datum decoupled_history_gate(PG_FUNCTION_ARGS) {
    if (!decoupled::as_of_applies()) PG_RETURN_BOOL(false);
    PG_RETURN_BOOL(history_gate(PG_GETARG_INT64(0), decoupled::as_of_value));
}

// decoupled._history_gate_before(lifetime_id bigint) -> boolean: the gate of
// the state just before decoupled.as_of (an incremental join step reads the
// inputs after the changed one there: c<id>_before).
Datum decoupled_history_gate_before(PG_FUNCTION_ARGS) {
    if (!decoupled::as_of_applies() || decoupled::as_of_value == 0) PG_RETURN_BOOL(false);
    PG_RETURN_BOOL(history_gate(PG_GETARG_INT64(0), decoupled::as_of_value - 1));
}

namespace {

// What a gate reads of collection `lifetime_id`: its catalog row and
// frontiers.
struct GateRow {
    bool since_null, upper_null, rel_null, dropped;
    int64 since, upper;
    Oid relation;
    char* name;
    char* kind;
};

// The row of `lifetime_id` in decoupled's catalog table `table`, through
// its primary key `pkey`, as `snapshot` sees it; nullptr if there is none.
// Read directly, not through SPI: no privilege is checked (the reader need
// not be able to read the catalog) and no statement is run — a gate runs
// once per branch of every read of history, and a query as the catalog
// reader (a user switch, a pinned search_path, an executor) was most of
// what a view's read of its changes cost.  The caller closes `*rel` after
// using the tuple.
HeapTuple catalog_row(const char* table, const char* pkey, int64 lifetime_id, Snapshot snapshot,
                      Relation* rel) {
    Oid nsp = get_namespace_oid("decoupled", false);
    Oid relid = get_relname_relid(table, nsp);
    Oid index = get_relname_relid(pkey, nsp);
    if (!OidIsValid(relid) || !OidIsValid(index))
        elog(ERROR, "catalog table decoupled.%s or its key is missing", table);
    *rel = table_open(relid, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, get_attnum(relid, "lifetime_id"), BTEqualStrategyNumber, F_INT8EQ,
                Int64GetDatum(lifetime_id));
    SysScanDesc scan = systable_beginscan(*rel, index, true, snapshot, 1, &key);
    HeapTuple found = systable_getnext(scan);
    HeapTuple row = found ? heap_copytuple(found) : nullptr;
    systable_endscan(scan);
    return row;
}

Datum column(Relation rel, HeapTuple row, const char* name, bool* isnull) {
    AttrNumber attnum = get_attnum(RelationGetRelid(rel), name);
    if (attnum == InvalidAttrNumber)
        elog(ERROR, "catalog table %s has no column %s", RelationGetRelationName(rel), name);
    return heap_getattr(row, attnum, RelationGetDescr(rel), isnull);
}

// Read-only: the frontiers come from the statement's own snapshot, the
// same one its data scans use, so the check and the read agree.
GateRow read_gate_row(int64 lifetime_id) {
    Snapshot snapshot = GetActiveSnapshot();
    Relation objects;
    HeapTuple o = catalog_row("catalog_objects", "catalog_objects_pkey", lifetime_id, snapshot,
                              &objects);
    if (o == nullptr)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("collection with lifetime id " INT64_FORMAT " does not exist",
                               lifetime_id)));
    GateRow g;
    bool isnull;
    g.name = TextDatumGetCString(column(objects, o, "name", &isnull));
    g.kind = TextDatumGetCString(column(objects, o, "kind", &isnull));
    g.relation = DatumGetObjectId(column(objects, o, "relation", &g.rel_null));
    (void)column(objects, o, "dropped_at", &isnull);
    g.dropped = !isnull;
    table_close(objects, AccessShareLock);

    Relation frontiers;
    HeapTuple f = catalog_row("catalog_frontiers", "catalog_frontiers_pkey", lifetime_id,
                              snapshot, &frontiers);
    g.since_null = g.upper_null = true;
    g.since = g.upper = 0;
    if (f != nullptr) {
        g.since = DatumGetInt64(column(frontiers, f, "since", &g.since_null));
        g.upper = DatumGetInt64(column(frontiers, f, "upper", &g.upper_null));
    }
    table_close(frontiers, AccessShareLock);
    return g;
}

}  // namespace

// Milliseconds since the Unix epoch, as the oracle counts.
static int64 clock_ms() {
    return GetCurrentTimestamp() / 1000 +
           static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

static bool history_gate(int64 lifetime_id, int64 t) {
    GateRow g = read_gate_row(lifetime_id);
    const char* name = g.name;
    const char* kind = g.kind;
    Oid relation = g.relation;
    int64 since = g.since, upper = g.upper;
    if (g.dropped || g.since_null || g.upper_null)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("%s \"%s\" was dropped", kind, name)));
    // History is read with the extension's rights: the reader — the
    // effective user, as whom this function runs — must be allowed to read
    // the collection's own relation, which gates every path to its history.
    if (g.rel_null || !OidIsValid(relation) ||
        !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relation)) ||
        pg_class_aclcheck(relation, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
        aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, name);

    switch (decoupled::readability(t, since, upper)) {
        case decoupled::Readability::Readable:
            break;
        case decoupled::Readability::Compacted:
            // No time is readable at all and its first one is still to
            // come (a source before its first tick): its history has not
            // begun, which no compaction took away.  (Compaction never
            // passes the clock: a since equal to an upper in the past is.)
            if (since == upper && upper > clock_ms())
                ereport(ERROR,
                        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                         errmsg("%s \"%s\" is not yet readable at decoupled.as_of: its history "
                                "begins at " INT64_FORMAT,
                                kind, name, since),
                         errdetail("decoupled.as_of is " INT64_FORMAT "; no time is readable yet.",
                                   t),
                         errhint("Wait for it with decoupled.wait_for_upper(%s, " INT64_FORMAT
                                 ").",
                                 quote_literal_cstr(name), since)));
            // Compacted under this session's own hold: its adapter
            // incarnation was retired, which released it (C4.3, C7.4).
            {
                int64 retired = 0;
                char* adapter = nullptr;
                if (decoupled::retired_hold(lifetime_id, &retired, &adapter))
                    ereport(ERROR,
                            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                             errmsg("incarnation " INT64_FORMAT " of adapter \"%s\" that this "
                                    "session attached to was retired",
                                    retired, adapter),
                             errdetail("Its holds are released: %s \"%s\" was compacted past "
                                       "this session's hold (decoupled.as_of is " INT64_FORMAT
                                       "; readable times are [" INT64_FORMAT ", " INT64_FORMAT
                                       ")).",
                                       kind, name, t, since, upper),
                             errhint("Reconnect to attach to the adapter's current incarnation, "
                                     "and take the hold again.")));
            }
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
