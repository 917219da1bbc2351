#include <gtest/gtest.h>

#include <limits>

#include "frontier.hpp"

using namespace decoupled;

TEST(Readability, HalfOpenInterval) {
    EXPECT_EQ(readability(9, 10, 20), Readability::Compacted);
    EXPECT_EQ(readability(10, 10, 20), Readability::Readable);
    EXPECT_EQ(readability(19, 10, 20), Readability::Readable);
    EXPECT_EQ(readability(20, 10, 20), Readability::NotYetReadable);
}

TEST(Readability, EmptyIntervalReadsNothing) {
    EXPECT_EQ(readability(10, 10, 10), Readability::NotYetReadable);
    EXPECT_FALSE(latest_readable(10, 10).has_value());
    EXPECT_EQ(latest_readable(10, 11), 10);
}

TEST(ProposeBound, RetainsHistoryBehindUpper) {
    EXPECT_EQ(propose_bound(10'000, 1'000, 0, std::nullopt, std::nullopt), 9'000);
    EXPECT_EQ(propose_bound(10'000, 0, 0, std::nullopt, std::nullopt), 10'000);
}

TEST(ProposeBound, CappedByRequirementsAndHolds) {
    EXPECT_EQ(propose_bound(10'000, 1'000, 0, 5'000, std::nullopt), 5'000);
    EXPECT_EQ(propose_bound(10'000, 1'000, 0, std::nullopt, 4'000), 4'000);
    EXPECT_EQ(propose_bound(10'000, 1'000, 0, 7'000, 6'000), 6'000);
    EXPECT_EQ(propose_bound(10'000, 1'000, 0, 9'500, 9'800), 9'000);
}

TEST(ProposeBound, NeverMovesBackwards) {
    // A cap below the current bound cannot exist once admitted, but even
    // then the proposal must not regress.
    EXPECT_EQ(propose_bound(10'000, 1'000, 9'500, 3'000, std::nullopt), 9'500);
    EXPECT_EQ(propose_bound(100, 1'000, 50, std::nullopt, std::nullopt), 50);
}

TEST(ProposeBound, SaturatesInsteadOfOverflowing) {
    auto lowest = std::numeric_limits<int64_t>::min();
    EXPECT_EQ(propose_bound(lowest + 5, 10, lowest, std::nullopt, std::nullopt), lowest);
}

TEST(CompactedSince, MovesToBoundButNotPastUpperNorBack) {
    EXPECT_EQ(compacted_since(10, 15, 20), 15);
    EXPECT_EQ(compacted_since(10, 25, 20), 20);
    EXPECT_EQ(compacted_since(18, 15, 20), 18);
    // Idempotent.
    EXPECT_EQ(compacted_since(compacted_since(10, 15, 20), 15, 20), 15);
}
