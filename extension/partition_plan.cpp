// The `partitions` strategy (brief C13.2): outer joins and EXISTS / IN /
// NOT EXISTS / NOT IN subqueries, maintained by recomputing only the
// partitions the changes touch.
//
// A query qualifies when all its inputs meet on one equality key: every
// join's ON (outer or inner) equates the key of an input on its left with
// the key of one on its right, inputs listed in FROM are equated in WHERE,
// and every subquery reads one input whose key it equates with the outer
// query's (its correlation, or IN's test).  Then a row of the view is made
// of input rows that all have the same key, or of one such row
// null-extended — its *partition* — and whether a row is null-extended or
// passes EXISTS depends only on rows of its partition.  So the view's rows
// of partition k are the query over the inputs' rows of partition k, and a
// step at t computes, for the keys its changes touch (the inputs' changed
// rows' keys, read from c<id>_delta),
//
//     Q(inputs at t,          filtered to the touched keys)     +1
//     Q(inputs just before t, filtered to the touched keys)     -1
//
// which consolidates to the view's difference at t.  A GROUP BY or
// DISTINCT on top is allowed when one of its keys is the key of an input
// that is never null-extended: each group then lies in one partition.
//
// NOT IN is the exception to partitioning: `x NOT IN (sub)` is NULL for
// every x once sub yields a NULL, and for x NULL it depends on whether sub
// is empty.  Its input is read whole (never filtered), and a step recomputes
// in full when that input's changes have a NULL key or flip whether the
// subquery is empty.
//
// The filtered reads are subqueries over the inputs' storage views, whose
// key condition the planner pushes down to the arrangements (indexes on
// each input's key, created with the view).  Everything runs as the view's
// owner, like any step (written_plan.hpp).
//
// No C++ objects live here: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"
}

#include "core/strategy.hpp"
#include "delta_plan.hpp"
#include "domain_types.hpp"
#include "kept_statements.hpp"
#include "written_plan.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_stage_partitions);
}

using namespace decoupled::delta;

namespace {

// ---------------------------------------------------------------------------
// The inputs, in a fixed order
// ---------------------------------------------------------------------------

enum class Via { From, Exists, In, NotIn };

// Where an input is read: range table entry `rti` of `query` (the view's
// query, or a subquery's), and how.  Walking a copy of the plan visits its
// slots in the same order, so a slot's number names it in every copy.
struct Slot {
    Query* query;
    int rti;
    int64 id;
    Via via;
    bool nullable;       // From: on the nullable side of an outer join
    SubLink* sublink;    // the subquery it is read in (else nullptr)
};

// A subquery the strategy accepts, with how it is used (a conjunct of the
// view's WHERE: EXISTS, NOT EXISTS, IN or NOT IN), or nullptr.
SubLink* accepted_sublink(Node* conjunct, Via* via) {
    bool negated = false;
    if (is_notclause(conjunct)) {
        negated = true;
        conjunct = reinterpret_cast<Node*>(get_notclausearg(reinterpret_cast<Expr*>(conjunct)));
    }
    if (conjunct == nullptr || !IsA(conjunct, SubLink)) return nullptr;
    auto* sublink = reinterpret_cast<SubLink*>(conjunct);
    if (sublink->subLinkType == EXISTS_SUBLINK) {
        *via = Via::Exists;  // NOT EXISTS alike: the partition decides both
        return sublink;
    }
    if (sublink->subLinkType == ANY_SUBLINK && sublink->testexpr != nullptr &&
        IsA(sublink->testexpr, OpExpr)) {
        *via = negated ? Via::NotIn : Via::In;
        return sublink;
    }
    return nullptr;
}

// Why a subquery conjunct of WHERE is not one accepted_sublink takes: the
// construct, named as the user wrote it.
const char* sublink_refused(Node* conjunct) {
    if (is_notclause(conjunct))
        conjunct = reinterpret_cast<Node*>(get_notclausearg(reinterpret_cast<Expr*>(conjunct)));
    if (conjunct != nullptr && IsA(conjunct, SubLink)) {
        switch (reinterpret_cast<SubLink*>(conjunct)->subLinkType) {
            case ANY_SUBLINK:
                return "it compares a row of several columns with IN or NOT IN (a subquery)";
            case ALL_SUBLINK:
                return "it compares with ALL (a subquery) in WHERE";
            default:
                break;
        }
    }
    return "it uses a subquery in WHERE other than EXISTS, NOT EXISTS, IN or NOT IN as a "
           "condition of its own";
}

List* where_conjuncts(Query* q) {
    return q->jointree->quals ? make_ands_implicit(reinterpret_cast<Expr*>(q->jointree->quals))
                              : NIL;
}

void from_slots(Node* node, Query* q, bool nullable, List** slots, const char** other) {
    if (node == nullptr) return;
    if (IsA(node, RangeTblRef)) {
        int rti = castNode(RangeTblRef, node)->rtindex;
        RangeTblEntry* rte = rt_fetch(rti, q->rtable);
        int64 id = collection_read(rte);
        if (id == 0) {
            if (*other == nullptr) *other = from_item(rte);
            return;
        }
        auto* slot = static_cast<Slot*>(palloc0(sizeof(Slot)));
        *slot = {q, rti, id, Via::From, nullable, nullptr};
        *slots = lappend(*slots, slot);
    } else if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        bool left_nullable = join->jointype == JOIN_RIGHT || join->jointype == JOIN_FULL;
        bool right_nullable = join->jointype == JOIN_LEFT || join->jointype == JOIN_FULL;
        from_slots(join->larg, q, nullable || left_nullable, slots, other);
        from_slots(join->rarg, q, nullable || right_nullable, slots, other);
    } else if (IsA(node, FromExpr)) {
        ListCell* lc;
        foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist)
            from_slots(static_cast<Node*>(lfirst(lc)), q, nullable, slots, other);
    } else if (*other == nullptr) {
        *other = "something in FROM that is not a collection";
    }
}

// A subquery's one input, if it is a plain selection over one collection.
bool plain_over_one_input(Query* sub) {
    return sub->commandType == CMD_SELECT && sub->setOperations == nullptr && !sub->hasAggs &&
           sub->groupClause == NIL && sub->havingQual == nullptr && sub->distinctClause == NIL &&
           sub->limitCount == nullptr && sub->limitOffset == nullptr && !sub->hasWindowFuncs &&
           !sub->hasTargetSRFs && !sub->hasSubLinks && sub->cteList == NIL &&
           sub->groupingSets == NIL && sub->jointree != nullptr &&
           list_length(sub->jointree->fromlist) == 1 &&
           IsA(linitial(sub->jointree->fromlist), RangeTblRef);
}

// The slots of `q`: its FROM in order, then the input of each accepted
// subquery among WHERE's conjuncts.  Sets `problem` when the query has
// something the strategy does not take.
List* slots_of(Query* q, const char** problem) {
    List* slots = NIL;
    const char* other = nullptr;
    from_slots(reinterpret_cast<Node*>(q->jointree), q, false, &slots, &other);
    if (other != nullptr && *problem == nullptr)
        *problem = psprintf("it reads %s next to an outer join or subquery", other);
    ListCell* lc;
    foreach (lc, where_conjuncts(q)) {
        Node* conjunct = static_cast<Node*>(lfirst(lc));
        if (!checkExprHasSubLink(conjunct)) continue;
        Via via;
        SubLink* sublink = accepted_sublink(conjunct, &via);
        if (sublink == nullptr) {
            if (*problem == nullptr) *problem = sublink_refused(conjunct);
            continue;
        }
        auto* sub = castNode(Query, sublink->subselect);
        int64 id = 0;
        int rti = 0;
        if (plain_over_one_input(sub)) {
            rti = castNode(RangeTblRef, linitial(sub->jointree->fromlist))->rtindex;
            id = collection_read(rt_fetch(rti, sub->rtable));
        }
        if (id == 0) {
            if (*problem == nullptr)
                *problem = "a subquery it uses is not a plain selection from one collection";
            continue;
        }
        auto* slot = static_cast<Slot*>(palloc0(sizeof(Slot)));
        *slot = {sub, rti, id, via, false, sublink};
        slots = lappend(slots, slot);
    }
    return slots;
}

// ---------------------------------------------------------------------------
// The key every input meets on
// ---------------------------------------------------------------------------

// An equality between the key expressions of two slots.
struct Edge {
    int a, b;          // slot numbers
    Node* key_a;       // over slot a's columns (its query's level)
    Node* key_b;
    Node* where;       // the join (JoinExpr*) whose ON holds it, else nullptr
};

// The slot whose columns (in the same query, level 0) `expr` reads alone.
int slot_of(Node* expr, List* slots, Query* query) {
    if (contain_vars_of_level(expr, 1) || expr == nullptr) return -1;
    Relids varnos = pull_varnos(nullptr, expr);
    if (bms_num_members(varnos) != 1) return -1;
    int rti = bms_singleton_member(varnos);
    for (int i = 0; i < list_length(slots); ++i) {
        auto* slot = static_cast<Slot*>(list_nth(slots, i));
        if (slot->query == query && slot->rti == rti) return i;
    }
    return -1;
}

// Is `op` between `left` and `right` the type's own built-in equality (the
// one the partition filter uses), under the collation each side has?  The
// filter finds a partition's rows by each side's key with that side's
// collation: an equality under a nondeterministic collation the sides do
// not both have (x.t COLLATE ci = y.t) makes rows of different partitions
// ('a', 'A') equal, and the touched partitions would miss them; so does a
// deterministic one over columns of a nondeterministic one (COLLATE "C").
bool key_equality(Oid op, Oid collation, Node* left, Node* right) {
    Oid type = exprType(left);
    if (type != exprType(right)) return false;
    // A step names touched partitions by literals of the key's type without
    // its domains (literal_type): a composite or range holding one has none.
    if (!OidIsValid(decoupled::literal_type_if_any(type))) return false;
    TypeCacheEntry* entry = lookup_type_cache(type, TYPECACHE_EQ_OPR);
    if (!OidIsValid(entry->eq_opr) || entry->eq_opr != op ||
        operator_namespace(op) != PG_CATALOG_NAMESPACE)
        return false;
    // The partition filter compares each side under its own collation: the
    // equality's must be both sides' (or all of them bytewise).
    Oid left_collation = exprCollation(left), right_collation = exprCollation(right);
    if (!OidIsValid(collation) || (left_collation == collation && right_collation == collation))
        return true;
    auto bytewise = [](Oid c) { return !OidIsValid(c) || get_collation_isdeterministic(c); };
    return bytewise(collation) && bytewise(left_collation) && bytewise(right_collation);
}

bool equality_sides(Node* clause, Node** left, Node** right) {
    if (clause == nullptr || !IsA(clause, OpExpr)) return false;
    auto* op = reinterpret_cast<OpExpr*>(clause);
    if (list_length(op->args) != 2) return false;
    *left = static_cast<Node*>(linitial(op->args));
    *right = static_cast<Node*>(lsecond(op->args));
    return key_equality(op->opno, op->inputcollid, *left, *right);
}

void add_edge(List** edges, int a, Node* key_a, int b, Node* key_b, Node* where) {
    if (a < 0 || b < 0 || a == b) return;
    auto* edge = static_cast<Edge*>(palloc(sizeof(Edge)));
    *edge = {a, b, key_a, key_b, where};
    *edges = lappend(*edges, edge);
}

// Equalities between two FROM inputs among `quals`' conjuncts.
void from_edges(Node* quals, Node* where, Query* q, List* slots, List** edges) {
    if (quals == nullptr) return;
    ListCell* lc;
    foreach (lc, make_ands_implicit(reinterpret_cast<Expr*>(quals))) {
        Node *l, *r;
        if (!equality_sides(static_cast<Node*>(lfirst(lc)), &l, &r)) continue;
        add_edge(edges, slot_of(l, slots, q), l, slot_of(r, slots, q), r, where);
    }
}

void join_edges(Node* node, Query* q, List* slots, List** edges) {
    if (node == nullptr) return;
    if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        from_edges(join->quals, node, q, slots, edges);
        join_edges(join->larg, q, slots, edges);
        join_edges(join->rarg, q, slots, edges);
    } else if (IsA(node, FromExpr)) {
        ListCell* lc;
        foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist)
            join_edges(static_cast<Node*>(lfirst(lc)), q, slots, edges);
    }
}

// The outer side of a correlation (levelsup 1 inside the subquery) as an
// expression of the view's query.
Node* outer_side(Node* expr) {
    if (contain_vars_of_level(expr, 0)) return nullptr;
    Node* copy = static_cast<Node*>(copyObjectImpl(expr));
    IncrementVarSublevelsUp(copy, -1, 1);
    return copy;
}

// The equality that ties a subquery's input to the view's: EXISTS's
// correlation (a conjunct of its WHERE), IN's test.
void sublink_edge(int s, Query* q, List* slots, List** edges) {
    auto* slot = static_cast<Slot*>(list_nth(slots, s));
    Query* sub = slot->query;
    if (slot->via == Via::Exists) {
        if (sub->jointree->quals == nullptr) return;
        ListCell* lc;
        foreach (lc, make_ands_implicit(reinterpret_cast<Expr*>(sub->jointree->quals))) {
            Node *l, *r;
            if (!equality_sides(static_cast<Node*>(lfirst(lc)), &l, &r)) continue;
            for (int flip = 0; flip < 2; ++flip) {
                Node* inner = flip ? r : l;
                Node* outer = outer_side(flip ? l : r);
                if (outer == nullptr || slot_of(inner, slots, sub) != s) continue;
                int o = slot_of(outer, slots, q);
                if (o >= 0 && static_cast<Slot*>(list_nth(slots, o))->via == Via::From) {
                    add_edge(edges, s, inner, o, outer, nullptr);
                    return;
                }
            }
        }
        return;
    }
    // IN / NOT IN: testexpr is `outer = PARAM` over the subquery's one column.
    auto* test = reinterpret_cast<OpExpr*>(slot->sublink->testexpr);
    if (list_length(sub->targetList) != 1 || list_length(test->args) != 2) return;
    Node* outer = static_cast<Node*>(linitial(test->args));
    Node* param = static_cast<Node*>(lsecond(test->args));
    Node* inner = reinterpret_cast<Node*>(linitial_node(TargetEntry, sub->targetList)->expr);
    if (!IsA(param, Param) || !key_equality(test->opno, test->inputcollid, outer, inner)) return;
    if (slot_of(inner, slots, sub) != s) return;
    if (slot->via == Via::NotIn && contain_vars_of_level(reinterpret_cast<Node*>(sub), 1)) return;
    int o = slot_of(outer, slots, q);
    if (o >= 0 && static_cast<Slot*>(list_nth(slots, o))->via == Via::From)
        add_edge(edges, s, inner, o, outer, nullptr);
}

// The partitioning: each slot's key (all in one class of equalities), or
// the reason there is none.
struct Partitioning {
    List* slots;   // Slot*
    Node** keys;   // per slot
    const char* problem;
    // A star (different keys): the slot every other one joins directly,
    // and per other slot the root's side of that equality; else root -1.
    int root;
    Node** root_keys;
};

int find(int* parent, int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

// Does some edge of `edges` (all between keys of the class) join a slot
// under `left` with one under `right`?
bool bridged(List* edges, Node* where, Bitmapset* left, Bitmapset* right) {
    ListCell* lc;
    foreach (lc, edges) {
        auto* e = static_cast<Edge*>(lfirst(lc));
        if (e->where != where) continue;
        if ((bms_is_member(e->a, left) && bms_is_member(e->b, right)) ||
            (bms_is_member(e->b, left) && bms_is_member(e->a, right)))
            return true;
    }
    return false;
}

Bitmapset* slots_under(Node* node, Query* q, List* slots) {
    Bitmapset* set = nullptr;
    if (IsA(node, RangeTblRef)) {
        int s = -1;
        for (int i = 0; i < list_length(slots); ++i) {
            auto* slot = static_cast<Slot*>(list_nth(slots, i));
            if (slot->query == q && slot->rti == castNode(RangeTblRef, node)->rtindex) s = i;
        }
        return s >= 0 ? bms_make_singleton(s) : nullptr;
    }
    if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        return bms_union(slots_under(join->larg, q, slots), slots_under(join->rarg, q, slots));
    }
    ListCell* lc;
    foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist)
        set = bms_union(set, slots_under(static_cast<Node*>(lfirst(lc)), q, slots));
    return set;
}

// Every join's ON bridges its sides with the class's keys; FROM's items
// are bridged by WHERE.
bool joins_bridged(Node* node, Query* q, List* slots, List* edges) {
    if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        return bridged(edges, node, slots_under(join->larg, q, slots),
                       slots_under(join->rarg, q, slots)) &&
               joins_bridged(join->larg, q, slots, edges) &&
               joins_bridged(join->rarg, q, slots, edges);
    }
    if (!IsA(node, FromExpr)) return true;
    List* items = reinterpret_cast<FromExpr*>(node)->fromlist;
    int n = list_length(items);
    int* parent = static_cast<int*>(palloc(sizeof(int) * (n > 0 ? n : 1)));
    for (int i = 0; i < n; ++i) parent[i] = i;
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j)
            if (bridged(edges, nullptr, slots_under(static_cast<Node*>(list_nth(items, i)), q, slots),
                        slots_under(static_cast<Node*>(list_nth(items, j)), q, slots)))
                parent[find(parent, j)] = find(parent, i);
    for (int i = 0; i < n; ++i) {
        if (find(parent, i) != find(parent, 0)) return false;
        if (!joins_bridged(static_cast<Node*>(list_nth(items, i)), q, slots, edges)) return false;
    }
    return true;
}

bool sublink_in_joins(Node* node) {
    if (node == nullptr || !IsA(node, JoinExpr)) {
        if (node != nullptr && IsA(node, FromExpr)) {
            ListCell* lc;
            foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist)
                if (sublink_in_joins(static_cast<Node*>(lfirst(lc)))) return true;
        }
        return false;
    }
    auto* join = reinterpret_cast<JoinExpr*>(node);
    return checkExprHasSubLink(join->quals) || sublink_in_joins(join->larg) ||
           sublink_in_joins(join->rarg);
}

const char* one_key(Query* q, Partitioning* out, List* edges);
bool star(Query* q, Partitioning* p, List* edges);

// Whether computing `node` can raise an error on a row's values.  A step
// computes a slot's key over every changed row of its input and compares
// it over the input's rows — also rows the view's WHERE leaves out, on
// which the plain query never computes it (ON y.id = x.s::int WHERE x.s ~
// '^[0-9]+$').  Columns, constants and leakproof functions and operators
// of them (PostgreSQL's mark for functions that raise no error depending
// on their arguments) cannot; a cast through text, a domain's check or a
// division may.
bool may_fail(Node* node, void* context) {
    if (node == nullptr) return false;
    switch (nodeTag(node)) {
        case T_CoerceViaIO:
        case T_ArrayCoerceExpr:
        case T_CoerceToDomain:
            return true;
        case T_FuncExpr:
            if (!get_func_leakproof(reinterpret_cast<FuncExpr*>(node)->funcid)) return true;
            break;
        case T_OpExpr:
        case T_DistinctExpr:
        case T_NullIfExpr: {
            auto* op = reinterpret_cast<OpExpr*>(node);
            if (!get_func_leakproof(get_opcode(op->opno))) return true;
            break;
        }
        default:
            break;
    }
    return expression_tree_walker(node, as_walker(may_fail), context);
}

Partitioning partitioning(Query* q) {
    Partitioning p{NIL, nullptr, nullptr, -1, nullptr};
    if (q->cteList != NIL) {
        p.problem = "it uses a WITH query that is read inside a subquery";
        return p;
    }
    if (q->setOperations || q->hasWindowFuncs || q->limitCount || q->limitOffset ||
        q->hasDistinctOn || q->hasTargetSRFs || q->groupingSets != NIL) {
        p.problem = "it uses an outer join or subquery together with a construct that is recomputed";
        return p;
    }
    p.slots = slots_of(q, &p.problem);
    if (p.problem) return p;
    // Subqueries anywhere but in WHERE's conjuncts (select list, ON,
    // HAVING, under OR) are not partitioned.
    int accepted = 0;
    ListCell* lc;
    foreach (lc, p.slots) accepted += static_cast<Slot*>(lfirst(lc))->sublink != nullptr;
    int in_where = 0;
    foreach (lc, where_conjuncts(q)) in_where += checkExprHasSubLink(static_cast<Node*>(lfirst(lc)));
    if (in_where != accepted || checkExprHasSubLink(reinterpret_cast<Node*>(q->targetList)) ||
        checkExprHasSubLink(q->havingQual) ||
        sublink_in_joins(reinterpret_cast<Node*>(q->jointree))) {
        p.problem = "it uses a subquery outside WHERE";
        return p;
    }

    // The equalities, then their classes (union-find over the slots' key
    // expressions).
    List* edges = NIL;
    join_edges(reinterpret_cast<Node*>(q->jointree), q, p.slots, &edges);
    from_edges(q->jointree->quals, nullptr, q, p.slots, &edges);
    for (int s = 0; s < list_length(p.slots); ++s)
        if (static_cast<Slot*>(list_nth(p.slots, s))->sublink) sublink_edge(s, q, p.slots, &edges);

    const char* problem = one_key(q, &p, edges);
    if (problem != nullptr && !star(q, &p, edges)) {
        p.problem = problem;
        return p;
    }

    // The keys are probed through arrangements: built-in expressions only.
    int nslots = list_length(p.slots);
    for (int s = 0; s < nslots; ++s) {
        auto* slot = static_cast<Slot*>(list_nth(p.slots, s));
        Input in{slot->rti, slot->id};
        Input root_in{0, 0};
        if (p.root >= 0) {
            auto* root = static_cast<Slot*>(list_nth(p.slots, p.root));
            root_in = {root->rti, root->id};
        }
        if (storage_expression(p.keys[s], &in) == nullptr ||
            (p.root >= 0 && s != p.root && storage_expression(p.root_keys[s], &root_in) == nullptr)) {
            p.problem = "its join key calls a function that is not built in";
            return p;
        }
        if (may_fail(p.keys[s], nullptr) ||
            (p.root >= 0 && s != p.root && may_fail(p.root_keys[s], nullptr))) {
            p.problem = "its join key is an expression that may raise an error (a cast from text, "
                        "a division) on rows its WHERE leaves out";
            return p;
        }
    }
    return p;
}

// One key class: every slot has exactly one key in it, and the class's
// equalities bridge every join; a GROUP BY or DISTINCT on top groups by
// the key of an input that is never null-extended.
const char* one_key(Query* q, Partitioning* out, List* edges) {
    Partitioning& p = *out;
    ListCell* lc;
    List* nodes = NIL;  // (slot, key) pairs as Edge halves: a, key_a
    auto node_of = [&nodes](int slot, Node* key) {
        for (int i = 0; i < list_length(nodes); ++i) {
            auto* n = static_cast<Edge*>(list_nth(nodes, i));
            if (n->a == slot && equal(n->key_a, key)) return i;
        }
        auto* n = static_cast<Edge*>(palloc0(sizeof(Edge)));
        n->a = slot;
        n->key_a = key;
        nodes = lappend(nodes, n);
        return list_length(nodes) - 1;
    };
    foreach (lc, edges) {
        auto* e = static_cast<Edge*>(lfirst(lc));
        (void)node_of(e->a, e->key_a);
        (void)node_of(e->b, e->key_b);
    }
    int n = list_length(nodes);
    int nslots = list_length(p.slots);
    int* parent = static_cast<int*>(palloc(sizeof(int) * (n > 0 ? n : 1)));
    for (int i = 0; i < n; ++i) parent[i] = i;
    foreach (lc, edges) {
        auto* e = static_cast<Edge*>(lfirst(lc));
        parent[find(parent, node_of(e->b, e->key_b))] = find(parent, node_of(e->a, e->key_a));
    }
    // A class with exactly one key per slot, covering every slot.
    p.keys = static_cast<Node**>(palloc0(sizeof(Node*) * (nslots > 0 ? nslots : 1)));
    int chosen = -1;
    for (int root = 0; root < n && chosen < 0; ++root) {
        if (find(parent, root) != root) continue;
        int* count = static_cast<int*>(palloc0(sizeof(int) * nslots));
        for (int i = 0; i < n; ++i)
            if (find(parent, i) == root) count[static_cast<Edge*>(list_nth(nodes, i))->a]++;
        bool covers = true;
        for (int s = 0; s < nslots; ++s) covers = covers && count[s] == 1;
        if (covers) chosen = root;
    }
    if (chosen < 0)
        return "its joins and subqueries do not all meet on one equality key of one type and collation";
    for (int i = 0; i < n; ++i) {
        auto* node = static_cast<Edge*>(list_nth(nodes, i));
        if (find(parent, i) == chosen) p.keys[node->a] = node->key_a;
    }
    // Only the class's equalities bridge joins and subqueries.
    List* class_edges = NIL;
    foreach (lc, edges) {
        auto* e = static_cast<Edge*>(lfirst(lc));
        if (equal(p.keys[e->a], e->key_a) && equal(p.keys[e->b], e->key_b))
            class_edges = lappend(class_edges, e);
    }
    if (!joins_bridged(reinterpret_cast<Node*>(q->jointree), q, p.slots, class_edges))
        return "its joins and subqueries do not all meet on one equality key of one type and collation";

    // Grouping on top: each group must lie in one partition.
    if (q->hasAggs || q->groupClause != NIL || q->distinctClause != NIL) {
        List* clauses = q->groupClause != NIL ? q->groupClause : q->distinctClause;
        bool keyed = false;
        foreach (lc, clauses) {
            Node* expr = reinterpret_cast<Node*>(
                get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), q->targetList)->expr);
            for (int s = 0; s < nslots; ++s) {
                auto* slot = static_cast<Slot*>(list_nth(p.slots, s));
                keyed = keyed || (slot->via == Via::From && !slot->nullable && equal(expr, p.keys[s]));
            }
        }
        if (!keyed) return "it groups rows of an outer join or subquery by other than the join key";
    }
    return nullptr;
}

// The equality that brings slot `s` to `root`, held by `where` (a JoinExpr's
// ON, or nullptr: WHERE or a subquery's correlation).
const Edge* edge_to_root(List* edges, int s, int root, Node* where) {
    ListCell* lc;
    foreach (lc, edges) {
        auto* e = static_cast<Edge*>(lfirst(lc));
        if (e->where == where && ((e->a == s && e->b == root) || (e->b == s && e->a == root)))
            return e;
    }
    return nullptr;
}

bool take_edge(const Edge* e, int s, Partitioning* p) {
    if (e == nullptr) return false;
    p->keys[s] = e->a == s ? e->key_a : e->key_b;
    p->root_keys[s] = e->a == s ? e->key_b : e->key_a;
    return true;
}

int slot_at(Node* node, Query* q, List* slots) {
    if (!IsA(node, RangeTblRef)) return -1;
    for (int i = 0; i < list_length(slots); ++i) {
        auto* slot = static_cast<Slot*>(list_nth(slots, i));
        if (slot->query == q && slot->rti == castNode(RangeTblRef, node)->rtindex) return i;
    }
    return -1;
}

// Every join brings one slot to the root (never null-extended), through an
// equality with the root in its ON; FROM's other items are single slots
// equated with the root in WHERE.
bool star_joins(Node* node, Query* q, Partitioning* p, List* edges) {
    if (IsA(node, RangeTblRef)) return slot_at(node, q, p->slots) == p->root;
    if (IsA(node, JoinExpr)) {
        auto* join = reinterpret_cast<JoinExpr*>(node);
        bool root_left = bms_is_member(p->root, slots_under(join->larg, q, p->slots));
        if (join->jointype == JOIN_FULL || (join->jointype == JOIN_LEFT && !root_left) ||
            (join->jointype == JOIN_RIGHT && root_left))
            return false;
        int s = slot_at(root_left ? join->rarg : join->larg, q, p->slots);
        return s >= 0 && take_edge(edge_to_root(edges, s, p->root, node), s, p) &&
               star_joins(root_left ? join->larg : join->rarg, q, p, edges);
    }
    bool root_found = false;
    ListCell* lc;
    foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist) {
        Node* item = static_cast<Node*>(lfirst(lc));
        if (bms_is_member(p->root, slots_under(item, q, p->slots))) {
            root_found = true;
            if (!star_joins(item, q, p, edges)) return false;
            continue;
        }
        int s = slot_at(item, q, p->slots);
        if (s < 0 || !take_edge(edge_to_root(edges, s, p->root, nullptr), s, p)) return false;
    }
    return root_found;
}

// A star: one input (the root) that every other one joins directly — a
// chain of LEFT joins to dimensions on different keys, say.  Each row of
// the view holds exactly one root row, so the rows to compute again are
// those of the root rows whose key for some input matches that input's
// changes (or that changed); the other inputs are read whole, probed by
// their keys.  No grouping on top (a group could span unchanged rows), no
// NOT IN.
bool star(Query* q, Partitioning* p, List* edges) {
    if (q->hasAggs || q->groupClause != NIL || q->distinctClause != NIL) return false;
    int nslots = list_length(p->slots);
    for (int r = 0; r < nslots; ++r) {
        auto* root = static_cast<Slot*>(list_nth(p->slots, r));
        if (root->via != Via::From || root->nullable) continue;
        p->root = r;
        p->keys = static_cast<Node**>(palloc0(sizeof(Node*) * nslots));
        p->root_keys = static_cast<Node**>(palloc0(sizeof(Node*) * nslots));
        bool ok = star_joins(reinterpret_cast<Node*>(q->jointree), q, p, edges);
        for (int s = 0; ok && s < nslots; ++s) {
            auto* slot = static_cast<Slot*>(list_nth(p->slots, s));
            if (slot->via == Via::NotIn) ok = false;
            if (slot->sublink && ok) ok = take_edge(edge_to_root(edges, s, r, nullptr), s, p);
        }
        // The root's own changes are found by its first key.
        for (int s = 0; ok && s < nslots && p->keys[r] == nullptr; ++s)
            if (s != r) p->keys[r] = p->root_keys[s];
        if (ok && p->keys[r] != nullptr) return true;
    }
    p->root = -1;
    return false;
}

}  // namespace

void decoupled::describe_partitions(Query* q, QueryShape* shape, List** arrangements) {
    Partitioning p = partitioning(q);
    // A group or distinct row is added under the spelling its step computes
    // and retracted under the one it computed before: where equal values
    // may differ in text (numeric 1 and 1.0, jsonb, a nondeterministic
    // collation), the two need not be the same row.
    if (p.problem == nullptr) {
        List* keys = list_concat(list_copy(q->groupClause), q->distinctClause);
        ListCell* lc;
        foreach (lc, keys) {
            Expr* key =
                get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), q->targetList)->expr;
            Node* k = reinterpret_cast<Node*>(key);
            if (!decoupled::delta::equal_means_identical(exprType(k), exprCollation(k))) {
                p.problem = "a GROUP BY or DISTINCT key's equal values may differ in text (numeric, "
                            "float, jsonb, a nondeterministic collation)";
                break;
            }
        }
    }
    shape->partitions = p.problem == nullptr;
    shape->partition_problem = p.problem;
    if (!shape->partitions || arrangements == nullptr) return;
    auto arrange = [arrangements](int64 id, char* keys) {
        ListCell* lc;
        foreach (lc, *arrangements) {
            auto* a = static_cast<Arrangement*>(lfirst(lc));
            if (a->id == id && strcmp(a->keys, keys) == 0) return;
        }
        auto* arrangement = static_cast<Arrangement*>(palloc(sizeof(Arrangement)));
        *arrangement = {id, keys};
        *arrangements = lappend(*arrangements, arrangement);
    };
    for (int s = 0; s < list_length(p.slots); ++s) {
        auto* slot = static_cast<Slot*>(list_nth(p.slots, s));
        if (slot->via == Via::NotIn) continue;  // read whole
        Input in{slot->rti, slot->id};
        arrange(slot->id, storage_expression(p.keys[s], &in));
        if (p.root >= 0 && s != p.root) {
            // The root is found by its key for each other input.
            auto* root = static_cast<Slot*>(list_nth(p.slots, p.root));
            Input root_in{root->rti, root->id};
            arrange(root->id, storage_expression(p.root_keys[s], &root_in));
        }
    }
}

namespace {

// ---------------------------------------------------------------------------
// A step
// ---------------------------------------------------------------------------

// The keys a slot's changes at t touch: the distinct non-null values (as
// typed SQL literals) and whether NULL is among them.
struct Keys {
    List* literals;  // char*
    bool null;
};

Keys changed_keys(Slot* slot, Node* key) {
    Input in{slot->rti, slot->id};
    char* sql = psprintf("SELECT DISTINCT %s FROM decoupled_storage.c" INT64_FORMAT "_delta",
                         storage_expression(key, &in), slot->id);
    Oid type = exprType(key);
    Keys keys{NIL, false};
    MemoryContext caller = CurrentMemoryContext;
    SPI_connect();
    if (decoupled::execute_kept(sql, true, 0) != SPI_OK_SELECT)
        elog(ERROR, "could not read the touched keys");
    MemoryContext spi = MemoryContextSwitchTo(caller);
    char* type_name = SPI_processed > 0 ? literal_type_name(type) : nullptr;
    for (uint64 r = 0; r < SPI_processed; ++r) {
        char* value = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
        if (value == nullptr)
            keys.null = true;
        else
            keys.literals = lappend(keys.literals, typed_literal(value, type_name));
    }
    MemoryContextSwitchTo(spi);
    SPI_finish();
    return keys;
}

// `expr` (over a slot's storage columns) matching `keys`: "expr = ANY
// (ARRAY[...]) OR expr IS NULL", either part only when needed; nullptr
// when no key.
char* key_condition(const char* expr, Oid type, List* literals, bool null) {
    StringInfoData buf;
    initStringInfo(&buf);
    if (literals != NIL && type_is_array_domain(type)) {
        // An array key: ARRAY[...] of arrays is one array of a dimension
        // more, which ANY would compare element by element.
        ListCell* lc;
        const char* compared = as_literal_type(expr, type);
        foreach (lc, literals)
            appendStringInfo(&buf, "%s%s OPERATOR(pg_catalog.=) %s", buf.len ? " OR " : "", compared,
                             static_cast<char*>(lfirst(lc)));
    } else if (literals != NIL) {
        appendStringInfo(&buf, "%s OPERATOR(pg_catalog.=) ANY (ARRAY[", expr);
        ListCell* lc;
        foreach (lc, literals)
            appendStringInfo(&buf, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
                             static_cast<char*>(lfirst(lc)));
        appendStringInfo(&buf, "]::%s[])", literal_type_name(type));
    }
    if (null) appendStringInfo(&buf, "%s%s IS NULL", buf.len ? " OR " : "", expr);
    return buf.len ? buf.data : nullptr;
}

// What a step computes again: per slot, the condition that restricts its
// rows (nullptr: read whole).
struct Touched {
    int64 count;          // touched keys (partitions, or keys of root rows)
    char** conditions;    // per slot
    bool whole_changed;   // a NOT IN input changed
    bool whole_null;      // ... with a NULL key
};

Touched touched(const Partitioning& p) {
    int nslots = list_length(p.slots);
    Touched t{0, static_cast<char**>(palloc0(sizeof(char*) * nslots)), false, false};
    Keys* keys = static_cast<Keys*>(palloc(sizeof(Keys) * nslots));
    for (int s = 0; s < nslots; ++s) {
        auto* slot = static_cast<Slot*>(list_nth(p.slots, s));
        keys[s] = changed_keys(slot, p.keys[s]);
        if (slot->via == Via::NotIn) {
            t.whole_changed |= keys[s].literals != NIL || keys[s].null;
            t.whole_null |= keys[s].null;
        }
    }
    if (p.root < 0) {
        // One key: every slot but NOT IN's is restricted to all the keys.
        List* all = NIL;
        bool null = false;
        for (int s = 0; s < nslots; ++s) {
            ListCell* lc;
            foreach (lc, keys[s].literals)
                if (!list_member(all, makeString(static_cast<char*>(lfirst(lc)))))
                    all = lappend(all, makeString(static_cast<char*>(lfirst(lc))));
            null |= keys[s].null;
        }
        List* literals = NIL;
        ListCell* lc;
        foreach (lc, all) literals = lappend(literals, strVal(lfirst(lc)));
        t.count = list_length(literals) + (null ? 1 : 0);
        for (int s = 0; s < nslots && t.count > 0; ++s) {
            auto* slot = static_cast<Slot*>(list_nth(p.slots, s));
            if (slot->via == Via::NotIn) continue;
            Input in{slot->rti, slot->id};
            t.conditions[s] = key_condition(storage_expression(p.keys[s], &in),
                                            exprType(p.keys[s]), literals, null);
        }
        return t;
    }
    // A star: the root rows whose key for slot s matches s's changes (a NULL
    // key matches nothing), or that changed themselves; the rest whole.
    auto* root = static_cast<Slot*>(list_nth(p.slots, p.root));
    Input root_in{root->rti, root->id};
    StringInfoData condition;
    initStringInfo(&condition);
    for (int s = 0; s < nslots; ++s) {
        bool own = s == p.root;
        Node* key = own ? p.keys[s] : p.root_keys[s];
        char* c = key_condition(storage_expression(key, &root_in), exprType(key), keys[s].literals,
                                own && keys[s].null);
        if (c == nullptr) continue;
        t.count += list_length(keys[s].literals) + (own && keys[s].null ? 1 : 0);
        appendStringInfo(&condition, "%s(%s)", condition.len ? " OR " : "", c);
    }
    if (condition.len > 0) t.conditions[p.root] = condition.data;
    return t;
}

// Replaces slot's entry by its storage at `part` ("history": at t;
// "before": just before t), restricted by `condition` unless nullptr.
void read_part(Slot* slot, const char* part, const char* condition) {
    if (condition == nullptr) {
        (void)read_storage_view(slot->query, slot->rti, slot->id, part, false);
        return;
    }
    char* sql = psprintf("SELECT * FROM decoupled_storage.c" INT64_FORMAT "_%s WHERE %s", slot->id,
                         part, condition);
    read_subquery_text(rt_fetch(slot->rti, slot->query->rtable), sql);
}

// The plan at `part` for what the changes touched.
char* touched_query(Oid plan, const char* part, const Touched& t) {
    Query* q = plan_query(plan);
    Partitioning p = partitioning(q);
    if (p.problem) elog(ERROR, "the written plan is no longer partitioned: %s", p.problem);
    for (int s = 0; s < list_length(p.slots); ++s)
        read_part(static_cast<Slot*>(list_nth(p.slots, s)), part, t.conditions[s]);
    return pg_get_querydef(q, false);
}

// Whether a NOT IN subquery's result turned empty or non-empty at t.
bool not_in_emptiness_flips(Oid plan) {
    const char* parts[2] = {"history", "before"};
    char* exists[2];
    for (int i = 0; i < 2; ++i) {
        Query* q = plan_query(plan);
        Partitioning p = partitioning(q);
        StringInfoData any;
        initStringInfo(&any);
        for (int s = 0; s < list_length(p.slots); ++s) {
            auto* slot = static_cast<Slot*>(list_nth(p.slots, s));
            if (slot->via != Via::NotIn) continue;
            (void)read_storage_view(slot->query, slot->rti, slot->id, parts[i], false);
            appendStringInfo(&any, "%sEXISTS (%s)", any.len ? ", " : "",
                             pg_get_querydef(slot->query, false));
        }
        exists[i] = any.data;
    }
    char* sql = psprintf("SELECT ROW(%s) IS DISTINCT FROM ROW(%s)", exists[0], exists[1]);
    SPI_connect();
    if (decoupled::execute_kept(sql, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
        elog(ERROR, "could not compare the NOT IN subqueries");
    char* flips = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
    bool result = flips != nullptr && strcmp(flips, "t") == 0;
    SPI_finish();
    return result;
}

}  // namespace

// decoupled._stage_partitions(plan regclass, owner oid, ts bigint, target regclass,
//                             view_rows float8) -> bigint
// A 'partitions' view's difference at ts, as its owner, into target as
// (ts, diff, row key, row hash, row...); returns how many partitions the
// changes touched, or -1 (nothing staged) when the step should recompute
// the view in full instead: too many partitions for probes to win, or a
// NOT IN subquery whose change reaches every row.
Datum decoupled_stage_partitions(PG_FUNCTION_ARGS) {
    Prepared p = prepared_args(fcinfo);
    if (PG_ARGISNULL(3) || PG_ARGISNULL(4)) elog(ERROR, "target and view_rows must not be null");
    Oid target_oid = PG_GETARG_OID(3);
    double view_rows = PG_GETARG_FLOAT8(4);

    Relation target = table_open(target_oid, RowExclusiveLock);
    decoupled::OwnerScope scope;
    decoupled::enter_owner(p.plan, p.owner, p.ts, &scope);
    decoupled::serial_only();
    Query* q = plan_query(p.plan);
    Partitioning parts = partitioning(q);
    if (parts.problem) elog(ERROR, "the written plan is no longer partitioned: %s", parts.problem);
    Touched t = touched(parts);

    int64 result = t.count;
    if (t.whole_null || (t.whole_changed && not_in_emptiness_flips(p.plan)) ||
        decoupled::recompute_touched_groups_in_full(t.count, view_rows)) {
        result = -1;
    } else if (t.count > 0) {
        int nout = output_columns(q);
        char* from = psprintf(
            "((SELECT q.*, 1::pg_catalog.int8 FROM (%s) q) UNION ALL "
            "(SELECT q.*, -1::pg_catalog.int8 FROM (%s) q)) d(%s, mz_diff)",
            touched_query(p.plan, "history", t), touched_query(p.plan, "before", t),
            positional_names(nout, ""));
        // The touched partitions' keys are in the text: it is new every time.
        (void)decoupled::stage_rows(
            target, decoupled::staging_sql("d.mz_diff", positional_names(nout, "d."), from), p.ts,
            false);
    }
    decoupled::leave_owner(&scope);
    table_close(target, NoLock);
    PG_RETURN_INT64(result);
}
