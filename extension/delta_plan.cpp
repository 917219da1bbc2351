// Incremental maintenance of materialized views (brief C13).
//
// The written plan's query tree is classified once, at creation
// (_mv_strategy, rules in core/strategy), and each step at a time t then
// derives what it runs from the same tree:
//
//   linear   the plan with its one input replaced by the input's changes
//            at t (decoupled_storage.c<id>_delta: its rows inserted at t
//            with mz_diff +1, retracted at t with -1) and mz_diff carried to
//            the output: the view's difference at t.       _stage_delta
//   groups   the plan's GROUP BY keys over the same changes: the groups
//            touched at t, as a condition on the view's key columns.  The
//            caller then computes the plan at t for those groups only (the
//            condition is pushed down to the input, where an arrangement —
//            an index on the keys in the input's storage — answers it) and
//            replaces the view's rows of those groups.   _touched_groups
//
// The derived query is deparsed (ruleutils, as for a view's definition) and
// run as the view's owner, exactly like the full computation
// (written_plan.hpp): the owner's rights, the pinned settings, and the
// delta view's gate checks that the owner may still read the input.
//
// No C++ objects live here: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

#include <cstdlib>
#include <cstring>

#include "core/strategy.hpp"
#include "written_plan.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_mv_strategy);
PG_FUNCTION_INFO_V1(decoupled_stage_delta);
PG_FUNCTION_INFO_V1(decoupled_touched_groups);
PG_FUNCTION_INFO_V1(decoupled_recompute_in_full);
}

namespace {

// ---------------------------------------------------------------------------
// The plan's query and its one input
// ---------------------------------------------------------------------------

Query* plan_query(Oid plan) {
    Relation rel = table_open(plan, AccessShareLock);
    Query* q = static_cast<Query*>(copyObjectImpl(get_view_query(rel)));
    table_close(rel, AccessShareLock);
    return q;
}

// The one relation a query reads, when it reads exactly one through one
// range table entry, with nothing but a projection and a condition: the
// storage relation of a collection (decoupled_storage.c<id>_<part>) or, for
// the read rewrite's table branch, a plain table.
Oid single_leaf(Query* q) {
    if (q == nullptr || q->setOperations != nullptr || q->jointree == nullptr ||
        list_length(q->jointree->fromlist) != 1 ||
        !IsA(linitial(q->jointree->fromlist), RangeTblRef) || q->hasAggs ||
        q->groupClause != NIL || q->hasSubLinks || q->limitCount || q->limitOffset ||
        q->distinctClause != NIL || q->hasTargetSRFs || q->hasWindowFuncs || q->cteList != NIL)
        return InvalidOid;
    RangeTblEntry* rte =
        rt_fetch(castNode(RangeTblRef, linitial(q->jointree->fromlist))->rtindex, q->rtable);
    return rte->rtekind == RTE_RELATION ? rte->relid : InvalidOid;
}

// The id of collection storage relation `rel` if it is that collection's
// `part`, else 0.
int64 storage_id(Oid rel, const char* part) {
    if (!OidIsValid(rel) || get_rel_namespace(rel) != get_namespace_oid("decoupled_storage", true))
        return 0;
    const char* name = get_rel_name(rel);
    long id = 0;
    char found[NAMEDATALEN];
    if (name == nullptr || sscanf(name, "c%ld_%63s", &id, found) != 2 || strcmp(found, part) != 0)
        return 0;
    return id;
}

// The collection a range table entry reads as a whole, or 0: the public
// view of a source or materialized view (its latest rows UNION ALL its
// history at decoupled.as_of), or the read rewrite of a registered table
// (the table itself UNION ALL its history).  Nothing else qualifies — a
// subquery or ordinary view that filters, joins or aggregates a collection
// is not the collection.
int64 collection_read(RangeTblEntry* rte) {
    Query* q = nullptr;
    bool is_view = false;
    if (rte->rtekind == RTE_SUBQUERY) {
        q = rte->subquery;
    } else if (rte->rtekind == RTE_RELATION && get_rel_relkind(rte->relid) == RELKIND_VIEW) {
        Relation view = table_open(rte->relid, AccessShareLock);
        q = static_cast<Query*>(copyObjectImpl(get_view_query(view)));
        table_close(view, AccessShareLock);
        is_view = true;
    }
    if (q == nullptr || q->jointree == nullptr || q->jointree->quals != nullptr) return 0;
    auto* op = reinterpret_cast<SetOperationStmt*>(q->setOperations);
    if (op == nullptr || !IsA(op, SetOperationStmt) || op->op != SETOP_UNION || !op->all ||
        !IsA(op->larg, RangeTblRef) || !IsA(op->rarg, RangeTblRef))
        return 0;
    RangeTblEntry* left = rt_fetch(castNode(RangeTblRef, op->larg)->rtindex, q->rtable);
    RangeTblEntry* right = rt_fetch(castNode(RangeTblRef, op->rarg)->rtindex, q->rtable);
    if (left->rtekind != RTE_SUBQUERY || right->rtekind != RTE_SUBQUERY) return 0;
    if (right->subquery->jointree == nullptr || right->subquery->jointree->quals != nullptr)
        return 0;
    int64 id = storage_id(single_leaf(right->subquery), "history");
    if (id == 0) return 0;
    Oid latest = single_leaf(left->subquery);
    if (is_view) return storage_id(latest, "cur") == id ? id : 0;
    return OidIsValid(latest) && get_rel_relkind(latest) == RELKIND_RELATION &&
                   storage_id(latest, "cur") == 0
               ? id
               : 0;
}

Oid operator_namespace(Oid op) {
    HeapTuple tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(op));
    if (!HeapTupleIsValid(tuple)) return InvalidOid;
    Oid ns = reinterpret_cast<Form_pg_operator>(GETSTRUCT(tuple))->oprnamespace;
    ReleaseSysCache(tuple);
    return ns;
}

// Describes the query for the classification; `input_rti` receives the
// range table index of its one input when there is one.
decoupled::QueryShape describe(Query* q, int* input_rti, int64* input_id) {
    decoupled::QueryShape s;
    *input_rti = 0;
    *input_id = 0;
    s.sublinks = q->hasSubLinks;
    s.ctes = q->cteList != NIL;
    s.set_operations = q->setOperations != nullptr;
    s.window_functions = q->hasWindowFuncs;
    s.limit = q->limitCount != nullptr || q->limitOffset != nullptr;
    s.distinct = q->distinctClause != NIL;
    s.set_returning = q->hasTargetSRFs;
    s.aggregates = q->hasAggs;
    s.group_by = q->groupClause != NIL;
    s.grouping_sets = q->groupingSets != NIL;

    // What FROM reads: one relation (or the read rewrite's subquery), not a
    // join; the view rule's OLD and NEW entries are never in FROM.
    List* from = q->jointree ? q->jointree->fromlist : NIL;
    if (list_length(from) != 1 || !IsA(linitial(from), RangeTblRef)) {
        s.joins = list_length(from) > 1 || (from != NIL && IsA(linitial(from), JoinExpr));
        s.inputs = from == NIL ? 0 : 2;
        return s;
    }
    int rti = castNode(RangeTblRef, linitial(from))->rtindex;
    RangeTblEntry* rte = rt_fetch(rti, q->rtable);
    int64 id = collection_read(rte);
    if (id > 0) {
        s.inputs = 1;
        *input_rti = rti;
        *input_id = id;
    } else if (rte->rtekind == RTE_SUBQUERY) {
        s.from_subquery = true;
    } else if (rte->rtekind == RTE_RELATION && get_rel_relkind(rte->relid) == RELKIND_VIEW) {
        s.inputs = 1;  // an ordinary view: whatever it reads, not incrementally
        s.through_view = true;
    }

    // Every GROUP BY key must be an output column with a built-in equality:
    // the view's rows of a group are found by it.
    ListCell* lc;
    foreach (lc, q->groupClause) {
        auto* clause = lfirst_node(SortGroupClause, lc);
        TargetEntry* te = get_sortgroupclause_tle(clause, q->targetList);
        if (te->resjunk) s.keys_are_outputs = false;
        TypeCacheEntry* type = lookup_type_cache(exprType(reinterpret_cast<Node*>(te->expr)),
                                                 TYPECACHE_EQ_OPR);
        if (!OidIsValid(type->eq_opr) || operator_namespace(type->eq_opr) != PG_CATALOG_NAMESPACE)
            s.keys_comparable = false;
    }
    return s;
}

// ---------------------------------------------------------------------------
// Deriving the step's query
// ---------------------------------------------------------------------------

Oid delta_view_of(int64 input) {
    char* name = psprintf("c" INT64_FORMAT "_delta", input);
    Oid rel = get_relname_relid(name, get_namespace_oid("decoupled_storage", false));
    if (!OidIsValid(rel))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("collection " INT64_FORMAT " has no change view", input)));
    return rel;
}

// Replaces the input's entry with the input's changes at decoupled.as_of:
// the same columns in the same order, and mz_diff after them.  Returns the
// number of the input's own columns.
int read_changes(Query* q, int rti, int64 input) {
    RangeTblEntry* rte = rt_fetch(rti, q->rtable);
    int ncols = list_length(rte->eref->colnames);
    List* colnames = list_copy(rte->eref->colnames);
    colnames = lappend(colnames, makeString(pstrdup("mz_diff")));
    rte->rtekind = RTE_RELATION;
    rte->relid = delta_view_of(input);
    rte->relkind = RELKIND_VIEW;
    rte->rellockmode = AccessShareLock;
    rte->subquery = nullptr;
    rte->security_barrier = false;
    rte->inh = false;
    rte->tablesample = nullptr;
    rte->requiredPerms = ACL_SELECT;
    rte->checkAsUser = InvalidOid;
    rte->selectedCols = nullptr;
    rte->insertedCols = nullptr;
    rte->updatedCols = nullptr;
    rte->extraUpdatedCols = nullptr;
    rte->eref = makeAlias(rte->eref->aliasname, colnames);
    return ncols;
}

// The number of the plan's output columns (those of the view).
int output_columns(Query* q) {
    int n = 0;
    ListCell* lc;
    foreach (lc, q->targetList)
        if (!lfirst_node(TargetEntry, lc)->resjunk) n++;
    return n;
}

// "x1, x2, ..., xn" with an optional prefix per name.
char* positional_names(int n, const char* prefix) {
    StringInfoData buf;
    initStringInfo(&buf);
    for (int i = 1; i <= n; ++i) appendStringInfo(&buf, "%s%sx%d", i > 1 ? ", " : "", prefix, i);
    return buf.data;
}

struct Prepared {
    Oid plan;
    Oid owner;
    int64 ts;
    int64 input;
};

Prepared prepared_args(FunctionCallInfo fcinfo) {
    for (int i = 0; i < 4; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "argument %d must not be null", i + 1);
    return {PG_GETARG_OID(0), PG_GETARG_OID(1), PG_GETARG_INT64(2), PG_GETARG_INT64(3)};
}

int input_rti_of(Query* q, int64 expected_input) {
    int rti;
    int64 input;
    decoupled::QueryShape shape = describe(q, &rti, &input);
    decoupled::Strategy strategy = decoupled::classify(shape);
    if (strategy.kind == decoupled::StrategyKind::Recompute || input != expected_input)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the written plan is no longer incremental over collection "
                               INT64_FORMAT, expected_input)));
    return rti;
}

// Storage is written with the extension's rights: an index on it may only
// evaluate built-in functions.
bool not_builtin(Oid func, void*) { return get_func_namespace(func) != PG_CATALOG_NAMESPACE; }

// PostgreSQL's walkers take an untyped function pointer; going through
// void (*)() keeps the cast explicit without a function-type warning.
using Walker = bool (*)();
Walker as_walker(bool (*fn)(Node*, void*)) {
    return reinterpret_cast<Walker>(reinterpret_cast<void (*)()>(fn));
}

bool calls_other_than_builtins(Node* node, void* context) {
    if (node == nullptr) return false;
    if (check_functions_in_node(node, not_builtin, context)) return true;
    return expression_tree_walker(node, as_walker(calls_other_than_builtins), context);
}

// A SQL literal of `value` as a value of `type`.
char* typed_literal(const char* value, Oid type) {
    return psprintf("%s::%s", quote_literal_cstr(value), format_type_be_qualified(type));
}

}  // namespace

// decoupled._mv_strategy(plan regclass, OUT strategy text, OUT reason text,
//                        OUT input bigint, OUT key_expressions text[])
// How the view is maintained (strategy 'linear', 'groups' or 'recompute'),
// why not incrementally, its one input, and — for 'groups' — its GROUP BY
// keys as expressions over the input's columns (for the arrangement).
Datum decoupled_mv_strategy(PG_FUNCTION_ARGS) {
    Oid plan = PG_GETARG_OID(0);
    Query* q = plan_query(plan);
    int rti;
    int64 input;
    decoupled::QueryShape shape = describe(q, &rti, &input);
    decoupled::Strategy strategy = decoupled::classify(shape);

    Datum values[4];
    bool nulls[4] = {false, false, false, false};
    const char* kind = strategy.kind == decoupled::StrategyKind::Linear   ? "linear"
                       : strategy.kind == decoupled::StrategyKind::Groups ? "groups"
                                                                          : "recompute";
    values[0] = CStringGetTextDatum(kind);
    values[1] = CStringGetTextDatum(strategy.reason.c_str());
    nulls[1] = strategy.reason.empty();
    values[2] = Int64GetDatum(input);
    nulls[2] = strategy.kind == decoupled::StrategyKind::Recompute;
    nulls[3] = true;
    if (strategy.kind == decoupled::StrategyKind::Groups) {
        // The keys over the input's own columns: its history view has them,
        // in order, so a Var of the input reads the same there.
        char* history = psprintf("c" INT64_FORMAT "_history", input);
        Oid history_rel = get_relname_relid(history, get_namespace_oid("decoupled_storage", false));
        List* context = deparse_context_for(history, history_rel);
        int n = list_length(q->groupClause);
        Datum* exprs = static_cast<Datum*>(palloc(sizeof(Datum) * n));
        int i = 0;
        bool builtin = true;
        ListCell* lc;
        foreach (lc, q->groupClause) {
            TargetEntry* te = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc),
                                                      q->targetList);
            Node* expr = static_cast<Node*>(copyObjectImpl(te->expr));
            builtin = builtin && !calls_other_than_builtins(expr, nullptr);
            ChangeVarNodes(expr, rti, 1, 0);
            exprs[i++] = CStringGetTextDatum(deparse_expression(expr, context, false, false));
        }
        values[3] = PointerGetDatum(construct_array(exprs, n, TEXTOID, -1, false, TYPALIGN_INT));
        nulls[3] = !builtin;
    }
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "_mv_strategy must return a composite type");
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

// decoupled._stage_delta(plan regclass, owner oid, ts bigint, input bigint,
//                        target regclass) -> bigint
// A linear view's difference at ts, as its owner, into target as
// (ts, diff, row key, row hash, row...).
Datum decoupled_stage_delta(PG_FUNCTION_ARGS) {
    Prepared p = prepared_args(fcinfo);
    if (PG_ARGISNULL(4)) elog(ERROR, "target must not be null");
    Oid target_oid = PG_GETARG_OID(4);

    Relation target = table_open(target_oid, RowExclusiveLock);
    decoupled::OwnerScope scope;
    decoupled::enter_owner(p.owner, p.ts, &scope);
    // Derived and deparsed inside the owner's scope: names are printed for
    // the pinned search_path the query then runs with.
    Query* q = plan_query(p.plan);
    int rti = input_rti_of(q, p.input);
    int ncols = read_changes(q, rti, p.input);
    int nout = output_columns(q);
    q->targetList = lappend(
        q->targetList,
        makeTargetEntry(reinterpret_cast<Expr*>(makeVar(rti, ncols + 1, INT8OID, -1, InvalidOid, 0)),
                        list_length(q->targetList) + 1, pstrdup("mz_diff"), false));
    q->sortClause = NIL;
    char* cols = positional_names(nout, "d.");
    char* sql = psprintf(
        "SELECT " INT64_FORMAT "::pg_catalog.int8, d.mz_diff, "
        "       pg_catalog.textin(pg_catalog.record_out(ROW(%s))), "
        "       pg_catalog.hashtext(pg_catalog.textin(pg_catalog.record_out(ROW(%s)))), %s "
        "  FROM (%s) d(%s, mz_diff)",
        p.ts, cols, cols, cols, pg_get_querydef(q, false), positional_names(nout, ""));
    uint64 rows = decoupled::stage_rows(target, sql);
    decoupled::leave_owner(&scope);
    table_close(target, NoLock);
    PG_RETURN_INT64(static_cast<int64>(rows));
}

// decoupled._touched_groups(plan regclass, owner oid, ts bigint, input bigint,
//                           OUT groups bigint, OUT filter text)
// The groups of a 'groups' view that the input's changes at ts touch, and
// a condition on the view's key columns that selects exactly them (NULL
// when none is touched).
Datum decoupled_touched_groups(PG_FUNCTION_ARGS) {
    Prepared p = prepared_args(fcinfo);
    MemoryContext caller = CurrentMemoryContext;

    decoupled::OwnerScope scope;
    decoupled::enter_owner(p.owner, p.ts, &scope);
    Query* q = plan_query(p.plan);
    int rti = input_rti_of(q, p.input);

    // The keys' names and types in the view, in GROUP BY order.
    int nkeys = list_length(q->groupClause);
    char** names = static_cast<char**>(palloc(sizeof(char*) * nkeys));
    Oid* types = static_cast<Oid*>(palloc(sizeof(Oid) * nkeys));
    List* keys = NIL;
    int k = 0;
    ListCell* lc;
    foreach (lc, q->groupClause) {
        TargetEntry* te = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), q->targetList);
        names[k] = pstrdup(quote_identifier(te->resname));
        types[k] = exprType(reinterpret_cast<Node*>(te->expr));
        TargetEntry* key = flatCopyTargetEntry(te);
        key->resno = ++k;
        key->ressortgroupref = 0;
        key->resjunk = false;
        keys = lappend(keys, key);
    }
    read_changes(q, rti, p.input);
    q->targetList = keys;
    q->groupClause = NIL;
    q->havingQual = nullptr;
    q->hasAggs = false;
    q->sortClause = NIL;
    char* sql = psprintf("SELECT DISTINCT * FROM (%s) k", pg_get_querydef(q, false));

    SPI_connect();
    if (SPI_execute(sql, true, 0) != SPI_OK_SELECT) elog(ERROR, "could not read the touched groups");
    uint64 groups = SPI_processed;
    // Non-null single keys become one `= ANY (array)` (an index probe);
    // other tuples are compared column by column, NULL matching NULL.
    StringInfoData any, rows, nulls_part;
    initStringInfo(&any);
    initStringInfo(&rows);
    initStringInfo(&nulls_part);
    for (uint64 r = 0; r < groups; ++r) {
        HeapTuple tuple = SPI_tuptable->vals[r];
        bool has_null = false;
        for (int c = 0; c < nkeys; ++c) has_null |= SPI_getvalue(tuple, SPI_tuptable->tupdesc, c + 1) == nullptr;
        if (!has_null && nkeys == 1) {
            appendStringInfo(&any, "%s%s", any.len ? ", " : "",
                             quote_literal_cstr(SPI_getvalue(tuple, SPI_tuptable->tupdesc, 1)));
            continue;
        }
        StringInfo out = has_null ? &nulls_part : &rows;
        appendStringInfoString(out, out->len ? " OR (" : "(");
        for (int c = 0; c < nkeys; ++c) {
            char* value = SPI_getvalue(tuple, SPI_tuptable->tupdesc, c + 1);
            if (c > 0) appendStringInfoString(out, " AND ");
            if (value == nullptr)
                appendStringInfo(out, "%s IS NULL", names[c]);
            else
                appendStringInfo(out, "%s OPERATOR(pg_catalog.=) %s", names[c],
                                 typed_literal(value, types[c]));
        }
        appendStringInfoChar(out, ')');
    }
    SPI_finish();
    decoupled::leave_owner(&scope);

    StringInfoData filter;
    initStringInfo(&filter);
    if (any.len > 0)
        appendStringInfo(&filter, "%s OPERATOR(pg_catalog.=) ANY (ARRAY[%s]::%s[])", names[0],
                         any.data, format_type_be_qualified(types[0]));
    if (rows.len > 0) appendStringInfo(&filter, "%s%s", filter.len ? " OR " : "", rows.data);
    if (nulls_part.len > 0)
        appendStringInfo(&filter, "%s%s", filter.len ? " OR " : "", nulls_part.data);

    MemoryContextSwitchTo(caller);
    Datum values[2] = {Int64GetDatum(static_cast<int64>(groups)), 0};
    bool isnull[2] = {false, filter.len == 0};
    if (filter.len > 0) values[1] = CStringGetTextDatum(psprintf("(%s)", filter.data));
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "_touched_groups must return a composite type");
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, isnull)));
}

// decoupled._recompute_in_full(touched bigint, view_rows float8) -> boolean
Datum decoupled_recompute_in_full(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(decoupled::recompute_touched_groups_in_full(PG_GETARG_INT64(0),
                                                               PG_GETARG_FLOAT8(1)));
}
