#include "backoff.hpp"

#include <algorithm>

namespace decoupled {

int64_t Backoff::on_failure(int64_t started_ms, int64_t now_ms) {
    if (now_ms - started_ms >= policy_.healthy_after_ms) failures_ = 0;
    int64_t delay = policy_.initial_ms;
    // Doubling stops at the cap; counting the shifts keeps it overflow-free.
    for (int i = 0; i < failures_ && delay < policy_.max_ms; ++i) delay *= 2;
    ++failures_;
    return now_ms + std::min(delay, policy_.max_ms);
}

}  // namespace decoupled
