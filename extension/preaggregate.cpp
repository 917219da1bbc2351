// Changes aggregated before they are joined (a `sums` view's step, brief
// C13.1).
//
// A term of a sums view's changes joins one input's changes with the other
// inputs and is then summed per group.  Every change of the input with the
// same values in the columns the term reads outside the aggregated
// expressions meets the same partners, so the term can sum those changes
// first: one row per such value with their net count (mz_diff) and, for
// each aggregated expression over that input alone, the count of its
// non-null values and their sum — the partials the outer aggregation adds
// up.  An UPDATE of 100,000 rows of a table joined on a key with 1,000
// values is then 1,000 probes (or a hash of 1,000 rows) instead of
// 200,000, and 1,000 updated rows touching 630 keys are 630.
//
// The rewritten term reads, in place of the changes' view, a subquery with
// the same columns at the same positions (the ones it no longer needs are
// NULL), mz_diff, then the partials; it sums each expression of its own
// input into them and outputs NULL for that expression, so that the
// outer aggregation (delta_plan.cpp, aggregated_sql) adds the partials and
// the other terms' rows alike.  Terms that cannot (the input read through a
// subquery, whole-row references, correlated subqueries, no column to
// drop) output NULL partials and stay as they were.
//
// The subquery is a common table expression of the whole statement
// (SharedChanges, named mz_changes_<input>_<n>): a keyed outer join's
// null-extended rows (outer_join_terms.cpp) need the nullable side's keys
// whose number of rows changed, which are those of its aggregated changes
// with a net count, and read them there instead of passing over the
// changes again.  Each statement's Partials holds its registry; texts that
// name an entry are analyzed under the statement's WITH and kept without
// it, so that deparsed they name it and the statement defines it once.
//
// No C++ objects: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "catalog/pg_collation.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
}

#include <cstring>

#include "delta_plan.hpp"

namespace decoupled::delta {

namespace {

struct Correlated {
    int rti;
    int depth;
};

// Whether a subquery of the term reads the changed input's columns (a Var
// of an outer level): those references would need the dropped columns.
bool correlated_walker(Node* node, void* arg) {
    auto* c = static_cast<Correlated*>(arg);
    if (node == nullptr) return false;
    if (IsA(node, Var)) {
        auto* var = reinterpret_cast<Var*>(node);
        return c->depth > 0 && var->varno == c->rti && static_cast<int>(var->varlevelsup) == c->depth;
    }
    if (IsA(node, Query)) {
        c->depth++;
        bool found = query_tree_walker(reinterpret_cast<Query*>(node), as_walker(correlated_walker),
                                       arg, 0);
        c->depth--;
        return found;
    }
    return expression_tree_walker(node, as_walker(correlated_walker), arg);
}

// The changes' view of the term's changed input (c<input>_delta), or
// InvalidOid when the entry is anything else (a subquery the changes were
// carried up through).
Oid changes_view(Query* q, int rti, int64* input) {
    RangeTblEntry* rte = rt_fetch(rti, q->rtable);
    if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_VIEW) return InvalidOid;
    const char* name = get_rel_name(rte->relid);
    char* end = nullptr;
    if (name == nullptr || name[0] != 'c' ||
        get_rel_namespace(rte->relid) != get_namespace_oid("decoupled_storage", false))
        return InvalidOid;
    *input = strtoll(name + 1, &end, 10);
    if (end == name + 1 || strcmp(end, "_delta") != 0) return InvalidOid;
    return rte->relid;
}

// Whether `expr` reads the changed input's columns and nothing else (no
// subquery), through functions that cannot fail on a value (leakproof):
// its partials are summed over every change, also those the term's join
// or conditions would drop — `v / w` with w = 0 there must not fail a step
// the recomputation passes.
bool own_expression(Node* expr, int rti) {
    if (checkExprHasSubLink(expr) || contain_leaked_vars(expr)) return false;
    Relids varnos = pull_varnos(nullptr, expr);
    return bms_num_members(varnos) == 1 && bms_is_member(rti, varnos);
}

// Whether values of `type` equal under its default equality are the same
// value (no 1.0 and 1.00, 0 and -0, or equal strings that differ): the
// rows summed into one keep the one value a read column had for them all.
bool groups_exactly(Oid type, Oid collation) {
    type = getBaseType(type);
    switch (type) {
        case BOOLOID:
        case CHAROID:
        case INT2OID:
        case INT4OID:
        case INT8OID:
        case OIDOID:
        case DATEOID:
        case TIMESTAMPOID:
        case TIMESTAMPTZOID:
        case UUIDOID:
            return true;
        case TEXTOID:
        case VARCHAROID:
        case NAMEOID:  // (not bpchar: its comparison ignores trailing spaces)
            return !OidIsValid(collation) || get_collation_isdeterministic(collation);
        default:
            return get_typtype(type) == TYPTYPE_ENUM;
    }
}

// Adds the columns of entry `rti` that `node` reads (in its own query
// level, inside subqueries too) to *read, as pull_varattnos numbers them.
void add_columns_read(Node* node, int rti, Bitmapset** read) {
    ListCell* lc;
    foreach (lc, pull_vars_of_level(node, 0)) {
        auto* var = static_cast<Var*>(lfirst(lc));
        if (IsA(var, Var) && static_cast<int>(var->varno) == rti)
            *read = bms_add_member(*read, var->varattno - FirstLowInvalidHeapAttributeNumber);
    }
}

// The relations the term joins (its FROM's range table references: a
// view's query also carries OLD and NEW entries that it does not read).
void count_relations(Node* node, int* count) {
    if (IsA(node, RangeTblRef)) {
        ++*count;
    } else if (IsA(node, JoinExpr)) {
        count_relations(reinterpret_cast<JoinExpr*>(node)->larg, count);
        count_relations(reinterpret_cast<JoinExpr*>(node)->rarg, count);
    } else if (IsA(node, FromExpr)) {
        ListCell* lc;
        foreach (lc, reinterpret_cast<FromExpr*>(node)->fromlist)
            count_relations(static_cast<Node*>(lfirst(lc)), count);
    }
}

// The aggregated changes of one input that a statement's terms read by
// name: a common table expression of the statement.
struct SharedChanges {
    int64 input;
    char* name;
    char* sql;
    List* grouped;  // the columns they are per value of (quoted)
};

// Registers `sql`, the aggregated changes of `input` per value of
// `grouped`, in `p` (once per text); returns its name.
const char* share_changes(Partials* p, int64 input, char* sql, List* grouped) {
    ListCell* lc;
    foreach (lc, p->shared) {
        auto* s = static_cast<SharedChanges*>(lfirst(lc));
        if (s->input == input && strcmp(s->sql, sql) == 0) return s->name;
    }
    auto* s = static_cast<SharedChanges*>(palloc(sizeof(SharedChanges)));
    s->input = input;
    // mz_* names are the extension's: a view's query may not use them.
    s->name = psprintf("mz_changes_" INT64_FORMAT "_%d", input, list_length(p->shared) + 1);
    s->sql = sql;
    s->grouped = grouped;
    p->shared = lappend(p->shared, s);
    return s->name;
}

}  // namespace

const char* shared_changes(const Partials* p, int64 input, const char* column) {
    if (p == nullptr) return nullptr;
    ListCell* lc;
    foreach (lc, p->shared) {
        auto* s = static_cast<SharedChanges*>(lfirst(lc));
        if (s->input != input) continue;
        ListCell* c;
        foreach (c, s->grouped)
            if (strcmp(static_cast<char*>(lfirst(c)), column) == 0) return s->name;
    }
    return nullptr;
}

char* with_shared_changes(const Partials* p) {
    if (p == nullptr || p->shared == NIL) return pstrdup("");
    StringInfoData sql;
    initStringInfo(&sql);
    ListCell* lc;
    foreach (lc, p->shared) {
        auto* s = static_cast<SharedChanges*>(lfirst(lc));
        appendStringInfo(&sql, "%s%s AS (%s)", sql.len ? ", " : "WITH ", s->name, s->sql);
    }
    appendStringInfoChar(&sql, ' ');
    return sql.data;
}

// The subquery is analyzed under the statement's WITH and then kept
// without it: deparsed, it names the shared changes, which the statement's
// own WITH (with_shared_changes) defines.
void read_subquery_sharing(RangeTblEntry* rte, const char* sql, const Partials* p) {
    if (p == nullptr || p->shared == NIL) {
        read_subquery_text(rte, sql);
        return;
    }
    read_subquery_text(rte, psprintf("%s%s", with_shared_changes(p), sql));
    rte->subquery->cteList = NIL;
}

void append_partials(Query* q, int changed_rti, int changed_ncols, int nkeys, Partials* p) {
    List* summable = p->summable;
    int nargs = list_length(summable);
    int first_arg = nkeys + 2;  // keys, mz_diff, then the aggregated expressions
    bool* own = static_cast<bool*>(palloc0(sizeof(bool) * Max(nargs, 1)));
    Node** flat = static_cast<Node**>(palloc0(sizeof(Node*) * Max(nargs, 1)));
    int64 input = 0;
    Oid view = changes_view(q, changed_rti, &input);
    bool rewrite = OidIsValid(view);

    // More than one relation in FROM: a term of one input alone gains
    // nothing from summing twice.
    if (rewrite) {
        int relations = 0;
        count_relations(reinterpret_cast<Node*>(q->jointree), &relations);
        Correlated c{changed_rti, 0};
        rewrite = relations > 1 && !query_tree_walker(q, as_walker(correlated_walker), &c, 0);
    }

    // The changed input's columns read outside its own aggregated
    // expressions (through join aliases too): the changes are summed per
    // value of these.
    Bitmapset* read = nullptr;
    if (rewrite) {
        add_columns_read(flatten_join_alias_vars(q, reinterpret_cast<Node*>(q->jointree)),
                         changed_rti, &read);
        int pos = 0;
        ListCell* lc;
        foreach (lc, q->targetList) {
            TargetEntry* te = lfirst_node(TargetEntry, lc);
            pos++;
            Node* expr = flatten_join_alias_vars(q, reinterpret_cast<Node*>(te->expr));
            if (pos == first_arg - 1) continue;  // mz_diff
            int j = pos - first_arg;
            if (j >= 0 && j < nargs && own_expression(expr, changed_rti)) {
                own[j] = true;
                flat[j] = expr;
                continue;
            }
            add_columns_read(expr, changed_rti, &read);
        }
        // A whole-row reference reads every column; with every column
        // read, nothing is summed; a read column whose equal values may
        // differ (numeric, float, a nondeterministic collation) is left
        // alone: an expression over it could tell them apart.
        bool whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, read);
        int nread = 0;
        bool exact = true;
        for (int a = 1; a <= changed_ncols; ++a)
            if (bms_is_member(a - FirstLowInvalidHeapAttributeNumber, read)) {
                nread++;
                Oid type, collation;
                int32 typmod;
                get_atttypetypmodcoll(view, a, &type, &typmod, &collation);
                exact = exact && groups_exactly(type, collation);
            }
        rewrite = !whole_row && exact && nread < changed_ncols;
    }

    int next_attno = changed_ncols + 2;
    if (rewrite) {
        StringInfoData sql, group, having;
        List* grouped = NIL;
        initStringInfo(&sql);
        initStringInfo(&group);
        initStringInfo(&having);
        appendStringInfoString(&sql, "SELECT ");
        for (int a = 1; a <= changed_ncols; ++a) {
            const char* name = quote_identifier(get_attname(view, a, false));
            if (bms_is_member(a - FirstLowInvalidHeapAttributeNumber, read)) {
                appendStringInfo(&sql, "c.%s, ", name);
                appendStringInfo(&group, "%sc.%s", group.len ? ", " : "", name);
                grouped = lappend(grouped, pstrdup(name));
            } else {
                Oid type, collation;
                int32 typmod;
                get_atttypetypmodcoll(view, a, &type, &typmod, &collation);
                // A domain's base type: NULL may break a domain's NOT NULL
                // (nothing reads the column).
                type = getBaseTypeAndTypmod(type, &typmod);
                appendStringInfo(&sql, "NULL::%s AS %s, ",
                                 format_type_extended(type, typmod,
                                                      FORMAT_TYPE_TYPEMOD_GIVEN |
                                                          FORMAT_TYPE_FORCE_QUALIFY),
                                 name);
            }
        }
        appendStringInfoString(&sql, "pg_catalog.sum(c.mz_diff)::pg_catalog.int8 AS mz_diff");
        appendStringInfoString(&having, "pg_catalog.sum(c.mz_diff) OPERATOR(pg_catalog.<>) 0");
        List* context = deparse_context_for("c", view);
        ListCell* lc = list_head(summable);
        for (int j = 0; j < nargs; ++j, lc = lnext(summable, lc)) {
            if (!own[j]) continue;
            Node* expr = static_cast<Node*>(copyObjectImpl(flat[j]));
            ChangeVarNodes(expr, changed_rti, 1, 0);
            char* text = deparse_expression(expr, context, true, false);
            char* count = psprintf(
                "pg_catalog.sum(CASE WHEN (%s) IS NULL THEN 0 ELSE c.mz_diff END)", text);
            char* sum = lfirst_int(lc) != 0 ? weighted_sum_sql("c.mz_diff", text) : nullptr;
            appendStringInfo(&sql, ", %s::pg_catalog.int8 AS mz_nn_%d, %s AS mz_s_%d", count, j + 1,
                             sum ? sum : "0::pg_catalog.numeric", j + 1);
            appendStringInfo(&having, " OR %s OPERATOR(pg_catalog.<>) 0", count);
            if (sum) appendStringInfo(&having, " OR %s OPERATOR(pg_catalog.<>) 0", sum);
        }
        appendStringInfo(&sql, " FROM decoupled_storage.%s c",
                         quote_identifier(get_rel_name(view)));
        if (group.len) appendStringInfo(&sql, " GROUP BY %s", group.data);
        appendStringInfo(&sql, " HAVING %s", having.data);

        RangeTblEntry* rte = rt_fetch(changed_rti, q->rtable);
        List* names = list_copy(rte->eref->colnames);
        // A statement-wide common table expression: a keyed outer join's
        // null-extended rows read the same changes' net counts per key
        // (outer_join_terms.cpp), and read them from there.
        const char* shared = share_changes(p, input, sql.data, grouped);
        read_subquery_sharing(rte, psprintf("SELECT * FROM %s", shared), p);
        for (int j = 0; j < nargs; ++j)
            if (own[j]) {
                names = lappend(names, makeString(psprintf("mz_nn_%d", j + 1)));
                names = lappend(names, makeString(psprintf("mz_s_%d", j + 1)));
            }
        rte->eref = makeAlias(rte->eref->aliasname, names);
    }

    // The partials: from the subquery for the expressions it summed (whose
    // own column becomes NULL), NULL for the others.
    for (int j = 0; j < nargs; ++j) {
        Expr* count;
        Expr* sum;
        if (rewrite && own[j]) {
            TargetEntry* te = static_cast<TargetEntry*>(list_nth(q->targetList, first_arg - 1 + j));
            Node* arg = reinterpret_cast<Node*>(te->expr);
            // Of a domain's base type: the output reads it, and a NOT NULL
            // domain would refuse NULL.
            int32 typmod = exprTypmod(arg);
            Oid type = getBaseTypeAndTypmod(exprType(arg), &typmod);
            te->expr = reinterpret_cast<Expr*>(makeNullConst(type, typmod, exprCollation(arg)));
            count = reinterpret_cast<Expr*>(makeVar(changed_rti, next_attno++, INT8OID, -1, InvalidOid, 0));
            sum = reinterpret_cast<Expr*>(makeVar(changed_rti, next_attno++, NUMERICOID, -1, InvalidOid, 0));
        } else {
            count = reinterpret_cast<Expr*>(makeNullConst(INT8OID, -1, InvalidOid));
            sum = reinterpret_cast<Expr*>(makeNullConst(NUMERICOID, -1, InvalidOid));
        }
        q->targetList = lappend(q->targetList,
                                makeTargetEntry(count, list_length(q->targetList) + 1,
                                                psprintf("mz_pn%d", j + 1), false));
        q->targetList = lappend(q->targetList,
                                makeTargetEntry(sum, list_length(q->targetList) + 1,
                                                psprintf("mz_ps%d", j + 1), false));
    }
}

char* weighted_sum_sql(const char* diff, const char* value) {
    static const Oid args[2] = {INT8OID, INT8OID};
    List* name = list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup("_weighted_sum")));
    if (OidIsValid(LookupFuncName(name, 2, args, true)))
        return psprintf("decoupled._weighted_sum((%s)::pg_catalog.int8, (%s)::pg_catalog.int8)", diff,
                        value);
    return psprintf("pg_catalog.sum((%s)::pg_catalog.numeric OPERATOR(pg_catalog.*) "
                    "(%s)::pg_catalog.numeric)",
                    diff, value);
}

}  // namespace decoupled::delta
