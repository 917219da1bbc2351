// Materialized views: checking the query, finding its logical inputs, and
// computing it at a time (brief C1.6, C3.3, C5.3).
//
// A materialized view's written plan is the analyzed query tree of a private
// view, decoupled_storage.c<id>_plan, created once from the user's SQL in the
// user's search_path.  PostgreSQL stores that tree (nodeToString, as for any
// view rule), binds every name to an OID and records dependencies on what it
// reads; replicas execute it and never parse the user's SQL again.
//
//   _mv_check_sql(sql)          one SELECT, or an error; returns its text
//   _mv_relations(plan)         every relation the plan reaches, through
//                               views too, after refusing non-deterministic
//                               constructs
//   _stage_plan(plan, owner, ts, target)
//                               runs the plan with every collection read AS OF
//                               ts, as the view's owner, and inserts
//                               (ts, +1, row key, row hash, row...) into target
//
// No C++ objects live here: every function below may longjmp.
extern "C" {
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parser.h"
#include "pgtime.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/typcache.h"
}

#include <cstring>

#include "delta_plan.hpp"
#include "kept_statements.hpp"
#include "scratch.hpp"
#include "shmem.hpp"
#include "step_deadline.hpp"
#include "written_plan.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_mv_check_sql);
PG_FUNCTION_INFO_V1(decoupled_mv_relations);
PG_FUNCTION_INFO_V1(decoupled_stage_plan);
PG_FUNCTION_INFO_V1(decoupled_row_text);
PG_FUNCTION_INFO_V1(decoupled_compared_by_value);
}

namespace {

// ---------------------------------------------------------------------------
// The query: one SELECT
// ---------------------------------------------------------------------------

[[noreturn]] void not_a_select(const char* detail) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("the query of a materialized view must be one SELECT"),
                    errdetail("%s", detail)));
    pg_unreachable();
}

// ---------------------------------------------------------------------------
// Determinism: replicas compute the query again at every input time, in
// other sessions, and must get the same answer each time.
// ---------------------------------------------------------------------------

// Built-in functions that are not immutable (stable: volatile ones are
// refused anyway) and whose result still depends only on their arguments
// and on the settings a computation fixes — TimeZone, DateStyle and the
// text search configuration the view recorded, and the output styles and
// locales enter_owner pins (kPinnedSettings) — or on catalog entries a
// value's own type owns (an enum's labels, a domain's checks).  Most are
// stable only because they call some type's output or input function.
// Every other stable built-in reads what a replica's session, the clock or
// the catalog decides — settings (current_setting, pg_settings), the
// session (pg_cursor, pg_backend_pid), statistics (pg_stat_get_*), names
// and privileges (reg* as text, has_*_privilege, pg_get_viewdef,
// pg_table_is_visible) — and is refused: a list of those would miss some
// (it missed pg_show_all_settings and pg_stat_get_live_tuples).
const char* const kStableBuiltins[] = {
    // Output, input, send and receive of types, and casts through them.
    "anyarray_out", "anyarray_recv", "anyarray_send", "anycompatiblearray_out",
    "anycompatiblearray_recv", "anycompatiblearray_send", "anycompatiblemultirange_in",
    "anycompatiblemultirange_out", "anycompatiblerange_in", "anycompatiblerange_out",
    "anyenum_out", "anymultirange_in", "anymultirange_out", "anyrange_in", "anyrange_out",
    "array_in", "array_out", "array_recv", "array_send", "bpcharrecv", "bpcharsend", "cash_in",
    "cash_out", "cstring_recv", "cstring_send", "date_in", "date_out", "domain_in",
    "domain_recv", "enum_in", "enum_out", "enum_recv", "enum_send", "interval_in",
    "interval_out", "multirange_in", "multirange_out", "multirange_recv", "multirange_send",
    "namerecv", "namesend", "range_in", "range_out", "range_recv", "range_send", "record_in",
    "record_out", "record_recv", "record_send", "textrecv", "textsend", "time_in",
    "timestamp_in", "timestamp_out", "timestamptz_in", "timestamptz_out", "timetz_in",
    "varcharrecv", "varcharsend", "xml_in", "xml_recv", "xml_send",
    // Dates and times in the view's TimeZone and DateStyle.
    "age",  // age(timestamptz, timestamptz); the one-argument forms are refused below
    "date", "date_part", "date_trunc", "extract", "generate_series", "make_timestamptz",
    "overlaps", "time", "timestamp", "timestamptz", "timetz", "timezone", "to_char", "to_date",
    "to_number", "to_timestamp", "interval_pl_timestamptz", "timestamptz_mi_interval",
    "timestamptz_pl_interval", "date_cmp_timestamptz", "date_eq_timestamptz",
    "date_ge_timestamptz", "date_gt_timestamptz", "date_le_timestamptz", "date_lt_timestamptz",
    "date_ne_timestamptz", "timestamp_cmp_timestamptz", "timestamp_eq_timestamptz",
    "timestamp_ge_timestamptz", "timestamp_gt_timestamptz", "timestamp_le_timestamptz",
    "timestamp_lt_timestamptz", "timestamp_ne_timestamptz", "timestamptz_cmp_date",
    "timestamptz_cmp_timestamp", "timestamptz_eq_date", "timestamptz_eq_timestamp",
    "timestamptz_ge_date", "timestamptz_ge_timestamp", "timestamptz_gt_date",
    "timestamptz_gt_timestamp", "timestamptz_le_date", "timestamptz_le_timestamp",
    "timestamptz_lt_date", "timestamptz_lt_timestamp", "timestamptz_ne_date",
    "timestamptz_ne_timestamp", "in_range",
    // Text, JSON and XML built from values.
    "anytextcat", "textanycat", "concat", "concat_ws", "format", "quote_literal",
    "quote_nullable", "array_to_string", "array_to_json", "row_to_json", "to_json", "to_jsonb",
    "json_agg", "json_build_array", "json_build_object", "json_object_agg",
    "json_populate_record", "json_populate_recordset", "json_to_record", "json_to_recordset",
    "jsonb_agg", "jsonb_build_array", "jsonb_build_object", "jsonb_object_agg",
    "jsonb_populate_record", "jsonb_populate_recordset", "jsonb_to_record",
    "jsonb_to_recordset", "jsonb_path_exists_tz", "jsonb_path_match_tz",
    "jsonb_path_query_array_tz", "jsonb_path_query_first_tz", "jsonb_path_query_tz", "xml",
    "xml_is_well_formed", "convert", "convert_from", "convert_to", "length", "money",
    "numeric", "pg_typeof", "enum_first", "enum_last", "enum_range", "getdatabaseencoding",
    "pg_char_to_encoding", "pg_encoding_to_char", "pg_options_to_table",
    // Text search in the view's configuration.
    "to_tsvector", "to_tsquery", "plainto_tsquery", "phraseto_tsquery", "websearch_to_tsquery",
    "json_to_tsvector", "jsonb_to_tsvector", "ts_headline", "ts_match_tq", "ts_match_tt",
    "get_current_ts_config", "ts_debug", "ts_parse", "ts_token_type"};

bool is_stable_builtin(const char* name) {
    for (const char* n : kStableBuiltins)
        if (strcmp(name, n) == 0) return true;
    return false;
}

// Whether a function that is not immutable reads state other than its
// arguments and a computation's fixed settings: every built-in outside
// kStableBuiltins, the one-argument age() (against today, or the current
// transaction), and every function of the extension itself (as_of(),
// catalog_version(): a replica's time and catalog, not the inputs').  A
// function of a user's schema is taken at its word: its owner declared it
// stable, as PostgreSQL's own index expressions take immutable ones.
bool is_session_dependent(Oid funcid) {
    if (func_volatile(funcid) == PROVOLATILE_IMMUTABLE) return false;
    Oid nsp = get_func_namespace(funcid);
    if (nsp == get_namespace_oid("decoupled", true)) return true;
    if (nsp != PG_CATALOG_NAMESPACE) return false;
    char* name = get_func_name(funcid);
    if (name == nullptr) return true;
    if (strcmp(name, "age") == 0) return get_func_nargs(funcid) < 2;
    return !is_stable_builtin(name);
}

bool non_deterministic_function(Oid funcid, void* context) {
    if (func_volatile(funcid) == PROVOLATILE_VOLATILE || is_session_dependent(funcid)) {
        *static_cast<Oid*>(context) = funcid;
        return true;
    }
    return false;
}

[[noreturn]] void refuse(const char* what, const char* hint) {
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("materialized view query is not deterministic: it %s", what),
             errdetail("Replicas compute a materialized view again at every input time and "
                       "must get the same result each time."),
             hint ? errhint("%s", hint) : 0));
    pg_unreachable();
}

// Two columns of different implicit collations compared without COLLATE:
// the parser leaves the comparison without a collation and PostgreSQL
// fails only when it runs on rows — for a maintained view, at its first
// step with data, after which it stays stalled.  Refused where the query
// is written, with PostgreSQL's own words.
void refuse_indeterminate_collation(Node* node) {
    Oid opno = InvalidOid;
    Oid inputcollid = InvalidOid;
    List* args = NIL;
    if (IsA(node, OpExpr) || IsA(node, DistinctExpr) || IsA(node, NullIfExpr)) {
        OpExpr* op = reinterpret_cast<OpExpr*>(node);
        opno = op->opno;
        inputcollid = op->inputcollid;
        args = op->args;
    } else if (IsA(node, ScalarArrayOpExpr)) {
        ScalarArrayOpExpr* op = reinterpret_cast<ScalarArrayOpExpr*>(node);
        opno = op->opno;
        inputcollid = op->inputcollid;
        args = op->args;
    } else {
        return;
    }
    if (OidIsValid(inputcollid) || list_length(args) != 2) return;
    Oid left = exprCollation(static_cast<Node*>(linitial(args)));
    Oid right = exprCollation(static_cast<Node*>(lsecond(args)));
    if (!OidIsValid(left) || !OidIsValid(right) || left == right) return;
    // Comparisons only (btree or hash operators): they are what needs a
    // collation; a concatenation of two collations' values is fine.
    Oid type = exprType(static_cast<Node*>(linitial(args)));
    if (get_op_btree_interpretation(opno) == NIL && !op_hashjoinable(opno, type)) return;
    ereport(ERROR,
            (errcode(ERRCODE_INDETERMINATE_COLLATION),
             errmsg("could not determine which collation to use for string comparison"),
             errdetail("Operator %s compares a value of collation \"%s\" with one of collation "
                       "\"%s\".",
                       format_operator(opno), get_collation_name(left), get_collation_name(right)),
             errhint("Use the COLLATE clause to set the collation explicitly.")));
}

struct Walk {
    List* relations;  // OIDs of every relation reached
    Oid view;         // the view being expanded: its rule's OLD/NEW entries name it
};

bool walk(Node* node, void* context);

// PostgreSQL's walkers take an untyped function pointer; going through
// void (*)() keeps the cast explicit without a function-type warning.
using Walker = bool (*)();
Walker as_walker(bool (*fn)(Node*, void*)) {
    return reinterpret_cast<Walker>(reinterpret_cast<void (*)()>(fn));
}

// A view is part of the query's meaning: its relations are logical inputs
// and its expressions must be deterministic too.  Collection storage is
// where the walk stops.
void walk_view(Oid relid, Walk* w) {
    if (get_rel_namespace(relid) == get_namespace_oid("decoupled_storage", true) &&
        w->view != InvalidOid)
        return;
    Relation view = table_open(relid, AccessShareLock);
    Query* q = static_cast<Query*>(copyObjectImpl(get_view_query(view)));
    table_close(view, AccessShareLock);
    Oid outer = w->view;
    w->view = relid;
    walk(reinterpret_cast<Node*>(q), w);
    w->view = outer;
}

// `decoupled.as_of() IS NULL`: the gate of the read rewrite's table branch
// (read_rewrite.cpp), in every plan that reads a registered table.  False
// in every computation (each runs at a time), so deterministic, unlike
// as_of() itself.
bool is_latest_gate(Node* node) {
    if (!IsA(node, NullTest)) return false;
    auto* test = reinterpret_cast<NullTest*>(node);
    if (test->nulltesttype != IS_NULL || test->argisrow || test->arg == nullptr ||
        !IsA(test->arg, FuncExpr))
        return false;
    auto* call = reinterpret_cast<FuncExpr*>(test->arg);
    if (call->args != NIL || get_func_namespace(call->funcid) !=
                                 get_namespace_oid("decoupled", true))
        return false;
    char* name = get_func_name(call->funcid);
    return name != nullptr && strcmp(name, "as_of") == 0;
}

bool walk(Node* node, void* context) {
    if (node == nullptr) return false;
    Walk* w = static_cast<Walk*>(context);
    check_stack_depth();
    if (is_latest_gate(node)) return false;
    if (IsA(node, SQLValueFunction))
        refuse("uses a session value such as CURRENT_TIMESTAMP or CURRENT_USER",
               "Store the value in a collection, or pass it as a constant.");
    if (IsA(node, NextValueExpr)) refuse("reads a sequence", nullptr);
    // ctid, xmin, xmax, cmin, cmax say where and by which transaction a row
    // was written, which history does not keep; tableoid of a registered
    // table is read from the table itself, not at the input's time.
    if (IsA(node, Var) && reinterpret_cast<Var*>(node)->varattno < 0)
        refuse("reads a system column (ctid, xmin, xmax, cmin, cmax or tableoid)",
               "Read the table's own columns only.");
    if (IsA(node, Query)) {
        Query* q = reinterpret_cast<Query*>(node);
        if (q->rowMarks != NIL) refuse("locks rows (FOR UPDATE/SHARE)", nullptr);
        if ((q->limitCount || q->limitOffset) && q->sortClause == NIL)
            refuse("uses LIMIT or OFFSET without ORDER BY",
                   "Order by columns that make the rows unique.");
        ListCell* lc;
        foreach (lc, q->rtable) {
            RangeTblEntry* rte = lfirst_node(RangeTblEntry, lc);
            if (rte->rtekind != RTE_RELATION || rte->relid == w->view) continue;
            if (rte->tablesample) refuse("samples a table (TABLESAMPLE)", nullptr);
            w->relations = list_append_unique_oid(w->relations, rte->relid);
            if (rte->relkind == RELKIND_VIEW) walk_view(rte->relid, w);
        }
        return query_tree_walker(q, as_walker(walk), w, 0);
    }
    refuse_indeterminate_collation(node);
    Oid bad = InvalidOid;
    if (check_functions_in_node(node, non_deterministic_function, &bad)) {
        char* what = psprintf("calls %s, which is %s", format_procedure(bad),
                              func_volatile(bad) == PROVOLATILE_VOLATILE
                                  ? "volatile"
                                  : "session- or time-dependent");
        refuse(what, "Use immutable or stable functions of the inputs only.");
    }
    return expression_tree_walker(node, as_walker(walk), w);
}

// ---------------------------------------------------------------------------
// Computing the plan into a relation
// ---------------------------------------------------------------------------

// Inserts every result row into the target relation.  The target is private
// scratch of the extension (no triggers, no indexes), opened before the
// switch to the view's owner, so the owner needs no right on it.
struct StageReceiver {
    DestReceiver pub;  // first: the executor sees a DestReceiver
    Relation target;
    TupleTableSlot* slot;
    BulkInsertState bistate;
    CommandId cid;
    uint64 rows;
};

bool stage_receive(TupleTableSlot* in, DestReceiver* self) {
    auto* r = reinterpret_cast<StageReceiver*>(self);
    slot_getallattrs(in);
    ExecClearTuple(r->slot);
    int natts = r->slot->tts_tupleDescriptor->natts;
    memcpy(r->slot->tts_values, in->tts_values, natts * sizeof(Datum));
    memcpy(r->slot->tts_isnull, in->tts_isnull, natts * sizeof(bool));
    ExecStoreVirtualTuple(r->slot);
    ExecMaterializeSlot(r->slot);
    table_tuple_insert(r->target, r->slot, r->cid, 0, r->bistate);
    r->rows++;
    return true;
}

void stage_startup(DestReceiver* self, int, TupleDesc desc) {
    decoupled::check_staged_row_type(desc, reinterpret_cast<StageReceiver*>(self)->target);
}

void stage_shutdown(DestReceiver*) {}
void stage_destroy(DestReceiver*) {}

// Settings that change a row's text (its key), a stable function's result
// or how the owner's code parses the SQL it builds: every computation of a
// view uses the same ones, in a replica and in verify()'s caller's session
// alike.  TimeZone and DateStyle's field order are the view's own
// (view_settings, below); DateStyle's output style stays ISO.  The caller
// of verify() chose the rest of its session's settings: one that makes
// `'\'` end a literal (standard_conforming_strings = off) turned an
// owner's correctly quoted dynamic SQL into the caller's SQL, run as the
// owner.
const char* const kPinnedSettings[][2] = {
    {"search_path", "pg_catalog, pg_temp"}, {"IntervalStyle", "postgres"},
    {"extra_float_digits", "1"},            {"bytea_output", "hex"},
    {"lc_monetary", "C"},                   {"lc_time", "C"},
    {"lc_numeric", "C"},                    {"xmlbinary", "base64"},
    {"array_nulls", "on"},                  {"xmloption", "content"},
    {"standard_conforming_strings", "on"},  {"backslash_quote", "safe_encoding"},
    {"escape_string_warning", "on"},        {"transform_null_equals", "off"},
    {"quote_all_identifiers", "off"},       {"gin_fuzzy_search_limit", "0"},
    {"plpgsql.check_asserts", "on"},        {"plpgsql.extra_errors", "none"},
    {"plpgsql.extra_warnings", "none"},     {"plpgsql.print_strict_params", "off"},
};

// A view's TimeZone, DateStyle and text search configuration (which
// to_tsvector(text) and the like read): its creator's session's when it was
// created (definition->'settings'), so that `at::date`, date_trunc() or
// `s::date` of '03/04/2026' give what they gave the creator — as
// everywhere in PostgreSQL, where a session's settings decide them — and
// the same at every step, on every replica, and in verify().  A view made
// before they were recorded keeps UTC and ISO, YMD.  Looked up once per
// written plan and backend; a catalog change (a plan's OID reused after a
// drop) empties the cache.
struct ViewSettings {
    Oid plan;  // the hash key
    char timezone[NAMEDATALEN * 2];
    char datestyle[32];
    char ts_config[NAMEDATALEN * 2 + 8];  // empty: made before it was recorded
};

HTAB* view_settings_cache = nullptr;
uint64 view_settings_epoch = 0;

const ViewSettings* view_settings(Oid plan) {
    uint64 epoch = pg_atomic_read_u64(&decoupled::shared_state()->catalog_epoch);
    if (view_settings_cache == nullptr || epoch != view_settings_epoch) {
        if (view_settings_cache != nullptr) hash_destroy(view_settings_cache);
        HASHCTL ctl;
        memset(&ctl, 0, sizeof(ctl));
        ctl.keysize = sizeof(Oid);
        ctl.entrysize = sizeof(ViewSettings);
        ctl.hcxt = TopMemoryContext;
        view_settings_cache =
            hash_create("pg_decoupled view settings", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
        view_settings_epoch = epoch;
    }
    auto* found = static_cast<ViewSettings*>(hash_search(view_settings_cache, &plan, HASH_FIND, nullptr));
    if (found != nullptr) return found;
    ViewSettings looked{plan, "UTC", "ISO, YMD", ""};
    static const Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(plan)};
    SPI_connect();
    if (SPI_execute_with_args(
            "SELECT o.definition->'settings'->>'TimeZone', "
            "       'ISO, ' || pg_catalog.split_part(o.definition->'settings'->>'DateStyle', ', ', 2), "
            "       o.definition->'settings'->>'default_text_search_config' "
            "  FROM decoupled.catalog_objects o "
            " WHERE o.kind = 'materialized view' AND o.definition->>'plan' = $1::pg_catalog.text "
            " ORDER BY o.lifetime_id DESC LIMIT 1",
            1, const_cast<Oid*>(types), args, nullptr, true, 1) == SPI_OK_SELECT &&
        SPI_processed == 1) {
        char* timezone = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        char* datestyle = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
        if (timezone != nullptr && datestyle != nullptr && strlen(datestyle) > strlen("ISO, ")) {
            strlcpy(looked.timezone, timezone, sizeof(looked.timezone));
            strlcpy(looked.datestyle, datestyle, sizeof(looked.datestyle));
        }
        char* ts_config = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
        if (ts_config != nullptr) strlcpy(looked.ts_config, ts_config, sizeof(looked.ts_config));
    }
    SPI_finish();
    auto* entry = static_cast<ViewSettings*>(hash_search(view_settings_cache, &plan, HASH_ENTER, nullptr));
    *entry = looked;
    return entry;
}

}  // namespace

// decoupled._mv_check_sql(sql text) -> text: the one SELECT in sql.
Datum decoupled_mv_check_sql(PG_FUNCTION_ARGS) {
    char* sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
    List* stmts = raw_parser(sql, RAW_PARSE_DEFAULT);
    if (list_length(stmts) != 1) not_a_select("It holds a number of statements other than one.");
    RawStmt* raw = linitial_node(RawStmt, stmts);
    if (!IsA(raw->stmt, SelectStmt)) not_a_select("It is not a SELECT, VALUES or WITH query.");
    if (reinterpret_cast<SelectStmt*>(raw->stmt)->intoClause)
        not_a_select("SELECT INTO creates a table.");
    int len = raw->stmt_len > 0 ? raw->stmt_len : static_cast<int>(strlen(sql)) - raw->stmt_location;
    PG_RETURN_TEXT_P(cstring_to_text_with_len(sql + raw->stmt_location, len));
}

// decoupled._mv_relations(plan regclass) -> oid[]
Datum decoupled_mv_relations(PG_FUNCTION_ARGS) {
    Oid plan = PG_GETARG_OID(0);
    if (get_rel_relkind(plan) != RELKIND_VIEW) elog(ERROR, "written plan %u is not a view", plan);
    Walk w{NIL, InvalidOid};
    walk_view(plan, &w);

    int n = list_length(w.relations);
    Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * (n > 0 ? n : 1)));
    int i = 0;
    ListCell* lc;
    foreach (lc, w.relations) elems[i++] = ObjectIdGetDatum(lfirst_oid(lc));
    PG_RETURN_ARRAYTYPE_P(construct_array(elems, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

// ---------------------------------------------------------------------------
// Running SQL as a view's owner, at a time (shared with delta_plan.cpp)
// ---------------------------------------------------------------------------

// As REFRESH MATERIALIZED VIEW does: the owner's rights, no escape from
// them, and settings that make every computation agree.
void decoupled::enter_owner(Oid plan, Oid owner, int64 ts, OwnerScope* scope) {
    const ViewSettings* own = view_settings(plan);
    GetUserIdAndSecContext(&scope->saved_user, &scope->saved_context);
    // The owner first: the time below is then the owner's own, which reads
    // in its security-restricted operation see (as_of_applies).
    SetUserIdAndSecContext(owner, scope->saved_context | SECURITY_RESTRICTED_OPERATION);
    scope->guc_level = NewGUCNestLevel();
    // A setting that already has its value is left alone (a replica's
    // session has them all): whatever the owner's code changes inside the
    // nest level goes back at leave_owner all the same.
    for (const auto& s : kPinnedSettings) {
        const char* now = GetConfigOption(s[0], true, false);
        if (now != nullptr && strcmp(now, s[1]) == 0) continue;
        (void)set_config_option(s[0], s[1], PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                                false);
    }
    (void)set_config_option("TimeZone", own->timezone, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                            true, 0, false);
    (void)set_config_option("DateStyle", own->datestyle, PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    if (own->ts_config[0] != '\0')
        (void)set_config_option("default_text_search_config", own->ts_config, PGC_USERSET,
                                PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    char ts_text[32];
    snprintf(ts_text, sizeof(ts_text), INT64_FORMAT, ts);
    (void)set_config_option("decoupled.as_of", ts_text, PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    // No JIT: a computation reads its inputs' history through a UNION ALL
    // whose estimates run high (the table's own branch counts in full,
    // though its filter is false AS OF a time), so JIT's cost thresholds
    // fired and compiled, with inlining and optimization, for 150–250 ms a
    // query that ran in 400 ms (a LEFT JOIN of 1,000,000 rows recomputed).
    (void)set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
    // A replica's step never waits long for a lock on what the view reads:
    // a role that may lock one of its tables (LOCK TABLE ... IN ACCESS
    // EXCLUSIVE MODE, with UPDATE on it) held up every object of the
    // cluster behind that view's step until decoupled.step_timeout.  The
    // step fails with 55P03 instead, and the replica tries that view again
    // shortly, as it does for busy storage (bgworker/replica_engine.cpp).
    if (decoupled::in_replica_step())
        (void)set_config_option("lock_timeout", decoupled::kStepLockTimeout, PGC_USERSET,
                                PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    decoupled::mark_owner_errors(&scope->errors);
}

// Every setting the computation changed goes back, set_config(..., false)
// too, as after REFRESH MATERIALIZED VIEW: the owner's code must leave no
// trace in the replica's or verify()'s caller's session.
// A step that reads a few rows through indexes: starting parallel workers
// would cost more than the whole step.
void decoupled::serial_only() {
    (void)set_config_option("max_parallel_workers_per_gather", "0", PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
}

void decoupled::leave_owner(OwnerScope* scope) {
    decoupled::unmark_owner_errors(&scope->errors);
    SetUserIdAndSecContext(scope->saved_user, scope->saved_context);
    AtEOXact_GUC(false, scope->guc_level);
}

// Runs `sql` (built by the caller while inside the scope, if it deparses)
// with $1 = ts and adds every row to `target`: a scratch relation (in
// memory, scratch.hpp) or a private table of the extension with no
// triggers or indexes, opened before the switch to the owner, so the owner
// needs no right on it.  With `keep`, from a plan kept for the text
// (kept_statements.hpp): only for texts a view runs at every step, never
// for one naming this step's touched groups.
// Whether a filter the extension built names literals: a single quote
// outside a double-quoted identifier (a key column may be called "a'b").
// The extension's filters hold no comments or dollar quotes, and the first
// quote outside an identifier opens a literal.
bool decoupled::names_literals(const char* filter) {
    bool in_identifier = false;
    for (const char* c = filter; *c != '\0'; ++c) {
        if (*c == '"')
            in_identifier = !in_identifier;  // "" inside one closes and reopens it
        else if (*c == '\'' && !in_identifier)
            return true;
    }
    return false;
}

uint64 decoupled::stage_rows(Relation target, const char* sql, int64 ts, bool keep,
                             Oid read_scratch) {
    uint64 rows = 0;
    StageReceiver table;
    DestReceiver* dest;
    if (decoupled::is_scratch(RelationGetRelid(target))) {
        dest = decoupled::scratch_receiver(target, &rows);
    } else {
        // The receiver inserts while the query may run in parallel
        // workers; a parallel operation cannot assign the transaction id
        // the first insert would, so assign it before.
        (void)GetCurrentTransactionId();
        memset(&table, 0, sizeof(table));
        table.pub.receiveSlot = stage_receive;
        table.pub.rStartup = stage_startup;
        table.pub.rShutdown = stage_shutdown;
        table.pub.rDestroy = stage_destroy;
        table.pub.mydest = DestNone;
        table.target = target;
        table.slot = table_slot_create(target, nullptr);
        table.bistate = GetBulkInsertState();
        table.cid = GetCurrentCommandId(true);
        dest = &table.pub;
    }

    SPI_connect();
    if (OidIsValid(read_scratch)) decoupled::expose_scratch(read_scratch);
    Oid types[1] = {INT8OID};
    Datum time = Int64GetDatum(ts);
    int rc = decoupled::execute_into(decoupled::statement_plan(sql, 1, types, keep), &time, INT8OID,
                                     dest);
    // A SELECT into a receiver of our own reports SPI_OK_UTILITY.
    if (rc != SPI_OK_SELECT && rc != SPI_OK_UTILITY) elog(ERROR, "could not stage %s: %d", sql, rc);
    SPI_finish();

    if (dest != &table.pub) return rows;
    FreeBulkInsertState(table.bistate);
    ExecDropSingleTupleTableSlot(table.slot);
    return table.rows;
}

char* decoupled::locked_relation_name(Oid relid) {
    LockRelationOid(relid, AccessShareLock);
    char* name = get_rel_name(relid);
    char* nsp = name ? get_namespace_name(get_rel_namespace(relid)) : nullptr;
    if (name == nullptr || nsp == nullptr)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("relation with OID %u no longer exists", relid),
                        errdetail("The object it belongs to was dropped meanwhile.")));
    return quote_qualified_identifier(nsp, name);
}

// A staged row's key is its text as history's writers print it, in UTC:
// the step computes in its view's TimeZone (enter_owner), and a key printed
// there would never pair with the copy the append finds.
// (A catalog not yet updated to 1.1 has no _row_text, and its views
// compute in UTC: record_out prints the same there.)
char* decoupled::staging_sql(const char* diff, const char* cols, const char* from) {
    Oid record_type = RECORDOID;
    bool has_row_text = OidIsValid(LookupFuncName(
        list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup("_row_text"))), 1,
        &record_type, true));
    const char* row_text =
        has_row_text ? "decoupled._row_text" : "pg_catalog.textin(pg_catalog.record_out";
    const char* close = has_row_text ? "" : ")";
    return psprintf(
        "SELECT $1::pg_catalog.int8, %s::pg_catalog.int8, "
        "       %s(ROW(%s))%s, "
        "       pg_catalog.hashtext(%s(ROW(%s))%s), %s "
        "  FROM %s",
        diff, row_text, cols, close, row_text, cols, close, cols, from);
}

// decoupled._row_text(record) -> text: record_out in UTC, whatever the
// session's TimeZone (the only setting a row's text depends on that a
// computation changes: the output styles stay pinned).
Datum decoupled_row_text(PG_FUNCTION_ARGS) {
    static pg_tz* utc = nullptr;
    if (utc == nullptr) utc = pg_tzset("UTC");
    pg_tz* saved = session_timezone;
    session_timezone = utc;
    volatile Datum text = 0;
    PG_TRY();
    { text = record_out(fcinfo); }  // its cache lives in this call's fn_extra
    PG_FINALLY();
    { session_timezone = saved; }
    PG_END_TRY();
    PG_RETURN_TEXT_P(cstring_to_text(DatumGetCString(text)));
}

// decoupled._compared_by_value(type oid, collation oid) -> boolean: whether
// verify() compares a view's column of this type and collation by the
// type's own equality rather than by its text.  Where equal values may
// print differently — numeric 1.0 and 1.00, float 0 and -0, interval
// '1 day' and '24 hours', jsonb, bpchar's trailing spaces, a
// nondeterministic collation, records, arrays and ranges of such values —
// a view may keep either of the equal values of a group or an extreme, as
// PostgreSQL's own GROUP BY, DISTINCT and min/max may; elsewhere equal
// means identical, and texts compare as strictly.  A type without an
// equality is compared by text.
Datum decoupled_compared_by_value(PG_FUNCTION_ARGS) {
    Oid type = PG_GETARG_OID(0);
    Oid collation = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);
    if (!OidIsValid(collation)) collation = get_typcollation(type);  // the type's own
    TypeCacheEntry* entry = lookup_type_cache(type, TYPECACHE_EQ_OPR);
    if (!OidIsValid(entry->eq_opr)) PG_RETURN_BOOL(false);
    if (OidIsValid(collation) && !get_collation_isdeterministic(collation)) PG_RETURN_BOOL(true);
    // bpchar's equality ignores trailing spaces, which its values keep
    // (its operator class says equal images, for its indexes' sake).
    Oid base = getBaseType(type);
    Oid element = get_element_type(base);
    if (base == BPCHAROID || (OidIsValid(element) && getBaseType(element) == BPCHAROID))
        PG_RETURN_BOOL(true);
    PG_RETURN_BOOL(!decoupled::delta::equal_means_identical(type, collation));
}

// decoupled._stage_plan(plan regclass, owner oid, ts bigint, target regclass,
//                       filter text DEFAULT NULL) -> bigint
// The plan at ts, as its owner, into target as (ts, +1, row key, row hash,
// row...); with `filter`, only its rows that pass it (a condition on the
// view's columns, built by the extension: the touched groups).
Datum decoupled_stage_plan(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 4; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "_stage_plan: argument %d must not be null", i + 1);
    Oid plan = PG_GETARG_OID(0);
    Oid owner = PG_GETARG_OID(1);
    int64 ts = PG_GETARG_INT64(2);
    Oid target_oid = PG_GETARG_OID(3);
    char* filter = PG_ARGISNULL(4) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(4));

    char* plan_name = decoupled::locked_relation_name(plan);
    char* sql = decoupled::staging_sql(
        "1", "d.*",
        psprintf("%s d%s%s", plan_name, filter ? " WHERE " : "", filter ? filter : ""));

    Relation target = table_open(target_oid, RowExclusiveLock);
    decoupled::OwnerScope scope;
    decoupled::enter_owner(plan, owner, ts, &scope);
    if (filter) decoupled::serial_only();
    // With a filter (this step's touched groups) the text is new each time.
    uint64 rows = decoupled::stage_rows(target, sql, ts, filter == nullptr);
    decoupled::leave_owner(&scope);
    table_close(target, NoLock);
    PG_RETURN_INT64(static_cast<int64>(rows));
}
