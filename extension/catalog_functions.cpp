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
#include "catalog/objectaddress.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
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

namespace {

[[noreturn]] void schema_not_safe(const char* schema, const char* detail) {
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("pg_decoupled cannot be installed into the existing schema \"%s\"", schema),
             errdetail("%s", detail),
             errhint("The extension's functions run with a superuser's rights and find each "
                     "other in that schema: drop it, or make it a superuser's, empty, and "
                     "writable by nobody else, before CREATE EXTENSION.")));
    pg_unreachable();
}

// The schema the control file names may exist before CREATE EXTENSION,
// which then installs into it whoever owns it.  Its owner — or a role it
// lets create there — could have put a function in it, or add one later,
// that a call of the extension's own SECURITY DEFINER code (written
// `decoupled.f(...)`, with an argument that matches an overload more
// exactly than the extension's) would run as a superuser.  So the schema
// must be a superuser's, nobody else may create in it, and nothing but
// this extension's own objects may be in it.
void assert_schema_safe(Oid nsp) {
    HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "cache lookup failed for schema %u", nsp);
    Form_pg_namespace form = (Form_pg_namespace)GETSTRUCT(tuple);
    const char* schema = pstrdup(NameStr(form->nspname));
    Oid owner = form->nspowner;
    bool isnull = false;
    Datum acl_datum = SysCacheGetAttr(NAMESPACEOID, tuple, Anum_pg_namespace_nspacl, &isnull);
    Acl* acl = isnull ? nullptr : DatumGetAclPCopy(acl_datum);
    ReleaseSysCache(tuple);
    if (!superuser_arg(owner))
        schema_not_safe(schema, psprintf("It is owned by role \"%s\", who is not a superuser.",
                                         GetUserNameFromId(owner, false)));
    if (acl != nullptr) {
        const AclItem* items = ACL_DAT(acl);
        for (int i = 0; i < ACL_NUM(acl); i++)
            if ((ACLITEM_GET_PRIVS(items[i]) & ACL_CREATE) != 0 && items[i].ai_grantee != owner &&
                (items[i].ai_grantee == ACL_ID_PUBLIC || !superuser_arg(items[i].ai_grantee)))
                schema_not_safe(schema, items[i].ai_grantee == ACL_ID_PUBLIC
                                            ? "Every role may create objects in it."
                                            : psprintf("Role \"%s\" may create objects in it.",
                                                       GetUserNameFromId(items[i].ai_grantee,
                                                                         false)));
    }
    // Objects of every kind a name in the extension's SQL could resolve
    // to, that are not members of the extension being created.
    static const char* const kObjects =
        "SELECT o.cls::regclass::text, o.oid FROM ("
        "  SELECT 'pg_class'::regclass AS cls, oid FROM pg_catalog.pg_class WHERE relnamespace = $1"
        "  UNION ALL SELECT 'pg_proc'::regclass, oid FROM pg_catalog.pg_proc WHERE pronamespace = $1"
        "  UNION ALL SELECT 'pg_type'::regclass, oid FROM pg_catalog.pg_type WHERE typnamespace = $1"
        "  UNION ALL SELECT 'pg_operator'::regclass, oid FROM pg_catalog.pg_operator"
        "             WHERE oprnamespace = $1"
        "  UNION ALL SELECT 'pg_collation'::regclass, oid FROM pg_catalog.pg_collation"
        "             WHERE collnamespace = $1"
        "  UNION ALL SELECT 'pg_conversion'::regclass, oid FROM pg_catalog.pg_conversion"
        "             WHERE connamespace = $1"
        "  UNION ALL SELECT 'pg_opclass'::regclass, oid FROM pg_catalog.pg_opclass"
        "             WHERE opcnamespace = $1"
        "  UNION ALL SELECT 'pg_opfamily'::regclass, oid FROM pg_catalog.pg_opfamily"
        "             WHERE opfnamespace = $1"
        "  UNION ALL SELECT 'pg_ts_config'::regclass, oid FROM pg_catalog.pg_ts_config"
        "             WHERE cfgnamespace = $1"
        "  UNION ALL SELECT 'pg_ts_dict'::regclass, oid FROM pg_catalog.pg_ts_dict"
        "             WHERE dictnamespace = $1"
        "  UNION ALL SELECT 'pg_ts_parser'::regclass, oid FROM pg_catalog.pg_ts_parser"
        "             WHERE prsnamespace = $1"
        "  UNION ALL SELECT 'pg_ts_template'::regclass, oid FROM pg_catalog.pg_ts_template"
        "             WHERE tmplnamespace = $1"
        "  UNION ALL SELECT 'pg_statistic_ext'::regclass, oid FROM pg_catalog.pg_statistic_ext"
        "             WHERE stxnamespace = $1"
        "  UNION ALL SELECT 'pg_extension'::regclass, oid FROM pg_catalog.pg_extension"
        "             WHERE extnamespace = $1 AND oid <> $2"
        ") o WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_depend d"
        "                       WHERE d.classid = o.cls AND d.objid = o.oid"
        "                         AND d.refclassid = 'pg_catalog.pg_extension'::regclass"
        "                         AND d.refobjid = $2 AND d.deptype = 'e')"
        " LIMIT 1";
    Oid types[2] = {OIDOID, OIDOID};
    Datum args[2] = {ObjectIdGetDatum(nsp), ObjectIdGetDatum(CurrentExtensionObject)};
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
    if (SPI_execute_with_args(kObjects, 2, types, args, nullptr, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not read the objects of schema \"%s\"", schema);
    if (SPI_processed > 0) {
        char* catalog = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        bool null = false;
        Oid object = DatumGetObjectId(
            SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
        ObjectAddress address;
        address.classId = DatumGetObjectId(DirectFunctionCall1(
            regclassin, CStringGetDatum(psprintf("pg_catalog.%s", catalog))));
        address.objectId = object;
        address.objectSubId = 0;
        char* description = getObjectDescription(&address, true);
        schema_not_safe(schema, psprintf("It already holds %s.",
                                         description ? description : "other objects"));
    }
    SPI_finish();
}

}  // namespace

// CREATE EXTENSION runs this first: the controller follows exactly one
// database, so a catalog anywhere else would never be maintained; and the
// schema it installs into must be safe for its functions (above).
Datum decoupled_assert_install_database(PG_FUNCTION_ARGS) {
    if (creating_extension) assert_schema_safe(get_func_namespace(fcinfo->flinfo->fn_oid));
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
