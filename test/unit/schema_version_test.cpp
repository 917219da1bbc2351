#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "schema_version.hpp"

using namespace decoupled;

TEST(SchemaVersion, CurrentVersionIsSupported) {
    EXPECT_TRUE(is_supported_schema_version(kCurrentSchemaVersion));
    EXPECT_FALSE(schema_version_problem(kCurrentSchemaVersion).has_value());
}

// A server running this build keeps opening a catalog that was not upgraded
// yet (extension 1.0, schema version 1).
TEST(SchemaVersion, EveryVersionSinceTheOldestIsSupported) {
    EXPECT_EQ(kOldestSchemaVersion, 1);
    EXPECT_EQ(kCurrentSchemaVersion, 2);
    for (int version = kOldestSchemaVersion; version <= kCurrentSchemaVersion; ++version) {
        EXPECT_TRUE(is_supported_schema_version(version)) << version;
        EXPECT_FALSE(schema_version_problem(version).has_value()) << version;
    }
}

TEST(SchemaVersion, NewerVersionIsRefusedAsNewer) {
    auto problem = schema_version_problem(99);
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(*problem,
              "catalog schema version 99 is newer than this build of pg_decoupled supports (1 to 2)");
    EXPECT_FALSE(is_supported_schema_version(kCurrentSchemaVersion + 1));
    problem = schema_version_problem(kCurrentSchemaVersion + 1);
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("is newer than this build"), std::string::npos) << *problem;
}

TEST(SchemaVersion, UnknownOlderVersionIsRefused) {
    EXPECT_FALSE(is_supported_schema_version(0));
    EXPECT_FALSE(is_supported_schema_version(-3));
    auto problem = schema_version_problem(0);
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(*problem,
              "catalog schema version 0 is not supported by this build of pg_decoupled "
              "(supports 1 to 2)");
}

TEST(SchemaVersion, EachExtensionVersionInstallsOneSchemaVersion) {
    EXPECT_EQ(schema_version_of_extension("1.0"), std::optional<int>(1));
    EXPECT_EQ(schema_version_of_extension("1.1"), std::optional<int>(2));
}

// A fresh CREATE EXTENSION installs the control file's default_version, and
// must stamp the newest schema version this build knows.
TEST(SchemaVersion, TheDefaultExtensionVersionInstallsTheCurrentSchemaVersion) {
    std::ifstream control(PG_DECOUPLED_CONTROL_FILE);
    ASSERT_TRUE(control) << PG_DECOUPLED_CONTROL_FILE;
    const std::regex line_re(R"(^\s*default_version\s*=\s*'([^']*)'\s*$)");
    std::string line, default_version;
    while (std::getline(control, line)) {
        std::smatch m;
        if (std::regex_match(line, m, line_re)) default_version = m[1];
    }
    ASSERT_FALSE(default_version.empty()) << "no default_version in " << PG_DECOUPLED_CONTROL_FILE;
    EXPECT_EQ(schema_version_of_extension(default_version),
              std::optional<int>(kCurrentSchemaVersion))
        << "default_version " << default_version;
}

TEST(SchemaVersion, UnknownExtensionVersionHasNoSchemaVersion) {
    EXPECT_FALSE(schema_version_of_extension("").has_value());
    EXPECT_FALSE(schema_version_of_extension("1").has_value());
    EXPECT_FALSE(schema_version_of_extension("1.2").has_value());
    EXPECT_FALSE(schema_version_of_extension("1.0 ").has_value());
    EXPECT_FALSE(schema_version_of_extension("1.10").has_value());
    EXPECT_FALSE(schema_version_of_extension("2.0").has_value());
}

TEST(SchemaVersion, EveryKnownExtensionVersionInstallsASupportedSchemaVersion) {
    for (const char* v : {"1.0", "1.1"}) {
        auto schema = schema_version_of_extension(v);
        ASSERT_TRUE(schema.has_value()) << v;
        EXPECT_TRUE(is_supported_schema_version(*schema)) << v;
    }
}
