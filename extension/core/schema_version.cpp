#include "schema_version.hpp"

namespace decoupled {

namespace {

// Every released extension version and the schema version it installs, in
// release order.  A release appends its row (docs/upgrades.md).
struct ExtensionSchema {
    std::string_view extension_version;
    int schema_version;
};
constexpr ExtensionSchema kExtensionSchemas[] = {
    {"1.0", 1},
    {"1.1", 2},
};

std::string supported_range() {
    if (kOldestSchemaVersion == kCurrentSchemaVersion) return std::to_string(kCurrentSchemaVersion);
    return std::to_string(kOldestSchemaVersion) + " to " + std::to_string(kCurrentSchemaVersion);
}

}  // namespace

bool is_supported_schema_version(int version) {
    return version >= kOldestSchemaVersion && version <= kCurrentSchemaVersion;
}

std::optional<std::string> schema_version_problem(int version) {
    if (is_supported_schema_version(version)) return std::nullopt;
    if (version > kCurrentSchemaVersion)
        return "catalog schema version " + std::to_string(version) +
               " is newer than this build of pg_decoupled supports (" + supported_range() + ")";
    return "catalog schema version " + std::to_string(version) +
           " is not supported by this build of pg_decoupled (supports " + supported_range() + ")";
}

std::optional<int> schema_version_of_extension(std::string_view extension_version) noexcept {
    for (const auto& entry : kExtensionSchemas)
        if (entry.extension_version == extension_version) return entry.schema_version;
    return std::nullopt;
}

}  // namespace decoupled
