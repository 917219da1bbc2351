#include <gtest/gtest.h>

#include "admission.hpp"

using namespace decoupled;

namespace {

PermissionState state(int64_t bound, int64_t committed) {
    PermissionState s;
    s.bound = bound;
    s.committed_bound = committed;
    return s;
}

}  // namespace

TEST(Admission, BoundMayAdvanceUpToRequirementsAndHolds) {
    auto s = state(100, 50);
    s.min_requirement = 100;
    s.min_hold = 120;
    EXPECT_FALSE(check_permission("t", PermissionChange::Bound, s).has_value());
}

TEST(Admission, BoundRegressionIsRejected) {
    auto v = check_permission("t", PermissionChange::Bound, state(40, 50));
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->message, "compaction bound of \"t\" cannot move backwards");
    EXPECT_EQ(v->detail, "The committed bound is 50; the transaction would set it to 40.");
}

TEST(Admission, BoundBeyondHoldIsRejectedNamingBoth) {
    auto s = state(100, 50);
    s.min_hold = 80;
    s.min_hold_owner = "adapter \"default\"";
    auto v = check_permission("t", PermissionChange::Bound, s);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->message, "compaction bound of \"t\" cannot pass a hold");
    EXPECT_EQ(v->detail, "The bound would be 100; the hold of adapter \"default\" is at 80.");
}

TEST(Admission, BoundBeyondRequirementIsRejected) {
    auto s = state(100, 50);
    s.min_requirement = 99;
    s.min_requirement_owner = "materialized view \"mv\"";
    auto v = check_permission("t", PermissionChange::Bound, s);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->message, "compaction bound of \"t\" cannot pass a requirement");
    EXPECT_NE(v->detail.find("materialized view \"mv\" is at 99"), std::string::npos);
}

TEST(Admission, HoldBelowBoundIsRejectedBlamingTheHold) {
    auto s = state(100, 100);
    s.min_hold = 70;
    auto v = check_permission("t", PermissionChange::Hold, s);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->message, "hold on \"t\" is below its compaction bound");
    EXPECT_NE(v->detail.find("is at 70; the bound is 100"), std::string::npos);
}

TEST(Admission, RequirementBelowBoundIsRejectedBlamingTheRequirement) {
    auto s = state(100, 100);
    s.min_requirement = 10;
    auto v = check_permission("t", PermissionChange::Requirement, s);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->message, "requirement on \"t\" is below its compaction bound");
}

TEST(Admission, HoldAtTheBoundIsAdmitted) {
    auto s = state(100, 100);
    s.min_hold = 100;
    s.min_requirement = 100;
    EXPECT_FALSE(check_permission("t", PermissionChange::Hold, s).has_value());
}
