// Which catalog schema versions this build can open.
//
// Pure logic (no PostgreSQL headers) so the unit tests can exercise it.  The
// catalog records its schema version in decoupled.catalog_meta; a build that
// meets a version it does not know refuses the catalog instead of guessing,
// because a silent conversion could lose declarations (brief C1.2).
#pragma once

#include <optional>
#include <string>

namespace decoupled {

// The schema version a fresh CREATE EXTENSION stamps.
constexpr int kCurrentSchemaVersion = 1;

bool is_supported_schema_version(int version);

// Why a catalog at `version` cannot be opened, or nothing when it can.
std::optional<std::string> schema_version_problem(int version);

}  // namespace decoupled
