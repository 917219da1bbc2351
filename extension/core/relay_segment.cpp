#include "relay_segment.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <climits>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace decoupled::relay {

namespace bip = boost::interprocess;

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain words");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words must be plain words");

namespace {

// Shared (not private) futexes: the waiters are other processes.
void futex_wake_all(std::atomic<uint32_t>* word) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ms) {
    if (timeout_ms <= 0) return;
    timespec ts;
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (timeout_ms % 1000) * 1000000L;
    // Returns at once if the word moved already; EINTR and spurious
    // wake-ups are fine: callers compare the word.
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

uint32_t wait_word(std::atomic<uint32_t>* word, uint32_t seen, int64_t timeout_ms) {
    uint32_t now = word->load();
    if (now != seen) return now;
    futex_wait(word, seen, timeout_ms);
    return word->load();
}

}  // namespace

struct Segment::Mapping {
    bip::shared_memory_object shm;
    bip::mapped_region region;
};

Segment::Segment(std::unique_ptr<Mapping> mapping)
    : mapping_(std::move(mapping)), layout_(static_cast<Layout*>(mapping_->region.get_address())) {}

Segment::~Segment() = default;

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 200) return false;
    for (char c : name)
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            return false;
    return true;
}

std::unique_ptr<Segment> Segment::own(const std::string& name) {
    if (!valid_name(name)) throw std::runtime_error("invalid relay name \"" + name + "\"");
    try {
        auto m = std::make_unique<Mapping>();
        m->shm = bip::shared_memory_object(bip::open_or_create, name.c_str(), bip::read_write,
                                           bip::permissions(0600));
        bip::offset_t size = 0;
        m->shm.get_size(size);
        bool fresh = size < static_cast<bip::offset_t>(sizeof(Layout));
        if (fresh) m->shm.truncate(sizeof(Layout));
        m->region = bip::mapped_region(m->shm, bip::read_write, 0, sizeof(Layout));
        auto* layout = static_cast<Layout*>(m->region.get_address());
        if (fresh || layout->magic.load() != kMagic || layout->version != kVersion) {
            // A new segment is zeroed by the kernel; an invalid one is reset.
            // The magic comes last: attachers ignore the segment until then.
            layout->magic.store(0);
            std::memset(static_cast<void*>(reinterpret_cast<char*>(layout) + sizeof(layout->magic)),
                        0, sizeof(Layout) - sizeof(layout->magic));
            layout->version = kVersion;
            layout->magic.store(kMagic);
        }
        return std::unique_ptr<Segment>(new Segment(std::move(m)));
    } catch (const bip::interprocess_exception& e) {
        throw std::runtime_error("relay segment \"" + name + "\": " + e.what());
    }
}

std::unique_ptr<Segment> Segment::attach(const std::string& name) noexcept {
    if (!valid_name(name)) return nullptr;
    try {
        auto m = std::make_unique<Mapping>();
        m->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
        bip::offset_t size = 0;
        if (!m->shm.get_size(size) || size < static_cast<bip::offset_t>(sizeof(Layout)))
            return nullptr;
        m->region = bip::mapped_region(m->shm, bip::read_write, 0, sizeof(Layout));
        auto* layout = static_cast<Layout*>(m->region.get_address());
        if (layout->magic.load() != kMagic || layout->version != kVersion) return nullptr;
        return std::unique_ptr<Segment>(new Segment(std::move(m)));
    } catch (...) {
        return nullptr;
    }
}

bool Segment::remove(const std::string& name) noexcept {
    try {
        return valid_name(name) && bip::shared_memory_object::remove(name.c_str());
    } catch (...) {
        return false;
    }
}

void Segment::publish(Topic topic) noexcept {
    layout_->epochs[static_cast<int>(topic)].fetch_add(1);
    layout_->publications.fetch_add(1);
    layout_->publish_word.fetch_add(1);
    futex_wake_all(&layout_->publish_word);
}

uint32_t Segment::wait_publication(uint32_t seen, int64_t timeout_ms) noexcept {
    return wait_word(&layout_->publish_word, seen, timeout_ms);
}

void Segment::fan_out(int64_t now_ms) noexcept {
    layout_->fanout_word.fetch_add(1);
    layout_->fanouts.fetch_add(1);
    layout_->last_fanout_ms.store(now_ms);
    futex_wake_all(&layout_->fanout_word);
}

void Segment::heartbeat(int32_t pid, int64_t now_ms) noexcept {
    layout_->relayd_pid.store(pid);
    layout_->relayd_heartbeat_ms.store(now_ms);
}

int Segment::reclaim_followers(bool (*alive)(int32_t pid)) noexcept {
    int freed = 0;
    for (auto& f : layout_->followers) {
        int32_t pid = f.pid.load();
        if (pid != 0 && !alive(pid) && f.pid.compare_exchange_strong(pid, 0)) ++freed;
    }
    return freed;
}

int Segment::join(int32_t pid, const char* kind, int64_t now_ms) noexcept {
    for (int i = 0; i < kMaxFollowers; ++i) {
        auto& f = layout_->followers[i];
        int32_t expected = 0;
        if (f.pid.load() == 0 && f.pid.compare_exchange_strong(expected, pid)) {
            std::strncpy(f.kind, kind ? kind : "", sizeof(f.kind) - 1);
            f.kind[sizeof(f.kind) - 1] = '\0';
            f.attached_ms.store(now_ms);
            return i;
        }
    }
    return -1;
}

void Segment::leave(int slot) noexcept {
    if (slot >= 0 && slot < kMaxFollowers) layout_->followers[slot].pid.store(0);
}

uint32_t Segment::fanout_seen() const noexcept { return layout_->fanout_word.load(); }

uint32_t Segment::wait_fanout(uint32_t seen, int64_t timeout_ms) noexcept {
    return wait_word(&layout_->fanout_word, seen, timeout_ms);
}

bool Segment::relay_alive(int64_t now_ms) const noexcept {
    return layout_->relayd_pid.load() != 0 &&
           now_ms - layout_->relayd_heartbeat_ms.load() <= kStaleHeartbeatMs;
}

int Segment::followers() const noexcept {
    int n = 0;
    for (const auto& f : layout_->followers)
        if (f.pid.load() != 0) ++n;
    return n;
}

}  // namespace decoupled::relay
