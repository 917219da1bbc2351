#include "frontier.hpp"

#include <algorithm>
#include <limits>

namespace decoupled {

Readability readability(int64_t t, int64_t since, int64_t upper) {
    if (t < since) return Readability::Compacted;
    if (t >= upper) return Readability::NotYetReadable;
    return Readability::Readable;
}

std::optional<int64_t> latest_readable(int64_t since, int64_t upper) {
    if (upper <= since) return std::nullopt;
    return upper - 1;
}

int64_t propose_bound(int64_t upper, int64_t retain_ms, int64_t current_bound,
                      std::optional<int64_t> min_requirement, std::optional<int64_t> min_hold) {
    int64_t proposal = upper;
    if (retain_ms > 0)
        proposal = upper < std::numeric_limits<int64_t>::min() + retain_ms
                       ? std::numeric_limits<int64_t>::min()
                       : upper - retain_ms;
    if (min_requirement) proposal = std::min(proposal, *min_requirement);
    if (min_hold) proposal = std::min(proposal, *min_hold);
    return std::max(proposal, current_bound);
}

int64_t compacted_since(int64_t since, int64_t bound, int64_t upper) {
    return std::max(since, std::min(bound, upper));
}

}  // namespace decoupled
