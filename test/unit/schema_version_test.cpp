#include <gtest/gtest.h>

#include "schema_version.hpp"

using namespace decoupled;

TEST(SchemaVersion, CurrentVersionIsSupported) {
    EXPECT_TRUE(is_supported_schema_version(kCurrentSchemaVersion));
    EXPECT_FALSE(schema_version_problem(kCurrentSchemaVersion).has_value());
}

TEST(SchemaVersion, NewerVersionIsRefusedAsNewer) {
    auto problem = schema_version_problem(kCurrentSchemaVersion + 98);
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("is newer than this build"), std::string::npos) << *problem;
    EXPECT_NE(problem->find("99"), std::string::npos) << *problem;
}

TEST(SchemaVersion, UnknownOlderVersionIsRefused) {
    EXPECT_FALSE(is_supported_schema_version(0));
    EXPECT_FALSE(is_supported_schema_version(-3));
    auto problem = schema_version_problem(0);
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("not supported"), std::string::npos) << *problem;
}
