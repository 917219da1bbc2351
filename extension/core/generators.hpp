// Load generators for sources (brief C5.2): deterministic per (source, time).
//
// Ticks fall on epoch + k * tick_ms (k >= 0): every replica agrees on them,
// and the rows of tick k depend only on the source's lifetime id and k, so
// two replicas appending the same interval produce identical updates and
// compare-and-append keeps exactly one copy.  Pure logic, unit-tested.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace decoupled {

struct GeneratedUpdate {
    int64_t time;
    int64_t diff;
    std::string data_json;  // a JSON object of column values
};

// The tick times in [from, until], at most max_ticks of them, oldest first.
std::vector<int64_t> tick_times(int64_t epoch, int64_t tick_ms, int64_t from, int64_t until,
                                size_t max_ticks);

class Generator {
  public:
    virtual ~Generator() = default;
    // Appends the updates of output `role` ("" is the source itself) at the
    // tick at `time` to `out`.
    virtual void tick(const std::string& role, int64_t time,
                      std::vector<GeneratedUpdate>& out) const = 0;
};

// nullptr for an unknown generator name.
std::unique_ptr<Generator> make_generator(const std::string& name, int64_t source_id,
                                          int64_t epoch, int64_t tick_ms);

// How long an auction stays open, in ticks.
constexpr int64_t kAuctionLifetimeTicks = 10;

// [{"mz_timestamp": t, "mz_diff": d, "data": {...}}, ...]
std::string updates_json(const std::vector<GeneratedUpdate>& updates);

std::string json_string(const std::string& text);
std::string iso8601_utc(int64_t epoch_ms);

}  // namespace decoupled
