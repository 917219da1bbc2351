#include <gtest/gtest.h>

#include "launch_spec.hpp"

using namespace decoupled;

namespace {

LaunchSpec replica(int64_t id, const std::string& name, const std::string& deployment = "default") {
    LaunchSpec s;
    s.kind = WorkerKind::Replica;
    s.replica_id = id;
    s.name = name;
    s.cluster = "c";
    s.deployment = deployment;
    return s;
}

LaunchSpec adapterd(const std::string& name, const std::string& deployment = "default") {
    LaunchSpec s;
    s.kind = WorkerKind::Adapterd;
    s.name = name;
    s.deployment = deployment;
    return s;
}

std::vector<std::string> keys(const std::vector<LaunchSpec>& specs) {
    std::vector<std::string> out;
    for (const auto& s : specs) out.push_back(s.key());
    return out;
}

}  // namespace

TEST(LaunchSpec, ReplicasAreIdentifiedByDeclarationNotName) {
    // Dropping r1 and declaring it again yields a new id: a new process.
    EXPECT_NE(replica(1, "r1").key(), replica(2, "r1").key());
    EXPECT_EQ(replica(1, "r1").key(), replica(1, "renamed").key());
}

TEST(LaunchSpec, DeploymentsAreSeparateProcesses) {
    EXPECT_NE(replica(1, "r1", "blue").key(), replica(1, "r1", "green").key());
    EXPECT_NE(adapterd("a", "blue").key(), adapterd("a", "green").key());
}

TEST(SupervisionPlan, NothingRunningStartsEverything) {
    auto plan = plan_supervision({adapterd("a"), replica(2, "r2"), replica(1, "r1")}, {});
    EXPECT_EQ(keys(plan.start),
              (std::vector<std::string>{"adapterd/default/a", "replica/default/1",
                                        "replica/default/2"}));
    EXPECT_TRUE(plan.keep.empty());
    EXPECT_TRUE(plan.stop.empty());
}

TEST(SupervisionPlan, RunningProcessesAreAdoptedNotRestarted) {
    auto plan = plan_supervision({replica(1, "r1"), replica(2, "r2")},
                                 {replica(2, "r2"), replica(3, "r3")});
    EXPECT_EQ(keys(plan.start), (std::vector<std::string>{"replica/default/1"}));
    EXPECT_EQ(keys(plan.keep), (std::vector<std::string>{"replica/default/2"}));
    EXPECT_EQ(keys(plan.stop), (std::vector<std::string>{"replica/default/3"}));
}

TEST(SupervisionPlan, DuplicatesCollapse) {
    auto plan = plan_supervision({adapterd("a"), adapterd("a")}, {adapterd("a"), adapterd("a")});
    EXPECT_EQ(plan.keep.size(), 1u);
    EXPECT_TRUE(plan.start.empty());
    EXPECT_TRUE(plan.stop.empty());
}

TEST(SupervisionPlan, EmptyCatalogStopsEverything) {
    auto plan = plan_supervision({}, {adapterd("a"), replica(7, "r7")});
    EXPECT_EQ(plan.stop.size(), 2u);
    EXPECT_TRUE(plan.start.empty());
}

TEST(LaunchSpec, CaptureWorkerIsOneProcessAcrossDeployments) {
    LaunchSpec capture;
    capture.kind = WorkerKind::Capture;
    capture.name = "capture";
    EXPECT_STREQ(decoupled::worker_kind_name(WorkerKind::Capture), "capture");
    EXPECT_EQ(capture.key(), "capture//capture");
    auto plan = decoupled::plan_supervision({capture}, {capture});
    EXPECT_TRUE(plan.start.empty());
    EXPECT_EQ(plan.keep.size(), 1u);
}
