// Planner statistics of collections' storage, for whom may read them
// (storage_stats.cpp).
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

void install_storage_stats_hooks();

// The relation that gates collection `lifetime_id`'s history (the
// registered table, the public view of a source or materialized view), as
// the active snapshot sees the catalog; InvalidOid when there is none (or
// no snapshot, or no catalog).  Read directly: no privilege is needed.
Oid collection_relation(int64 lifetime_id);

}  // namespace decoupled
