// Frontier algebra (brief C2, C3): which times are readable, and how far
// compaction may go.  Times are milliseconds since the Unix epoch.
//
//   upper            every update at a time < upper is final
//   since            history before it is compacted
//   compaction bound committed permission: since may advance up to it
//
// A collection is readable at t iff since <= t < upper.  Pure logic.
#pragma once

#include <cstdint>
#include <optional>

namespace decoupled {

enum class Readability {
    Readable,        // since <= t < upper
    Compacted,       // t < since: the history was consolidated away
    NotYetReadable,  // t >= upper: not every update at t is final yet
};

Readability readability(int64_t t, int64_t since, int64_t upper);

// The latest readable time, or nothing when no time is readable yet.
std::optional<int64_t> latest_readable(int64_t since, int64_t upper);

// A proposal for the next compaction bound: `upper - retain_ms`, capped by
// the lowest requirement and the lowest hold, and never behind the current
// bound (bounds only move forward).  Saturates instead of overflowing.
int64_t propose_bound(int64_t upper, int64_t retain_ms, int64_t current_bound,
                      std::optional<int64_t> min_requirement, std::optional<int64_t> min_hold);

// Where physical compaction may move `since`: up to the bound, never past
// upper (nothing beyond upper exists yet), never backwards.
int64_t compacted_since(int64_t since, int64_t bound, int64_t upper);

}  // namespace decoupled
