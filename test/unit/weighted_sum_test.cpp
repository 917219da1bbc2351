#include "weighted_sum.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

using decoupled::int128_decimal;
using decoupled::kInt128DecimalSize;
using decoupled::weighted_add;
using decoupled::WeightedSum;

namespace {

std::string text(__int128 v) {
    char buf[kInt128DecimalSize];
    std::size_t n = int128_decimal(v, buf);
    EXPECT_EQ(n, std::string(buf).size());
    return buf;
}

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

}  // namespace

TEST(WeightedSum, NothingAddedUntilAValue) {
    WeightedSum s;
    EXPECT_FALSE(s.any);
    EXPECT_TRUE(weighted_add(&s, 1, 0));
    EXPECT_TRUE(s.any);
    EXPECT_EQ(text(s.sum), "0");
}

TEST(WeightedSum, AddsSignedProducts) {
    WeightedSum s;
    EXPECT_TRUE(weighted_add(&s, 1, 42));
    EXPECT_TRUE(weighted_add(&s, -1, 40));
    EXPECT_TRUE(weighted_add(&s, 3, -5));
    EXPECT_EQ(text(s.sum), "-13");
}

TEST(WeightedSum, ProductsBeyond64Bits) {
    WeightedSum s;
    EXPECT_TRUE(weighted_add(&s, kMax, kMax));
    EXPECT_EQ(text(s.sum), "85070591730234615847396907784232501249");  // (2^63 - 1)^2
    EXPECT_TRUE(weighted_add(&s, -kMax, kMax));
    EXPECT_EQ(text(s.sum), "0");
}

TEST(WeightedSum, SaysWhenASumWouldOverflowAndKeepsIt) {
    // (-2^63)^2 = 2^126: the second addition makes 2^127, one past the top.
    WeightedSum s;
    EXPECT_TRUE(weighted_add(&s, kMin, kMin));
    EXPECT_FALSE(weighted_add(&s, kMin, kMin));
    EXPECT_EQ(text(s.sum), "85070591730234615865843651857942052864");  // 2^126, unchanged
    // The caller carries it away and adds again from 0.
    s.sum = 0;
    EXPECT_TRUE(weighted_add(&s, kMin, kMin));
    // Downwards too: -2^126 - 2^126 is -2^127, which fits; one more does not.
    WeightedSum d;
    EXPECT_TRUE(weighted_add(&d, kMin, kMax));
    EXPECT_TRUE(weighted_add(&d, kMin, kMax));
    EXPECT_TRUE(weighted_add(&d, kMin, 1));
    EXPECT_TRUE(weighted_add(&d, kMin, 1));
    EXPECT_EQ(text(d.sum), "-170141183460469231731687303715884105728");  // -2^127
    EXPECT_FALSE(weighted_add(&d, -1, 1));
}

TEST(WeightedSum, DecimalText) {
    EXPECT_EQ(text(0), "0");
    EXPECT_EQ(text(-7), "-7");
    EXPECT_EQ(text(1234567890123), "1234567890123");
    __int128 min = -(static_cast<__int128>(1) << 126) * 2;  // -2^127
    EXPECT_EQ(text(min), "-170141183460469231731687303715884105728");
    EXPECT_EQ(text(-(min + 1)), "170141183460469231731687303715884105727");
}
