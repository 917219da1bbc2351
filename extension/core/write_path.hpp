// How one append writes its updates (brief C2.1, C14.3).  Pure logic.
//
// The write path keeps one prepared plan per collection and statement kind
// (extension/append_core.cpp); which kinds an append runs depends only on
// the shape of what it writes, decided here:
//
//   * updates that only insert (every multiplicity positive) need no
//     consolidation: inserting d copies of a row for each update gives the
//     same multiset as summing first.  Captured changes and JSON updates
//     that only insert go straight into `cur`, without the stage;
//   * anything else is staged, consolidated per (time, row), and its net
//     retractions paired with the oldest copies present before their time;
//     with one time only (every tick, every view step) that pairing is one
//     index probe per retracted row with no ranking across times.
#pragma once

#include <cstdint>
#include <optional>

namespace decoupled {

// What an append writes, as far as choosing statements goes: the least and
// greatest multiplicity and time among its non-zero updates (none when it
// writes nothing), and how many rows its negative multiplicities would
// retract before consolidation (an upper bound of the net retractions).
struct WriteShape {
    std::optional<int64_t> min_diff, max_diff;
    std::optional<int64_t> min_ts, max_ts;
    int64_t retractions = 0;
};

enum class InsertPath {
    None,          // nothing positive to insert
    Copies,        // every multiplicity is 1: one row each
    Multiplied,    // every multiplicity is positive: d copies each
    Consolidated,  // mixed signs: net multiplicity per (time, row) first
};

enum class RetractPath {
    None,     // nothing negative
    OneTime,  // retractions at a single time
    General,  // retractions at several times: the k-th pairs with the k-th oldest copy
};

InsertPath insert_path(const WriteShape& shape) noexcept;
RetractPath retract_path(const WriteShape& shape) noexcept;

// Whether the updates may skip the stage and go straight into `cur`: they
// only insert.
bool writes_directly(const WriteShape& shape) noexcept;

// Whether retracted rows are better found by one hash join over `cur` (of
// about `cur_rows` rows) than by one index probe each.  A probe costs about
// as much as reading thirty rows in a scan; below kScanRetractions the
// probes win whatever the size (and a plan for few rows is never wrong by
// much).
constexpr int64_t kScanRetractions = 10000;
bool retract_by_scan(int64_t retractions, double cur_rows) noexcept;

// Whether a tick that left a registered table's pending relation empty
// should give it a new, empty file (TRUNCATE) rather than keep its
// `blocks` pages.  Pending is a queue: every tick deletes what it holds,
// and the pages a burst grew it to (a bulk UPDATE captured, a backlog) stay
// until a VACUUM truncates them, which under steady writes never happens
// (the tail always holds the newest rows).  Every later tick reads them
// all.  Below kCompactPendingBlocks (1 MB) reading them costs less than a
// new file (a catalog update and an invalidation for every session).
constexpr int64_t kCompactPendingBlocks = 128;
bool compacts_pending(int64_t blocks) noexcept;

}  // namespace decoupled
