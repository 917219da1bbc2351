#include "launch_spec.hpp"

#include <algorithm>

namespace decoupled {

const char* worker_kind_name(WorkerKind kind) {
    switch (kind) {
        case WorkerKind::Relay: return "relay";
        case WorkerKind::Adapterd: return "adapterd";
        case WorkerKind::Replica: return "replica";
        case WorkerKind::Capture: return "capture";
    }
    return "unknown";
}

std::string LaunchSpec::key() const {
    // The replica id, not its name, identifies a declaration: a replica that
    // is dropped and re-declared under the same name is a new process.
    std::string k = worker_kind_name(kind);
    k += '/';
    k += deployment;
    k += '/';
    k += kind == WorkerKind::Replica ? std::to_string(replica_id) : name;
    return k;
}

namespace {

void sort_unique(std::vector<LaunchSpec>& specs) {
    std::sort(specs.begin(), specs.end(),
              [](const LaunchSpec& a, const LaunchSpec& b) { return a.key() < b.key(); });
    specs.erase(std::unique(specs.begin(), specs.end()), specs.end());
}

}  // namespace

SupervisionPlan plan_supervision(std::vector<LaunchSpec> desired,
                                 std::vector<LaunchSpec> running) {
    sort_unique(desired);
    sort_unique(running);
    SupervisionPlan plan;
    auto d = desired.begin();
    auto r = running.begin();
    while (d != desired.end() || r != running.end()) {
        if (r == running.end() || (d != desired.end() && d->key() < r->key())) {
            plan.start.push_back(*d++);
        } else if (d == desired.end() || r->key() < d->key()) {
            plan.stop.push_back(*r++);
        } else {
            plan.keep.push_back(*r++);
            ++d;
        }
    }
    return plan;
}

}  // namespace decoupled
