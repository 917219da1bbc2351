// The external relay's shared-memory segment (brief C8.2), free of
// PostgreSQL so the daemon, the replica host and the unit tests use it too.
//
// pg_decoupled_relayd owns a Boost.Interprocess segment named by
// decoupled.relay_name.  The server's processes publish into it at commit
// ("a frontier advanced", "the catalog changed"); the daemon sees each
// publication and fans it out to every follower attached to the segment.
//
//   publisher:  epochs[topic]++, publish_word++, futex-wake publish_word
//   relayd:     futex-wait publish_word -> fanout_word++, futex-wake fanout_word
//   follower:   futex-wait fanout_word (with a timeout: its poll interval)
//
// Only atomics live in the segment, and every wait has a timeout: no
// process can die holding a lock others need, and a dead or wedged daemon
// only means followers wake at their poll interval (wake-ups are hints).
// The daemon reuses a valid segment it finds when it starts, so processes
// attached to it never need to notice a restart; a process that found no
// segment tries to attach again later.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace decoupled::relay {

constexpr uint32_t kMagic = 0x594c5244;  // "DRLY"
constexpr uint32_t kVersion = 1;
constexpr int kMaxFollowers = 64;
// A daemon whose heartbeat is older than this is reported not alive.
constexpr int64_t kStaleHeartbeatMs = 2000;

enum class Topic : int { Frontier = 0, Catalog = 1 };

struct FollowerSlot {
    std::atomic<int32_t> pid;  // 0: free
    std::atomic<int64_t> attached_ms;
    char kind[32];
};

struct Layout {
    std::atomic<uint32_t> magic;  // set last when the segment is initialized
    uint32_t version;
    std::atomic<int32_t> relayd_pid;  // 0: no daemon runs
    std::atomic<int64_t> relayd_heartbeat_ms;
    std::atomic<uint32_t> publish_word;  // publishers -> daemon
    std::atomic<uint32_t> fanout_word;   // daemon -> followers
    std::atomic<uint64_t> epochs[2];     // per Topic
    std::atomic<uint64_t> publications;
    std::atomic<uint64_t> fanouts;
    std::atomic<int64_t> last_fanout_ms;
    FollowerSlot followers[kMaxFollowers];
};

class Segment {
  public:
    // The daemon's: opens the segment `name`, creating and initializing it
    // when it is missing or not a valid one.  Throws std::runtime_error.
    static std::unique_ptr<Segment> own(const std::string& name);
    // Everyone else's: the segment if it exists and is valid, else null.
    static std::unique_ptr<Segment> attach(const std::string& name) noexcept;
    // Removes the name (attached processes keep their mapping).
    static bool remove(const std::string& name) noexcept;

    ~Segment();
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;

    Layout& layout() { return *layout_; }
    const Layout& layout() const { return *layout_; }

    // Publisher: never blocks.
    void publish(Topic topic) noexcept;

    // Daemon: waits up to timeout_ms for a publication after `seen`
    // (publish_word's value); returns the new value (== seen on timeout).
    uint32_t wait_publication(uint32_t seen, int64_t timeout_ms) noexcept;
    void fan_out(int64_t now_ms) noexcept;
    void heartbeat(int32_t pid, int64_t now_ms) noexcept;
    // Frees slots of followers whose process is gone; returns how many.
    int reclaim_followers(bool (*alive)(int32_t pid)) noexcept;

    // Follower: a slot in the registry (-1 when full), released by leave().
    int join(int32_t pid, const char* kind, int64_t now_ms) noexcept;
    void leave(int slot) noexcept;
    uint32_t fanout_seen() const noexcept;
    // Waits up to timeout_ms for a fan-out after `seen`; returns the new
    // value of fanout_word (== seen on timeout).
    uint32_t wait_fanout(uint32_t seen, int64_t timeout_ms) noexcept;

    bool relay_alive(int64_t now_ms) const noexcept;
    int followers() const noexcept;

  private:
    struct Mapping;
    explicit Segment(std::unique_ptr<Mapping> mapping);
    std::unique_ptr<Mapping> mapping_;
    Layout* layout_;
};

// A valid segment name: what shm_open accepts portably.
bool valid_name(const std::string& name);

}  // namespace decoupled::relay
