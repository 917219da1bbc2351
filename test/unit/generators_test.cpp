#include <gtest/gtest.h>

#include "generators.hpp"

using namespace decoupled;

TEST(TickTimes, AlignedToTheEpochWithinTheRange) {
    EXPECT_EQ(tick_times(1000, 100, 1000, 1250, 10), (std::vector<int64_t>{1000, 1100, 1200}));
    EXPECT_EQ(tick_times(1000, 100, 1001, 1300, 10), (std::vector<int64_t>{1100, 1200, 1300}));
    EXPECT_TRUE(tick_times(1000, 100, 1301, 1350, 10).empty());
    EXPECT_TRUE(tick_times(1000, 100, 500, 900, 10).empty());
    EXPECT_EQ(tick_times(1000, 100, 1000, 5000, 3).size(), 3u);
}

TEST(TickTimes, ConsecutiveIntervalsNeitherOverlapNorGap) {
    // Appending [upper, last + 1) each time covers every tick exactly once.
    std::vector<int64_t> all;
    int64_t upper = 1000;
    for (int64_t now : {1050, 1234, 1234, 1999, 2500}) {
        auto ticks = tick_times(1000, 100, upper, now, 1000);
        if (ticks.empty()) continue;
        all.insert(all.end(), ticks.begin(), ticks.end());
        upper = ticks.back() + 1;
    }
    EXPECT_EQ(all, tick_times(1000, 100, 1000, 2500, 1000));
}

TEST(Generators, UnknownNameOrTickIsRejected) {
    EXPECT_EQ(make_generator("tpch", 1, 0, 1000), nullptr);
    EXPECT_EQ(make_generator("counter", 1, 0, 0), nullptr);
}

TEST(Generators, CounterCountsTicks) {
    auto g = make_generator("counter", 7, 1000, 100);
    std::vector<GeneratedUpdate> out;
    g->tick("", 1000, out);
    g->tick("", 1300, out);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].data_json, "{\"n\": 1}");
    EXPECT_EQ(out[1].data_json, "{\"n\": 4}");
    EXPECT_EQ(out[1].time, 1300);
    EXPECT_EQ(out[1].diff, 1);
}

TEST(Generators, DeterministicPerSourceAndTime) {
    auto a = make_generator("auction", 42, 0, 1000);
    auto b = make_generator("auction", 42, 0, 1000);
    auto other = make_generator("auction", 43, 0, 1000);
    std::vector<GeneratedUpdate> ua, ub, uo;
    for (int64_t t = 0; t < 50'000; t += 1000) {
        a->tick("bids", t, ua);
        b->tick("bids", t, ub);
        other->tick("bids", t, uo);
    }
    ASSERT_EQ(ua.size(), ub.size());
    for (size_t i = 0; i < ua.size(); ++i) EXPECT_EQ(ua[i].data_json, ub[i].data_json);
    size_t differing = 0;
    for (size_t i = 0; i < ua.size(); ++i) differing += ua[i].data_json != uo[i].data_json;
    EXPECT_GT(differing, ua.size() / 2) << "another source draws other rows";
}

TEST(Generators, BidsGoToOpenAuctions) {
    auto g = make_generator("auction", 5, 0, 1000);
    for (int64_t k = 1; k <= 200; ++k) {
        int64_t t = (k - 1) * 1000;
        std::vector<GeneratedUpdate> bids;
        g->tick("bids", t, bids);
        ASSERT_EQ(bids.size(), 1u);
        auto pos = bids[0].data_json.find("\"auction_id\": ") + 14;
        int64_t auction = std::stoll(bids[0].data_json.substr(pos));
        EXPECT_GE(auction, 1);
        EXPECT_LE(auction, k) << "a bid never precedes its auction";
        EXPECT_LT(k - auction, kAuctionLifetimeTicks) << "a bid goes to an auction still open";
    }
}

TEST(Generators, AuctionsEndAfterTheirLifetime) {
    auto g = make_generator("auction", 5, 0, 1000);
    std::vector<GeneratedUpdate> out;
    g->tick("auctions", 5000, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NE(out[0].data_json.find("\"id\": 6"), std::string::npos);
    EXPECT_NE(out[0].data_json.find("\"end_time\": \"1970-01-01T00:00:15.000Z\""),
              std::string::npos);
    std::vector<GeneratedUpdate> progress;
    g->tick("", 5000, progress);
    EXPECT_TRUE(progress.empty()) << "the auction source itself records progress only";
}

TEST(Json, UpdatesAndEscaping) {
    EXPECT_EQ(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    EXPECT_EQ(updates_json({{5, -1, "{\"n\": 2}"}}),
              "[{\"mz_timestamp\": 5, \"mz_diff\": -1, \"data\": {\"n\": 2}}]");
    EXPECT_EQ(updates_json({}), "[]");
    EXPECT_EQ(iso8601_utc(1'796'082'005'455), "2026-11-30T23:40:05.455Z");
}
