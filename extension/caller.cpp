// Public entry points that act on a caller's behalf, and who that caller is.
//
// A SECURITY DEFINER function cannot tell who called it: inside it
// current_user is the definer, and the session's outer user is the wrong
// answer whenever the caller is not the session itself — a view computed as
// its owner inside a replica's superuser session, or another role's
// SECURITY DEFINER function.  Nor may it resolve names in the caller's
// search_path: the caller's functions and operators would run with the
// extension's rights.
//
// So an entry point that needs its caller (acquire_hold, verify,
// create_materialized_view, ...) is declared LANGUAGE C with the symbol
// decoupled_entry.  Running as the caller, it records a CallerFrame — the
// effective user, the effective search_path with every schema explicit, the
// current schema — and calls its implementation directly through fmgr: the
// SECURITY DEFINER function of the same schema and argument types whose
// name has a leading underscore (decoupled._acquire_hold, ...).  No role is
// granted EXECUTE on an implementation, so there is no way around the entry
// point's checks.  Implementations ask decoupled._caller(),
// _caller_is_admin(), _caller_can_select() and _caller_schema(), which read
// the innermost frame; the only code that ever runs in the caller's
// search_path is parse analysis of a view's query (_create_plan_view), with
// every setting restored right after it.
//
// No C++ objects live here: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_proc.h"
#include "commands/view.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/value.h"
#include "parser/analyze.h"
#include "parser/parse_func.h"
#include "storage/lmgr.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
}

#include "caller.hpp"
#include "read_rewrite.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_entry);
PG_FUNCTION_INFO_V1(decoupled_caller);
PG_FUNCTION_INFO_V1(decoupled_caller_is_admin);
PG_FUNCTION_INFO_V1(decoupled_caller_can_select);
PG_FUNCTION_INFO_V1(decoupled_caller_schema);
PG_FUNCTION_INFO_V1(decoupled_create_plan_view);
}

namespace decoupled {
namespace {

CallerFrame* innermost = nullptr;
const char* target_schema = nullptr;
bool abort_callback_registered = false;

// A frame left behind by an error that unwound past its entry point
// without PG_FINALLY (it cannot happen today) must not outlive the
// transaction.
void forget_frames_at_abort(XactEvent event, void*) {
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) {
        innermost = nullptr;
        target_schema = nullptr;
    }
}

// The caller's search_path as PostgreSQL resolves it now, for the current
// user: the schemas it may use, pg_catalog and its temporary schema at the
// places they take, so that setting it again later, as another user,
// resolves names the same way ("$user" already expanded).
char* effective_search_path() {
    List* path = fetch_search_path(true);
    StringInfoData buf;
    initStringInfo(&buf);
    ListCell* lc;
    foreach (lc, path) {
        Oid ns = lfirst_oid(lc);
        const char* name = isTempNamespace(ns) ? "pg_temp" : get_namespace_name(ns);
        if (name == nullptr) continue;
        if (buf.len > 0) appendStringInfoString(&buf, ", ");
        appendStringInfoString(&buf, isTempNamespace(ns) ? name : quote_identifier(name));
    }
    list_free(path);
    return buf.data;
}

char* effective_current_schema() {
    List* path = fetch_search_path(false);
    char* name = path == NIL ? nullptr : get_namespace_name(linitial_oid(path));
    list_free(path);
    return name;
}

Oid caller_user() { return innermost ? innermost->user : GetUserId(); }

// The implementation of the entry point `flinfo` calls: same schema, same
// argument types, its name with a leading underscore.
FmgrInfo* implementation_of(FmgrInfo* flinfo) {
    if (flinfo->fn_extra != nullptr) return static_cast<FmgrInfo*>(flinfo->fn_extra);
    HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(flinfo->fn_oid));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "cache lookup failed for function %u", flinfo->fn_oid);
    auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
    int nargs = proc->pronargs;
    Oid* argtypes = static_cast<Oid*>(palloc(sizeof(Oid) * (nargs > 0 ? nargs : 1)));
    memcpy(argtypes, proc->proargtypes.values, sizeof(Oid) * nargs);
    char* impl_name = psprintf("_%s", NameStr(proc->proname));
    char* schema = get_namespace_name(proc->pronamespace);
    ReleaseSysCache(tuple);

    Oid impl = LookupFuncName(list_make2(makeString(schema), makeString(impl_name)), nargs,
                              argtypes, false);
    auto* cached = static_cast<FmgrInfo*>(MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(FmgrInfo)));
    fmgr_info_cxt(impl, cached, flinfo->fn_mcxt);
    cached->fn_expr = flinfo->fn_expr;
    flinfo->fn_extra = cached;
    return cached;
}

}  // namespace

void push_caller_frame(CallerFrame* frame) {
    if (!abort_callback_registered) {
        RegisterXactCallback(forget_frames_at_abort, nullptr);
        abort_callback_registered = true;
    }
    frame->user = GetUserId();
    frame->search_path = effective_search_path();
    frame->current_schema = target_schema ? pstrdup(target_schema) : effective_current_schema();
    target_schema = nullptr;  // for the statement's own call, not the calls it makes
    frame->outer = innermost;
    innermost = frame;
}

void pop_caller_frame(CallerFrame* frame) { innermost = frame->outer; }

const CallerFrame* current_caller_frame() { return innermost; }

bool caller_can_select(Oid relation) {
    return OidIsValid(relation) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relation)) &&
           pg_class_aclcheck(relation, caller_user(), ACL_SELECT) == ACLCHECK_OK;
}

void set_target_schema(const char* schema) {
    if (!abort_callback_registered) {
        RegisterXactCallback(forget_frames_at_abort, nullptr);
        abort_callback_registered = true;
    }
    target_schema = schema;
}

}  // namespace decoupled

// Every entry point that acts on a caller's behalf: records the caller and
// calls the implementation with the same arguments (and result set info).
Datum decoupled_entry(PG_FUNCTION_ARGS) {
    // The catalog first, as every implementation reads it: a call that
    // waits here for ALTER EXTENSION ... UPDATE then runs the updated
    // implementation, compiled anew.  Waiting inside the old one, its plans
    // no longer matched the catalog's row type ("type of parameter ... does
    // not match that when preparing the plan").
    Oid nsp = get_namespace_oid("decoupled", true);
    Oid catalog = OidIsValid(nsp) ? get_relname_relid("catalog_objects", nsp) : InvalidOid;
    if (OidIsValid(catalog)) LockRelationOid(catalog, AccessShareLock);
    FmgrInfo* impl = decoupled::implementation_of(fcinfo->flinfo);
    FunctionCallInfo call =
        static_cast<FunctionCallInfo>(palloc0(SizeForFunctionCallInfo(fcinfo->nargs)));
    InitFunctionCallInfoData(*call, impl, fcinfo->nargs, fcinfo->fncollation, fcinfo->context,
                             fcinfo->resultinfo);
    for (int i = 0; i < fcinfo->nargs; ++i) call->args[i] = fcinfo->args[i];

    auto* frame = static_cast<decoupled::CallerFrame*>(palloc0(sizeof(decoupled::CallerFrame)));
    auto* result = static_cast<Datum*>(palloc0(sizeof(Datum)));
    decoupled::push_caller_frame(frame);
    PG_TRY();
    {
        *result = FunctionCallInvoke(call);
    }
    PG_FINALLY();
    {
        decoupled::pop_caller_frame(frame);
    }
    PG_END_TRY();
    fcinfo->isnull = call->isnull;
    return *result;
}

// decoupled._caller() -> the role that called the entry point.
Datum decoupled_caller(PG_FUNCTION_ARGS) { PG_RETURN_OID(decoupled::caller_user()); }

// decoupled._caller_is_admin() -> superuser or member of decoupled_admin.
Datum decoupled_caller_is_admin(PG_FUNCTION_ARGS) {
    Oid caller = decoupled::caller_user();
    if (superuser_arg(caller)) PG_RETURN_BOOL(true);
    Oid admin = get_role_oid("decoupled_admin", true);
    PG_RETURN_BOOL(OidIsValid(admin) && has_privs_of_role(caller, admin));
}

// decoupled._caller_can_select(relation oid) -> may the caller read it
// (false for a relation that no longer exists).
Datum decoupled_caller_can_select(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(decoupled::caller_can_select(PG_GETARG_OID(0)));
}

// decoupled._caller_schema() -> the caller's current schema, or NULL.
Datum decoupled_caller_schema(PG_FUNCTION_ARGS) {
    const decoupled::CallerFrame* frame = decoupled::current_caller_frame();
    if (frame == nullptr || frame->current_schema == nullptr) PG_RETURN_NULL();
    PG_RETURN_TEXT_P(cstring_to_text(frame->current_schema));
}

// decoupled._create_plan_view(plan text, query text): CREATE VIEW plan WITH
// (security_invoker) AS query, the query analyzed in the caller's
// search_path — the one place the caller's names are resolved — and every
// setting as it was before once the view exists.
//
// The query is analyzed once, as the caller in a security-restricted
// operation, and that analysis is what the view stores.  Parse analysis
// runs code: a literal of an array, composite or range of a domain is
// converted at once, running the domain's CHECK — a function its author
// wrote.  Analyzing the text again as the extension's owner (a CREATE VIEW
// of it) ran that function as a superuser.  So the view is made with
// typed NULLs of the query's columns (no literal of the caller's, nothing
// converted) and its rule then replaced by the caller's analysis.
Datum decoupled_create_plan_view(PG_FUNCTION_ARGS) {
    const decoupled::CallerFrame* frame = decoupled::current_caller_frame();
    if (frame == nullptr)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("a written plan is created only through "
                               "decoupled.create_materialized_view()")));
    char* plan = text_to_cstring(PG_GETARG_TEXT_PP(0));
    char* query = text_to_cstring(PG_GETARG_TEXT_PP(1));

    int guc_level = NewGUCNestLevel();
    (void)set_config_option("search_path", frame->search_path, PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    // Analyzed as the caller: schemas named explicitly need the caller's
    // USAGE, as for any query the caller writes, and whatever the analysis
    // runs runs with the caller's rights.
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    SetUserIdAndSecContext(frame->user, saved_context | SECURITY_LOCAL_USERID_CHANGE |
                                            SECURITY_RESTRICTED_OPERATION);
    RawStmt* raw = linitial_node(RawStmt, raw_parser(query, RAW_PARSE_DEFAULT));
    Query* analyzed = decoupled::analyze_stored_query(raw, query);
    SetUserIdAndSecContext(saved_user, saved_context);
    // What DefineView refuses of a query (_mv_check_sql refused them before).
    if (analyzed->commandType != CMD_SELECT || analyzed->utilityStmt != nullptr)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("a materialized view's query must be a SELECT")));
    if (analyzed->hasModifyingCTE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("views must not contain data-modifying statements in WITH")));

    // The view, of the query's columns, each a NULL of its type, typmod and
    // collation, names qualified as the extension's path prints them.
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    StringInfoData columns;
    initStringInfo(&columns);
    ListCell* lc;
    foreach (lc, analyzed->targetList) {
        TargetEntry* te = lfirst_node(TargetEntry, lc);
        if (te->resjunk) continue;
        Node* expr = reinterpret_cast<Node*>(te->expr);
        Oid collation = exprCollation(expr);
        appendStringInfo(&columns, "%sNULL::%s", columns.len > 0 ? ", " : "",
                         format_type_with_typemod(exprType(expr), exprTypmod(expr)));
        if (OidIsValid(collation))
            appendStringInfo(&columns, " COLLATE %s", generate_collation_name(collation));
        appendStringInfo(&columns, " AS %s", quote_identifier(te->resname ? te->resname : "?column?"));
    }
    SPI_connect();
    char* sql =
        psprintf("CREATE VIEW %s WITH (security_invoker = true) AS SELECT %s", plan, columns.data);
    if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY) elog(ERROR, "could not create %s", plan);
    SPI_finish();
    Oid view = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(plan)),
                                AccessExclusiveLock, false);
    StoreViewQuery(view, analyzed, true);
    CommandCounterIncrement();
    AtEOXact_GUC(false, guc_level);
    PG_RETURN_VOID();
}
