// Admission rules for compaction permission (brief C3.2), checked on a
// transaction's final state at commit.  For one collection:
//
//   (a) the bound never moves backwards from its committed value;
//   (b) the bound never passes a committed requirement or hold;
//   (c) a new or stronger requirement or hold never lies below the bound.
//
// (b) and (c) are one invariant, bound <= every requirement and hold; which
// message fits depends on what the transaction changed.  Pure logic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace decoupled {

enum class PermissionChange { Bound, Requirement, Hold };

struct PermissionState {
    int64_t bound = 0;            // final bound of this transaction
    int64_t committed_bound = 0;  // the bound before this transaction
    std::optional<int64_t> min_requirement;
    std::string min_requirement_owner;  // who requires it, for the message
    std::optional<int64_t> min_hold;
    std::string min_hold_owner;
};

struct PermissionViolation {
    std::string message;
    std::string detail;
};

// `collection` names the collection in messages; `change` says which record
// the transaction wrote, so that the message blames the right side.
std::optional<PermissionViolation> check_permission(const std::string& collection,
                                                    PermissionChange change,
                                                    const PermissionState& state);

}  // namespace decoupled
