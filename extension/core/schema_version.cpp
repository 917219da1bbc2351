#include "schema_version.hpp"

namespace decoupled {

bool is_supported_schema_version(int version) {
    return version == kCurrentSchemaVersion;
}

std::optional<std::string> schema_version_problem(int version) {
    if (is_supported_schema_version(version)) return std::nullopt;
    if (version > kCurrentSchemaVersion)
        return "catalog schema version " + std::to_string(version) +
               " is newer than this build of pg_decoupled supports (" +
               std::to_string(kCurrentSchemaVersion) + ")";
    return "catalog schema version " + std::to_string(version) +
           " is not supported by this build of pg_decoupled (supports " +
           std::to_string(kCurrentSchemaVersion) + ")";
}

}  // namespace decoupled
