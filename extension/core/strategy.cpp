#include "strategy.hpp"

namespace decoupled {

namespace {

Strategy recompute(const char* reason) { return {StrategyKind::Recompute, reason}; }

// The reason for something in FROM: the named construct where the query
// walk found one.
Strategy recompute_from(const QueryShape& s, const char* generic) {
    if (s.from_problem != nullptr) return recompute(s.from_problem);
    return recompute(generic);
}

}  // namespace

Strategy classify(const QueryShape& s) {
    // The first construct in this order names the reason.
    // A recursive query reads its inputs through its CTE, never in FROM:
    // "it reads no collection" would hide why.
    if (s.recursive) return recompute("it uses WITH RECURSIVE");
    if (s.whole_rows) return recompute("it reads a whole row of a FROM item as a value");
    if (s.set_operations && s.union_all_of_linear && !s.limit && !s.distinct)
        return {StrategyKind::Linear, ""};
    if (s.set_operations && s.setop_of_linear && !s.limit) {
        if (!s.keys_comparable) return recompute("an output column's type has no built-in equality");
        return {StrategyKind::Groups, ""};
    }
    if (s.set_operations)
        return recompute("it uses UNION, INTERSECT or EXCEPT of branches that are not all linear");
    if (s.keyed_outer_join && s.sums_only) {
        // Kept sums over the join: its changes are the inner join's and
        // those of its null-extended rows, both derived from the inputs'.
        QueryShape inner = s;
        inner.outer_joins = inner.keyed_outer_join = false;
        inner.partitions = false;
        inner.partition_problem = nullptr;
        Strategy sums = classify(inner);
        if (sums.kind == StrategyKind::Sums) return sums;
    }
    if (s.partitions) return {StrategyKind::Partitions, ""};
    if (s.grouped_subquery) {
        if (!s.keys_comparable) return recompute("a GROUP BY key's type has no built-in equality");
        return {StrategyKind::Groups, ""};
    }
    if (s.from_subquery && s.inputs == 0) return recompute_from(s, "it reads a subquery in FROM");
    if (s.inputs == 0 && s.from_problem != nullptr) return recompute(s.from_problem);
    if (s.inputs == 0 && s.sublinks)
        return recompute("it uses a subquery in an expression and reads no collection in FROM");
    if (s.inputs == 0) return recompute("it reads no collection");
    if (s.through_view) return recompute("it reads a collection through an ordinary view");
    if (s.outer_joins && s.partition_problem) return recompute(s.partition_problem);
    if (s.outer_joins) return recompute("it uses an outer join");
    if (s.from_subquery) return recompute_from(s, "it reads a subquery in FROM");
    if (s.other_from) return recompute_from(s, "it reads a function or VALUES in FROM");
    if (s.set_operations) return recompute("it uses UNION, INTERSECT or EXCEPT");
    if (s.sublinks && s.partition_problem) return recompute(s.partition_problem);
    if (s.sublinks) return recompute("it uses a subquery in an expression");
    if (s.ctes) return recompute("it uses WITH");
    if (s.window_functions) return recompute("it uses window functions");
    if (s.limit) return recompute("it uses LIMIT or OFFSET");
    if (s.distinct_on) return recompute("it uses DISTINCT ON");
    if (s.distinct && (s.group_by || s.aggregates))
        return recompute("it uses DISTINCT over aggregates");
    if (s.set_returning) return recompute("it calls a set-returning function in its select list");
    if (s.grouping_sets) return recompute("it uses GROUPING SETS, ROLLUP or CUBE");
    if (s.aggregates && !s.group_by) return recompute("it aggregates without GROUP BY");
    if (s.group_by && !s.keys_are_outputs)
        return recompute("a GROUP BY key is not one of its output columns");
    if (s.group_by && !s.keys_comparable)
        return recompute("a GROUP BY key's type has no built-in equality");
    if (s.group_by) return {s.sums_only ? StrategyKind::Sums : StrategyKind::Groups, ""};
    if (s.distinct) {
        if (!s.keys_comparable) return recompute("a DISTINCT column's type has no built-in equality");
        return {StrategyKind::Groups, ""};
    }
    return {StrategyKind::Linear, ""};
}

const char* strategy_name(StrategyKind kind) {
    switch (kind) {
        case StrategyKind::Linear:
        case StrategyKind::Sums:
        case StrategyKind::Groups:
        case StrategyKind::Partitions:
            return "incremental";
        case StrategyKind::Recompute:
            break;
    }
    return "recompute";
}

// Below this many groups the probes always win.
constexpr int64_t kAlwaysProbe = 64;

bool recompute_touched_groups_in_full(int64_t touched, double view_rows) {
    // Above a quarter of the view's rows a sequential pass over the input
    // wins (the figures are in docs/performance.md).
    if (touched <= kAlwaysProbe) return false;
    if (view_rows < 0) return false;
    return static_cast<double>(touched) * 4 > view_rows;
}

bool probe_extremes_in_full(int64_t groups, double input_rows) {
    // Measured on 1,000,000 rows in 1,000 groups (docs/performance.md,
    // "Extremes probed group by group"): an ordered probe of a group's
    // extremes costs about 0.1 ms, a pass over the input about 0.2 µs a
    // row, so they break even near 500 rows a group; half of that leaves
    // the pass, whose cost does not depend on the index's state, the
    // benefit of the doubt.
    constexpr double kInputRowsPerProbedGroup = 256;
    if (groups <= kAlwaysProbe) return false;
    if (input_rows < 0) return false;
    return static_cast<double>(groups) * kInputRowsPerProbedGroup > input_rows;
}

}  // namespace decoupled
