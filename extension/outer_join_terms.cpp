// Keyed outer joins (brief C13.2): the changes of `P LEFT JOIN N ON n.k =
// p.k` from the changes of its inputs, without computing any partition
// again.
//
// The join's rows are its inner join's rows plus the null-extended rows of
// P: those p with no n of the same key.  So its changes at t are the inner
// join's (the linear terms, delta_plan.cpp) plus the changes of the
// null-extended rows, which change only for keys whose P rows changed at t
// or whose number of N rows did — the touched keys K (N rows that changed
// within their key, an update of another column, leave it alone):
//
//     P at t          with no N at t of its key, key in K            +1
//     P just before t with no N just before t of its key, key in K   -1
//     P's changes at t with a NULL key (they never match)        their sign
//
// each row null-extended.  Unlike a `partitions` step, nothing
// reads a partition's rows: the first two terms are index probes on P's
// and N's arrangements on the key, and NOT EXISTS stops at the first row
// it finds.  RIGHT JOIN is the same with the sides swapped, FULL JOIN has
// both sides' null-extended rows.
//
// A join qualifies when it is the query's only FROM item, joins two
// collections read whole, and its ON is one equality of a column of each,
// of the same type, under the type's built-in equality (so the probes
// below, written with it, match exactly the rows the ON matches) — not an
// array, which the touched keys' ARRAY(SELECT ...) would stack into one of
// a dimension more.
//
// No C++ objects live here: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"
}

#include "delta_plan.hpp"
#include "gucs.hpp"

namespace decoupled::delta {

namespace {

// One side of the join: the input and its key column.
struct Side {
    const Input* input;
    Var* key;
};

struct KeyedJoin {
    JoinExpr* join;
    Side left, right;
};

const Input* top_input(List* inputs, int rti) {
    ListCell* lc;
    foreach (lc, inputs) {
        auto* in = static_cast<Input*>(lfirst(lc));
        if (in->outer == NIL && in->rti == rti) return in;
    }
    return nullptr;
}

bool reads_rte(Node* node, void* rti) {
    if (node == nullptr) return false;
    if (IsA(node, Var))
        return reinterpret_cast<Var*>(node)->varlevelsup == 0 &&
               static_cast<int>(reinterpret_cast<Var*>(node)->varno) == *static_cast<int*>(rti);
    return expression_tree_walker(node, as_walker(reads_rte), rti);
}

bool keyed_join(Query* q, List* inputs, KeyedJoin* out) {
    if (q->setOperations != nullptr || q->hasSubLinks || q->jointree == nullptr ||
        list_length(q->jointree->fromlist) != 1 || !IsA(linitial(q->jointree->fromlist), JoinExpr))
        return false;
    auto* join = linitial_node(JoinExpr, q->jointree->fromlist);
    if ((join->jointype != JOIN_LEFT && join->jointype != JOIN_RIGHT && join->jointype != JOIN_FULL) ||
        !IsA(join->larg, RangeTblRef) || !IsA(join->rarg, RangeTblRef) || join->quals == nullptr ||
        !IsA(join->quals, OpExpr))
        return false;
    const Input* left = top_input(inputs, castNode(RangeTblRef, join->larg)->rtindex);
    const Input* right = top_input(inputs, castNode(RangeTblRef, join->rarg)->rtindex);
    auto* op = reinterpret_cast<OpExpr*>(join->quals);
    if (left == nullptr || right == nullptr || list_length(op->args) != 2 ||
        !IsA(linitial(op->args), Var) || !IsA(lsecond(op->args), Var))
        return false;
    auto* a = static_cast<Var*>(linitial(op->args));
    auto* b = static_cast<Var*>(lsecond(op->args));
    if (static_cast<int>(a->varno) == right->rti) std::swap(a, b);
    if (a->varlevelsup != 0 || b->varlevelsup != 0 || static_cast<int>(a->varno) != left->rti ||
        static_cast<int>(b->varno) != right->rti || a->varattno <= 0 || b->varattno <= 0 ||
        a->vartype != b->vartype || type_is_array_domain(a->vartype))
        return false;
    TypeCacheEntry* type = lookup_type_cache(a->vartype, TYPECACHE_EQ_OPR);
    if (op->opno != type->eq_opr || operator_namespace(op->opno) != PG_CATALOG_NAMESPACE ||
        (OidIsValid(op->inputcollid) && !get_collation_isdeterministic(op->inputcollid)))
        return false;
    // Columns read through the join's own entry (USING's merged columns)
    // are neither side's: left to the partitions strategy.
    int join_rti = join->rtindex;
    if (reads_rte(reinterpret_cast<Node*>(q->targetList), &join_rti) ||
        reads_rte(q->jointree->quals, &join_rti) || reads_rte(q->havingQual, &join_rti))
        return false;
    if (out) *out = {join, {left, a}, {right, b}};
    return true;
}

// The storage column of `key`'s input that `key` reads.
char* key_column(const Side& side) {
    return pstrdup(quote_identifier(
        get_attname(storage_view(side.input->id, "history"), side.key->varattno, false)));
}

// Replaces a side's entry by `sql`, a read of its storage with its columns
// (and, `with_diff`, mz_diff after them), which may read `shared`'s
// aggregated changes.
void read_subquery(Query* q, const Side& side, const char* sql, bool with_diff,
                   const Partials* shared = nullptr) {
    RangeTblEntry* rte = rt_fetch(side.input->rti, q->rtable);
    List* colnames = list_copy(rte->eref->colnames);
    if (with_diff) colnames = lappend(colnames, makeString(pstrdup("mz_diff")));
    read_subquery_sharing(rte, sql, shared);
    rte->eref = makeAlias(rte->eref->aliasname, colnames);
}

// One term of the null-extended rows of `preserved`: the query with
// preserved read from `from` (its storage, with mz_diff) and the nullable
// side read as no rows — the join itself null-extends them, whatever the
// query does with the nullable side's columns.
char* null_extended_term(Query* base, const Side& preserved, const Side& nullable, const char* from,
                         SelectList select_list, void* arg, const Partials* shared = nullptr) {
    Query* q = static_cast<Query*>(copyObjectImpl(base));
    int ncols = list_length(rt_fetch(preserved.input->rti, q->rtable)->eref->colnames);
    read_subquery(q, nullable,
                  psprintf("SELECT * FROM decoupled_storage.c" INT64_FORMAT "_history WHERE false",
                           nullable.input->id),
                  false);
    read_subquery(q, preserved, from, true, shared);
    select_list(q, preserved.input->rti, ncols, arg);
    return psprintf("(%s)", pg_get_querydef(q, false));
}

// "p has no partner" at `part` of the nullable side: NOT EXISTS a row of
// its storage view with p's key, kept a subplan by OFFSET 0 — pulled up
// into an anti join, the key would be a join clause, which the planner
// cannot push into the view's branches (it read all of the partner: 700 ms
// over 1,000,000 rows after one change).  As the subplan's condition it
// reaches each branch's index on the key (see partner_probe_settings).
char* no_partner(int64 nullable, const char* part, const char* nk, const char* pk) {
    return psprintf("NOT EXISTS (SELECT FROM decoupled_storage.c" INT64_FORMAT "_%s n "
                    "WHERE n.%s OPERATOR(pg_catalog.=) p.%s OFFSET 0)",
                    nullable, part, nk, pk);
}

// The three terms of preserved's null-extended rows (see the top): the
// first two read as one subquery, which finds the touched keys once.
void null_extended_terms(Query* base, const Side& preserved, const Side& nullable,
                         SelectList select_list, void* arg, const Partials* shared,
                         StringInfo sql) {
    char* pk = key_column(preserved);
    char* nk = key_column(nullable);
    int64 p = preserved.input->id, n = nullable.input->id;
    // The nullable side's keys whose number of rows changed: from its
    // changes aggregated per key where the inner join's term made them (a
    // pass over 200,000 changes less after a 100,000-row update).  Read
    // twice, they are materialized; that costs more than a second pass
    // over a few thousand changes (a LEFT JOIN view's step after 1,000
    // changed rows: 8.5 ms against 4.5), so only many changes share them.
    const char* aggregated = shared_changes(shared, n, nk);
    if (aggregated != nullptr && input_changes(n) < kCountedChanges) aggregated = nullptr;
    char* nullable_changes =
        aggregated ? pstrdup(aggregated)
                   : psprintf("decoupled_storage.c" INT64_FORMAT "_delta", n);
    char* touched = psprintf(
        "ARRAY(SELECT c.%s FROM decoupled_storage.c" INT64_FORMAT "_delta c UNION "
        "SELECT c.%s FROM %s c GROUP BY 1 "
        "HAVING pg_catalog.sum(c.mz_diff) OPERATOR(pg_catalog.<>) 0)",
        pk, p, nk, nullable_changes);
    // The touched keys are read once (a pass over both inputs' changes:
    // OFFSET 0 keeps the planner from copying the expression into both
    // reads) and reach both reads as a lateral reference, which the planner
    // pushes into every branch of their storage views like a constant.
    const char* parts[2] = {"history", "before"};
    char* reads[2];
    for (int i = 0; i < 2; ++i)
        reads[i] = psprintf(
            "(SELECT p.*, %d::pg_catalog.int8 AS mz_diff FROM decoupled_storage.c" INT64_FORMAT "_%s p "
            "WHERE p.%s OPERATOR(pg_catalog.=) ANY (k.keys) AND %s)",
            i == 0 ? 1 : -1, p, parts[i], pk, no_partner(n, parts[i], nk, pk));
    char* from = psprintf("SELECT s.* FROM (SELECT %s AS keys OFFSET 0) k, LATERAL (%s UNION ALL %s) s",
                          touched, reads[0], reads[1]);
    appendStringInfo(sql, " UNION ALL %s",
                     null_extended_term(base, preserved, nullable, from, select_list, arg,
                                        aggregated ? shared : nullptr));
    char* nulls = psprintf("SELECT p.* FROM decoupled_storage.c" INT64_FORMAT "_delta p "
                           "WHERE p.%s IS NULL",
                           p, pk);
    appendStringInfo(sql, " UNION ALL %s",
                     null_extended_term(base, preserved, nullable, nulls, select_list, arg));
}

}  // namespace

bool is_keyed_outer_join(Query* q, List* inputs) { return keyed_join(q, inputs, nullptr); }

// A partner probe (no_partner) wants one row of the partner's key: an
// index scan on the key's arrangement, which stops at the first row it
// finds.  But the view's union is planned for all its rows, and the
// planner costs a bitmap scan of the same index lower — one that reads
// every entry of the key before it returns a row (1,000 entries a probe
// over 1,000,000 rows in 1,000 keys, 0.16 ms a probe; 0.03 ms with the
// index scan).  So statements with probes are planned, and run, without
// bitmap scans.
int partner_probe_settings(bool probes) {
    static const char* const bitmap_off[] = {"enable_bitmapscan", nullptr};
    return probes ? decoupled::planner_settings_off(bitmap_off) : -1;
}

char* outer_join_changes(Query* base, List* inputs, SelectList select_list, void* arg,
                         bool* probes, const Partials* shared) {
    KeyedJoin kj;
    if (!keyed_join(base, inputs, &kj)) return nullptr;
    // The inner join's changes: the linear terms.
    Query* inner = static_cast<Query*>(copyObjectImpl(base));
    auto* join = linitial_node(JoinExpr, inner->jointree->fromlist);
    join->jointype = JOIN_INNER;
    rt_fetch(join->rtindex, inner->rtable)->jointype = JOIN_INNER;
    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfoString(&sql, changes_union(inner, select_list, arg, probes, shared));
    if (probes) *probes = true;
    if (kj.join->jointype != JOIN_RIGHT)
        null_extended_terms(base, kj.left, kj.right, select_list, arg, shared, &sql);
    if (kj.join->jointype != JOIN_LEFT)
        null_extended_terms(base, kj.right, kj.left, select_list, arg, shared, &sql);
    return sql.data;
}

}  // namespace decoupled::delta
