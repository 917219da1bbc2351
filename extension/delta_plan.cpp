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
#include "access/nbtree.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/bitmapset.h"
#include "nodes/pathnodes.h"
#include "pgstat.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "parser/analyze.h"
#include "parser/parse_func.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/strategy.hpp"
#include "delta_plan.hpp"
#include "domain_types.hpp"
#include "read_rewrite.hpp"
#include "gucs.hpp"
#include "kept_statements.hpp"
#include "scratch.hpp"
#include "step_texts.hpp"
#include "storage_names.hpp"
#include "not_decoded.hpp"
#include "written_plan.hpp"

using namespace decoupled::delta;

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_mv_strategy);
PG_FUNCTION_INFO_V1(decoupled_stage_delta);
PG_FUNCTION_INFO_V1(decoupled_touched_groups);
PG_FUNCTION_INFO_V1(decoupled_recompute_in_full);
PG_FUNCTION_INFO_V1(decoupled_hashable);
PG_FUNCTION_INFO_V1(decoupled_estimated_rows);
PG_FUNCTION_INFO_V1(decoupled_mv_kept_state);
PG_FUNCTION_INFO_V1(decoupled_stage_sums);
PG_FUNCTION_INFO_V1(decoupled_merge_sums);
PG_FUNCTION_INFO_V1(decoupled_stage_kept);
PG_FUNCTION_INFO_V1(decoupled_kept_sum_int8);
PG_FUNCTION_INFO_V1(decoupled_kept_sum_numeric);
PG_FUNCTION_INFO_V1(decoupled_kept_avg);
}

namespace decoupled::delta {

// ---------------------------------------------------------------------------
// The plan's query and its one input
// ---------------------------------------------------------------------------

// The range table entries that read q's WITH queries: in q's own FROM and,
// when q is a set operation, in its branches' FROM (a branch is a subquery
// of q, one level below the WITH).
List* cte_references(Query* q) {
    List* refs = NIL;
    ListCell* lc;
    foreach (lc, q->rtable) {
        auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
        if (rte->rtekind == RTE_CTE && rte->ctelevelsup == 0) refs = lappend(refs, rte);
        if (q->setOperations == nullptr || rte->rtekind != RTE_SUBQUERY || rte->subquery == nullptr)
            continue;
        ListCell* bc;
        foreach (bc, rte->subquery->rtable) {
            auto* inner = static_cast<RangeTblEntry*>(lfirst(bc));
            if (inner->rtekind == RTE_CTE && inner->ctelevelsup == 1) refs = lappend(refs, inner);
        }
    }
    return refs;
}

// WITH: each reference to a non-recursive CTE becomes a subquery in FROM
// (as the planner inlines them), so that the strategies see through it.
// Only when every reference is in the query's own FROM or in the FROM of
// its set operation's branches (none in a subquery of those, in an
// expression or in another CTE) — else the CTEs stay, and so does
// recomputation.  A view's query is deterministic (checked at creation),
// so MATERIALIZED changes nothing but the plan.  WITH RECURSIVE whose CTEs
// are none of them recursive is WITH.
void inline_ctes(Query* q) {
    if (q->cteList == NIL) return;
    List* refs = cte_references(q);
    ListCell* lc;
    foreach (lc, q->cteList) {
        auto* cte = lfirst_node(CommonTableExpr, lc);
        int count = 0;
        ListCell* rc;
        foreach (rc, refs)
            count += strcmp(static_cast<RangeTblEntry*>(lfirst(rc))->ctename, cte->ctename) == 0;
        if (cte->cterecursive || count != cte->cterefcount || !IsA(cte->ctequery, Query) ||
            castNode(Query, cte->ctequery)->commandType != CMD_SELECT)
            return;
    }
    foreach (lc, refs) {
        auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
        ListCell* cc;
        foreach (cc, q->cteList) {
            auto* cte = lfirst_node(CommonTableExpr, cc);
            if (strcmp(rte->ctename, cte->ctename) != 0) continue;
            rte->rtekind = RTE_SUBQUERY;
            rte->subquery = static_cast<Query*>(copyObjectImpl(cte->ctequery));
            rte->security_barrier = false;
            // ctename stays (the planner reads it only of RTE_CTE entries):
            // a recompute reason names the WITH query.
            rte->ctelevelsup = 0;
            rte->self_reference = false;
            rte->coltypes = rte->coltypmods = rte->colcollations = NIL;
            break;
        }
    }
    q->cteList = NIL;
    q->hasRecursive = false;
}

Query* plan_query(Oid plan) {
    Relation rel = table_open(plan, AccessShareLock);
    Query* q = static_cast<Query*>(copyObjectImpl(get_view_query(rel)));
    table_close(rel, AccessShareLock);
    inline_ctes(q);
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

}  // namespace decoupled::delta

bool kept_sums_suffice(Query* q);
bool kept_extremes(Query* q);
List* kept_extreme_args(Query* q);

namespace decoupled::delta {

// What identifies a view's groups: its GROUP BY, or for SELECT DISTINCT its
// DISTINCT list (every output column: each distinct row is a group).
List* key_clauses(Query* q) { return q->groupClause != NIL ? q->groupClause : q->distinctClause; }

int grouped_subquery(Query* q);
List* outer_key_entries(Query* q, int rti);

// The target entries of those keys; for a set operation (each distinct row
// a group) every output column; for a selection over a grouped subquery,
// its output columns that are the subquery's keys.
List* key_entries(Query* q) {
    List* entries = NIL;
    ListCell* lc;
    if (int rti = grouped_subquery(q)) return outer_key_entries(q, rti);
    if (q->setOperations != nullptr) {
        foreach (lc, q->targetList)
            if (!lfirst_node(TargetEntry, lc)->resjunk) entries = lappend(entries, lfirst(lc));
        return entries;
    }
    foreach (lc, key_clauses(q))
        entries = lappend(entries,
                          get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), q->targetList));
    return entries;
}


decoupled::QueryShape describe(Query* q, List** inputs);

// `q`'s output entries that are plain references to the GROUP BY keys of
// its subquery `rti`, in GROUP BY order; NIL unless every key is output.
List* outer_key_entries(Query* q, int rti) {
    Query* sub = rt_fetch(rti, q->rtable)->subquery;
    List* entries = NIL;
    ListCell* kc;
    foreach (kc, key_entries(sub)) {
        TargetEntry* key = lfirst_node(TargetEntry, kc);
        TargetEntry* found = nullptr;
        ListCell* lc;
        foreach (lc, q->targetList) {
            TargetEntry* te = lfirst_node(TargetEntry, lc);
            auto* var = reinterpret_cast<Var*>(te->expr);
            if (!te->resjunk && IsA(var, Var) && var->varno == rti && var->varlevelsup == 0 &&
                var->varattno == key->resno) {
                found = te;
                break;
            }
        }
        if (found == nullptr) return NIL;
        entries = lappend(entries, found);
    }
    return entries;
}

// A selection and projection over one subquery in FROM (or inlined CTE)
// that is a `groups` or `sums` query, whose keys it outputs: each of its
// rows lies in one group of the subquery, so the touched groups are
// computed again through it.  Returns the subquery's range table index, or
// 0.
int grouped_subquery(Query* q) {
    if (q->setOperations != nullptr || q->hasAggs || q->groupClause != NIL ||
        q->distinctClause != NIL || q->hasWindowFuncs || q->limitCount || q->limitOffset ||
        q->hasTargetSRFs || q->hasSubLinks || q->cteList != NIL || q->jointree == nullptr ||
        list_length(q->jointree->fromlist) != 1 || !IsA(linitial(q->jointree->fromlist), RangeTblRef))
        return 0;
    int rti = castNode(RangeTblRef, linitial(q->jointree->fromlist))->rtindex;
    RangeTblEntry* rte = rt_fetch(rti, q->rtable);
    if (rte->rtekind != RTE_SUBQUERY || rte->lateral || rte->subquery->groupClause == NIL ||
        collection_read(rte) != 0)
        return 0;
    List* inputs;
    decoupled::StrategyKind kind = decoupled::classify(describe(rte->subquery, &inputs)).kind;
    if (kind != decoupled::StrategyKind::Groups && kind != decoupled::StrategyKind::Sums) return 0;
    return outer_key_entries(q, rti) != NIL ? rti : 0;
}

// A subquery in FROM (or an inlined CTE) that is itself linear: selection,
// projection and inner joins of collections.
bool linear_subquery(RangeTblEntry* rte) {
    if (rte->lateral || rte->subquery->setOperations != nullptr) return false;
    List* inputs;
    decoupled::QueryShape shape = describe(rte->subquery, &inputs);
    return decoupled::classify(shape).kind == decoupled::StrategyKind::Linear;
}

// `(VALUES ...) AS v`: a subquery over one VALUES list, nothing else.
bool only_values(Query* q) {
    if (q->jointree == nullptr || list_length(q->jointree->fromlist) != 1 ||
        !IsA(linitial(q->jointree->fromlist), RangeTblRef) || q->jointree->quals != nullptr)
        return false;
    int rti = castNode(RangeTblRef, linitial(q->jointree->fromlist))->rtindex;
    return rt_fetch(rti, q->rtable)->rtekind == RTE_VALUES;
}

const char* from_item(RangeTblEntry* rte) {
    const char* name = quote_identifier(rte->eref->aliasname);
    switch (rte->rtekind) {
        case RTE_SUBQUERY:
            if (rte->ctename != nullptr) return psprintf("WITH query %s", quote_identifier(rte->ctename));
            return only_values(rte->subquery) ? "VALUES in FROM" : psprintf("subquery %s in FROM", name);
        case RTE_CTE:
            return psprintf("WITH query %s", quote_identifier(rte->ctename));
        case RTE_VALUES:
            return "VALUES in FROM";
        case RTE_FUNCTION:
        case RTE_TABLEFUNC:
            return "a function in FROM";
        case RTE_RELATION:
            return psprintf("%s, which is not a collection", name);
        default:
            return "something in FROM that is not a collection";
    }
}

// The reason a subquery in FROM that is not linear keeps the view from
// being incremental: what it is, and what inside it is the cause.
const char* subquery_problem(RangeTblEntry* rte) {
    const char* what = from_item(rte);
    if (rte->lateral) return psprintf("it reads LATERAL %s", what);
    List* inputs;
    decoupled::Strategy inner = decoupled::classify(describe(rte->subquery, &inputs));
    switch (inner.kind) {
        case decoupled::StrategyKind::Recompute:
            if (only_values(rte->subquery)) return psprintf("it reads %s", what);
            return psprintf("it reads %s, which is not incremental: %s", what, inner.reason.c_str());
        case decoupled::StrategyKind::Linear:  // a linear subquery with set operations
            return psprintf("it reads %s, which uses UNION ALL: incremental only as a view's whole query",
                            what);
        case decoupled::StrategyKind::Partitions:
            return psprintf(
                "it reads %s, which uses an outer join or a subquery: incremental only as a view's "
                "whole query",
                what);
        case decoupled::StrategyKind::Sums:
        case decoupled::StrategyKind::Groups:
            break;
    }
    Query* sub = rte->subquery;
    if (sub->groupClause == NIL && sub->distinctClause == NIL && sub->setOperations == nullptr)
        return psprintf(
            "it reads %s, whose rows are grouped in a subquery of its own: a grouped subquery "
            "is incremental only directly under the view's query",
            what);
    return psprintf(
        "it reads %s, which groups its rows: incremental only alone in FROM, its keys among the "
        "view's columns",
        what);
}

// The reason for a function, VALUES or WITH query in FROM.
const char* other_from_problem(RangeTblEntry* rte) {
    if (rte->rtekind == RTE_CTE)
        return psprintf("it reads %s, which a subquery or another WITH query reads too",
                        from_item(rte));
    return psprintf("it reads %s", from_item(rte));
}

// Collects the inputs of FROM: collection reads, inner-joined.
void collect_from(Node* node, Query* q, List** inputs, decoupled::QueryShape* s) {
    if (node == nullptr) return;
    if (IsA(node, RangeTblRef)) {
        int rti = castNode(RangeTblRef, node)->rtindex;
        RangeTblEntry* rte = rt_fetch(rti, q->rtable);
        int64 id = collection_read(rte);
        if (id > 0) {
            auto* input = static_cast<Input*>(palloc(sizeof(Input)));
            *input = {rti, id};
            *inputs = lappend(*inputs, input);
            s->inputs++;
        } else if (rte->rtekind == RTE_SUBQUERY && linear_subquery(rte)) {
            // A linear subquery: its inputs are the view's, one level down.
            List* nested;
            (void)describe(rte->subquery, &nested);
            ListCell* lc;
            foreach (lc, nested) {
                auto* input = static_cast<Input*>(palloc(sizeof(Input)));
                *input = *static_cast<Input*>(lfirst(lc));
                input->outer = lcons_int(rti, list_copy(input->outer));
                *inputs = lappend(*inputs, input);
                s->inputs++;
            }
        } else if (rte->rtekind == RTE_SUBQUERY) {
            s->from_subquery = true;
            if (s->from_problem == nullptr) s->from_problem = subquery_problem(rte);
        } else if (rte->rtekind == RTE_RELATION && get_rel_relkind(rte->relid) == RELKIND_VIEW) {
            s->inputs++;  // an ordinary view: whatever it reads, not incrementally
            s->through_view = true;
        } else {
            s->other_from = true;
            if (s->from_problem == nullptr) s->from_problem = other_from_problem(rte);
        }
    } else if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        if (join->jointype != JOIN_INNER) s->outer_joins = true;
        collect_from(join->larg, q, inputs, s);
        collect_from(join->rarg, q, inputs, s);
    } else if (IsA(node, FromExpr)) {
        ListCell* lc;
        foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist)
            collect_from(static_cast<Node*>(lfirst(lc)), q, inputs, s);
    }
}

decoupled::QueryShape describe(Query* q, List** inputs);

// A whole row of a FROM item used as a value (`w`, `to_jsonb(w)`, `w IS
// NULL`): a step reads an input's changes through a relation with one more
// column (mz_diff), so such a row would not be the input's row.
bool whole_row_walker(Node* node, void* context) {
    if (node == nullptr) return false;
    if (IsA(node, Var)) return reinterpret_cast<Var*>(node)->varattno == 0;
    if (IsA(node, Query))
        return query_tree_walker(reinterpret_cast<Query*>(node), as_walker(whole_row_walker),
                                 context, 0);
    return expression_tree_walker(node, as_walker(whole_row_walker), context);
}

bool reads_whole_rows(Query* q) {
    return query_tree_walker(q, as_walker(whole_row_walker), nullptr, 0);
}

// The branches (Query*) of a set operation tree: with `union_all_only`,
// NIL when `op` is anything but UNION ALL; NIL too when a branch is itself
// not a query.
List* setop_branches(Query* q, Node* op, bool union_all_only) {
    if (IsA(op, RangeTblRef)) {
        RangeTblEntry* rte = rt_fetch(castNode(RangeTblRef, op)->rtindex, q->rtable);
        return rte->rtekind == RTE_SUBQUERY ? list_make1(rte->subquery) : NIL;
    }
    auto* set = reinterpret_cast<SetOperationStmt*>(op);
    if (!IsA(op, SetOperationStmt) || (union_all_only && (set->op != SETOP_UNION || !set->all)))
        return NIL;
    List* left = setop_branches(q, set->larg, union_all_only);
    List* right = setop_branches(q, set->rarg, union_all_only);
    return left == NIL || right == NIL ? NIL : list_concat(left, right);
}

List* union_all_branches(Query* q, Node* op) { return setop_branches(q, op, true); }

bool all_branches_linear(List* branches) {
    ListCell* lc;
    foreach (lc, branches) {
        List* inputs;
        decoupled::QueryShape shape = describe(static_cast<Query*>(lfirst(lc)), &inputs);
        if (decoupled::classify(shape).kind != decoupled::StrategyKind::Linear) return false;
    }
    return branches != NIL;
}

// Describes the query for the classification; `inputs` receives its
// inputs (Input*) in range table order of FROM.
decoupled::QueryShape describe(Query* q, List** inputs) {
    decoupled::QueryShape s;
    *inputs = NIL;
    s.sublinks = q->hasSubLinks;
    s.ctes = q->cteList != NIL;
    ListCell* cte;
    foreach (cte, q->cteList)
        s.recursive = s.recursive || lfirst_node(CommonTableExpr, cte)->cterecursive;
    s.set_operations = q->setOperations != nullptr;
    s.grouped_subquery = grouped_subquery(q) != 0;
    s.union_all_of_linear =
        s.set_operations && all_branches_linear(union_all_branches(q, q->setOperations));
    s.setop_of_linear = s.set_operations && !s.union_all_of_linear &&
                        all_branches_linear(setop_branches(q, q->setOperations, false));
    s.window_functions = q->hasWindowFuncs;
    s.limit = q->limitCount != nullptr || q->limitOffset != nullptr;
    s.distinct = q->distinctClause != NIL;
    s.distinct_on = q->hasDistinctOn;
    s.set_returning = q->hasTargetSRFs;
    s.aggregates = q->hasAggs;
    s.group_by = q->groupClause != NIL;
    s.grouping_sets = q->groupingSets != NIL;
    // The view rule's OLD and NEW entries are never in FROM.
    collect_from(reinterpret_cast<Node*>(q->jointree), q, inputs, &s);
    s.whole_rows = reads_whole_rows(q);

    // Every GROUP BY key must be an output column with a built-in equality:
    // the view's rows of a group are found by it.
    ListCell* lc;
    foreach (lc, key_entries(q)) {
        TargetEntry* te = lfirst_node(TargetEntry, lc);
        if (te->resjunk) s.keys_are_outputs = false;
        TypeCacheEntry* type = lookup_type_cache(exprType(reinterpret_cast<Node*>(te->expr)),
                                                 TYPECACHE_EQ_OPR);
        if (!OidIsValid(type->eq_opr) || operator_namespace(type->eq_opr) != PG_CATALOG_NAMESPACE)
            s.keys_comparable = false;
        // A step names touched groups by literals of the key's type without
        // its domains (literal_type): a composite or range holding one has
        // no such type.
        if (!OidIsValid(decoupled::literal_type_if_any(type->type_id))) s.keys_comparable = false;
    }
    s.sums_only = s.group_by && s.aggregates && s.keys_are_outputs && kept_sums_suffice(q);
    s.keyed_outer_join = s.outer_joins && is_keyed_outer_join(q, *inputs);
    if ((s.outer_joins || s.sublinks) && !s.set_operations)
        decoupled::describe_partitions(q, &s, nullptr);
    return s;
}

// ---------------------------------------------------------------------------
// Deriving the step's query
// ---------------------------------------------------------------------------

Oid storage_view(int64 input, const char* part) {
    char* name = psprintf("c" INT64_FORMAT "_%s", input, part);
    Oid rel = decoupled::storage_relid(input, part);
    if (!OidIsValid(rel))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("collection " INT64_FORMAT " has no view %s", input, name)));
    return rel;
}

// Replaces an input's entry with a view of its storage with the same
// columns in the same order (and, for the changes, mz_diff after them).
// Returns the number of the input's own columns.
int read_storage_view(Query* q, int rti, int64 input, const char* part, bool with_diff) {
    RangeTblEntry* rte = rt_fetch(rti, q->rtable);
    int ncols = list_length(rte->eref->colnames);
    List* colnames = list_copy(rte->eref->colnames);
    if (with_diff) colnames = lappend(colnames, makeString(pstrdup("mz_diff")));
    rte->rtekind = RTE_RELATION;
    rte->relid = storage_view(input, part);
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

// Replaces an entry by the subquery `sql` (parsed here, over storage the
// step's user may read), keeping the entry's column names.
void read_subquery_text(RangeTblEntry* rte, const char* sql) {
    RawStmt* raw = linitial_node(RawStmt, raw_parser(sql, RAW_PARSE_DEFAULT));
    decoupled::read_entry_through(rte, parse_analyze_fixedparams(raw, sql, nullptr, 0, nullptr));
}

// The input's changes at decoupled.as_of (c<id>_delta), with mz_diff.
int read_changes(Query* q, int rti, int64 input) {
    return read_storage_view(q, rti, input, "delta", true);
}

// How many changes the input has at decoupled.as_of, counted up to
// `limit`: a read of its delta view (the time indexes of its storage), as
// the current user like the step's query, through a kept plan (the limit is
// its parameter).
int64 input_changes(int64 input, int64 limit) {
    char* sql = psprintf("SELECT pg_catalog.count(*) FROM (SELECT FROM decoupled_storage.%s "
                         "LIMIT $1) d",
                         quote_identifier(get_rel_name(storage_view(input, "delta"))));
    Oid types[1] = {INT8OID};
    Datum args[1] = {Int64GetDatum(std::min(limit, kCountedChanges))};
    SPI_connect();
    if (SPI_execute_plan(decoupled::statement_plan(sql, 1, types), args, nullptr, true, 1) !=
            SPI_OK_SELECT ||
        SPI_processed != 1)
        elog(ERROR, "could not read the changes of collection " INT64_FORMAT, input);
    bool isnull = false;
    int64 count = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    SPI_finish();
    return count;
}

// The input's state just before decoupled.as_of (c<id>_before).
void read_before(Query* q, int rti, int64 input) {
    (void)read_storage_view(q, rti, input, "before", false);
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

Prepared prepared_args(FunctionCallInfo fcinfo) {
    for (int i = 0; i < 3; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "argument %d must not be null", i + 1);
    return {PG_GETARG_OID(0), PG_GETARG_OID(1), PG_GETARG_INT64(2)};
}

// The plan's inputs, checking that it is still incremental.
List* inputs_of(Query* q) {
    List* inputs;
    decoupled::QueryShape shape = describe(q, &inputs);
    if (decoupled::classify(shape).kind == decoupled::StrategyKind::Recompute)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the written plan is no longer incremental")));
    return inputs;
}

TargetEntry* diff_entry(Query* q, int rti, int ncols);

// The query an input is read in: `depth` levels of its path down from `q`
// (-1: all of them, the input's own query).
Query* query_at(Query* q, const Input* in, int depth) {
    int level = 0;
    ListCell* lc;
    foreach (lc, in->outer) {
        if (depth >= 0 && level++ == depth) break;
        q = rt_fetch(lfirst_int(lc), q->rtable)->subquery;
    }
    return q;
}

// A changed input inside subqueries: each subquery on its path passes its
// mz_diff up as one more output column, so that the view's query sees it
// as column (*ncols + 1) of entry *rti.
void carry_diff_up(Query* q, const Input* changed, int* rti, int* ncols) {
    for (int depth = list_length(changed->outer); depth >= 1; --depth) {
        Query* inner = query_at(q, changed, depth);
        Query* parent = query_at(q, changed, depth - 1);
        int sub_rti = list_nth_int(changed->outer, depth - 1);
        // Only the output columns stay (a linear subquery's ORDER BY means
        // nothing), so the new one is numbered right after them.
        List* outputs = NIL;
        ListCell* lc;
        foreach (lc, inner->targetList)
            if (!lfirst_node(TargetEntry, lc)->resjunk) outputs = lappend(outputs, lfirst(lc));
        inner->targetList = outputs;
        inner->sortClause = NIL;
        int width = list_length(outputs);
        inner->targetList = lappend(inner->targetList, diff_entry(inner, *rti, *ncols));
        RangeTblEntry* rte = rt_fetch(sub_rti, parent->rtable);
        rte->eref->colnames = lappend(list_copy(rte->eref->colnames), makeString(pstrdup("mz_diff")));
        *rti = sub_rti;
        *ncols = width;
    }
}

// How many live rows `relid` holds: the statistics system's count (inserts
// less deletes, kept without ANALYZE), else the planner's estimate.
double live_rows(Oid relid) {
    PgStat_StatTabEntry* stats = pgstat_fetch_stat_tabentry(relid);
    if (stats != nullptr && stats->n_live_tuples > 0) return static_cast<double>(stats->n_live_tuples);
    Relation rel = table_open(relid, AccessShareLock);
    BlockNumber pages = 0;
    double tuples = 0, allvisfrac = 0;
    estimate_rel_size(rel, nullptr, &pages, &tuples, &allvisfrac);
    table_close(rel, AccessShareLock);
    return tuples;
}

// restrict_partners reads a partner for the changed rows' values only where
// the partner has more than kSmallPartner rows and at least
// kRowsPerChange of them for each change.
constexpr double kSmallPartner = 5000;
constexpr double kRowsPerChange = 1000;

// The live rows of each input a term may read as a partner (one not inside
// a subquery); -1 for the others, and for a query over one input, which
// has no partner.  Read once, so that counting the changes (changes_limit)
// and restricting the partners decide on the same figures.
double* partner_rows(List* inputs) {
    int n = list_length(inputs);
    auto* rows = static_cast<double*>(palloc(sizeof(double) * n));
    for (int j = 0; j < n; ++j) {
        auto* input = static_cast<Input*>(list_nth(inputs, j));
        rows[j] = n > 1 && input->outer == NIL ? live_rows(storage_view(input->id, "cur")) : -1;
    }
    return rows;
}

// How far input i's changes must be counted (see inputs_changed): to 1
// (none or some) unless another input is a partner restrict_partners may
// read for them, then one past the most changes it reads that partner
// for.
int64 changes_limit(List* inputs, const double* rows, int i) {
    auto* changed = static_cast<Input*>(list_nth(inputs, i));
    int64 limit = 1;
    if (changed->outer != NIL) return limit;
    for (int j = 0; j < list_length(inputs); ++j) {
        if (j == i || rows[j] <= kSmallPartner) continue;
        double most = std::floor(rows[j] / kRowsPerChange) + 1;
        limit = std::max(limit, most >= static_cast<double>(kCountedChanges)
                                    ? kCountedChanges
                                    : static_cast<int64>(most));
    }
    return limit;
}

// How many changes each of `inputs` has at decoupled.as_of (-1: not
// counted, a single input).  A term of the sum below whose input did not
// change is empty, but not free: its other inputs are read AS OF, and a
// plan kept for any change (generic, the changes' size unknown) may hash
// them whole before it finds the changes empty — a join step after one
// changed row of its large input took 25 ms reading the other term.  So
// terms without changes are left out.  One input changed is the common
// case, and a single-input query has nothing to leave out; when none
// changed (a branch of a set operation the change did not reach) the first
// term stays, for the query's shape.
//
// Each input's changes are counted only as far as an answer depends on
// it (changes_limit): a term is empty or not, and restrict_partners asks
// whether they are few against a partner.  Counting a large input's 2,000
// changes to learn that they are not none took 0.9 ms of a join step after
// 1,000 changed rows (auto_explain, timing on; docs/performance.md).
int64* inputs_changed(List* inputs, const double* rows) {
    int n = list_length(inputs);
    auto* changes = static_cast<int64*>(palloc(sizeof(int64) * n));
    auto* limits = static_cast<int64*>(palloc(sizeof(int64) * n));
    bool any = false;
    for (int i = 0; i < n; ++i) {
        auto* input = static_cast<Input*>(list_nth(inputs, i));
        changes[i] = -1;
        if (n > 1) {
            limits[i] = changes_limit(inputs, rows, i);
            int same = 0;  // a self-join reads one input's changes twice
            while (static_cast<Input*>(list_nth(inputs, same))->id != input->id) ++same;
            // A count of the same input serves when it was exact or went
            // as far as this one needs.
            bool counted = same < i && (changes[same] < limits[same] || limits[same] >= limits[i]);
            changes[i] = counted ? changes[same] : input_changes(input->id, limits[i]);
            limits[i] = counted ? limits[same] : limits[i];
        }
        any = any || changes[i] != 0;
    }
    if (!any) changes[0] = -1;
    return changes;
}

// The inner joins' conditions of `q`: its WHERE and the ON of its inner
// joins, as a list of their conjuncts.
void inner_join_quals(Node* node, List** quals) {
    if (node == nullptr) return;
    if (IsA(node, FromExpr)) {
        auto* from = reinterpret_cast<FromExpr*>(node);
        ListCell* lc;
        foreach (lc, from->fromlist) inner_join_quals(static_cast<Node*>(lfirst(lc)), quals);
        *quals = list_concat(*quals, make_ands_implicit(reinterpret_cast<Expr*>(from->quals)));
    } else if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        if (join->jointype != JOIN_INNER) return;
        inner_join_quals(join->larg, quals);
        inner_join_quals(join->rarg, quals);
        *quals = list_concat(*quals, make_ands_implicit(reinterpret_cast<Expr*>(join->quals)));
    }
}

// ARRAY(SELECT column FROM the changed input's change view): the values
// of its column `attno` in its changes at decoupled.as_of.
SubLink* changed_values(const Input* changed, AttrNumber attno) {
    Oid delta = storage_view(changed->id, "delta");
    char* sql = psprintf("SELECT %s FROM decoupled_storage.%s",
                         quote_identifier(get_attname(delta, attno, false)),
                         quote_identifier(get_rel_name(delta)));
    RawStmt* raw = linitial_node(RawStmt, raw_parser(sql, RAW_PARSE_DEFAULT));
    SubLink* link = makeNode(SubLink);
    link->subLinkType = ARRAY_SUBLINK;
    link->subselect = reinterpret_cast<Node*>(parse_analyze_fixedparams(raw, sql, nullptr, 0, nullptr));
    link->location = -1;
    return link;
}

// C13.4: a term reads its other inputs AS OF, and one that meets the
// changed input on an equality of plain columns is read for the changed
// rows' values only — `partner.col = ANY (ARRAY(SELECT col FROM delta))`,
// which the planner pushes into each branch of the partner's history (a
// join key it cannot push there) and answers from the arrangement on that
// key.  Without it, a term in which a dimension row changed read the whole
// fact table at t (115 ms of CPU after one changed row of a 1,000-row
// dimension over 1,000,000 rows; 11 ms with it).  Only where the changes
// are few against the partner — at most one for each kRowsPerChange of its
// rows — and the partner is not small (kSmallPartner rows or fewer are
// hashed whole, cheaper than reading the changes twice): each changed key
// may match many rows, and probing for most of the partner's keys costs
// more than reading it once (all 1,000 dimension rows changed: 920 ms
// restricted, 736 ms not).
void restrict_partners(Query* q, List* inputs, const double* rows, const Input* changed,
                       int64 changes) {
    if (changed->outer != NIL || changes < 0 || changes >= kCountedChanges) return;
    List* quals = NIL;
    inner_join_quals(reinterpret_cast<Node*>(q->jointree), &quals);
    List* restrictions = NIL;
    ListCell* lc;
    foreach (lc, quals) {
        if (!IsA(lfirst(lc), OpExpr)) continue;
        auto* op = static_cast<OpExpr*>(lfirst(lc));
        if (list_length(op->args) != 2 || !IsA(linitial(op->args), Var) ||
            !IsA(lsecond(op->args), Var))
            continue;
        auto* left = static_cast<Var*>(linitial(op->args));
        auto* right = static_cast<Var*>(lsecond(op->args));
        if (left->varlevelsup != 0 || right->varlevelsup != 0) continue;
        // Oriented as partner op changed.
        Var* partner_var = left;
        Var* changed_var = right;
        Oid opno = op->opno;
        if (left->varno == changed->rti) {
            partner_var = right;
            changed_var = left;
            opno = get_commutator(op->opno);
        }
        // Columns, not whole rows; and no arrays, which ARRAY(SELECT ...)
        // would stack into one of a dimension more.
        if (changed_var->varno != changed->rti ||
            partner_var->varno == changed_var->varno || !OidIsValid(opno) ||
            changed_var->varattno <= 0 || partner_var->varattno <= 0 ||
            OidIsValid(get_element_type(changed_var->vartype)) ||
            !op_mergejoinable(opno, exprType(reinterpret_cast<Node*>(partner_var))))
            continue;
        int partner = -1;
        for (int j = 0; j < list_length(inputs); ++j) {
            auto* in = static_cast<Input*>(list_nth(inputs, j));
            if (in->outer == NIL && in->rti == partner_var->varno) partner = j;
        }
        if (partner < 0 || rows[partner] <= kSmallPartner ||
            static_cast<double>(changes) * kRowsPerChange > rows[partner])
            continue;
        ScalarArrayOpExpr* any = makeNode(ScalarArrayOpExpr);
        any->opno = opno;
        any->opfuncid = get_opcode(opno);
        any->useOr = true;
        any->inputcollid = op->inputcollid;
        any->args = list_make2(copyObjectImpl(partner_var), changed_values(changed, changed_var->varattno));
        any->location = -1;
        restrictions = lappend(restrictions, any);
    }
    if (restrictions != NIL)
        q->jointree->quals = make_and_qual(q->jointree->quals,
                                           reinterpret_cast<Node*>(make_ands_explicit(restrictions)));
}

// The view's changes at decoupled.as_of as one query: the sum (UNION ALL)
// over its inputs i of the plan with input i replaced by its changes, the
// inputs before i read at as_of and those after it just before (C13.1 —
// a self-join is two inputs).  `select_list` shapes each term's output
// from the term's query, the changed input's range table index and its
// column count (mz_diff is the column after them).
char* changes_union(Query* base, SelectList select_list, void* arg, bool* probes,
                    const Partials* shared) {
    if (base->setOperations != nullptr) {
        // A set operation: the changes of each branch, in turn (for UNION
        // ALL, the view's changes; for the others, the rows they touch).
        (void)inputs_of(base);
        StringInfoData sql;
        initStringInfo(&sql);
        ListCell* lc;
        foreach (lc, setop_branches(base, base->setOperations, false))
            appendStringInfo(&sql, "%s%s", sql.len ? " UNION ALL " : "",
                             changes_union(static_cast<Query*>(lfirst(lc)), select_list, arg,
                                           probes, shared));
        return sql.data;
    }
    List* inputs = inputs_of(base);
    if (char* outer = outer_join_changes(base, inputs, select_list, arg, probes, shared))
        return outer;
    double* rows = partner_rows(inputs);
    int64* changes = inputs_changed(inputs, rows);
    StringInfoData sql;
    initStringInfo(&sql);
    for (int i = 0; i < list_length(inputs); ++i) {
        if (changes[i] == 0) continue;
        Query* q = static_cast<Query*>(copyObjectImpl(base));
        int changed_ncols = 0;
        auto* changed = static_cast<Input*>(list_nth(inputs, i));
        for (int j = 0; j < list_length(inputs); ++j) {
            auto* input = static_cast<Input*>(list_nth(inputs, j));
            if (j == i) changed_ncols = read_changes(query_at(q, input, -1), input->rti, input->id);
            if (j > i) read_before(query_at(q, input, -1), input->rti, input->id);
        }
        restrict_partners(q, inputs, rows, changed, changes[i]);
        int changed_rti = changed->rti;
        carry_diff_up(q, changed, &changed_rti, &changed_ncols);
        select_list(q, changed_rti, changed_ncols, arg);
        appendStringInfo(&sql, "%s(%s)", sql.len ? " UNION ALL " : "", pg_get_querydef(q, false));
    }
    return sql.data;
}

TargetEntry* diff_entry(Query* q, int rti, int ncols) {
    return makeTargetEntry(
        reinterpret_cast<Expr*>(makeVar(rti, ncols + 1, INT8OID, -1, InvalidOid, 0)),
        list_length(q->targetList) + 1, pstrdup("mz_diff"), false);
}

// Storage is written with the extension's rights: an index on it may only
// evaluate built-in functions.
bool not_builtin(Oid func, void*) { return get_func_namespace(func) != PG_CATALOG_NAMESPACE; }

Walker as_walker(bool (*fn)(Node*, void*)) {
    return reinterpret_cast<Walker>(reinterpret_cast<void (*)()>(fn));
}

bool calls_other_than_builtins(Node* node, void* context) {
    if (node == nullptr) return false;
    if (check_functions_in_node(node, not_builtin, context)) return true;
    return expression_tree_walker(node, as_walker(calls_other_than_builtins), context);
}

// `expr` (of `type`) compared with a typed_literal: cast to the literal's
// type where taking the domains off changed it (an array of a domain has
// no equality with an array of its base type).
char* as_literal_type(const char* expr, Oid type) {
    Oid literal = decoupled::literal_type(type);
    if (literal == getBaseType(type)) return pstrdup(expr);
    return psprintf("(%s)::%s", expr, format_type_be_qualified(literal));
}

// The type to write literals of `type` as — without its domains: the
// statement runs with the extension's rights, and the values come from
// storage (literal_type).  Once per key, not per value.
char* literal_type_name(Oid type) {
    return format_type_be_qualified(decoupled::literal_type(type));
}

// A SQL literal of `value` as a value of `type_name` (literal_type_name).
char* typed_literal(const char* value, const char* type_name) {
    return psprintf("%s::%s", quote_literal_cstr(value), type_name);
}

}  // namespace decoupled::delta

namespace decoupled::delta {


// `expr` (over input `in`'s columns) as an index expression on its storage,
// or nullptr if it calls anything but built-in functions (storage is
// written with the extension's rights).
char* storage_expression(Node* expr, const Input* in) {
    if (calls_other_than_builtins(expr, nullptr)) return nullptr;
    Relids varnos = pull_varnos(nullptr, expr);
    if (bms_num_members(varnos) != 1 || !bms_is_member(in->rti, varnos)) return nullptr;
    char* history = psprintf("c" INT64_FORMAT "_history", in->id);
    Oid rel = get_relname_relid(history, get_namespace_oid("decoupled_storage", false));
    Node* copy = static_cast<Node*>(copyObjectImpl(expr));
    ChangeVarNodes(copy, in->rti, 1, 0);
    return psprintf("(%s)", deparse_expression(copy, deparse_context_for(history, rel), false, false));
}

const Input* only_input_of(Node* expr, List* inputs) {
    Relids varnos = pull_varnos(nullptr, expr);
    const Input* found = nullptr;
    ListCell* lc;
    foreach (lc, inputs) {
        auto* in = static_cast<Input*>(lfirst(lc));
        if (bms_is_member(in->rti, varnos)) {
            if (found) return nullptr;
            found = in;
        }
    }
    return found;
}

// The join keys: each side of an equality between columns of two inputs,
// in WHERE or an inner join's ON, is probed when the other side changes.
void join_arrangements(Node* quals, List* inputs, List** out) {
    if (quals == nullptr) return;
    if (is_andclause(quals)) {
        ListCell* lc;
        foreach (lc, reinterpret_cast<BoolExpr*>(quals)->args)
            join_arrangements(static_cast<Node*>(lfirst(lc)), inputs, out);
        return;
    }
    if (!IsA(quals, OpExpr) || list_length(reinterpret_cast<OpExpr*>(quals)->args) != 2) return;
    Node* sides[2] = {static_cast<Node*>(linitial(reinterpret_cast<OpExpr*>(quals)->args)),
                      static_cast<Node*>(lsecond(reinterpret_cast<OpExpr*>(quals)->args))};
    const Input* a = only_input_of(sides[0], inputs);
    const Input* b = only_input_of(sides[1], inputs);
    if (a == nullptr || b == nullptr || a == b) return;
    for (int i = 0; i < 2; ++i) {
        const Input* in = i == 0 ? a : b;
        char* keys = storage_expression(sides[i], in);
        if (keys) {
            auto* arrangement = static_cast<Arrangement*>(palloc(sizeof(Arrangement)));
            *arrangement = {in->id, keys};
            *out = lappend(*out, arrangement);
        }
    }
}

void collect_join_quals(Node* node, List* inputs, List** out) {
    if (node == nullptr) return;
    if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        join_arrangements(join->quals, inputs, out);
        collect_join_quals(join->larg, inputs, out);
        collect_join_quals(join->rarg, inputs, out);
    } else if (IsA(node, FromExpr)) {
        auto* from = reinterpret_cast<FromExpr*>(node);
        join_arrangements(from->quals, inputs, out);
        ListCell* lc;
        foreach (lc, from->fromlist) collect_join_quals(static_cast<Node*>(lfirst(lc)), inputs, out);
    }
}

}  // namespace decoupled::delta

namespace decoupled::delta {

// The GROUP BY keys of q (over its one input `in`) as index expressions on
// the input's storage, e.g. "(k % 10), (s)"; nullptr if one is not built
// in.
char* key_expressions(Query* q, const Input* in) {
    StringInfoData keys;
    initStringInfo(&keys);
    ListCell* lc;
    foreach (lc, key_clauses(q)) {
        TargetEntry* te = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), q->targetList);
        char* key = storage_expression(reinterpret_cast<Node*>(te->expr), in);
        if (key == nullptr) return nullptr;
        appendStringInfo(&keys, "%s%s", keys.len ? ", " : "", key);
    }
    return keys.data;
}

// The arrangement a 'sums' view over one input probes in order for its
// groups' extremes (`extremes`: the distinct arguments of its min and
// max): its key, then its one min/max argument.  nullptr if
// it has several keys (its unknown groups are named by literals), no
// min/max argument or several (an index for each would cost every write
// into the input; those views compute the groups again instead), or one
// is not built in.
char* ordered_arrangement(Query* q, const Input* in, List* extremes) {
    if (list_length(extremes) != 1 || list_length(key_clauses(q)) != 1) return nullptr;
    char* keys = key_expressions(q, in);
    char* value = storage_expression(static_cast<Node*>(linitial(extremes)), in);
    return keys && value ? psprintf("%s, %s", keys, value) : nullptr;
}

}  // namespace decoupled::delta

// decoupled._mv_strategy(plan regclass, OUT strategy text, OUT reason text,
//                        OUT arrangement_inputs bigint[], OUT arrangement_keys text[])
// How the view is maintained ('linear', 'sums', 'groups' or 'recompute'),
// why not incrementally, and the arrangements its steps probe: the join
// keys of every input, and for 'groups' over one input its GROUP BY keys
// (for 'sums' too where it keeps a min or max: its groups whose extreme
// became unknown are computed afresh by them).
Datum decoupled_mv_strategy(PG_FUNCTION_ARGS) {
    Oid plan = PG_GETARG_OID(0);
    Query* q = plan_query(plan);
    List* inputs;
    decoupled::QueryShape shape = describe(q, &inputs);
    decoupled::Strategy strategy = decoupled::classify(shape);
    bool by_group_keys =
        strategy.kind == decoupled::StrategyKind::Groups ||
        (strategy.kind == decoupled::StrategyKind::Sums && kept_extremes(q));
    if (int sub = grouped_subquery(q)) {
        // Its subquery's arrangements: the groups are computed through it.
        q = rt_fetch(sub, q->rtable)->subquery;
        (void)describe(q, &inputs);
    }

    List* arrangements = NIL;
    if (strategy.kind == decoupled::StrategyKind::Partitions) {
        decoupled::describe_partitions(q, &shape, &arrangements);
    } else if (strategy.kind != decoupled::StrategyKind::Recompute) {
        // Arrangements are on the inputs the view's query reads itself (not
        // through a subquery): their keys are its expressions.
        List* top = NIL;
        ListCell* lc;
        foreach (lc, inputs)
            if (static_cast<Input*>(lfirst(lc))->outer == NIL) top = lappend(top, lfirst(lc));
        bool only_top = list_length(top) == list_length(inputs);
        inputs = top;
        collect_join_quals(reinterpret_cast<Node*>(q->jointree), inputs, &arrangements);
        if (by_group_keys && list_length(inputs) == 1 && only_top) {
            auto* in = static_cast<Input*>(linitial(inputs));
            if (char* keys = key_expressions(q, in)) {
                // A 'sums' view with one min/max argument finds a group's
                // new extreme by an ordered probe (ordered_extremes_sql):
                // its arrangement ends with that value, and serves probes
                // on the keys alone too.
                char* ordered = strategy.kind == decoupled::StrategyKind::Sums
                                    ? ordered_arrangement(q, in, kept_extreme_args(q))
                                    : nullptr;
                auto* arrangement = static_cast<Arrangement*>(palloc(sizeof(Arrangement)));
                *arrangement = {in->id, ordered ? ordered : keys};
                arrangements = lappend(arrangements, arrangement);
            }
        }
    }

    Datum values[4];
    bool nulls[4] = {false, false, true, true};
    const char* kind = strategy.kind == decoupled::StrategyKind::Linear   ? "linear"
                       : strategy.kind == decoupled::StrategyKind::Sums   ? "sums"
                       : strategy.kind == decoupled::StrategyKind::Groups ? "groups"
                       : strategy.kind == decoupled::StrategyKind::Partitions ? "partitions"
                                                                              : "recompute";
    values[0] = CStringGetTextDatum(kind);
    values[1] = CStringGetTextDatum(strategy.reason.c_str());
    nulls[1] = strategy.reason.empty();
    int n = list_length(arrangements);
    if (n > 0) {
        Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * n));
        Datum* keys = static_cast<Datum*>(palloc(sizeof(Datum) * n));
        for (int i = 0; i < n; ++i) {
            auto* a = static_cast<Arrangement*>(list_nth(arrangements, i));
            ids[i] = Int64GetDatum(a->id);
            keys[i] = CStringGetTextDatum(a->keys);
        }
        values[2] = PointerGetDatum(construct_array(ids, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
        values[3] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
        nulls[2] = nulls[3] = false;
    }
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "_mv_strategy must return a composite type");
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

namespace {

void linear_select_list(Query* q, int changed_rti, int changed_ncols, void*) {
    q->targetList = lappend(q->targetList, diff_entry(q, changed_rti, changed_ncols));
    q->sortClause = NIL;
}

}  // namespace

// decoupled._stage_delta(plan regclass, owner oid, ts bigint, target regclass) -> bigint
// A linear view's difference at ts, as its owner, into target as
// (ts, diff, row key, row hash, row...).
Datum decoupled_stage_delta(PG_FUNCTION_ARGS) {
    Prepared p = prepared_args(fcinfo);
    if (PG_ARGISNULL(3)) elog(ERROR, "target must not be null");
    Oid target_oid = PG_GETARG_OID(3);

    Relation target = table_open(target_oid, RowExclusiveLock);
    decoupled::OwnerScope scope;
    decoupled::enter_owner(p.plan, p.owner, p.ts, &scope);
    decoupled::serial_only();
    // Derived and deparsed inside the owner's scope: names are printed for
    // the pinned search_path the query then runs with.
    Query* q = plan_query(p.plan);
    int nout = output_columns(q);
    bool probes = false;
    char* changes = changes_union(q, linear_select_list, nullptr, &probes);
    char* sql = decoupled::staging_sql(
        "d.mz_diff", positional_names(nout, "d."),
        psprintf("(%s) d(%s, mz_diff)", changes, positional_names(nout, "")));
    int level = partner_probe_settings(probes);
    uint64 rows = decoupled::stage_rows(target, sql, p.ts, true);
    if (level >= 0) AtEOXact_GUC(true, level);
    decoupled::leave_owner(&scope);
    table_close(target, NoLock);
    PG_RETURN_INT64(static_cast<int64>(rows));
}

namespace {

// The view's GROUP BY keys: their names (quoted) and types in the view, in
// GROUP BY order, and the key target entries renumbered 1..n for a select
// list of their own.
struct Keys {
    int n;
    char** names;
    Oid* types;
    List* entries;
};

Keys group_keys(Query* q) {
    List* entries = key_entries(q);
    Keys keys{list_length(entries), nullptr, nullptr, NIL};
    keys.names = static_cast<char**>(palloc(sizeof(char*) * keys.n));
    keys.types = static_cast<Oid*>(palloc(sizeof(Oid) * keys.n));
    int k = 0;
    ListCell* lc;
    foreach (lc, entries) {
        TargetEntry* te = lfirst_node(TargetEntry, lc);
        keys.names[k] = pstrdup(quote_identifier(te->resname));
        keys.types[k] = exprType(reinterpret_cast<Node*>(te->expr));
        TargetEntry* key = flatCopyTargetEntry(te);
        key->resno = ++k;
        key->ressortgroupref = 0;
        key->resjunk = false;
        keys.entries = lappend(keys.entries, key);
    }
    return keys;
}

// Drops the grouping: what is left reads the rows the groups are made of.
void ungroup(Query* q, List* target_list) {
    q->targetList = target_list;
    q->groupClause = NIL;
    q->distinctClause = NIL;
    q->havingQual = nullptr;
    q->hasAggs = false;
    q->sortClause = NIL;
}

// A condition on the key columns that selects exactly the groups whose
// keys are the rows of the SPI result (its first keys.n columns; NULL
// matches NULL).  Non-null single keys become one `= ANY (array)` (an index
// probe); other tuples are compared column by column.  Built-in equality
// only (OPERATOR(pg_catalog.=)), literals cast to the keys' types.
char* groups_filter(HeapTuple* rows, TupleDesc desc, uint64 count, const Keys& keys) {
    StringInfoData tuples, filter;
    Datum* any = static_cast<Datum*>(palloc(sizeof(Datum) * Max(count, 1)));
    int nany = 0;
    initStringInfo(&tuples);
    initStringInfo(&filter);
    // Each key's side of `=` and its literals' type, worked out at the first
    // tuple compared column by column.
    char** compared = nullptr;
    char** literal_types = nullptr;
    for (uint64 r = 0; r < count; ++r) {
        HeapTuple tuple = rows[r];
        bool has_null = false;
        for (int c = 0; c < keys.n; ++c) has_null |= SPI_getvalue(tuple, desc, c + 1) == nullptr;
        // An array-typed key compares as a whole: no ANY over it.
        if (!has_null && keys.n == 1 && !OidIsValid(get_element_type(keys.types[0]))) {
            any[nany++] = CStringGetTextDatum(SPI_getvalue(tuple, desc, 1));
            continue;
        }
        if (compared == nullptr) {
            compared = static_cast<char**>(palloc(sizeof(char*) * keys.n));
            literal_types = static_cast<char**>(palloc(sizeof(char*) * keys.n));
            for (int c = 0; c < keys.n; ++c) {
                compared[c] = as_literal_type(keys.names[c], keys.types[c]);
                literal_types[c] = literal_type_name(keys.types[c]);
            }
        }
        appendStringInfoString(&tuples, tuples.len ? " OR (" : "(");
        for (int c = 0; c < keys.n; ++c) {
            char* value = SPI_getvalue(tuple, desc, c + 1);
            if (c > 0) appendStringInfoString(&tuples, " AND ");
            if (value == nullptr)
                appendStringInfo(&tuples, "%s IS NULL", keys.names[c]);
            else
                appendStringInfo(&tuples, "%s OPERATOR(pg_catalog.=) %s", compared[c],
                                 typed_literal(value, literal_types[c]));
        }
        appendStringInfoChar(&tuples, ')');
    }
    // One array literal, not an ARRAY[] of a literal per group: parsing,
    // analysing and folding a thousand constants cost a large step more
    // than its plan.  The key type's input reads each element's text.
    if (nany > 0)
        appendStringInfo(&filter, "%s OPERATOR(pg_catalog.=) ANY (%s::%s[])", keys.names[0],
                         quote_literal_cstr(OidOutputFunctionCall(
                             F_ARRAY_OUT, PointerGetDatum(construct_array(
                                              any, nany, TEXTOID, -1, false, TYPALIGN_INT)))),
                         literal_type_name(keys.types[0]));
    if (tuples.len > 0) appendStringInfo(&filter, "%s%s", filter.len ? " OR " : "", tuples.data);
    return filter.len > 0 ? psprintf("(%s)", filter.data) : nullptr;
}

// The same groups as groups_filter, read from scratch `scratch` (the
// view's dstate, which holds one row per touched group): one text at every
// step, so the statements carrying it keep their plans (planning them
// again at every step was 7% of the replica's time under writers).  A
// semi-join, whatever the number of groups; only where no touched key is
// NULL (no `=` matches NULL).  mz_ names are reserved in views: the alias
// shadows no key.
char* scratch_groups_filter(const Keys& keys, const char* scratch) {
    StringInfoData outer, inner;
    initStringInfo(&outer);
    initStringInfo(&inner);
    for (int k = 0; k < keys.n; ++k) {
        appendStringInfo(&outer, "%s%s", k > 0 ? ", " : "", keys.names[k]);
        appendStringInfo(&inner, "%smz_d.%s", k > 0 ? ", " : "", keys.names[k]);
    }
    return psprintf("((%s) OPERATOR(pg_catalog.=) ANY (SELECT %s FROM %s mz_d))", outer.data,
                    inner.data, scratch);
}

// Whether a key of rows[0..count) (the first keys.n columns) is NULL.
bool any_null_key(HeapTuple* rows, TupleDesc desc, uint64 count, const Keys& keys) {
    for (uint64 r = 0; r < count; ++r)
        for (int c = 0; c < keys.n; ++c)
            if (SPI_getvalue(rows[r], desc, c + 1) == nullptr) return true;
    return false;
}

// (groups, filter) — and `unknown` where the declaration has a third
// column (1.1's _merge_sums; 1.0's has two).
Datum groups_result(FunctionCallInfo fcinfo, int64 groups, const char* filter,
                    const char* unknown = nullptr) {
    Datum values[3] = {Int64GetDatum(groups), filter ? CStringGetTextDatum(filter) : 0,
                       unknown ? CStringGetTextDatum(unknown) : 0};
    bool isnull[3] = {false, filter == nullptr, unknown == nullptr};
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE || desc->natts > 3)
        elog(ERROR, "function returning the touched groups must return a composite type");
    return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, isnull));
}

}  // namespace

namespace {

void keys_select_list(Query* q, int, int, void*) {
    if (key_clauses(q) == NIL) {
        // A branch of a set operation: each of its rows is a group.
        List* rows = NIL;
        ListCell* lc;
        foreach (lc, q->targetList)
            if (!lfirst_node(TargetEntry, lc)->resjunk) rows = lappend(rows, lfirst(lc));
        ungroup(q, rows);
        return;
    }
    Keys keys = group_keys(q);
    ungroup(q, keys.entries);
}

}  // namespace

// decoupled._touched_groups(plan regclass, owner oid, ts bigint,
//                           OUT groups bigint, OUT filter text)
// The groups of a 'groups' view that its inputs' changes at ts touch, and
// a condition on the view's key columns that selects exactly them (NULL
// when none is touched).
Datum decoupled_touched_groups(PG_FUNCTION_ARGS) {
    Prepared p = prepared_args(fcinfo);
    MemoryContext caller = CurrentMemoryContext;

    decoupled::OwnerScope scope;
    decoupled::enter_owner(p.plan, p.owner, p.ts, &scope);
    decoupled::serial_only();
    Query* q = plan_query(p.plan);
    Keys keys = group_keys(q);
    // Over a grouped subquery, its groups are the view's.
    int sub = grouped_subquery(q);
    bool probes = false;
    char* sql = psprintf("SELECT DISTINCT * FROM (%s) k",
                         changes_union(sub ? rt_fetch(sub, q->rtable)->subquery : q,
                                       keys_select_list, nullptr, &probes));

    SPI_connect();
    int level = partner_probe_settings(probes);
    if (decoupled::execute_kept(sql, true, 0) != SPI_OK_SELECT)
        elog(ERROR, "could not read the touched groups");
    if (level >= 0) AtEOXact_GUC(true, level);
    uint64 groups = SPI_processed;
    MemoryContext spi = MemoryContextSwitchTo(caller);
    char* filter = groups_filter(SPI_tuptable->vals, SPI_tuptable->tupdesc, groups, keys);
    MemoryContextSwitchTo(spi);
    SPI_finish();
    decoupled::leave_owner(&scope);
    PG_RETURN_DATUM(groups_result(fcinfo, static_cast<int64>(groups), filter));
}

// ---------------------------------------------------------------------------
// Kept counts and sums ('sums' views)
//
// State c<view>_state: the key columns (named as in the view), mz_n (the
// group's rows), per distinct aggregated expression j of count/sum/avg:
// mz_nn_j (its non-null values) and mz_s_j (their sum, numeric), and per
// distinct expression e of min/max: mz_lo_e and mz_hi_e (its extremes) and
// mz_rlo_e, mz_rhi_e (the extremes of a step's retracted values; NULL in
// the state).  mz_* names are reserved in a view's columns, so they never
// clash with a key.  A step aggregates the changes at t into
// c<view>_dstate (as the owner), adds them to the state (_merge_sums, as
// the extension: arithmetic and built-in comparisons only), and computes
// the touched groups' rows from the state (as the owner).
//
// An inserted value moves an extreme by comparison alone; a retracted one
// that reaches the kept extreme leaves the group's extreme unknown.  Those
// groups — few: a retraction must hit the group's minimum or maximum — are
// computed again at t from the input (_stage_sums with a filter, through
// the arrangement) and replace their state rows (_merge_sums with
// `replace`).
// ---------------------------------------------------------------------------

// Whether equal values of `type` compared under `collation` are always the
// same value, byte for byte — what its btree operator class's equalimage
// function says (deduplication asks it too).  A numeric 3.0 equals 3.00 and
// a float 0 equals -0: a group or an extreme kept from one of them would
// show its text where the recomputation shows the other's.  Such keys and
// extremes are recomputed with their touched groups instead.  Asked at
// every step (_merge_sums reads the view's sums): the operator class comes
// from the type cache.
bool decoupled::delta::equal_means_identical(Oid type, Oid collation) {
    // An array equals another only with the same bounds and equal elements
    // (array_ops declares no equalimage function of its own).
    Oid element = get_element_type(getBaseType(type));
    if (OidIsValid(element)) return equal_means_identical(element, collation);
    TypeCacheEntry* entry = lookup_type_cache(type, TYPECACHE_BTREE_OPFAMILY);
    if (!OidIsValid(entry->btree_opf)) return false;
    Oid proc = get_opfamily_proc(entry->btree_opf, entry->btree_opintype, entry->btree_opintype,
                                 BTEQUALIMAGE_PROC);
    return OidIsValid(proc) &&
           DatumGetBool(OidFunctionCall1Coll(proc, collation, ObjectIdGetDatum(type)));
}

namespace {

struct SumsContext {
    List* keys;  // key expressions, in GROUP BY order
    List* args;  // distinct aggregated expressions of count/sum/avg
    List* summable;  // per arg: is it an exact number (int2/4/8, numeric)?
    List* extremes;  // distinct aggregated expressions of min/max
    bool ok;     // only count, sum/avg of exact numbers, min/max of built-in
                 // types; no other input column
    bool mutate;
    bool allow_extremes;  // the catalog's SQL recomputes unknown extremes
    int final_args;       // with mutate: how many args the walk will find
    Oid kept_sum_int8, kept_sum_numeric, kept_avg;
};

// min/max of `arg` can be kept: a built-in base type (no domain, no
// user-defined comparison: _merge_sums compares as the extension) whose
// ordering is the btree one min and max follow, aggregated with its own
// collation into a value of its own type, whose equal values are identical.
bool keepable_extreme(Node* arg, Aggref* agg) {
    Oid type = exprType(arg);
    if (type >= FirstNormalObjectId || get_typtype(type) != TYPTYPE_BASE ||
        agg->aggtype != type || agg->inputcollid != exprCollation(arg) ||
        !decoupled::delta::equal_means_identical(type, exprCollation(arg)))
        return false;
    TypeCacheEntry* entry =
        lookup_type_cache(type, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR | TYPECACHE_CMP_PROC);
    return OidIsValid(entry->lt_opr) && OidIsValid(entry->gt_opr) &&
           OidIsValid(entry->cmp_proc) && operator_namespace(entry->lt_opr) == PG_CATALOG_NAMESPACE &&
           operator_namespace(entry->gt_opr) == PG_CATALOG_NAMESPACE;
}

// The position of `arg` among the distinct expressions in `*list`,
// appended if new (*added tells).
int distinct_index(List** list, Node* arg, bool* added) {
    int i = 0;
    ListCell* lc;
    foreach (lc, *list) {
        if (equal(lfirst(lc), arg)) return i;
        i++;
    }
    *list = lappend(*list, arg);
    *added = true;
    return i;
}

// Integers only: a numeric sum kept across retractions keeps the largest
// scale it ever saw, and its text would differ from the recomputation's.
bool exact_number(Oid type) { return type == INT2OID || type == INT4OID || type == INT8OID; }

int arg_index(SumsContext* c, Node* arg) {
    bool added = false;
    int j = distinct_index(&c->args, arg, &added);
    if (added) c->summable = lappend_int(c->summable, exact_number(exprType(arg)) ? 1 : 0);
    return j;
}

Node* kept_call(Oid fn, Oid result, Var* n, Var* s) {
    return reinterpret_cast<Node*>(makeFuncExpr(fn, result, list_make2(n, s), InvalidOid,
                                                InvalidOid, COERCE_EXPLICIT_CALL));
}

Node* to_state(Node* node, SumsContext* c);
bool state_walker(Node* node, void* context);
Node* state_mutator(Node* node, void* context);

using Mutator = Node* (*)();
Mutator as_mutator(Node* (*fn)(Node*, void*)) {
    return reinterpret_cast<Mutator>(reinterpret_cast<void (*)()>(fn));
}

// Replaces every key expression by the state's key column and every
// aggregate by what the state keeps; `ok` turns false at anything else.
Node* to_state(Node* node, SumsContext* c) {
    if (node == nullptr) return nullptr;
    int k = 1;
    ListCell* lc;
    foreach (lc, c->keys) {
        Node* key = static_cast<Node*>(lfirst(lc));
        if (equal(node, key))
            return reinterpret_cast<Node*>(makeVar(1, k, exprType(key), exprTypmod(key),
                                                   exprCollation(key), 0));
        k++;
    }
    int nkeys = list_length(c->keys);
    if (IsA(node, Aggref)) {
        auto* agg = reinterpret_cast<Aggref*>(node);
        const char* name = get_func_name(agg->aggfnoid);
        bool plain = agg->aggdistinct == NIL && agg->aggorder == NIL && agg->aggfilter == nullptr &&
                     agg->aggkind == AGGKIND_NORMAL && agg->agglevelsup == 0 &&
                     get_func_namespace(agg->aggfnoid) == PG_CATALOG_NAMESPACE && name != nullptr;
        if (plain && agg->aggstar && strcmp(name, "count") == 0)
            return reinterpret_cast<Node*>(makeVar(1, nkeys + 1, INT8OID, -1, InvalidOid, 0));
        if (!plain || agg->aggstar || list_length(agg->args) != 1) {
            c->ok = false;
            return node;
        }
        Node* arg = reinterpret_cast<Node*>(linitial_node(TargetEntry, agg->args)->expr);
        bool min = strcmp(name, "min") == 0, max = strcmp(name, "max") == 0;
        if (min || max) {
            if (!c->allow_extremes || !keepable_extreme(arg, agg)) {
                c->ok = false;
                return node;
            }
            bool added = false;
            int e = distinct_index(&c->extremes, arg, &added);
            if (!c->mutate) return node;
            int attno = nkeys + 2 + 2 * c->final_args + 4 * e + (min ? 0 : 1);
            return reinterpret_cast<Node*>(
                makeVar(1, attno, exprType(arg), -1, exprCollation(arg), 0));
        }
        bool sum = strcmp(name, "sum") == 0, avg = strcmp(name, "avg") == 0;
        if (!(strcmp(name, "count") == 0 || ((sum || avg) && exact_number(exprType(arg))))) {
            c->ok = false;
            return node;
        }
        int j = arg_index(c, arg);
        Var* nn = makeVar(1, nkeys + 2 + 2 * j, INT8OID, -1, InvalidOid, 0);
        Var* total = makeVar(1, nkeys + 3 + 2 * j, NUMERICOID, -1, InvalidOid, 0);
        if (!c->mutate) return node;
        if (strcmp(name, "count") == 0) return reinterpret_cast<Node*>(nn);
        if (avg) return kept_call(c->kept_avg, NUMERICOID, nn, total);
        return agg->aggtype == INT8OID ? kept_call(c->kept_sum_int8, INT8OID, nn, total)
                                       : kept_call(c->kept_sum_numeric, NUMERICOID, nn, total);
    }
    if (IsA(node, Var) && reinterpret_cast<Var*>(node)->varlevelsup == 0) c->ok = false;
    if (!c->mutate) {
        (void)expression_tree_walker(node, as_walker(state_walker), c);
        return node;
    }
    return expression_tree_mutator(node, as_mutator(state_mutator), c);
}

bool state_walker(Node* node, void* context) {
    (void)to_state(node, static_cast<SumsContext*>(context));
    return false;
}

Node* state_mutator(Node* node, void* context) {
    return to_state(node, static_cast<SumsContext*>(context));
}

Oid kept_function(const char* name) {
    Oid args[2] = {INT8OID, NUMERICOID};
    return LookupFuncName(list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup(name))), 2,
                          args, false);
}

// Walks (or, with `mutate`, rewrites) the select list and HAVING of a
// grouped query over the state.  `allow_extremes` false: min/max are not
// kept (a 1.0 catalog cannot recompute an unknown extreme).
SumsContext sums_of(Query* q, bool mutate, bool allow_extremes = true) {
    SumsContext c{NIL, NIL, NIL, NIL, true, mutate, allow_extremes, 0, InvalidOid, InvalidOid,
                  InvalidOid};
    // The extremes' columns follow every arg's: their positions need the
    // number of args, which a walk without rewriting finds first.
    if (mutate)
        c.final_args =
            list_length(sums_of(static_cast<Query*>(copyObjectImpl(q)), false, allow_extremes).args);
    ListCell* lc;
    foreach (lc, q->groupClause) {
        Expr* key = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), q->targetList)->expr;
        c.keys = lappend(c.keys, key);
        // A group kept under one of several equal keys shows that one's text.
        if (!decoupled::delta::equal_means_identical(exprType(reinterpret_cast<Node*>(key)),
                                   exprCollation(reinterpret_cast<Node*>(key))))
            c.ok = false;
    }
    if (mutate) {
        c.kept_sum_int8 = kept_function("_kept_sum_int8");
        c.kept_sum_numeric = kept_function("_kept_sum_numeric");
        c.kept_avg = kept_function("_kept_avg");
    }
    foreach (lc, q->targetList) {
        TargetEntry* te = lfirst_node(TargetEntry, lc);
        if (te->resjunk) continue;
        Node* kept = to_state(reinterpret_cast<Node*>(te->expr), &c);
        if (mutate) te->expr = reinterpret_cast<Expr*>(kept);
    }
    Node* having = to_state(q->havingQual, &c);
    if (mutate) q->havingQual = having;
    return c;
}

}  // namespace

// Whether this catalog's replica_maintain recomputes the groups whose kept
// extreme became unknown: its _merge_sums takes `replace` (1.1 on).  A 1.0
// catalog served by this library keeps min/max views recomputing groups.
bool catalog_keeps_extremes() {
    Oid args[4] = {REGCLASSOID, REGCLASSOID, REGCLASSOID, TEXTOID};
    return OidIsValid(LookupFuncName(
        list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup("_merge_sums"))), 4, args,
        true));
}

bool kept_sums_suffice(Query* q) {
    return sums_of(static_cast<Query*>(copyObjectImpl(q)), false, catalog_keeps_extremes()).ok;
}

// Whether a 'sums' view keeps a min or max.
bool kept_extremes(Query* q) {
    return sums_of(static_cast<Query*>(copyObjectImpl(q)), false).extremes != NIL;
}

// The distinct arguments of its min and max (over q's inputs), in the
// order of the state's mz_lo_e columns.
List* kept_extreme_args(Query* q) {
    return sums_of(static_cast<Query*>(copyObjectImpl(q)), false).extremes;
}

// decoupled._mv_kept_state(plan regclass, OUT columns text, OUT keys text)
// The state table's column definitions and its key columns, for a 'sums'
// view.
Datum decoupled_mv_kept_state(PG_FUNCTION_ARGS) {
    Query* q = plan_query(PG_GETARG_OID(0));
    Keys keys = group_keys(q);
    SumsContext c = sums_of(q, false);
    StringInfoData columns, key_list;
    initStringInfo(&columns);
    initStringInfo(&key_list);
    ListCell* lc;
    int k = 0;
    foreach (lc, keys.entries) {
        Node* expr = reinterpret_cast<Node*>(lfirst_node(TargetEntry, lc)->expr);
        Oid collation = exprCollation(expr);
        appendStringInfo(&columns, "%s %s%s%s, ", keys.names[k],
                         format_type_with_typemod(exprType(expr), exprTypmod(expr)),
                         OidIsValid(collation) && collation != get_typcollation(exprType(expr))
                             ? " COLLATE "
                             : "",
                         OidIsValid(collation) && collation != get_typcollation(exprType(expr))
                             ? generate_collation_name(collation)
                             : "");
        appendStringInfo(&key_list, "%s%s", k > 0 ? ", " : "", keys.names[k]);
        k++;
    }
    appendStringInfoString(&columns, "mz_n bigint NOT NULL");
    for (int j = 0; j < list_length(c.args); ++j)
        appendStringInfo(&columns, ", mz_nn_%d bigint NOT NULL, mz_s_%d numeric NOT NULL", j + 1, j + 1);
    int e = 1;
    foreach (lc, c.extremes) {
        Node* arg = static_cast<Node*>(lfirst(lc));
        Oid type = exprType(arg), collation = exprCollation(arg);
        char* column_type = psprintf(
            "%s%s%s", format_type_extended(type, -1, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY),
            OidIsValid(collation) && collation != get_typcollation(type) ? " COLLATE " : "",
            OidIsValid(collation) && collation != get_typcollation(type)
                ? generate_collation_name(collation)
                : "");
        for (const char* part : {"lo", "hi", "rlo", "rhi"})
            appendStringInfo(&columns, ", mz_%s_%d %s", part, e, column_type);
        e++;
    }
    Datum values[2] = {CStringGetTextDatum(columns.data), CStringGetTextDatum(key_list.data)};
    bool nulls[2] = {false, false};
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "_mv_kept_state must return a composite type");
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

namespace {

// Keys, then mz_diff (changes only), then the aggregated expressions of
// count/sum/avg and of min/max.  Theirs are mz_ names: a filter on the
// keys' names reads these rows too.
List* sums_select_list(Query* q, TargetEntry* diff) {
    Keys keys = group_keys(q);
    SumsContext c = sums_of(static_cast<Query*>(copyObjectImpl(q)), false);
    List* tlist = keys.entries;
    if (diff) {
        diff->resno = list_length(tlist) + 1;
        tlist = lappend(tlist, diff);
    }
    ListCell* lc;
    foreach (lc, list_concat_copy(c.args, c.extremes))
        tlist = lappend(tlist, makeTargetEntry(static_cast<Expr*>(lfirst(lc)), list_length(tlist) + 1,
                                               psprintf("mz_a%d", list_length(tlist) + 1), false));
    return tlist;
}

// With `partials` (a view without min/max over several inputs), each term
// also outputs per aggregated expression the partial count and sum of the
// changes it aggregated before joining them (preaggregate.cpp).
void sums_changes_select_list(Query* q, int changed_rti, int changed_ncols, void* partials) {
    int nkeys = list_length(key_entries(q));
    ungroup(q, sums_select_list(q, diff_entry(q, changed_rti, changed_ncols)));
    if (partials)
        append_partials(q, changed_rti, changed_ncols, nkeys, static_cast<Partials*>(partials));
}

}  // namespace

// Whether input `id` has the arrangement on `expression` (its index on
// cur, named as _arrange names it): a view made before its steps probed
// in order has the one on its keys alone, through which an ordered probe
// would read the group's rows twice per extreme.
bool has_arrangement(int64 id, const char* expression) {
    if (expression == nullptr) return false;
    char md5[MD5_PASSWD_LEN + 1];
    const char* error = nullptr;
    if (!pg_md5_hash(expression, strlen(expression), md5, &error))
        elog(ERROR, "could not name an arrangement: %s", error ? error : "md5 failed");
    char* name = psprintf("c" INT64_FORMAT "_a%.12s_cur", id, md5);
    return OidIsValid(get_relname_relid(name, get_namespace_oid("decoupled_storage", false)));
}

// The name of `relid`'s sibling in the view's storage: its own name with
// `suffix` (which it must end with) replaced by `sibling`.
char* sibling_name(Oid relid, const char* suffix, const char* sibling) {
    char* name = get_rel_name(relid);
    size_t len = name ? strlen(name) : 0, n = strlen(suffix);
    if (len < n || strcmp(name + len - n, suffix) != 0)
        elog(ERROR, "relation %u is no view storage named *%s", relid, suffix);
    return psprintf("%.*s%s", static_cast<int>(len - n), name, sibling);
}

// The kept state beside the aggregated changes `dstate` (c<id>_state
// beside c<id>_dstate), qualified.
char* state_of(Oid dstate) {
    return quote_qualified_identifier(get_namespace_name(get_rel_namespace(dstate)),
                                      sibling_name(dstate, "_dstate", "_state"));
}

// The one input whose arrangement on (key, value) answers `q`'s groups'
// extremes by ordered probes (ordered_extremes_sql); nullptr where the
// view groups by more than one key, reads more than one input, or the
// arrangement is not there (a view made before those probes).
Input* ordered_probe_input(Query* q, const Keys& keys, const SumsContext& c) {
    if (keys.n != 1) return nullptr;
    List* inputs;
    (void)describe(q, &inputs);
    if (list_length(inputs) != 1) return nullptr;
    auto* in = static_cast<Input*>(linitial(inputs));
    if (in->outer != NIL || !has_arrangement(in->id, ordered_arrangement(q, in, c.extremes)))
        return nullptr;
    return in;
}

// The rows of the groups `filter` selects when only their extremes are
// unknown (a retraction reached them): counts and sums from the state,
// which has them exact, and each extreme the least (greatest) of the
// first row of the input's cur and of its dead at as_of, in the order
// of that value within the group — an ordered probe of the arrangement on
// (keys, value), which stops at the first visible row, where computing
// the group again read all its rows (1,000 of them on as many pages per
// group over 1,000,000 rows).  Each part is read apart: through the
// union of both the planner orders by a sort, not an index.  NULL where
// the view reads more than one input, groups by more than one key, or
// names groups by literals (then every aggregate is computed again).
char* ordered_extremes_sql(Query* q, const Keys& keys, const SumsContext& c, Oid dstate,
                           const char* filter) {
    if (decoupled::names_literals(filter) || strcmp(filter, "true") == 0) return nullptr;
    q = static_cast<Query*>(copyObjectImpl(q));  // the caller's stays as it was
    Input* in = ordered_probe_input(q, keys, c);
    if (in == nullptr) return nullptr;
    // The view's rows before grouping (keys, args, extremes), from one
    // part of the input's history.
    ungroup(q, sums_select_list(q, nullptr));
    char* parts[2];
    const char* part_names[2] = {"history_cur", "history_dead"};
    for (int i = 0; i < 2; ++i) {
        Query* rows = static_cast<Query*>(copyObjectImpl(q));
        (void)read_storage_view(rows, in->rti, in->id, part_names[i], false);
        parts[i] = pg_get_querydef(rows, false);
    }
    StringInfoData names, sql;
    initStringInfo(&names);
    initStringInfo(&sql);
    appendStringInfoString(&names, "k1");
    for (int j = 1; j <= list_length(c.args); ++j) appendStringInfo(&names, ", a%d", j);
    for (int e = 1; e <= list_length(c.extremes); ++e) appendStringInfo(&names, ", e%d", e);
    const char* key = keys.names[0];  // quoted already (group_keys)
    const char* equal_key = psprintf("x.k1 OPERATOR(pg_catalog.=) mz_u.%s", key);
    appendStringInfo(&sql, "SELECT mz_u.%s, mz_u.mz_n", key);
    for (int j = 1; j <= list_length(c.args); ++j) appendStringInfo(&sql, ", mz_u.mz_nn_%d, mz_u.mz_s_%d", j, j);
    int e = 1;
    ListCell* lc;
    foreach (lc, c.extremes) {
        char* type = format_type_extended(exprType(static_cast<Node*>(lfirst(lc))), -1,
                                          FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
        for (const char* order : {"", " DESC"}) {
            appendStringInfoString(&sql, *order ? ", GREATEST(" : ", LEAST(");
            // The NULL group (GROUP BY puts NULL keys together) is
            // probed by IS NULL, which the arrangement answers too: an
            // equality never matches it.
            for (int i = 0; i < 2; ++i) {
                const char* conds[2] = {"x.k1 IS NULL", equal_key};
                appendStringInfo(&sql, "%sCASE WHEN mz_u.%s IS NULL THEN ", i > 0 ? ", " : "", key);
                for (int n = 0; n < 2; ++n)
                    appendStringInfo(&sql,
                                     "%s(SELECT x.e%d FROM (%s) x(%s) "
                                     "WHERE %s AND x.e%d IS NOT NULL ORDER BY x.e%d%s LIMIT 1)",
                                     n > 0 ? " ELSE " : "", e, parts[i], names.data, conds[n], e,
                                     e, order);
                appendStringInfoString(&sql, " END");
            }
            appendStringInfoChar(&sql, ')');
        }
        appendStringInfo(&sql, ", NULL::%s, NULL::%s", type, type);
        e++;
    }
    appendStringInfo(&sql, " FROM %s mz_u WHERE %s", state_of(dstate), filter);
    return sql.data;
}

// The statement that stages the aggregated changes at the step's time
// (with `initial`, the view's groups then: all, or those `filter`
// selects).  Sets *probes when it probes an input once per row.
char* aggregated_sql(Query* q, const Keys& keys, const SumsContext& c, bool initial,
                     const char* filter, bool* probes) {
    char* rows_sql;
    if (initial) {
        ungroup(q, sums_select_list(q, nullptr));
        rows_sql = pg_get_querydef(q, false);
        // Pushed down to the input, where the arrangement answers it.
        if (filter) rows_sql = psprintf("SELECT * FROM (%s) r WHERE %s", rows_sql, filter);
    }
    Partials partials{c.summable};
    bool with_partials = !initial && c.extremes == NIL && list_length(inputs_of(q)) > 1;
    if (!initial)
        rows_sql = changes_union(q, sums_changes_select_list, with_partials ? &partials : nullptr,
                                 probes, with_partials ? &partials : nullptr);
    ListCell* lc;

    StringInfoData sql, names;
    initStringInfo(&sql);
    initStringInfo(&names);
    // The aggregated changes the terms read, once for all of them.
    appendStringInfo(&sql, "%sSELECT ", with_shared_changes(with_partials ? &partials : nullptr));
    for (int k = 1; k <= keys.n; ++k) {
        appendStringInfo(&sql, "x.k%d, ", k);
        appendStringInfo(&names, "%sk%d", k > 1 ? ", " : "", k);
    }
    appendStringInfoString(&sql, initial ? "count(*)" : "sum(x.d)::pg_catalog.int8");
    if (!initial) appendStringInfoString(&names, ", d");
    int j = 1;
    foreach (lc, c.summable) {
        bool summable = lfirst_int(lc) != 0;  // count(x) of another type: no sum
        appendStringInfo(&names, ", a%d", j);
        if (initial)
            appendStringInfo(&sql, ", count(x.a%d), %s", j,
                             summable ? psprintf("coalesce(sum(x.a%d::pg_catalog.int8), 0)", j)
                                      : "0::pg_catalog.numeric");
        else if (with_partials)
            appendStringInfo(&sql,
                             ", (coalesce(sum(CASE WHEN x.a%d IS NULL THEN 0 ELSE x.d END), 0)"
                             " + coalesce(sum(x.pn%d), 0))::pg_catalog.int8, %s",
                             j, j,
                             summable ? psprintf("coalesce(%s, 0) + coalesce(sum(x.ps%d), 0)",
                                                 weighted_sum_sql("x.d", psprintf("x.a%d", j)), j)
                                      : "0::pg_catalog.numeric");
        else
            appendStringInfo(&sql,
                             ", coalesce(sum(CASE WHEN x.a%d IS NULL THEN 0 ELSE x.d END), 0)"
                             "::pg_catalog.int8, %s",
                             j,
                             summable ? psprintf("coalesce(%s, 0)",
                                                 weighted_sum_sql("x.d", psprintf("x.a%d", j)))
                                      : "0::pg_catalog.numeric");
        j++;
    }
    if (with_partials)
        for (int k = 1; k <= list_length(c.summable); ++k) appendStringInfo(&names, ", pn%d, ps%d", k, k);
    int e = 1;
    foreach (lc, c.extremes) {
        char* type = format_type_extended(exprType(static_cast<Node*>(lfirst(lc))), -1,
                                          FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
        appendStringInfo(&names, ", e%d", e);
        if (initial)
            appendStringInfo(&sql, ", min(x.e%d), max(x.e%d), NULL::%s, NULL::%s", e, e, type, type);
        else
            appendStringInfo(&sql,
                             ", min(x.e%d) FILTER (WHERE x.d OPERATOR(pg_catalog.>) 0)"
                             ", max(x.e%d) FILTER (WHERE x.d OPERATOR(pg_catalog.>) 0)"
                             ", min(x.e%d) FILTER (WHERE x.d OPERATOR(pg_catalog.<) 0)"
                             ", max(x.e%d) FILTER (WHERE x.d OPERATOR(pg_catalog.<) 0)",
                             e, e, e, e);
        e++;
    }
    appendStringInfo(&sql, " FROM (%s) x(%s) GROUP BY ", rows_sql, names.data);
    for (int k = 1; k <= keys.n; ++k) appendStringInfo(&sql, "%sx.k%d", k > 1 ? ", " : "", k);
    return sql.data;
}

// decoupled._stage_sums(plan regclass, owner oid, ts bigint, target regclass,
//                       initial boolean, filter text DEFAULT NULL) -> bigint
// Per group: the count of rows and, per aggregated expression, of its
// non-null values and their sum, or its extremes — of the inputs' changes
// at ts (counted with their signs; the extremes of the inserted and of the
// retracted values apart), or with `initial` of the view's rows at ts (with
// `filter`, of the groups it selects only) — as the owner, into target
// (the view's dstate).
Datum decoupled_stage_sums(PG_FUNCTION_ARGS) {
    Prepared p = prepared_args(fcinfo);
    if (PG_ARGISNULL(3) || PG_ARGISNULL(4)) elog(ERROR, "target and initial must not be null");
    Oid target_oid = PG_GETARG_OID(3);
    bool initial = PG_GETARG_BOOL(4);
    char* filter = PG_NARGS() > 5 && !PG_ARGISNULL(5) ? text_to_cstring(PG_GETARG_TEXT_PP(5)) : nullptr;
    if (filter && !initial) elog(ERROR, "_stage_sums: a filter needs initial");

    Relation target = table_open(target_oid, RowExclusiveLock);
    // What the last step's _merge_sums left there (its touched groups).
    if (decoupled::is_scratch(target_oid)) decoupled::clear_scratch(target_oid);
    decoupled::OwnerScope scope;
    decoupled::enter_owner(p.plan, p.owner, p.ts, &scope);
    if (!initial || filter) decoupled::serial_only();
    // A step's changes, of a view over one input: the same text at every
    // step (step_texts.hpp).  Over several, the terms depend on which
    // inputs changed and by how much; "" is kept for them, so that their
    // steps need not find that out again.
    bool probes = false;
    const char* statement =
        initial ? nullptr : decoupled::kept_step_text(p.plan, decoupled::StepText::kChangeSums, &probes);
    bool known = statement != nullptr;
    if (statement == nullptr || statement[0] == '\0') {
        Query* q = plan_query(p.plan);
        Keys keys = group_keys(q);
        SumsContext c = sums_of(static_cast<Query*>(copyObjectImpl(q)), false);
        // Groups whose extremes alone are unknown: ordered probes instead,
        // planned without bitmap scans (which cannot return rows in order: a
        // bitmap scan of the group and a sort would read all its rows).
        char* ordered = filter ? ordered_extremes_sql(q, keys, c, target_oid, filter) : nullptr;
        probes = ordered != nullptr;
        bool one_input = !initial && !known && q->setOperations == nullptr &&
                         list_length(inputs_of(q)) == 1;
        statement = ordered ? ordered : aggregated_sql(q, keys, c, initial, filter, &probes);
        if (!initial && !known)
            decoupled::keep_step_text(p.plan, decoupled::StepText::kChangeSums,
                                      one_input ? statement : "", probes);
    }
    // The first computation runs once, and a filter with literals names
    // this step's groups: their plans are not kept.
    int level = partner_probe_settings(probes);
    uint64 rows = decoupled::stage_rows(target, statement, p.ts,
                                        !initial || (filter && !decoupled::names_literals(filter)));
    if (level >= 0) AtEOXact_GUC(true, level);
    decoupled::leave_owner(&scope);
    table_close(target, NoLock);
    PG_RETURN_INT64(static_cast<int64>(rows));
}

// Whether the groups whose extremes became unknown are computed afresh by
// one pass over the input rather than group by group.  Ordered probes cost
// a few index probes a group whatever its size, so they are weighed
// against the input's rows; computing a group again reads all its rows,
// so that is weighed against the view's (the state's) groups.  `by_state`:
// the groups are named by the state's marks, not by literals, which
// ordered probes need (ordered_extremes_sql).
bool unknown_in_full(Query* q, const Keys& keys, const SumsContext& c, int64 unknown,
                     Oid state, bool by_state) {
    Input* in = by_state ? ordered_probe_input(static_cast<Query*>(copyObjectImpl(q)), keys, c)
                         : nullptr;
    if (in != nullptr)
        return decoupled::probe_extremes_in_full(unknown, live_rows(storage_view(in->id, "cur")));
    return decoupled::recompute_touched_groups_in_full(unknown, live_rows(state));
}

// The state rows an UPDATE or INSERT returned (`rows` of `returned`, whose
// columns `ctid_col` and `n_col` are the row's ctid and mz_n) that it left
// with a count of 0 are deleted: their groups are gone.  By ctid, not by an
// index on mz_n: an index on it would make every update of a group's count
// a non-HOT update, with a new entry in the key index (docs/performance.md).
void delete_emptied(const char* state, SPITupleTable* returned, uint64 rows, int ctid_col,
                    int n_col) {
    Datum* tids = nullptr;
    int ntids = 0;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        Datum n = SPI_getbinval(returned->vals[r], returned->tupdesc, n_col, &isnull);
        if (isnull || DatumGetInt64(n) != 0) continue;
        if (tids == nullptr) tids = static_cast<Datum*>(palloc(sizeof(Datum) * rows));
        tids[ntids++] = SPI_getbinval(returned->vals[r], returned->tupdesc, ctid_col, &isnull);
    }
    if (ntids == 0) return;
    Oid types[1] = {TIDARRAYOID};
    Datum args[1] = {PointerGetDatum(
        construct_array(tids, ntids, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT))};
    char* sql = psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)", state);
    if (SPI_execute_plan(decoupled::statement_plan(sql, 1, types), args, nullptr, false, 0) !=
            SPI_OK_DELETE ||
        SPI_processed != static_cast<uint64>(ntids))
        elog(ERROR, "could not delete the emptied groups of %s", state);
}

// decoupled._merge_sums(plan regclass, state regclass, dstate regclass,
//                       replace text DEFAULT NULL,
//                       OUT groups bigint, OUT filter text, OUT unknown text)
// Adds the aggregated changes in dstate to the state (a group whose count
// reaches 0 goes) and returns the touched groups as a condition on the key
// columns, and those whose kept extreme a retraction reached (`unknown`,
// NULL if none; `true` if so many that computing every group is cheaper)
// as another.  With `replace`, the groups it selects are
// replaced by dstate's rows instead (computed afresh).  Arithmetic and
// built-in comparisons only: run as the extension.
Datum decoupled_merge_sums(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 3; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "_merge_sums: argument %d must not be null", i + 1);
    Query* q = plan_query(PG_GETARG_OID(0));
    char* state = decoupled::locked_relation_name(PG_GETARG_OID(1));
    Oid dstate_relid = PG_GETARG_OID(2);
    char* replace = PG_NARGS() > 3 && !PG_ARGISNULL(3) ? text_to_cstring(PG_GETARG_TEXT_PP(3)) : nullptr;
    // The aggregated changes are a scratch in memory (scratch.hpp).
    char* dstate = decoupled::scratch_name(dstate_relid);
    Keys keys = group_keys(q);
    SumsContext c = sums_of(q, false);
    MemoryContext caller = CurrentMemoryContext;

    SPI_connect();
    decoupled::expose_scratch(dstate_relid);
    if (replace) {
        char* remove = psprintf("DELETE FROM %s WHERE %s", state, replace);
        decoupled::not_decoded([&] {
            if ((decoupled::names_literals(replace) ? SPI_execute(remove, false, 0)
                                         : decoupled::execute_kept(remove, false, 0)) !=
                    SPI_OK_DELETE ||
                decoupled::execute_kept(psprintf("INSERT INTO %s SELECT * FROM %s", state, dstate),
                                        false, 0) != SPI_OK_INSERT)
                elog(ERROR, "could not replace the groups of %s", state);
        });
        decoupled::clear_scratch(dstate_relid);
        SPI_finish();
        PG_RETURN_DATUM(groups_result(fcinfo, 0, nullptr, nullptr));
    }

    // The state's unique index on the keys (NULLS NOT DISTINCT) finds each
    // group; a group whose count reaches 0 is deleted by the ctid the
    // statement returns (delete_emptied).  A kept extreme takes the
    // inserted values'; the retracted values' extreme stays in mz_rlo/mz_rhi only where it
    // reaches the kept one and no inserted value lies strictly beyond it
    // (then the extreme is unknown: RETURNING shows it, and the state keeps
    // the mark until the group's row is replaced).  Strictly: a join's
    // changes may insert and retract one value at once, which cancels; a
    // value beyond every retracted one was not retracted.
    StringInfoData set, key_list, unknown, unknown_marked;
    initStringInfo(&set);
    initStringInfo(&key_list);
    initStringInfo(&unknown);
    initStringInfo(&unknown_marked);
    for (int k = 0; k < keys.n; ++k)
        appendStringInfo(&key_list, "%s%s", k > 0 ? ", " : "", keys.names[k]);
    // The counts and sums added: the state's `s` plus the changes' `from`.
    auto add_sums = [&](StringInfo to, const char* from) {
        appendStringInfo(to, "mz_n = s.mz_n OPERATOR(pg_catalog.+) %s.mz_n", from);
        for (int j = 1; j <= list_length(c.args); ++j)
            appendStringInfo(to,
                             ", mz_nn_%d = s.mz_nn_%d OPERATOR(pg_catalog.+) %s.mz_nn_%d"
                             ", mz_s_%d = s.mz_s_%d OPERATOR(pg_catalog.+) %s.mz_s_%d",
                             j, j, from, j, j, j, from, j);
    };
    add_sums(&set, "EXCLUDED");
    for (int e = 1; e <= list_length(c.extremes); ++e) {
        appendStringInfo(&set,
                         ", mz_lo_%d = LEAST(s.mz_lo_%d, EXCLUDED.mz_lo_%d)"
                         ", mz_hi_%d = GREATEST(s.mz_hi_%d, EXCLUDED.mz_hi_%d)"
                         ", mz_rlo_%d = CASE WHEN EXCLUDED.mz_rlo_%d OPERATOR(pg_catalog.>) s.mz_lo_%d"
                         " OR EXCLUDED.mz_lo_%d OPERATOR(pg_catalog.<) EXCLUDED.mz_rlo_%d"
                         " THEN NULL ELSE EXCLUDED.mz_rlo_%d END"
                         ", mz_rhi_%d = CASE WHEN EXCLUDED.mz_rhi_%d OPERATOR(pg_catalog.<) s.mz_hi_%d"
                         " OR EXCLUDED.mz_hi_%d OPERATOR(pg_catalog.>) EXCLUDED.mz_rhi_%d"
                         " THEN NULL ELSE EXCLUDED.mz_rhi_%d END",
                         e, e, e, e, e, e, e, e, e, e, e, e, e, e, e, e, e, e);
        appendStringInfo(&unknown, "%smz_rlo_%d IS NOT NULL OR mz_rhi_%d IS NOT NULL",
                         e > 1 ? " OR " : "", e, e);
        appendStringInfo(&unknown_marked, "%su.mz_rlo_%d IS NOT NULL OR u.mz_rhi_%d IS NOT NULL",
                         e > 1 ? " OR " : "", e, e);
    }

    if (decoupled::execute_kept(psprintf("SELECT %s FROM %s", key_list.data, dstate), true, 0) !=
        SPI_OK_SELECT)
        elog(ERROR, "could not read the aggregated changes");
    uint64 groups = SPI_processed;
    SPITupleTable* touched = SPI_tuptable;  // until SPI_finish
    char* filter = nullptr;
    char* unknown_filter = nullptr;
    // Without kept extremes and NULL keys, the groups the state has are
    // updated by a join that probes its key index and only new groups are
    // inserted: INSERT ... ON CONFLICT locked each row it updated and
    // checked the index for a conflict first (1.9 ms of a 1,000-change
    // step's 630 groups; docs/performance.md).
    bool by_update = groups > 0 && unknown.len == 0 &&
                     !any_null_key(touched->vals, touched->tupdesc, groups, keys);
    if (by_update) decoupled::not_decoded([&] {
        StringInfoData matched, update_set;
        initStringInfo(&matched);
        initStringInfo(&update_set);
        for (int k = 0; k < keys.n; ++k)
            appendStringInfo(&matched, "%ss.%s OPERATOR(pg_catalog.=) d.%s", k > 0 ? " AND " : "",
                             keys.names[k], keys.names[k]);
        add_sums(&update_set, "d");
        static const char* const probes_only[] = {"enable_seqscan", "enable_bitmapscan",
                                                  "enable_hashjoin", "enable_mergejoin", nullptr};
        int level = decoupled::planner_settings_off(probes_only);
        int updated = decoupled::execute_kept(
            psprintf("UPDATE %s s SET %s FROM %s d WHERE %s RETURNING s.ctid, s.mz_n", state,
                     update_set.data, dstate, matched.data),
            false, 0);
        AtEOXact_GUC(true, level);
        if (updated != SPI_OK_UPDATE_RETURNING)
            elog(ERROR, "could not add the aggregated changes to %s", state);
        uint64 found = SPI_processed;
        SPITupleTable* updated_rows = SPI_tuptable;  // until SPI_finish
        // New groups (before the emptied ones go: they are not new); one
        // whose changes net to no row is none.
        if (found < groups &&
            decoupled::execute_kept(psprintf("INSERT INTO %s SELECT d.* FROM %s d "
                                             "WHERE d.mz_n OPERATOR(pg_catalog.<>) 0 AND NOT EXISTS "
                                             "(SELECT FROM %s s WHERE %s)",
                                             state, dstate, state, matched.data),
                                    false, 0) != SPI_OK_INSERT)
            elog(ERROR, "could not add the aggregated changes to %s", state);
        delete_emptied(state, updated_rows, found, 1, 2);
    });
    if (groups > 0 && !by_update) decoupled::not_decoded([&] {
        // The row's ctid and count come last (delete_emptied).
        char* returning = unknown.len > 0 ? psprintf(" RETURNING %s, %s, s.ctid, s.mz_n",
                                                     key_list.data, unknown.data)
                                          : pstrdup(" RETURNING s.ctid, s.mz_n");
        int merged = decoupled::execute_kept(psprintf("INSERT INTO %s AS s SELECT * FROM %s "
                                                      "ON CONFLICT (%s) DO UPDATE SET %s%s",
                                                      state, dstate, key_list.data, set.data,
                                                      returning),
                                             false, 0);
        if (merged != SPI_OK_INSERT_RETURNING)
            elog(ERROR, "could not add the aggregated changes to %s", state);
        SPITupleTable* returned = SPI_tuptable;
        uint64 nreturned = SPI_processed;
        int returned_cols = returned->tupdesc->natts;
        if (unknown.len > 0) {
            HeapTuple* unknown_rows = static_cast<HeapTuple*>(palloc(sizeof(HeapTuple) * nreturned));
            uint64 nunknown = 0;
            for (uint64 r = 0; r < nreturned; ++r) {
                bool isnull;
                Datum flag = SPI_getbinval(returned->vals[r], returned->tupdesc, keys.n + 1, &isnull);
                if (!isnull && DatumGetBool(flag)) unknown_rows[nunknown++] = returned->vals[r];
            }
            MemoryContext spi_context = MemoryContextSwitchTo(caller);
            // Many unknown groups: one pass over the input is cheaper than
            // a probe per group (the step-size rule of 'groups' views).
            bool null_key = false;
            for (uint64 r = 0; r < nunknown; ++r)
                for (int k = 0; k < keys.n; ++k)
                    null_key |= SPI_getvalue(unknown_rows[r], returned->tupdesc, k + 1) == nullptr;
            bool by_state = keys.n == 1 && !OidIsValid(get_element_type(keys.types[0])) && !null_key;
            if (nunknown == 0)
                unknown_filter = nullptr;
            else if (unknown_in_full(q, keys, c, static_cast<int64>(nunknown), PG_GETARG_OID(1),
                                     by_state))
                unknown_filter = pstrdup("true");
            else if (by_state)
                // The state marks them: a text without literals, whose plans
                // are kept (an ANY over a subquery's array is pushed down to
                // the arrangement, as in restrict_partners).
                unknown_filter = psprintf(
                    "%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT u.%s FROM %s u WHERE %s))",
                    keys.names[0], keys.names[0], state, unknown_marked.data);
            else
                unknown_filter = groups_filter(unknown_rows, returned->tupdesc, nunknown, keys);
            MemoryContextSwitchTo(spi_context);
        }
        delete_emptied(state, returned, nreturned, returned_cols - 1, returned_cols);
    });
    // The touched groups: where the step goes on with them (1.1's step, no
    // group to compute again, no NULL key), as dstate's rows, which stay
    // for _stage_kept and _replace_staged (the next _stage_sums clears
    // them); otherwise by literals.
    bool by_scratch = false;
    if (groups > 0) {
        TupleDesc declared;
        by_scratch = unknown_filter == nullptr &&
                     get_call_result_type(fcinfo, nullptr, &declared) == TYPEFUNC_COMPOSITE &&
                     declared->natts == 3 &&
                     !any_null_key(touched->vals, touched->tupdesc, groups, keys);
        MemoryContext spi = MemoryContextSwitchTo(caller);
        filter = by_scratch ? scratch_groups_filter(keys, dstate)
                            : groups_filter(touched->vals, touched->tupdesc, groups, keys);
        MemoryContextSwitchTo(spi);
    }
    if (!by_scratch) decoupled::clear_scratch(dstate_relid);
    SPI_finish();
    PG_RETURN_DATUM(groups_result(fcinfo, static_cast<int64>(groups), filter, unknown_filter));
}

// The dstate scratch of the view whose state is `state` (c<id>_dstate
// beside c<id>_state).
Oid dstate_of(Oid state) {
    Oid relid = get_relname_relid(sibling_name(state, "_state", "_dstate"), get_rel_namespace(state));
    if (!OidIsValid(relid) || !decoupled::is_scratch(relid))
        elog(ERROR, "the kept state %u has no aggregated changes", state);
    return relid;
}

char* kept_rows_sql(Oid plan, Oid state);

// decoupled._stage_kept(plan regclass, owner oid, ts bigint, state regclass,
//                       target regclass, filter text) -> bigint
// The rows of the groups `filter` selects, computed from the kept state —
// the view's select list and HAVING with each aggregate replaced by what
// the state keeps — as the owner, into target as (ts, +1, key, hash, row).
Datum decoupled_stage_kept(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 6; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "_stage_kept: argument %d must not be null", i + 1);
    Oid plan = PG_GETARG_OID(0);
    Oid owner = PG_GETARG_OID(1);
    int64 ts = PG_GETARG_INT64(2);
    Oid state = PG_GETARG_OID(3);
    Oid target_oid = PG_GETARG_OID(4);
    char* filter = text_to_cstring(PG_GETARG_TEXT_PP(5));

    Relation target = table_open(target_oid, RowExclusiveLock);
    decoupled::OwnerScope scope;
    decoupled::enter_owner(plan, owner, ts, &scope);
    decoupled::serial_only();
    // The same text at every step (step_texts.hpp) but for the filter, which
    // names the touched groups by literals or through the view's dstate.
    const char* rows_sql = decoupled::kept_step_text(plan, decoupled::StepText::kKeptRows, nullptr);
    if (rows_sql == nullptr) {
        rows_sql = kept_rows_sql(plan, state);
        decoupled::keep_step_text(plan, decoupled::StepText::kKeptRows, rows_sql, false);
    }
    const char* place = strrchr(rows_sql, '\x01');
    char* sql = psprintf("%.*s%s%s", static_cast<int>(place - rows_sql), rows_sql, filter, place + 1);
    // A filter with literals names this step's touched groups (a new text
    // every time); one without reads them from the view's dstate.
    bool literals = decoupled::names_literals(filter);
    uint64 rows = decoupled::stage_rows(target, sql, ts, !literals,
                                        literals ? InvalidOid : dstate_of(state));
    decoupled::leave_owner(&scope);
    table_close(target, NoLock);
    PG_RETURN_INT64(static_cast<int64>(rows));
}

// The staging statement of _stage_kept for the view whose written plan is
// `plan` and kept state `state`, with a \x01 where the condition naming the
// touched groups goes: the last one in the text (what follows it is the
// extension's own, while the select list and HAVING before it may hold
// literals of any character).
char* kept_rows_sql(Oid plan, Oid state) {
    Query* q = plan_query(plan);
    SumsContext c = sums_of(q, true);
    if (!c.ok) elog(ERROR, "the written plan is no longer maintained by kept sums");
    List* context = deparse_context_for("s", state);
    StringInfoData select;
    initStringInfo(&select);
    int nout = 0;
    ListCell* lc;
    foreach (lc, q->targetList) {
        TargetEntry* te = lfirst_node(TargetEntry, lc);
        if (te->resjunk) continue;
        appendStringInfo(&select, "%s%s", nout++ > 0 ? ", " : "",
                         deparse_expression(reinterpret_cast<Node*>(te->expr), context, true, false));
    }
    char* having = q->havingQual
                       ? psprintf(" AND (%s)", deparse_expression(q->havingQual, context, true, false))
                       : pstrdup("");
    char* sql = decoupled::staging_sql(
        "1", positional_names(nout, "d."),
        psprintf("(SELECT %s FROM %s s WHERE s.mz_n OPERATOR(pg_catalog.>) 0%s AND "
                 "\x01) d(%s)",
                 select.data, decoupled::locked_relation_name(state), having,
                 positional_names(nout, "")));
    return sql;
}

// decoupled._kept_sum_int8(n bigint, s numeric) -> bigint, and friends:
// sum() and avg() of a group from its kept count of non-null values and
// their sum; NULL when there is none.  avg divides as numeric avg() does.
Datum decoupled_kept_sum_int8(PG_FUNCTION_ARGS) {
    if (PG_GETARG_INT64(0) <= 0) PG_RETURN_NULL();
    return DirectFunctionCall1(numeric_int8, PG_GETARG_DATUM(1));
}

Datum decoupled_kept_sum_numeric(PG_FUNCTION_ARGS) {
    if (PG_GETARG_INT64(0) <= 0) PG_RETURN_NULL();
    PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}

Datum decoupled_kept_avg(PG_FUNCTION_ARGS) {
    if (PG_GETARG_INT64(0) <= 0) PG_RETURN_NULL();
    return DirectFunctionCall2(numeric_div, PG_GETARG_DATUM(1),
                               DirectFunctionCall1(int8_numeric, PG_GETARG_DATUM(0)));
}

// decoupled._estimated_rows(rel regclass) -> float8
// How many live rows rel holds, which the step-size rules weigh the touched
// groups against: the statistics system's count of live rows (inserts less
// deletes, kept without ANALYZE), else the planner's estimate.  Not
// pg_class.reltuples alone: a view's storage has -1 there until its first
// ANALYZE, and a rule fed -1 never chose recomputation — a left join's
// step after 1,000 changes touching 63% of its keys probed them all
// instead (374 ms).  Nor the planner's estimate alone: it counts the
// pages the step's own retractions left dead, three times a 1,000-row
// view's rows after a few steps.
Datum decoupled_estimated_rows(PG_FUNCTION_ARGS) {
    PG_RETURN_FLOAT8(live_rows(PG_GETARG_OID(0)));
}

// decoupled._recompute_in_full(touched bigint, view_rows float8) -> boolean
// decoupled._hashable(type oid): whether values of `type` hash — for a
// composite, array or range, every field's or element's type too, as the
// type cache finds.  A hash index accepts a composite of a type without
// hashing (money) and fails at its first write of such a value: on an
// input's storage, the input's ticks.
Datum decoupled_hashable(PG_FUNCTION_ARGS) {
    TypeCacheEntry* entry = lookup_type_cache(PG_GETARG_OID(0), TYPECACHE_HASH_PROC);
    PG_RETURN_BOOL(OidIsValid(entry->hash_proc));
}

Datum decoupled_recompute_in_full(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(decoupled::recompute_touched_groups_in_full(PG_GETARG_INT64(0),
                                                               PG_GETARG_FLOAT8(1)));
}
