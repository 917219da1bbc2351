#include "generators.hpp"

#include <array>
#include <ctime>

namespace decoupled {

namespace {

// SplitMix64: a fast, well-mixed function of its input.
uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

uint64_t draw(int64_t source_id, int64_t k, uint64_t salt) {
    return mix(mix(static_cast<uint64_t>(source_id)) ^ mix(static_cast<uint64_t>(k) + salt));
}

class TickedGenerator : public Generator {
  public:
    TickedGenerator(int64_t source_id, int64_t epoch, int64_t tick_ms)
        : source_id_(source_id), epoch_(epoch), tick_ms_(tick_ms) {}

  protected:
    // 1 for the first tick.
    int64_t tick_number(int64_t time) const { return (time - epoch_) / tick_ms_ + 1; }
    int64_t source_id_, epoch_, tick_ms_;
};

class Counter : public TickedGenerator {
  public:
    using TickedGenerator::TickedGenerator;
    void tick(const std::string& role, int64_t time,
              std::vector<GeneratedUpdate>& out) const override {
        if (!role.empty()) return;
        out.push_back({time, 1, "{\"n\": " + std::to_string(tick_number(time)) + "}"});
    }
};

constexpr std::array<const char*, 12> kItems = {
    "Signed Memorabilia", "City Bar Crawl", "Best Pizza in Town", "Gift Basket",
    "Custom Art", "Vintage Lamp", "Oak Desk", "Concert Tickets",
    "Antique Clock", "Mountain Bike", "Espresso Machine", "First Edition Novel"};

// One auction opens per tick and stays open kAuctionLifetimeTicks ticks; one
// bid per tick goes to an auction that is still open.
class Auction : public TickedGenerator {
  public:
    using TickedGenerator::TickedGenerator;
    void tick(const std::string& role, int64_t time,
              std::vector<GeneratedUpdate>& out) const override {
        int64_t k = tick_number(time);
        if (role == "auctions") {
            std::string row = "{\"id\": " + std::to_string(k) +
                              ", \"seller\": " + std::to_string(1 + draw(source_id_, k, 1) % 100) +
                              ", \"item\": " + json_string(kItems[draw(source_id_, k, 2) % kItems.size()]) +
                              ", \"end_time\": " +
                              json_string(iso8601_utc(time + kAuctionLifetimeTicks * tick_ms_)) + "}";
            out.push_back({time, 1, std::move(row)});
        } else if (role == "bids") {
            int64_t open = k < kAuctionLifetimeTicks ? k : kAuctionLifetimeTicks;
            int64_t auction = k - static_cast<int64_t>(draw(source_id_, k, 3) % open);
            std::string row = "{\"id\": " + std::to_string(k) +
                              ", \"buyer\": " + std::to_string(1 + draw(source_id_, k, 4) % 1000) +
                              ", \"auction_id\": " + std::to_string(auction) +
                              ", \"amount\": " + std::to_string(1 + draw(source_id_, k, 5) % 100) +
                              ", \"bid_time\": " + json_string(iso8601_utc(time)) + "}";
            out.push_back({time, 1, std::move(row)});
        }
    }
};

}  // namespace

std::vector<int64_t> tick_times(int64_t epoch, int64_t tick_ms, int64_t from, int64_t until,
                                size_t max_ticks) {
    std::vector<int64_t> times;
    if (tick_ms <= 0 || until < from || until < epoch) return times;
    int64_t first = from <= epoch ? epoch : epoch + ((from - epoch + tick_ms - 1) / tick_ms) * tick_ms;
    for (int64_t t = first; t <= until && times.size() < max_ticks; t += tick_ms) times.push_back(t);
    return times;
}

std::unique_ptr<Generator> make_generator(const std::string& name, int64_t source_id,
                                          int64_t epoch, int64_t tick_ms) {
    if (tick_ms <= 0) return nullptr;
    if (name == "counter") return std::make_unique<Counter>(source_id, epoch, tick_ms);
    if (name == "auction") return std::make_unique<Auction>(source_id, epoch, tick_ms);
    return nullptr;
}

std::string updates_json(const std::vector<GeneratedUpdate>& updates) {
    std::string json = "[";
    for (size_t i = 0; i < updates.size(); ++i) {
        if (i) json += ", ";
        json += "{\"mz_timestamp\": " + std::to_string(updates[i].time) +
                ", \"mz_diff\": " + std::to_string(updates[i].diff) +
                ", \"data\": " + updates[i].data_json + "}";
    }
    return json + "]";
}

std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

std::string iso8601_utc(int64_t epoch_ms) {
    time_t seconds = static_cast<time_t>(epoch_ms / 1000);
    struct tm tm;
    gmtime_r(&seconds, &tm);
    char buf[96];  // sized for any int field values, which keeps -Wformat-truncation quiet
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             static_cast<int>(epoch_ms % 1000));
    return buf;
}

}  // namespace decoupled
