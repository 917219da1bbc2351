// Storage locked for maintenance's writes without waiting (write_locks.hpp).
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
}

#include "storage_names.hpp"
#include "write_locks.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_lock_storage_nowait);
}

namespace {

// The part of c<id> that could not be locked, or nullptr.
const char* busy_part(int64 id) {
    static const char* const parts[] = {"cur", "dead"};
    for (const char* part : parts) {
        Oid relid = decoupled::storage_relid(id, part);
        if (OidIsValid(relid) && !ConditionalLockRelationOid(relid, RowExclusiveLock)) return part;
    }
    return nullptr;
}

}  // namespace

bool decoupled::lock_storage_for_writes(int64 id) { return busy_part(id) == nullptr; }

// decoupled._lock_storage_nowait(lifetime_id bigint): a replica's step
// takes its output's storage this way before writing it; 55P03 when
// another transaction holds it, which the replica retries shortly without
// reporting the object stalled.
Datum decoupled_lock_storage_nowait(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0)) PG_RETURN_VOID();
    int64 id = PG_GETARG_INT64(0);
    const char* part = busy_part(id);
    if (part != nullptr)
        ereport(ERROR,
                (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
                 errmsg("could not lock \"%s\" for maintenance without waiting",
                        decoupled::storage_name(id, part)),
                 errdetail("Another transaction holds it, such as one creating a materialized "
                           "view over its collection."),
                 errhint("Maintenance tries again shortly.")));
    PG_RETURN_VOID();
}
