// PostgreSQL's own statements on the extension's objects (issue 13, brief
// C15.1).
//
// A maintained materialized view is, to PostgreSQL, an ordinary view over
// its history (relkind 'v'); a registered table is an ordinary table.  So
// that users can work with them through the statements they know, the
// ProcessUtility hook (ddl_guard.cpp) hands these statements here first:
//
//   CREATE MATERIALIZED VIEW v WITH (decoupled.maintained = true
//       [, decoupled.cluster = 'c'] [, decoupled.retain_history = '1 hour'])
//       AS SELECT ...                      -> decoupled.create_materialized_view
//   CREATE TABLE t (...) WITH (decoupled.registered = true
//       [, decoupled.retain_history = ...])  -> CREATE TABLE, register_table
//   ALTER TABLE t SET (decoupled.registered = true | false),
//   ALTER TABLE t RESET (decoupled.registered)  -> register / unregister
//   DROP MATERIALIZED VIEW, COMMENT ON MATERIALIZED VIEW, ALTER
//   MATERIALIZED VIEW ... on a maintained view  -> the same statement on the
//       view, so the catalog's own rules apply (a drop goes through the
//       catalog with its dependency rules; changes are refused)
//   REFRESH MATERIALIZED VIEW on a maintained view  -> refused with a hint
//
// Everything else, and every statement on PostgreSQL's own materialized
// views, passes through untouched.  The calls go through the public entry
// points as the session's user: a statement can do exactly what the
// function call it stands for can.
//
// No C++ objects live here: ereport may longjmp through this file.
extern "C" {
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/comment.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "common/keywords.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/scanner.h"
#include "storage/lmgr.h"
#include "tcop/cmdtag.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

#include "caller.hpp"
#include "catalog_access.hpp"
#include "familiar_ddl.hpp"

namespace {

constexpr const char* kNamespace = "decoupled";

// ----------------------------------------------------------------------
// Options

bool is_decoupled_option(const DefElem* def) {
    return def->defnamespace != nullptr && strcmp(def->defnamespace, kNamespace) == 0;
}

bool has_decoupled_option(List* options) {
    ListCell* lc;
    foreach (lc, options) {
        if (is_decoupled_option(lfirst_node(DefElem, lc))) return true;
    }
    return false;
}

// The decoupled.* options a statement may carry, each NULL when absent.
struct DecoupledOptions {
    DefElem* maintained = nullptr;
    DefElem* registered = nullptr;
    DefElem* cluster = nullptr;
    DefElem* retain_history = nullptr;
    List* others = NIL;  // options of other namespaces, in order
};

// Splits `options` of a statement that accepts the decoupled options named
// in `accepted` ("maintained", "registered", "cluster", "retain_history").
// Unknown or repeated decoupled options are refused as PostgreSQL refuses
// unknown storage parameters.
DecoupledOptions split_options(List* options, const char* const* accepted, int n_accepted,
                               const char* what) {
    DecoupledOptions out;
    ListCell* lc;
    foreach (lc, options) {
        DefElem* def = lfirst_node(DefElem, lc);
        if (!is_decoupled_option(def)) {
            out.others = lappend(out.others, def);
            continue;
        }
        bool known = false;
        for (int i = 0; i < n_accepted; ++i) known = known || strcmp(def->defname, accepted[i]) == 0;
        DefElem** slot = nullptr;
        if (strcmp(def->defname, "maintained") == 0) slot = &out.maintained;
        else if (strcmp(def->defname, "registered") == 0) slot = &out.registered;
        else if (strcmp(def->defname, "cluster") == 0) slot = &out.cluster;
        else if (strcmp(def->defname, "retain_history") == 0) slot = &out.retain_history;
        if (!known || slot == nullptr) {
            StringInfoData names;
            initStringInfo(&names);
            for (int i = 0; i < n_accepted; ++i)
                appendStringInfo(&names, "%sdecoupled.%s", i == 0 ? "" : ", ", accepted[i]);
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("unrecognized parameter \"decoupled.%s\" for %s", def->defname,
                                   what),
                            errhint("%s accepts %s.", what, names.data)));
        }
        if (*slot != nullptr)
            ereport(ERROR, (errcode(ERRCODE_SYNTAX_ERROR),
                            errmsg("parameter \"decoupled.%s\" specified more than once",
                                   def->defname)));
        if (def->defaction == DEFELEM_DROP && slot != &out.registered)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("cannot reset parameter \"decoupled.%s\"", def->defname),
                            errhint("Only decoupled.registered can be reset, which unregisters "
                                    "the table.")));
        *slot = def;
    }
    return out;
}

// A decoupled.* value given as text; the option must have one.
char* option_text(DefElem* def) {
    if (def->arg == nullptr)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("parameter \"decoupled.%s\" needs a value", def->defname)));
    return defGetString(def);
}

// A decoupled.* boolean ("true" when given without a value, as PostgreSQL
// reads a bare storage parameter).
bool option_bool(DefElem* def) {
    if (def->arg == nullptr) return true;
    bool value;
    if (!parse_bool(defGetString(def), &value))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("parameter \"decoupled.%s\" requires a Boolean value", def->defname)));
    return value;
}

// ----------------------------------------------------------------------
// The catalog

// Does `sql`, run as the catalog reader with `arg` as $1, return a row?
bool catalog_has_row(const char* sql, Oid arg) {
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(arg)};
    if (SPI_execute_with_args(sql, 1, types, args, nullptr, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not read the pg_decoupled catalog");
    bool found = SPI_processed > 0;
    SPI_finish();
    decoupled::restore_user(saved);
    return found;
}

// The live maintained materialized view whose relation is `relid`.
struct MaintainedView {
    bool found = false;
    int64 lifetime_id = 0;
    Oid relid = InvalidOid;
    char* name = nullptr;  // its catalog name
    Oid owner = InvalidOid;  // who created it (the catalog's owner, not the relation's)
};

MaintainedView maintained_view(Oid relid) {
    MaintainedView view;
    if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_VIEW) return view;
    MemoryContext caller_context = CurrentMemoryContext;
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(relid)};
    if (SPI_execute_with_args("SELECT lifetime_id, name::text, (definition->>'owner')::oid "
                              "FROM decoupled.catalog_objects WHERE relation = $1::regclass "
                              "AND kind = 'materialized view' AND dropped_at IS NULL",
                              1, types, args, nullptr, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not read the pg_decoupled catalog");
    if (SPI_processed > 0) {
        HeapTuple row = SPI_tuptable->vals[0];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool isnull;
        view.found = true;
        view.relid = relid;
        view.lifetime_id = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
        char* name = SPI_getvalue(row, desc, 2);
        view.name = MemoryContextStrdup(caller_context, name);
        Datum owner = SPI_getbinval(row, desc, 3, &isnull);
        view.owner = isnull ? InvalidOid : DatumGetObjectId(owner);
    }
    SPI_finish();
    decoupled::restore_user(saved);
    return view;
}

bool is_maintained_view(Oid relid) { return maintained_view(relid).found; }

// The live view, source or sink whose relation (a view's or source's view,
// a sink's table) is `relid`, for COMMENT ON: found and its creator.
struct CommentedObject {
    bool found = false;
    Oid creator = InvalidOid;
};

CommentedObject commented_object(Oid relid) {
    CommentedObject object;
    char relkind = OidIsValid(relid) ? get_rel_relkind(relid) : '\0';
    if (relkind != RELKIND_VIEW && relkind != RELKIND_RELATION) return object;
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(relid)};
    if (SPI_execute_with_args(
            "SELECT coalesce((definition->>'owner')::oid, to_regrole(quote_ident(owner))::oid) "
            "  FROM decoupled.catalog_objects WHERE relation = $1::regclass "
            "   AND kind IN ('materialized view', 'source', 'sink') AND dropped_at IS NULL",
            1, types, args, nullptr, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not read the pg_decoupled catalog");
    if (SPI_processed > 0) {
        bool isnull;
        Datum creator = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        object.found = true;
        object.creator = isnull ? InvalidOid : DatumGetObjectId(creator);
    }
    SPI_finish();
    decoupled::restore_user(saved);
    return object;
}

bool is_registered_table(Oid relid) {
    if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_RELATION) return false;
    return catalog_has_row("SELECT FROM decoupled.catalog_objects WHERE relation = $1::regclass "
                           "AND kind = 'table' AND dropped_at IS NULL",
                           relid);
}

Oid relation_of(RangeVar* rv) { return RangeVarGetRelid(rv, NoLock, true); }

// Runs a call of the public API as the session's user.
// `function` (its signature) is what the statement stands for, `action`
// what the statement does, for the refusal of a role that may not call it:
// PostgreSQL's own message would name a function the user never called.
void call_api(const char* sql, int nargs, Oid* types, Datum* args, const char* function,
              const char* action) {
    Oid fn = DatumGetObjectId(
        DirectFunctionCall1(to_regprocedure, CStringGetTextDatum(function)));
    if (OidIsValid(fn) && pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
        ereport(ERROR,
                (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("permission denied to %s", action),
                 errdetail("The statement calls %s, which superusers and members of "
                           "decoupled_admin may call.",
                           function)));
    SPI_connect();
    int rc = SPI_execute_with_args(sql, nargs, types, args, nullptr, false, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "could not run \"%s\": %s", sql, SPI_result_code_string(rc));
    SPI_finish();
}

// ----------------------------------------------------------------------
// Statements rewritten into other statements

PlannedStmt* with_statement(PlannedStmt* pstmt, Node* stmt) {
    PlannedStmt* copy = makeNode(PlannedStmt);
    memcpy(copy, pstmt, sizeof(PlannedStmt));
    copy->utilityStmt = stmt;
    return copy;
}

// ----------------------------------------------------------------------
// CREATE MATERIALIZED VIEW ... WITH (decoupled.maintained = true) AS ...

// The text of the query of a CREATE MATERIALIZED VIEW statement: what
// follows its first AS outside parentheses (a name, a column list, USING,
// WITH (...) and TABLESPACE hold none), without a trailing WITH [NO] DATA.
// Read with PostgreSQL's own scanner, so quotes, comments and dollar
// quoting are what they are to the parser.
char* query_text_of(const char* statement) {
    core_yy_extra_type extra;
    core_yyscan_t scanner = scanner_init(statement, &extra, &ScanKeywords, ScanKeywordTokens);
    auto token_of = [](const char* keyword) {
        return static_cast<int>(ScanKeywordTokens[ScanKeywordLookup(keyword, &ScanKeywords)]);
    };
    const int as_token = token_of("as"), with_token = token_of("with"), no_token = token_of("no"),
              data_token = token_of("data");
    int depth = 0, start = -1, with_at = -1, trailing = 0;
    for (;;) {
        core_YYSTYPE value;
        YYLTYPE location;
        int token = core_yylex(&value, &location, scanner);
        if (token == 0) break;
        if (start == -1) {
            if (token == '(') depth++;
            else if (token == ')') depth--;
            else if (token == as_token && depth == 0) start = -2;  // the query starts next
            continue;
        }
        if (start == -2) start = location;
        // Track a trailing WITH [NO] DATA at depth 0 of the query.
        if (token == '(') depth++;
        else if (token == ')') depth--;
        if (depth == 0 && token == with_token) {
            with_at = location;
            trailing = 1;
        } else if (trailing == 1 && token == no_token) {
            trailing = 2;
        } else if ((trailing == 1 || trailing == 2) && token == data_token) {
            trailing = 3;
        } else {
            trailing = 0;
        }
    }
    scanner_finish(scanner);
    if (start < 0) elog(ERROR, "could not find the query of CREATE MATERIALIZED VIEW");
    int end = trailing == 3 ? with_at : static_cast<int>(strlen(statement));
    while (end > start && (isspace(static_cast<unsigned char>(statement[end - 1])) ||
                           statement[end - 1] == ';'))
        end--;
    return pnstrdup(statement + start, end - start);
}

char* statement_text(PlannedStmt* pstmt, const char* query_string) {
    int location = pstmt->stmt_location < 0 ? 0 : pstmt->stmt_location;
    int length = pstmt->stmt_len > 0 ? pstmt->stmt_len : static_cast<int>(strlen(query_string + location));
    return pnstrdup(query_string + location, length);
}

void refuse_for_maintained_view(const char* what, const char* hint) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("%s is not supported for a maintained materialized view", what),
                    hint ? errhint("%s", hint) : 0));
}

bool create_maintained_view(PlannedStmt*& pstmt, const char* query_string, QueryCompletion* qc) {
    auto* stmt = castNode(CreateTableAsStmt, pstmt->utilityStmt);
    IntoClause* into = stmt->into;
    if (!has_decoupled_option(into->options)) return false;
    if (stmt->objtype != OBJECT_MATVIEW)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("decoupled options are not supported for CREATE TABLE AS"),
                        errhint("Create a maintained view with CREATE MATERIALIZED VIEW ... WITH "
                                "(decoupled.maintained = true), or register a table with "
                                "CREATE TABLE ... WITH (decoupled.registered = true).")));
    static const char* const accepted[] = {"maintained", "cluster", "retain_history"};
    DecoupledOptions options = split_options(into->options, accepted, 3, "CREATE MATERIALIZED VIEW");
    bool maintained = options.maintained != nullptr && option_bool(options.maintained);
    if (!maintained) {
        if (options.cluster != nullptr || options.retain_history != nullptr)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("decoupled.cluster and decoupled.retain_history need "
                                   "decoupled.maintained = true")));
        // decoupled.maintained = false: PostgreSQL's own materialized view.
        auto* plain = static_cast<CreateTableAsStmt*>(copyObjectImpl(stmt));
        plain->into->options = options.others;
        pstmt = with_statement(pstmt, reinterpret_cast<Node*>(plain));
        return false;
    }
    if (options.others != NIL)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("storage parameter \"%s\" is not supported for a maintained "
                               "materialized view",
                               linitial_node(DefElem, options.others)->defname),
                        errdetail("Its rows are stored in the extension's history.")));
    if (into->colNames != NIL)
        refuse_for_maintained_view("a column name list",
                                   "Name the columns in the query's select list (AS name).");
    if (into->accessMethod != nullptr) refuse_for_maintained_view("USING", nullptr);
    if (into->tableSpaceName != nullptr) refuse_for_maintained_view("TABLESPACE", nullptr);
    if (into->skipData)
        refuse_for_maintained_view("WITH NO DATA",
                                   "A maintained view is computed from the moment it is created.");

    RangeVar* rel = into->rel;
    if (stmt->if_not_exists && OidIsValid(relation_of(rel))) {
        ereport(NOTICE, (errcode(ERRCODE_DUPLICATE_TABLE),
                         errmsg("relation \"%s\" already exists, skipping", rel->relname)));
        return true;
    }
    const char* schema = rel->schemaname;
    if (schema != nullptr) (void)get_namespace_oid(schema, false);
    char* query = query_text_of(statement_text(pstmt, query_string));

    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfoString(&sql, "SELECT decoupled.create_materialized_view($1, $2");
    Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
    Datum args[4] = {CStringGetTextDatum(rel->relname), CStringGetTextDatum(query), 0, 0};
    int nargs = 2;
    if (options.cluster != nullptr) {
        args[nargs++] = CStringGetTextDatum(option_text(options.cluster));
        appendStringInfo(&sql, ", cluster => $%d", nargs);
    }
    if (options.retain_history != nullptr) {
        args[nargs++] = CStringGetTextDatum(option_text(options.retain_history));
        appendStringInfo(&sql, ", retain_history => $%d::interval", nargs);
    }
    appendStringInfoChar(&sql, ')');
    // The view goes into the schema the statement names (the current one
    // otherwise), which the entry point records as the caller's.
    decoupled::set_target_schema(schema);
    PG_TRY();
    {
        call_api(sql.data, nargs, types, args,
                 "decoupled.create_materialized_view(text,text,text,interval,bigint)",
                 psprintf("create maintained materialized view \"%s\"", rel->relname));
    }
    PG_FINALLY();
    {
        decoupled::set_target_schema(nullptr);
    }
    PG_END_TRY();
    if (qc) SetQueryCompletion(qc, CMDTAG_CREATE_MATERIALIZED_VIEW, 0);
    return true;
}

// ----------------------------------------------------------------------
// Registered tables

const char* const kTableOptions[] = {"registered", "retain_history"};

void register_relation(Oid relid, DefElem* retain_history) {
    Oid types[2] = {OIDOID, TEXTOID};
    Datum args[2] = {ObjectIdGetDatum(relid), 0};
    if (retain_history != nullptr) {
        args[1] = CStringGetTextDatum(option_text(retain_history));
        call_api("SELECT decoupled.register_table($1::regclass, $2::interval)", 2, types, args,
                 "decoupled.register_table(regclass,interval)",
                 psprintf("register table \"%s\"", get_rel_name(relid)));
    } else {
        call_api("SELECT decoupled.register_table($1::regclass)", 1, types, args,
                 "decoupled.register_table(regclass,interval)",
                 psprintf("register table \"%s\"", get_rel_name(relid)));
    }
}

void unregister_relation(Oid relid) {
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(relid)};
    call_api("SELECT decoupled.unregister_table($1::regclass)", 1, types, args,
             "decoupled.unregister_table(regclass)",
             psprintf("unregister table \"%s\"", get_rel_name(relid)));
}

// CREATE TABLE t (...) WITH (decoupled.registered = true, ...): the table
// as PostgreSQL creates it without those options, then registered, in the
// statement's transaction.
bool create_registered_table(PlannedStmt* pstmt, const decoupled::UtilityCall& call) {
    auto* stmt = castNode(CreateStmt, pstmt->utilityStmt);
    if (!has_decoupled_option(stmt->options)) return false;
    DecoupledOptions options = split_options(stmt->options, kTableOptions, 2, "CREATE TABLE");
    if (options.registered == nullptr || !option_bool(options.registered)) {
        if (options.retain_history != nullptr)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("decoupled.retain_history needs decoupled.registered = true")));
    }
    bool existed = OidIsValid(relation_of(stmt->relation));
    auto* plain = static_cast<CreateStmt*>(copyObjectImpl(stmt));
    plain->options = options.others;
    call.run(call, with_statement(pstmt, reinterpret_cast<Node*>(plain)));
    // CREATE TABLE IF NOT EXISTS of an existing table changes nothing.
    if (existed || options.registered == nullptr || !option_bool(options.registered)) return true;
    CommandCounterIncrement();
    register_relation(RangeVarGetRelid(stmt->relation, NoLock, false), options.retain_history);
    return true;
}

// ALTER TABLE t SET (decoupled.registered = ...) / RESET (decoupled.registered).
bool alter_registration(PlannedStmt* pstmt) {
    auto* stmt = castNode(AlterTableStmt, pstmt->utilityStmt);
    AlterTableCmd* found = nullptr;
    ListCell* lc;
    foreach (lc, stmt->cmds) {
        auto* cmd = lfirst_node(AlterTableCmd, lc);
        if ((cmd->subtype == AT_SetRelOptions || cmd->subtype == AT_ResetRelOptions ||
             cmd->subtype == AT_ReplaceRelOptions) &&
            has_decoupled_option(castNode(List, cmd->def)))
            found = cmd;
    }
    if (found == nullptr) return false;
    if (stmt->objtype != OBJECT_TABLE)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("decoupled options are supported only for ALTER TABLE")));
    DecoupledOptions options =
        split_options(castNode(List, found->def), kTableOptions, 2, "ALTER TABLE");
    if (list_length(stmt->cmds) != 1 || options.others != NIL)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("decoupled options cannot be combined with other changes in one "
                               "ALTER TABLE"),
                        errhint("Give decoupled.* options in an ALTER TABLE of their own.")));
    if (options.registered == nullptr)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("decoupled.retain_history can be set only with "
                               "decoupled.registered = true"),
                        errhint("A registered table's retention is fixed at registration.")));
    Oid relid = RangeVarGetRelid(stmt->relation, NoLock, stmt->missing_ok);
    if (!OidIsValid(relid)) {
        ereport(NOTICE, (errmsg("relation \"%s\" does not exist, skipping", stmt->relation->relname)));
        return true;
    }
    bool registered = is_registered_table(relid);
    bool wanted = found->subtype != AT_ResetRelOptions && option_bool(options.registered);
    if (wanted && registered && options.retain_history != nullptr)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("cannot change the retention of registered table \"%s\"",
                               get_rel_name(relid)),
                        errhint("Unregister the table and register it again with the new "
                                "decoupled.retain_history.")));
    if (!wanted && options.retain_history != nullptr)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("decoupled.retain_history needs decoupled.registered = true")));
    // Like a storage parameter, the option says what should be: saying it
    // again changes nothing.
    if (wanted && !registered) register_relation(relid, options.retain_history);
    else if (!wanted && registered) unregister_relation(relid);
    return true;
}

// ----------------------------------------------------------------------
// Statements on a maintained view named as a materialized view

// Without CASCADE, the views' dependents outside the statement are refused
// in one error naming them all, as for DROP TABLE / DROP VIEW of other
// catalog objects (ddl_guard.cpp) — once the caller may drop at all, so
// that a caller without the privilege learns only that.
void refuse_dependents(List* views) {
    int n = 0;
    Datum* rels = static_cast<Datum*>(palloc(sizeof(Datum) * list_length(views)));
    ListCell* lc;
    foreach (lc, views) rels[n++] = ObjectIdGetDatum(static_cast<MaintainedView*>(lfirst(lc))->relid);
    ArrayType* array = construct_array(rels, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT);
    Oid types[2] = {OIDARRAYOID, OIDOID};
    Datum args[2] = {PointerGetDatum(array), ObjectIdGetDatum(GetUserId())};
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    if (SPI_execute_with_args("SELECT decoupled._refuse_relation_drop($1) "
                              "WHERE has_function_privilege($2, 'decoupled.drop(text, boolean)', "
                              "'EXECUTE')",
                              2, types, args, nullptr, false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not check the statement against the pg_decoupled catalog");
    SPI_finish();
    decoupled::restore_user(saved);
}

// DROP MATERIALIZED VIEW (or DROP VIEW) a, b: the maintained views among
// them are dropped through the catalog, as decoupled.drop() drops them
// (the same privileges, dependency rules and CASCADE), the rest by
// PostgreSQL.  Dependents were created after what they read, so dropping
// the newest first lets one statement drop a view with its dependents.
bool drop_maintained_views(PlannedStmt* pstmt, const decoupled::UtilityCall& call) {
    auto* stmt = castNode(DropStmt, pstmt->utilityStmt);
    if (stmt->removeType != OBJECT_MATVIEW && stmt->removeType != OBJECT_VIEW) return false;
    List* views = NIL;  // MaintainedView*, newest first
    List* others = NIL;
    ListCell* lc;
    foreach (lc, stmt->objects) {
        List* name = castNode(List, lfirst(lc));
        MaintainedView view = maintained_view(relation_of(makeRangeVarFromNameList(name)));
        if (!view.found) {
            others = lappend(others, name);
            continue;
        }
        // Named twice (by two spellings, say): dropped once, as PostgreSQL
        // drops a relation named twice.
        ListCell* at;
        int position = 0;
        bool named_before = false;
        foreach (at, views) {
            int64 id = static_cast<MaintainedView*>(lfirst(at))->lifetime_id;
            named_before |= id == view.lifetime_id;
            if (id < view.lifetime_id) break;
            position++;
        }
        if (named_before) continue;
        auto* copy = static_cast<MaintainedView*>(palloc(sizeof(MaintainedView)));
        *copy = view;
        views = list_insert_nth(views, position, copy);
    }
    if (views == NIL) return false;
    if (stmt->concurrent) refuse_for_maintained_view("DROP ... CONCURRENTLY", nullptr);
    if (stmt->behavior != DROP_CASCADE) refuse_dependents(views);
    foreach (lc, views) {
        auto* view = static_cast<MaintainedView*>(lfirst(lc));
        Oid types[2] = {TEXTOID, BOOLOID};
        Datum args[2] = {CStringGetTextDatum(view->name), BoolGetDatum(stmt->behavior == DROP_CASCADE)};
        call_api("SELECT decoupled.drop($1, $2)", 2, types, args, "decoupled.drop(text,boolean)",
                 psprintf("drop maintained materialized view \"%s\"", view->name));
        CommandCounterIncrement();
    }
    if (others != NIL) {
        auto* rest = static_cast<DropStmt*>(copyObjectImpl(stmt));
        rest->objects = others;
        call.run(call, with_statement(pstmt, reinterpret_cast<Node*>(rest)));
    }
    return true;
}

// COMMENT ON [MATERIALIZED] VIEW of a maintained view or a source, COMMENT
// ON TABLE of a sink's table.  Their relations belong to the extension, so
// PostgreSQL would let only a superuser comment; whoever may manage the
// object in the catalog (its creator, decoupled_admin) may comment too:
// only the comment's text is written.
bool comment_on_maintained_view(PlannedStmt* pstmt, const decoupled::UtilityCall& call) {
    auto* c = castNode(CommentStmt, pstmt->utilityStmt);
    if (c->objtype != OBJECT_MATVIEW && c->objtype != OBJECT_VIEW && c->objtype != OBJECT_TABLE)
        return false;
    Oid relid = relation_of(makeRangeVarFromNameList(castNode(List, c->object)));
    // A maintained view named as a materialized view is commented as the
    // view its relation is; anything else keeps PostgreSQL's own checks.
    char relkind = OidIsValid(relid) ? get_rel_relkind(relid) : '\0';
    if ((c->objtype == OBJECT_TABLE) != (relkind == RELKIND_RELATION)) return false;
    CommentedObject object = commented_object(relid);
    if (!object.found) return false;
    Oid admin = get_role_oid("decoupled_admin", true);
    bool manages = pg_class_ownercheck(relid, GetUserId()) ||
                   (OidIsValid(object.creator) && has_privs_of_role(GetUserId(), object.creator)) ||
                   (OidIsValid(admin) && has_privs_of_role(GetUserId(), admin));
    if (!manages) {
        auto* copy = static_cast<CommentStmt*>(copyObjectImpl(c));
        if (copy->objtype == OBJECT_MATVIEW)
            copy->objtype = OBJECT_VIEW;  // PostgreSQL's own "must be owner"
        call.run(call, with_statement(pstmt, reinterpret_cast<Node*>(copy)));
        return true;
    }
    LockRelationOid(relid, ShareUpdateExclusiveLock);
    CreateComments(relid, RelationRelationId, 0, c->comment);
    return true;
}

void refuse_refresh(RefreshMatViewStmt* stmt) {
    if (!is_maintained_view(relation_of(stmt->relation))) return;
    ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                    errmsg("cannot refresh maintained materialized view \"%s\"",
                           stmt->relation->relname),
                    errdetail("The replicas of its cluster keep it up to date."),
                    errhint("To wait until it reflects a time, use decoupled.wait_for_upper().")));
}

// ALTER ... on a maintained view named as a materialized view: the
// statement on the view it is, which the catalog's DDL trigger refuses with
// its own error.
PlannedStmt* retarget_to_view(PlannedStmt* pstmt) {
    Node* stmt = pstmt->utilityStmt;
    switch (nodeTag(stmt)) {
        case T_RenameStmt: {
            auto* r = castNode(RenameStmt, stmt);
            bool matview = r->renameType == OBJECT_MATVIEW || r->relationType == OBJECT_MATVIEW;
            if (!matview || r->relation == nullptr || !is_maintained_view(relation_of(r->relation)))
                return pstmt;
            auto* copy = static_cast<RenameStmt*>(copyObjectImpl(r));
            if (copy->renameType == OBJECT_MATVIEW) copy->renameType = OBJECT_VIEW;
            if (copy->relationType == OBJECT_MATVIEW) copy->relationType = OBJECT_VIEW;
            return with_statement(pstmt, reinterpret_cast<Node*>(copy));
        }
        case T_AlterObjectSchemaStmt: {
            auto* a = castNode(AlterObjectSchemaStmt, stmt);
            if (a->objectType != OBJECT_MATVIEW || a->relation == nullptr ||
                !is_maintained_view(relation_of(a->relation)))
                return pstmt;
            auto* copy = static_cast<AlterObjectSchemaStmt*>(copyObjectImpl(a));
            copy->objectType = OBJECT_VIEW;
            return with_statement(pstmt, reinterpret_cast<Node*>(copy));
        }
        case T_AlterTableStmt: {
            auto* a = castNode(AlterTableStmt, stmt);
            if (a->objtype != OBJECT_MATVIEW || !is_maintained_view(relation_of(a->relation))) return pstmt;
            auto* copy = static_cast<AlterTableStmt*>(copyObjectImpl(a));
            copy->objtype = OBJECT_VIEW;
            return with_statement(pstmt, reinterpret_cast<Node*>(copy));
        }
        default:
            return pstmt;
    }
}

// CREATE VIEW / CREATE TABLE AS ... WITH (decoupled.*): say which
// statement takes them instead of PostgreSQL's "unrecognized parameter
// namespace".
void refuse_misplaced_options(Node* stmt) {
    List* options = NIL;
    const char* what = nullptr;
    if (IsA(stmt, ViewStmt)) {
        options = castNode(ViewStmt, stmt)->options;
        what = "CREATE VIEW";
    }
    if (what == nullptr || !has_decoupled_option(options)) return;
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("decoupled options are not supported for %s", what),
                    errhint("Create a maintained view with CREATE MATERIALIZED VIEW ... WITH "
                            "(decoupled.maintained = true).")));
}

// ----------------------------------------------------------------------
// pg_restore's last statement, DROP EXTENSION (85_dump_restore.sql)

constexpr const char* kRestoreMarker = "decoupled_restored";

// CREATE EVENT TRIGGER decoupled_restored: pg_restore creates event
// triggers after everything else, so a restore in progress is complete.
// The marker exists already (CREATE EXTENSION made it): creating it again
// changes nothing.
bool finish_restore_at_marker(PlannedStmt* pstmt, QueryCompletion* qc) {
    auto* stmt = castNode(CreateEventTrigStmt, pstmt->utilityStmt);
    if (strcmp(stmt->trigname, kRestoreMarker) != 0 || !superuser()) return false;
    SPI_connect();
    if (SPI_execute("SELECT FROM pg_catalog.pg_proc p WHERE p.proname = '_finish_restore' "
                    "AND p.pronamespace = 'decoupled'::pg_catalog.regnamespace",
                    true, 1) == SPI_OK_SELECT &&
        SPI_processed > 0 &&
        SPI_execute("SELECT decoupled._finish_restore()", false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not finish the restore");
    SPI_finish();
    if (!OidIsValid(get_event_trigger_oid(kRestoreMarker, true))) return false;
    if (qc) SetQueryCompletion(qc, CMDTAG_CREATE_EVENT_TRIGGER, 0);
    return true;
}

// DROP EXTENSION pg_decoupled: the marker is no member of the extension
// but depends on its function; it goes first.
void drop_restore_marker(DropStmt* stmt) {
    ListCell* lc;
    foreach (lc, stmt->objects) {
        if (strcmp(strVal(lfirst(lc)), "pg_decoupled") != 0) continue;
        if (!OidIsValid(get_event_trigger_oid(kRestoreMarker, true))) return;
        SPI_connect();
        if (SPI_execute("DROP EVENT TRIGGER IF EXISTS decoupled_restored", false, 0) !=
            SPI_OK_UTILITY)
            elog(ERROR, "could not drop event trigger decoupled_restored");
        SPI_finish();
        return;
    }
}

}  // namespace

bool decoupled::familiar_ddl_candidate(const Node* stmt) {
    switch (nodeTag(stmt)) {
        case T_CreateTableAsStmt:
            return has_decoupled_option(castNode(CreateTableAsStmt, stmt)->into->options);
        case T_CreateStmt:
            return has_decoupled_option(castNode(CreateStmt, stmt)->options);
        case T_ViewStmt:
            return has_decoupled_option(castNode(ViewStmt, stmt)->options);
        case T_AlterTableStmt: {
            auto* a = castNode(AlterTableStmt, stmt);
            if (a->objtype == OBJECT_MATVIEW) return true;
            ListCell* lc;
            foreach (lc, a->cmds) {
                auto* cmd = lfirst_node(AlterTableCmd, lc);
                if ((cmd->subtype == AT_SetRelOptions || cmd->subtype == AT_ResetRelOptions ||
                     cmd->subtype == AT_ReplaceRelOptions) &&
                    has_decoupled_option(castNode(List, cmd->def)))
                    return true;
            }
            return false;
        }
        case T_DropStmt:
            return castNode(DropStmt, stmt)->removeType == OBJECT_MATVIEW ||
                   castNode(DropStmt, stmt)->removeType == OBJECT_VIEW ||
                   castNode(DropStmt, stmt)->removeType == OBJECT_EXTENSION;
        case T_CreateEventTrigStmt:
            return true;
        case T_RefreshMatViewStmt:
            return true;
        case T_CommentStmt:
            return castNode(CommentStmt, stmt)->objtype == OBJECT_MATVIEW ||
                   castNode(CommentStmt, stmt)->objtype == OBJECT_VIEW ||
                   castNode(CommentStmt, stmt)->objtype == OBJECT_TABLE;  // a sink's
        case T_RenameStmt:
            return castNode(RenameStmt, stmt)->renameType == OBJECT_MATVIEW ||
                   castNode(RenameStmt, stmt)->relationType == OBJECT_MATVIEW;
        case T_AlterObjectSchemaStmt:
            return castNode(AlterObjectSchemaStmt, stmt)->objectType == OBJECT_MATVIEW;
        default:
            return false;
    }
}

bool decoupled::run_familiar_ddl(PlannedStmt* pstmt, const char* query_string, QueryCompletion* qc,
                                 const UtilityCall& call) {
    Node* stmt = pstmt->utilityStmt;
    switch (nodeTag(stmt)) {
        case T_CreateTableAsStmt:
            if (create_maintained_view(pstmt, query_string, qc)) return true;
            break;
        case T_CreateStmt:
            return create_registered_table(pstmt, call);
        case T_AlterTableStmt:
            if (alter_registration(pstmt)) return true;
            pstmt = retarget_to_view(pstmt);
            break;
        case T_DropStmt:
            if (castNode(DropStmt, stmt)->removeType == OBJECT_EXTENSION)
                drop_restore_marker(castNode(DropStmt, stmt));
            else if (drop_maintained_views(pstmt, call))
                return true;
            break;
        case T_CreateEventTrigStmt:
            if (finish_restore_at_marker(pstmt, qc)) return true;
            break;
        case T_CommentStmt:
            if (comment_on_maintained_view(pstmt, call)) return true;
            break;
        case T_RefreshMatViewStmt:
            refuse_refresh(castNode(RefreshMatViewStmt, stmt));
            break;
        case T_ViewStmt:
            refuse_misplaced_options(stmt);
            break;
        default:
            pstmt = retarget_to_view(pstmt);
            break;
    }
    call.run(call, pstmt);
    return true;
}
