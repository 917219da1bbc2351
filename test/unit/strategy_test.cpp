#include <gtest/gtest.h>

#include "strategy.hpp"

using decoupled::classify;
using decoupled::QueryShape;
using decoupled::recompute_touched_groups_in_full;
using decoupled::StrategyKind;

namespace {

QueryShape one_input() {
    QueryShape s;
    s.inputs = 1;
    return s;
}

}  // namespace

TEST(Strategy, SelectionAndProjectionAreLinear) {
    EXPECT_EQ(classify(one_input()).kind, StrategyKind::Linear);
}

TEST(Strategy, GroupByWithKeysInTheOutputRecomputesTouchedGroups) {
    QueryShape s = one_input();
    s.aggregates = s.group_by = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Groups);
}

TEST(Strategy, CountsAndSumsAreKept) {
    QueryShape s = one_input();
    s.aggregates = s.group_by = s.sums_only = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Sums);
    s.keys_are_outputs = false;
    EXPECT_EQ(classify(s).kind, StrategyKind::Recompute);
}

TEST(Strategy, EachConstructOutsideFallsBackAndSaysWhy) {
    struct Case {
        void (*set)(QueryShape&);
        const char* reason_part;
    };
    const Case cases[] = {
        {[](QueryShape& s) { s.inputs = 2; s.outer_joins = true; }, "outer join"},
        {[](QueryShape& s) { s.other_from = true; }, "function or VALUES"},
        {[](QueryShape& s) { s.through_view = true; }, "ordinary view"},
        {[](QueryShape& s) { s.from_subquery = true; }, "subquery in FROM"},
        {[](QueryShape& s) { s.set_operations = true; }, "UNION"},
        {[](QueryShape& s) { s.sublinks = true; }, "subquery"},
        {[](QueryShape& s) { s.ctes = true; }, "WITH"},
        {[](QueryShape& s) { s.ctes = s.recursive = true; }, "WITH RECURSIVE"},
        {[](QueryShape& s) { s.whole_rows = true; }, "whole row"},
        {[](QueryShape& s) { s.whole_rows = s.partitions = true; }, "whole row"},
        {[](QueryShape& s) { s.window_functions = true; }, "window"},
        {[](QueryShape& s) { s.limit = true; }, "LIMIT"},
        {[](QueryShape& s) { s.distinct = s.distinct_on = true; }, "DISTINCT ON"},
        {[](QueryShape& s) { s.distinct = s.aggregates = s.group_by = true; }, "DISTINCT over"},
        {[](QueryShape& s) { s.distinct = true; s.keys_comparable = false; }, "DISTINCT column"},
        {[](QueryShape& s) { s.set_returning = true; }, "set-returning"},
        {[](QueryShape& s) { s.group_by = s.aggregates = s.grouping_sets = true; }, "GROUPING"},
        {[](QueryShape& s) { s.aggregates = true; }, "without GROUP BY"},
        {[](QueryShape& s) { s.group_by = true; s.keys_are_outputs = false; }, "output"},
        {[](QueryShape& s) { s.group_by = true; s.keys_comparable = false; }, "equality"},
    };
    for (const auto& c : cases) {
        QueryShape s = one_input();
        c.set(s);
        auto strategy = classify(s);
        EXPECT_EQ(strategy.kind, StrategyKind::Recompute) << c.reason_part;
        EXPECT_NE(strategy.reason.find(c.reason_part), std::string::npos) << strategy.reason;
    }
}

// A view whose FROM reads no collection says what it reads them with
// instead, where it does.
TEST(Strategy, NoCollectionInFromSaysWhereItReadsThem) {
    QueryShape none;
    EXPECT_EQ(classify(none).reason, "it reads no collection");
    QueryShape recursive;
    recursive.ctes = recursive.recursive = true;
    EXPECT_EQ(classify(recursive).reason, "it uses WITH RECURSIVE");
    QueryShape sublink;
    sublink.sublinks = true;
    EXPECT_NE(classify(sublink).reason.find("subquery in an expression"), std::string::npos)
        << classify(sublink).reason;
}

TEST(Strategy, InnerJoinsOfAnyArityAreIncremental) {
    QueryShape s = one_input();
    s.inputs = 3;
    EXPECT_EQ(classify(s).kind, StrategyKind::Linear);
    s.aggregates = s.group_by = s.sums_only = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Sums);
}

TEST(Strategy, UnionAllOfLinearBranchesIsLinear) {
    QueryShape s;
    s.set_operations = s.union_all_of_linear = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Linear);
    s.union_all_of_linear = false;
    EXPECT_EQ(classify(s).kind, StrategyKind::Recompute);
}

TEST(Strategy, SetOperationsOfLinearBranchesAreGroups) {
    QueryShape s;
    s.set_operations = s.setop_of_linear = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Groups);
    s.keys_comparable = false;
    EXPECT_EQ(classify(s).kind, StrategyKind::Recompute);
    s.keys_comparable = true;
    s.limit = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Recompute);
    s.limit = false;
    s.setop_of_linear = false;
    EXPECT_NE(classify(s).reason.find("not all linear"), std::string::npos);
}

TEST(Strategy, OuterJoinsAndSubqueriesOnOneKeyArePartitions) {
    QueryShape s;
    s.inputs = 2;
    s.outer_joins = s.sublinks = s.partitions = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Partitions);
    EXPECT_STREQ(decoupled::strategy_name(StrategyKind::Partitions), "incremental");
}

TEST(Strategy, KeyedOuterJoinsKeepSums) {
    QueryShape s;
    s.inputs = 2;
    s.outer_joins = s.partitions = s.keyed_outer_join = true;
    // Without kept sums (no GROUP BY, or another aggregate): partitions.
    EXPECT_EQ(classify(s).kind, StrategyKind::Partitions);
    s.aggregates = s.group_by = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Partitions);
    s.sums_only = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Sums);
    // What stops sums over an inner join stops it here too.
    s.window_functions = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Partitions);
    s.window_functions = false;
    s.keyed_outer_join = false;
    EXPECT_EQ(classify(s).kind, StrategyKind::Partitions);
}

TEST(Strategy, OuterJoinsOnDifferentKeysSayWhy) {
    QueryShape s;
    s.inputs = 3;
    s.outer_joins = true;
    s.partition_problem = "its joins and subqueries do not all meet on one equality key";
    decoupled::Strategy strategy = classify(s);
    EXPECT_EQ(strategy.kind, StrategyKind::Recompute);
    EXPECT_EQ(strategy.reason, s.partition_problem);
    s.outer_joins = false;
    s.sublinks = true;
    EXPECT_EQ(classify(s).reason, s.partition_problem);
}

TEST(Strategy, SelectionOverAGroupedSubqueryIsGroups) {
    QueryShape s;
    s.from_subquery = s.grouped_subquery = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Groups);
    s.keys_comparable = false;
    EXPECT_EQ(classify(s).kind, StrategyKind::Recompute);
}

TEST(Strategy, DistinctRowsAreGroups) {
    QueryShape s = one_input();
    s.distinct = true;
    EXPECT_EQ(classify(s).kind, StrategyKind::Groups);
}

TEST(Strategy, NoInputIsRecomputed) {
    EXPECT_EQ(classify(QueryShape{}).kind, StrategyKind::Recompute);
}

TEST(Strategy, NamesAreWhatUsersSee) {
    EXPECT_STREQ(decoupled::strategy_name(StrategyKind::Linear), "incremental");
    EXPECT_STREQ(decoupled::strategy_name(StrategyKind::Groups), "incremental");
    EXPECT_STREQ(decoupled::strategy_name(StrategyKind::Sums), "incremental");
    EXPECT_STREQ(decoupled::strategy_name(StrategyKind::Recompute), "recompute");
}

TEST(Strategy, FewTouchedGroupsAreAlwaysProbed) {
    EXPECT_FALSE(recompute_touched_groups_in_full(1, 10));
    EXPECT_FALSE(recompute_touched_groups_in_full(64, 64));
}

TEST(Strategy, ManyTouchedGroupsRecomputeInFull) {
    EXPECT_TRUE(recompute_touched_groups_in_full(632, 1000));
    EXPECT_FALSE(recompute_touched_groups_in_full(200, 1000));
    EXPECT_FALSE(recompute_touched_groups_in_full(1000, 1000000));
}

TEST(Strategy, ExtremesProbedWhileGroupsAreFewAgainstTheInput) {
    using decoupled::probe_extremes_in_full;
    // Every group of 1,000,000 rows in 1,000: still cheaper probed.
    EXPECT_FALSE(probe_extremes_in_full(1000, 1000000));
    EXPECT_FALSE(probe_extremes_in_full(64, 100));
    EXPECT_TRUE(probe_extremes_in_full(5000, 1000000));
    EXPECT_TRUE(probe_extremes_in_full(100, 1000));
    EXPECT_FALSE(probe_extremes_in_full(100000, -1));
}

TEST(Strategy, UnknownViewSizeProbes) {
    EXPECT_FALSE(recompute_touched_groups_in_full(5000, -1));
}

// What in FROM keeps a view from being incremental is named where the
// query walk found it (a WITH query, LATERAL, VALUES), over the generic
// reason; without inputs too.
TEST(Strategy, FromProblemNamesTheConstruct) {
    QueryShape values;
    values.inputs = 1;
    values.from_subquery = true;
    values.from_problem = "it reads VALUES in FROM";
    EXPECT_EQ(classify(values).reason, "it reads VALUES in FROM");
    QueryShape generic = values;
    generic.from_problem = nullptr;
    EXPECT_EQ(classify(generic).reason, "it reads a subquery in FROM");
    QueryShape cte;
    cte.other_from = cte.sublinks = true;
    cte.from_problem = "it reads WITH query c, which a subquery or another WITH query reads too";
    EXPECT_EQ(classify(cte).reason, cte.from_problem);
    // The order stands: an ordinary view is named before what else FROM holds.
    QueryShape view = values;
    view.through_view = true;
    EXPECT_EQ(classify(view).reason, "it reads a collection through an ordinary view");
}
