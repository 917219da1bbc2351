// The external relay's segment protocol (extension/core/relay_segment):
// publications reach the daemon, fan-outs reach followers, every wait is
// bounded, a restarted daemon reuses the segment, and invalid segments and
// names are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "relay_segment.hpp"

using decoupled::relay::Segment;
using decoupled::relay::Topic;

namespace {

std::string unique_name(const char* what) {
    return std::string("pg_decoupled_test_") + what + "_" + std::to_string(getpid());
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 since)
        .count();
}

struct Removed {
    std::string name;
    ~Removed() { Segment::remove(name); }
};

}  // namespace

TEST(RelaySegment, AttachFindsNothingBeforeTheDaemon) {
    Removed r{unique_name("absent")};
    Segment::remove(r.name);
    EXPECT_EQ(Segment::attach(r.name), nullptr);
}

TEST(RelaySegment, PublicationWakesTheDaemonAndFanOutWakesFollowers) {
    Removed r{unique_name("fanout")};
    auto daemon = Segment::own(r.name);
    auto publisher = Segment::attach(r.name);
    auto follower = Segment::attach(r.name);
    ASSERT_NE(publisher, nullptr);
    ASSERT_NE(follower, nullptr);

    uint32_t published = daemon->layout().publish_word.load();
    uint32_t fanned = follower->fanout_seen();
    std::thread relay([&] {
        uint32_t now = daemon->wait_publication(published, 5000);
        if (now != published) daemon->fan_out(42);
    });
    std::thread waiter([&] { fanned = follower->wait_fanout(fanned, 5000); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    publisher->publish(Topic::Frontier);
    relay.join();
    waiter.join();
    EXPECT_NE(fanned, 0u);
    EXPECT_EQ(daemon->layout().epochs[static_cast<int>(Topic::Frontier)].load(), 1u);
    EXPECT_EQ(daemon->layout().epochs[static_cast<int>(Topic::Catalog)].load(), 0u);
    EXPECT_EQ(daemon->layout().fanouts.load(), 1u);
    EXPECT_EQ(daemon->layout().last_fanout_ms.load(), 42);
}

TEST(RelaySegment, WaitsAreBoundedWithoutADaemon) {
    Removed r{unique_name("bounded")};
    auto daemon = Segment::own(r.name);
    auto follower = Segment::attach(r.name);
    auto start = std::chrono::steady_clock::now();
    uint32_t seen = follower->fanout_seen();
    EXPECT_EQ(follower->wait_fanout(seen, 50), seen);
    EXPECT_GE(elapsed_ms(start), 40);
    EXPECT_LT(elapsed_ms(start), 2000);
    // A publication nobody relays wakes no follower.
    follower->publish(Topic::Catalog);
    EXPECT_EQ(follower->wait_fanout(seen, 20), seen);
}

TEST(RelaySegment, AFanOutBeforeTheWaitIsNotMissed) {
    Removed r{unique_name("early")};
    auto daemon = Segment::own(r.name);
    auto follower = Segment::attach(r.name);
    uint32_t seen = follower->fanout_seen();
    daemon->fan_out(1);
    auto start = std::chrono::steady_clock::now();
    EXPECT_NE(follower->wait_fanout(seen, 5000), seen);
    EXPECT_LT(elapsed_ms(start), 1000);
}

TEST(RelaySegment, ARestartedDaemonReusesTheSegment) {
    Removed r{unique_name("restart")};
    auto first = Segment::own(r.name);
    auto follower = Segment::attach(r.name);
    follower->publish(Topic::Frontier);
    first->heartbeat(1234, 1000);
    first.reset();  // the daemon exits (or is killed)
    auto second = Segment::own(r.name);
    EXPECT_EQ(second->layout().epochs[0].load(), 1u) << "the segment was not reset";
    second->fan_out(2000);
    EXPECT_EQ(follower->layout().fanouts.load(), 1u) << "the follower's mapping is the same segment";
}

TEST(RelaySegment, AnInvalidSegmentIsResetByTheDaemonAndIgnoredByOthers) {
    Removed r{unique_name("invalid")};
    {
        auto owner = Segment::own(r.name);
        owner->layout().magic.store(0xdeadbeef);
    }
    EXPECT_EQ(Segment::attach(r.name), nullptr);
    auto owner = Segment::own(r.name);
    EXPECT_NE(Segment::attach(r.name), nullptr);
    EXPECT_EQ(owner->layout().publications.load(), 0u);
}

TEST(RelaySegment, LivenessFollowsTheHeartbeat) {
    Removed r{unique_name("alive")};
    auto daemon = Segment::own(r.name);
    EXPECT_FALSE(daemon->relay_alive(10'000));
    daemon->heartbeat(99, 10'000);
    EXPECT_TRUE(daemon->relay_alive(10'500));
    EXPECT_FALSE(daemon->relay_alive(10'000 + decoupled::relay::kStaleHeartbeatMs + 1));
    daemon->heartbeat(0, 0);
    EXPECT_FALSE(daemon->relay_alive(10'000));
}

TEST(RelaySegment, FollowersJoinLeaveAndDeadOnesAreReclaimed) {
    Removed r{unique_name("followers")};
    auto daemon = Segment::own(r.name);
    int a = daemon->join(100, "replicad", 1);
    int b = daemon->join(200, "replicad", 1);
    EXPECT_NE(a, b);
    EXPECT_EQ(daemon->followers(), 2);
    daemon->leave(a);
    EXPECT_EQ(daemon->followers(), 1);
    EXPECT_EQ(daemon->reclaim_followers([](int32_t pid) { return pid != 200; }), 1);
    EXPECT_EQ(daemon->followers(), 0);
    for (int i = 0; i < decoupled::relay::kMaxFollowers; ++i)
        EXPECT_GE(daemon->join(1000 + i, "x", 1), 0);
    EXPECT_EQ(daemon->join(5000, "x", 1), -1) << "a full registry refuses, it does not overwrite";
}

TEST(RelaySegment, NamesAreChecked) {
    EXPECT_TRUE(decoupled::relay::valid_name("pg_decoupled_relay"));
    EXPECT_FALSE(decoupled::relay::valid_name(""));
    EXPECT_FALSE(decoupled::relay::valid_name("../etc/passwd"));
    EXPECT_FALSE(decoupled::relay::valid_name("a b"));
    EXPECT_THROW(Segment::own("bad/name"), std::runtime_error);
    EXPECT_EQ(Segment::attach("bad/name"), nullptr);
}
