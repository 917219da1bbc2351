// Launch specifications: what the controller must keep running.
//
// The controller derives one spec per process from the committed catalog
// (brief C9.1): the relay, one adapterd per declared adapter and one replica
// worker per replica declaration and live deployment.  Comparing the desired
// specs with what runs yields the supervision plan.  Pure logic, unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace decoupled {

enum class WorkerKind { Relay, Adapterd, Replica, Capture };

const char* worker_kind_name(WorkerKind kind);

struct LaunchSpec {
    WorkerKind kind = WorkerKind::Relay;
    std::string name;        // replica, adapter or "relay"
    std::string cluster;     // replicas only
    std::string deployment;  // empty for the relay, which serves every deployment
    int64_t replica_id = 0;  // replicas only: the declaration's id

    // The identity a running process is matched on.  Two specs with the same
    // key describe the same process, so it is adopted rather than restarted.
    std::string key() const;
    bool operator==(const LaunchSpec& other) const { return key() == other.key(); }
};

struct SupervisionPlan {
    std::vector<LaunchSpec> start;  // desired, not running
    std::vector<LaunchSpec> keep;   // desired and running: adopt, never restart
    std::vector<LaunchSpec> stop;   // running, no longer declared
};

// Both inputs may be in any order; the plan lists specs sorted by key so
// that logs and views are stable.
SupervisionPlan plan_supervision(std::vector<LaunchSpec> desired,
                                 std::vector<LaunchSpec> running);

}  // namespace decoupled
