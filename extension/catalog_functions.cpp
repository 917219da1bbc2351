// SQL-callable functions behind the catalog: install checks, schema-version
// refusal, the controller wake-up at commit, and the naming helpers every
// step calls (in C: a LANGUAGE sql function with a SET clause is parsed and
// planned again at every call, which was most of what an idle step cost).
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

#include "core/schema_version.hpp"
#include "gucs.hpp"
#include "pg_guard.hpp"
#include "read_rewrite.hpp"
#include "relay_client.hpp"
#include "shmem.hpp"
#include "storage_names.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_assert_install_database);
PG_FUNCTION_INFO_V1(decoupled_assert_schema_version);
PG_FUNCTION_INFO_V1(decoupled_supported_schema_version);
PG_FUNCTION_INFO_V1(decoupled_wake_controller_at_commit);
PG_FUNCTION_INFO_V1(decoupled_storage_name);
PG_FUNCTION_INFO_V1(decoupled_required_frontier);
}

using decoupled::cpp_entry;
using decoupled::UserError;

// CREATE EXTENSION runs this first: the controller follows exactly one
// database, so a catalog anywhere else would never be maintained.
Datum decoupled_assert_install_database(PG_FUNCTION_ARGS) {
    const char* here = get_database_name(MyDatabaseId);
    if (strcmp(here, decoupled::guc_database) != 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("pg_decoupled can only be installed in database \"%s\"",
                        decoupled::guc_database),
                 errdetail("The current database is \"%s\".", here),
                 errhint("The catalog lives in the database named by decoupled.database; "
                         "change that setting and restart the server to use another one.")));
    PG_RETURN_VOID();
}

Datum decoupled_assert_schema_version(PG_FUNCTION_ARGS) {
    int32 version = PG_GETARG_INT32(0);
    return cpp_entry([&]() -> Datum {
        if (auto problem = decoupled::schema_version_problem(version))
            throw UserError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, *problem,
                            "The catalog was left unchanged.",
                            "Run the pg_decoupled build that matches this catalog, or upgrade "
                            "the extension with ALTER EXTENSION pg_decoupled UPDATE.");
        PG_RETURN_VOID();
    });
}

namespace {

// The pg_extension row of the extension being created or updated: its name
// and extversion, palloc'd; false when there is none.  CREATE EXTENSION
// inserts the row with the version its install script installs, and ALTER
// EXTENSION UPDATE (ApplyExtensionUpdates, also for each step of a CREATE
// that installs an older version and updates) sets extversion to each
// step's target before running that step's script (PostgreSQL's
// commands/extension.c).  A scan with the catalog snapshot sees it: a
// catalog without a syscache is read with a fresh snapshot every time.
bool extension_being_installed(char** name, char** version) {
    if (!creating_extension || !OidIsValid(CurrentExtensionObject)) return false;
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(CurrentExtensionObject));
    SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, nullptr, 1, &key);
    HeapTuple tuple = systable_getnext(scan);
    bool found = false;
    if (HeapTupleIsValid(tuple)) {
        bool isnull = false;
        Datum d = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);
        if (!isnull) {
            *name = pstrdup(NameStr(reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple))->extname));
            *version = TextDatumGetCString(d);
            found = true;
        }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return found;
}

}  // namespace

// The schema version the running script installs: within CREATE EXTENSION
// or ALTER EXTENSION UPDATE of pg_decoupled, the one of the extension
// version being installed (the frozen 1.0 script stamps what this returns,
// and must keep stamping 1); otherwise the newest this build opens.
Datum decoupled_supported_schema_version(PG_FUNCTION_ARGS) {
    char* name = nullptr;
    char* version = nullptr;
    if (!extension_being_installed(&name, &version) || strcmp(name, "pg_decoupled") != 0)
        PG_RETURN_INT32(decoupled::kCurrentSchemaVersion);
    std::optional<int> schema = decoupled::schema_version_of_extension(version);
    if (!schema)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("pg_decoupled extension version \"%s\" is not known to this build of "
                        "pg_decoupled",
                        version),
                 errdetail("This build knows the catalog schema versions of extension versions "
                           "up to its own (schema version %d).",
                           decoupled::kCurrentSchemaVersion),
                 errhint("Install the pg_decoupled library that matches the extension scripts.")));
    PG_RETURN_INT32(*schema);
}

namespace {

bool wake_pending = false;
bool callback_registered = false;

void wake_on_commit(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            if (wake_pending) {
                pg_atomic_fetch_add_u64(&decoupled::shared_state()->catalog_epoch, 1);
                decoupled::relay_publish(decoupled::relay::Topic::Catalog);
                decoupled::wake_controller();
                decoupled::wake_workers();
            }
            wake_pending = false;
            break;
        case XACT_EVENT_PRE_PREPARE:
            // A prepared catalog change would commit later, out of sight of
            // the followers' wake-ups and caches.
            if (wake_pending)
                ereport(ERROR,
                        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                         errmsg("cannot prepare a transaction that changed the pg_decoupled "
                                "catalog")));
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            wake_pending = false;
            break;
        default:
            break;
    }
}

}  // namespace

// Called by every catalog change.  The wake-up is sent only after commit, so
// the controller never wakes to a catalog version it cannot yet see.
Datum decoupled_wake_controller_at_commit(PG_FUNCTION_ARGS) {
    if (!callback_registered) {
        RegisterXactCallback(wake_on_commit, nullptr);
        callback_registered = true;
    }
    wake_pending = true;
    decoupled::catalog_changed_in_xact();
    PG_RETURN_VOID();
}


// decoupled._storage(lifetime_id, part): the name of one part of a
// collection's storage, 'decoupled_storage.c<id>_<part>'.
Datum decoupled_storage_name(PG_FUNCTION_ARGS) {
    int64 id = PG_GETARG_INT64(0);
    char* part = text_to_cstring(PG_GETARG_TEXT_PP(1));
    PG_RETURN_TEXT_P(cstring_to_text(decoupled::storage_name(id, part)));
}

// decoupled._required_frontier(as_of, upper): what a view at `upper` still
// reads of its inputs — its last computed time, never before its as_of.
Datum decoupled_required_frontier(PG_FUNCTION_ARGS) {
    int64 as_of = PG_GETARG_INT64(0);
    int64 upper = PG_GETARG_INT64(1);
    PG_RETURN_INT64(Max(as_of, upper - 1));
}
