// The names of a collection's storage, decoupled_storage.c<id>_<part>
// (cur, dead, stage, pending, state, ...): one spelling for C and SQL
// (decoupled._storage() returns this).
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// Qualified, palloc'd in the current memory context.
inline char* storage_name(int64 id, const char* part) {
    return psprintf("decoupled_storage.c" INT64_FORMAT "_%s", id, part);
}

}  // namespace decoupled
