// Which catalog schema versions this build can open, and which schema
// version each extension version installs.
//
// Pure logic (no PostgreSQL headers) so the unit tests can exercise it.  The
// catalog records its schema version in decoupled.catalog_meta; a build that
// meets a version it does not know refuses the catalog instead of guessing,
// because a silent conversion could lose declarations (brief C1.2).
//
// Each extension version (pg_extension.extversion) installs exactly one
// schema version; an upgrade script moves the catalog to the schema version
// of its target (docs/upgrades.md).  This build opens every schema version
// from kOldestSchemaVersion to kCurrentSchemaVersion, so a server running it
// against a catalog not yet upgraded keeps working until ALTER EXTENSION
// pg_decoupled UPDATE.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace decoupled {

// The schema version a fresh CREATE EXTENSION of the newest version stamps.
constexpr int kCurrentSchemaVersion = 2;
// The oldest schema version this build still opens.
constexpr int kOldestSchemaVersion = 1;

bool is_supported_schema_version(int version);

// Why a catalog at `version` cannot be opened, or nothing when it can.
std::optional<std::string> schema_version_problem(int version);

// The schema version that extension version `extension_version` installs
// ("1.0" -> 1, "1.1" -> 2), or nothing for a version this build does not know.
std::optional<int> schema_version_of_extension(std::string_view extension_version) noexcept;

}  // namespace decoupled
