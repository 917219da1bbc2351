// What the incremental strategies share (delta_plan.cpp defines these,
// partition_plan.cpp also uses them): the written plan's query, the
// collections it reads, and the storage views a step reads them through.
// Every function may longjmp: no C++ objects.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "nodes/parsenodes.h"
}

#include "core/strategy.hpp"

namespace decoupled::delta {

// One input of a view: a range table entry that reads a collection whole,
// in the view's query or (`outer`: the range table indexes of the
// subqueries in FROM leading to it, from the top) in a linear subquery.
struct Input {
    int rti;
    int64 id;
    List* outer = NIL;
};

// An arrangement: an index on input `id`'s storage over `keys` (deparsed
// over its columns, e.g. "(k % 10), (s)").
struct Arrangement {
    int64 id;
    char* keys;
};

// The arguments every step function starts with: (plan, owner, ts).
struct Prepared {
    Oid plan;
    Oid owner;
    int64 ts;
};
Prepared prepared_args(FunctionCallInfo fcinfo);

// A copy of the written plan's query.
Query* plan_query(Oid plan);
// The collection a range table entry reads whole, or 0.
int64 collection_read(RangeTblEntry* rte);
// What a FROM item that is no collection is, for a recompute reason
// ("subquery \"s\" in FROM", "WITH query \"t\"", "VALUES in FROM", ...).
const char* from_item(RangeTblEntry* rte);
Oid operator_namespace(Oid op);

// decoupled_storage.c<input>_<part>, a view over the collection's storage
// with its columns in order: `history` (its state at decoupled.as_of),
// `before` (just before), `delta` (its changes then, with mz_diff).
Oid storage_view(int64 input, const char* part);
// Replaces range table entry `rti` of `q` by that view; returns the
// number of the input's own columns.
int read_storage_view(Query* q, int rti, int64 input, const char* part, bool with_diff);
// Replaces a range table entry by the subquery `sql`, keeping its column
// names (eref).
void read_subquery_text(RangeTblEntry* rte, const char* sql);

// The number of the plan's output columns; "x1, ..., xn" with a prefix.
int output_columns(Query* q);
char* positional_names(int n, const char* prefix);

bool calls_other_than_builtins(Node* node, void* context);
// PostgreSQL's walkers take an untyped function pointer; going through
// void (*)() keeps the cast explicit without a function-type warning.
using Walker = bool (*)();
Walker as_walker(bool (*fn)(Node*, void*));

// The view's changes at decoupled.as_of as one query (delta_plan.cpp): the
// sum over its inputs i of the query with input i replaced by its changes.
// `select_list` shapes each term's output from the term's query, the changed
// input's range table index and its column count (mz_diff is the column
// after them).
// `*probes` (if given) is set when the text probes an input once per row
// and must be planned and run with partner_probe_settings().
// `shared` (a sums statement's, see Partials below): the aggregated changes
// its terms registered, which a keyed outer join's null-extended rows read.
using SelectList = void (*)(Query* q, int changed_rti, int changed_ncols, void* arg);
struct Partials;
char* changes_union(Query* base, SelectList select_list, void* arg, bool* probes = nullptr,
                    const Partials* shared = nullptr);
// Planner settings for a statement that probes (above): returns the GUC
// nest level to restore with AtEOXact_GUC(true, level), or -1 if `probes`
// is false.
int partner_probe_settings(bool probes);

// Keyed outer joins (outer_join_terms.cpp): whether the query's FROM is one
// outer join of two inputs on an equality of their columns, and its
// changes: the inner join's terms and those of the null-extended rows
// (nullptr when the query is no keyed outer join).
bool is_keyed_outer_join(Query* q, List* inputs);
char* outer_join_changes(Query* base, List* inputs, SelectList select_list, void* arg,
                         bool* probes, const Partials* shared);
// Changes aggregated before they are joined (preaggregate.cpp).  One
// statement's: the `summable` flags of its aggregated expressions, and the
// aggregated changes its terms read, each a common table expression of
// the statement (SharedChanges) that other terms may read too.
struct Partials {
    List* summable;
    List* shared = NIL;
};
// Appends to a sums term's output (keys, mz_diff, then the aggregated
// expressions) each expression's partial count of non-null values and
// sum, and when it can, rewrites the term to read its changed input's
// changes aggregated first (registered in `p`).
void append_partials(Query* q, int changed_rti, int changed_ncols, int nkeys, Partials* p);
// The name of the aggregated changes of `input` registered in `p` whose
// rows are per value of (among others) `column`, or nullptr.
const char* shared_changes(const Partials* p, int64 input, const char* column);
// Replaces a range table entry by the subquery `sql`, which may read the
// aggregated changes registered in `p` by name (as read_subquery_text).
void read_subquery_sharing(RangeTblEntry* rte, const char* sql, const Partials* p);
// How many changes `input` has at decoupled.as_of, counted up to `limit`
// (at most kCountedChanges; a kept statement).
constexpr int64 kCountedChanges = 10000;
int64 input_changes(int64 input, int64 limit = kCountedChanges);
// "WITH name AS (...), ... " for the statement whose terms read them, or "".
char* with_shared_changes(const Partials* p);
// Whether equal values of `type` under `collation` are always identical
// (numeric 1 and 1.0, float 0 and -0, jsonb, a nondeterministic collation:
// no).
bool equal_means_identical(Oid type, Oid collation);
// A SQL literal of `value` as a value of `type`.
char* literal_type_name(Oid type);
char* typed_literal(const char* value, const char* type_name);
// `expr` of `type`, cast where needed to compare with a typed_literal.
char* as_literal_type(const char* expr, Oid type);

// The SQL of the sum of diff * value over a group (NULL values skipped,
// NULL if none), `diff` and `value` integer expressions:
// decoupled._weighted_sum, or the numeric arithmetic it replaced where a
// catalog not yet updated from 1.0 lacks it.
char* weighted_sum_sql(const char* diff, const char* value);
// `expr` over `in`'s columns, deparsed over its storage's columns, or
// nullptr if it calls anything but built-in functions.
char* storage_expression(Node* expr, const Input* in);
// The one input among `inputs` whose columns `expr` reads, or nullptr.
const Input* only_input_of(Node* expr, List* inputs);

}  // namespace decoupled::delta

// The partitions strategy (partition_plan.cpp): whether a query with outer
// joins or subqueries qualifies (shape->partitions, or the reason in
// shape->partition_problem) and, with `arrangements`, the arrangements
// (Arrangement*) its steps probe.
namespace decoupled {
void describe_partitions(Query* q, QueryShape* shape, List** arrangements);
}
