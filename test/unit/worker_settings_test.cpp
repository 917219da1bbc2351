#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "worker_settings.hpp"

using namespace decoupled;

namespace {

const PinnedSetting* find(const char* name) {
    for (const PinnedSetting& s : kPinnedSettings)
        if (std::strcmp(s.name, name) == 0) return &s;
    return nullptr;
}

}  // namespace

// The processes bound their own waits later (lock_timeout around a drop a
// reader holds, a replica's statement_timeout per step): those must be
// pinned so that the later setting wins.
TEST(WorkerSettings, TimeoutsAreOffAndSetLater) {
    for (const char* name : {"statement_timeout", "lock_timeout",
                             "idle_in_transaction_session_timeout", "idle_session_timeout"}) {
        const PinnedSetting* s = find(name);
        ASSERT_NE(s, nullptr) << name;
        EXPECT_STREQ(s->value, "0") << name;
        EXPECT_TRUE(s->set_later) << name;
    }
}

// What names resolve in and what a transaction may do stay the process's
// own, whatever code running there later sets.
TEST(WorkerSettings, NamesAndTransactionsAreHeld) {
    for (const char* name : {"role", "search_path", "array_nulls", "xmloption",
                             "default_transaction_read_only", "default_transaction_isolation"}) {
        const PinnedSetting* s = find(name);
        ASSERT_NE(s, nullptr) << name;
        EXPECT_FALSE(s->set_later) << name;
    }
    EXPECT_STREQ(find("search_path")->value, "pg_catalog, pg_temp");
    EXPECT_STREQ(find("role")->value, "none");
    EXPECT_STREQ(find("default_transaction_read_only")->value, "off");
}

// The role goes first: a database default of `role` must not decide who
// sets the rest.
TEST(WorkerSettings, RoleFirst) { EXPECT_STREQ(kPinnedSettings[0].name, "role"); }
