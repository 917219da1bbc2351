// How a materialized view is maintained (brief C13): the strategy its query
// allows, and, per step, whether to recompute instead.  Pure logic: the
// query walk (extension/delta_plan.cpp) describes the query as a QueryShape.
//
//   linear     inputs inner-joined (one, or any number, self-joins too), or
//              a UNION ALL of such branches;
//              selection, projection and deterministic expressions.  The
//              view's difference at t is the sum over inputs i of the query
//              with input i replaced by its changes at t, the inputs before
//              i read at t and those after it at t - 1.
//   sums       the same, or one outer join of two inputs on an equality
//              of a column of each (its null-extended rows' changes found
//              by probes on the key, extension/outer_join_terms.cpp);
//              GROUP BY whose keys are all output columns, and
//              only count(*), count(x), sum(x) and avg(x) of integers, and
//              min(x) and max(x) of built-in types: per group counts, sums
//              and extremes are kept, the changes at t are aggregated and
//              added, and the touched groups' rows are computed from the
//              kept state (a group whose kept extreme a retraction reached
//              is computed again at t first).
//   groups     the same, GROUP BY whose keys are all output columns, any
//              aggregates and HAVING; or SELECT DISTINCT (each distinct row
//              a group); or UNION, INTERSECT, EXCEPT (with or without ALL)
//              of linear branches (each distinct row a group).  The groups
//              the changes at t touch are computed again at t (an index
//              probe on the keys) and replace the view's rows of those
//              groups.  Also a selection and projection over such a
//              grouped subquery (or CTE) that outputs its keys.
//   partitions outer joins, EXISTS, IN, NOT EXISTS and NOT IN subqueries
//              whose inputs all meet on one equality key (a.k = b.k in
//              every join's ON and every subquery's correlation): the
//              view's rows split into partitions by that key, and the
//              partitions the changes at t touch are computed at t and just
//              before t; their difference is the view's.
//   recompute  anything else: the whole query at t, diffed with the view.
#pragma once

#include <cstdint>
#include <string>

namespace decoupled {

struct QueryShape {
    int inputs = 0;                 // references to collections in FROM (inner joins)
    bool through_view = false;      // an input reached through an ordinary view
    bool from_subquery = false;     // a subquery in FROM
    bool outer_joins = false;       // LEFT, RIGHT or FULL JOIN
    bool other_from = false;        // a function, VALUES or table in FROM that is no collection
    // What in FROM keeps the query from being incremental, naming it (a
    // subquery, WITH query, LATERAL, VALUES, function); empty: the generic
    // reasons below stand.  Not owned (the walk's memory context).
    const char* from_problem = nullptr;
    // A whole row of a FROM item used as a value (`w`, `to_jsonb(w)`): a
    // step reads changes through relations with one more column (mz_diff).
    bool whole_rows = false;
    bool sublinks = false;          // EXISTS / IN / scalar subqueries
    bool ctes = false;              // WITH
    bool recursive = false;         // a recursive CTE (WITH RECURSIVE)
    bool set_operations = false;    // UNION / INTERSECT / EXCEPT
    bool union_all_of_linear = false;  // UNION ALL of branches that are each linear
    bool window_functions = false;
    bool limit = false;             // LIMIT / OFFSET
    bool distinct = false;          // DISTINCT
    bool distinct_on = false;       // DISTINCT ON (keeps an arbitrary row per key)
    bool set_returning = false;     // set-returning functions in the select list
    bool aggregates = false;
    bool group_by = false;
    bool grouping_sets = false;
    bool keys_are_outputs = true;   // every GROUP BY key is an output column
    bool keys_comparable = true;    // every key type has a built-in equality
    bool sums_only = false;         // every aggregate is count, or sum/avg of an exact number
    bool setop_of_linear = false;   // UNION/INTERSECT/EXCEPT whose branches are each linear
    bool grouped_subquery = false;  // selection over a sums/groups subquery, its keys output
    bool keyed_outer_join = false;  // FROM is one outer join of two inputs on one equality
    bool partitions = false;        // outer joins / subqueries over inputs sharing one key
    const char* partition_problem = nullptr;  // else why not (outer joins or subqueries)
};

enum class StrategyKind { Linear, Sums, Groups, Partitions, Recompute };

struct Strategy {
    StrategyKind kind = StrategyKind::Recompute;
    std::string reason;  // for Recompute: the construct that forced it
};

Strategy classify(const QueryShape& shape);
const char* strategy_name(StrategyKind kind);

// A `groups` (or `partitions`) step recomputes the touched groups through an
// index; once they are a large part of the view, one pass over the input is
// cheaper.
// `view_rows` is the planner's estimate (negative: unknown).
bool recompute_touched_groups_in_full(int64_t touched, double view_rows);

// A `sums` step finds the new extremes of the groups a retraction reached
// by ordered probes (a few index probes a group, whatever its size); one
// pass over the input is cheaper only once there is a group for every few
// hundred of the input's rows.  `input_rows`: negative if unknown.
bool probe_extremes_in_full(int64_t groups, double input_rows);

}  // namespace decoupled
