// The names of a collection's storage, decoupled_storage.c<id>_<part>
// (cur, dead, stage, pending, state, ...): one spelling for C and SQL
// (decoupled._storage() returns this).
#pragma once

extern "C" {
#include "postgres.h"

#include "catalog/namespace.h"
#include "utils/lsyscache.h"
}

namespace decoupled {

// Qualified, palloc'd in the current memory context.
inline char* storage_name(int64 id, const char* part) {
    return psprintf("decoupled_storage.c" INT64_FORMAT "_%s", id, part);
}

// The relation c<id>_<part> in decoupled_storage, or InvalidOid.
inline Oid storage_relid(int64 id, const char* part) {
    Oid nsp = get_namespace_oid("decoupled_storage", true);
    if (!OidIsValid(nsp)) return InvalidOid;
    char* rel = psprintf("c" INT64_FORMAT "_%s", id, part);
    Oid relid = get_relname_relid(rel, nsp);
    pfree(rel);
    return relid;
}

}  // namespace decoupled
