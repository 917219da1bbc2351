#include "admission.hpp"

namespace decoupled {

namespace {

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

}  // namespace

std::optional<PermissionViolation> check_permission(const std::string& collection,
                                                    PermissionChange change,
                                                    const PermissionState& s) {
    if (s.bound < s.committed_bound)
        return PermissionViolation{
            "compaction bound of " + quoted(collection) + " cannot move backwards",
            "The committed bound is " + std::to_string(s.committed_bound) +
                "; the transaction would set it to " + std::to_string(s.bound) + "."};

    auto blocked_by = [&](int64_t frontier, const std::string& what,
                          const std::string& owner) -> std::optional<PermissionViolation> {
        if (frontier >= s.bound) return std::nullopt;
        if (change == PermissionChange::Bound)
            return PermissionViolation{
                "compaction bound of " + quoted(collection) + " cannot pass a " + what,
                "The bound would be " + std::to_string(s.bound) + "; the " + what + " of " +
                    owner + " is at " + std::to_string(frontier) + "."};
        return PermissionViolation{
            what + " on " + quoted(collection) + " is below its compaction bound",
            "The " + what + " of " + owner + " is at " + std::to_string(frontier) +
                "; the bound is " + std::to_string(s.bound) +
                " and history before it may already be compacted."};
    };
    if (s.min_requirement) {
        if (auto v = blocked_by(*s.min_requirement, "requirement", s.min_requirement_owner))
            return v;
    }
    if (s.min_hold) {
        if (auto v = blocked_by(*s.min_hold, "hold", s.min_hold_owner)) return v;
    }
    return std::nullopt;
}

}  // namespace decoupled
