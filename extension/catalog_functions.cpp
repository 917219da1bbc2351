// SQL-callable functions behind the catalog: install checks, schema-version
// refusal and the controller wake-up at commit.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
}

#include "core/schema_version.hpp"
#include "gucs.hpp"
#include "pg_guard.hpp"
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_assert_install_database);
PG_FUNCTION_INFO_V1(decoupled_assert_schema_version);
PG_FUNCTION_INFO_V1(decoupled_supported_schema_version);
PG_FUNCTION_INFO_V1(decoupled_wake_controller_at_commit);
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

Datum decoupled_supported_schema_version(PG_FUNCTION_ARGS) {
    PG_RETURN_INT32(decoupled::kCurrentSchemaVersion);
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
    PG_RETURN_VOID();
}
