#include <gtest/gtest.h>

#include "backoff.hpp"

using namespace decoupled;

TEST(Backoff, DoublesUpToTheCap) {
    Backoff b({100, 1000, 60'000});
    EXPECT_EQ(b.on_failure(0, 0), 100);
    EXPECT_EQ(b.on_failure(0, 0), 200);
    EXPECT_EQ(b.on_failure(0, 0), 400);
    EXPECT_EQ(b.on_failure(0, 0), 800);
    EXPECT_EQ(b.on_failure(0, 0), 1000);
    EXPECT_EQ(b.on_failure(0, 0), 1000);
    EXPECT_EQ(b.failures(), 6);
}

TEST(Backoff, ManyFailuresNeverOverflow) {
    Backoff b({100, 30'000, 60'000});
    int64_t next = 0;
    for (int i = 0; i < 10'000; ++i) next = b.on_failure(0, 5);
    EXPECT_EQ(next, 5 + 30'000);
}

TEST(Backoff, HealthyRunEarnsAFreshStart) {
    Backoff b({100, 30'000, 60'000});
    b.on_failure(0, 10);
    b.on_failure(0, 20);
    // The next run stayed up a full minute: its failure starts over.
    EXPECT_EQ(b.on_failure(1000, 61'000), 61'000 + 100);
    EXPECT_EQ(b.failures(), 1);
}

TEST(Backoff, ResumesFromRecordedFailures) {
    // The controller keeps the count in shared memory between passes.
    Backoff b({100, 30'000, 60'000}, 3);
    EXPECT_EQ(b.on_failure(0, 0), 800);
    EXPECT_EQ(b.failures(), 4);
}

TEST(Backoff, ResetForgetsFailures) {
    Backoff b;
    b.on_failure(0, 0);
    b.on_failure(0, 0);
    b.reset();
    EXPECT_EQ(b.failures(), 0);
    EXPECT_EQ(b.on_failure(0, 0), BackoffPolicy{}.initial_ms);
}
