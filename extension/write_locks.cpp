// Storage locked for maintenance's writes without waiting (write_locks.hpp).
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
}

#include "storage_names.hpp"
#include "write_locks.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_lock_storage_nowait);
PG_FUNCTION_INFO_V1(decoupled_lock_time_index);
}

bool decoupled::ticks_never_wait = false;

Oid decoupled::lock_storage_for_writes(int64 id) {
    static const char* const parts[] = {"cur", "dead"};
    for (const char* part : parts) {
        Oid relid = storage_relid(id, part);
        if (OidIsValid(relid) && !ConditionalLockRelationOid(relid, RowExclusiveLock)) return relid;
    }
    return InvalidOid;
}

Oid decoupled::lock_all_without_waiting(List* relids, LOCKMODE mode) {
    MemoryContext context = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(context);
    volatile Oid busy = InvalidOid;
    PG_TRY();
    {
        ListCell* cell;
        foreach (cell, relids) {
            if (!ConditionalLockRelationOid(lfirst_oid(cell), mode)) {
                busy = lfirst_oid(cell);
                break;
            }
        }
    }
    PG_CATCH();
    {
        // Out of lock space, say: the subtransaction ends before the error
        // goes on, so a caller's own subtransactions stay balanced.
        MemoryContextSwitchTo(context);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(context);
        CurrentResourceOwner = owner;
        ReThrowError(error);
    }
    PG_END_TRY();
    if (OidIsValid(busy))
        RollbackAndReleaseCurrentSubTransaction();
    else
        ReleaseCurrentSubTransaction();  // the locks pass to the enclosing transaction
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
    return busy;
}

Oid decoupled::lock_all_storage_for_writes(const int64* ids, int n, int* holder) {
    List* relids = NIL;
    List* owners = NIL;  // each relation's place in ids
    static const char* const parts[] = {"cur", "dead"};
    for (int i = 0; i < n; i++)
        for (const char* part : parts) {
            Oid relid = storage_relid(ids[i], part);
            if (!OidIsValid(relid)) continue;
            relids = lappend_oid(relids, relid);
            owners = lappend_int(owners, i);
        }
    Oid busy = lock_all_without_waiting(relids, RowExclusiveLock);
    if (holder != nullptr) {
        *holder = -1;
        ListCell *r, *o;
        forboth(r, relids, o, owners) if (lfirst_oid(r) == busy) *holder = lfirst_int(o);
    }
    list_free(relids);
    list_free(owners);
    return busy;
}

// decoupled._lock_storage_nowait(lifetime_id bigint): a replica's step
// takes its output's storage this way before writing it; ZD004 when
// another transaction holds it, which the replica retries shortly.
Datum decoupled_lock_storage_nowait(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0)) PG_RETURN_VOID();
    Oid busy = decoupled::lock_storage_for_writes(PG_GETARG_INT64(0));
    if (OidIsValid(busy))
        ereport(ERROR,
                (errcode(DECOUPLED_ERRCODE_BUSY),
                 errmsg("could not lock \"%s\" for maintenance without waiting",
                        get_rel_name(busy)),
                 errdetail("Another transaction holds it, such as one creating a materialized "
                           "view over its collection."),
                 errhint("Maintenance tries again shortly.")));
    PG_RETURN_VOID();
}

// decoupled._lock_time_index(lifetime_id, wait): the lock under which a
// collection's time index is made (_ensure_time_index), held until the
// transaction ends; false when `wait` is false and another holds it.  An
// advisory lock tag in a space of its own (field 4 = 3): pg_advisory_lock()
// takes 1 and 2 only, so no role can take it from SQL and hold up whoever
// creates a view (and the replicas it then makes wait).
Datum decoupled_lock_time_index(PG_FUNCTION_ARGS) {
    uint64 id = (uint64)PG_GETARG_INT64(0);
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32)(id >> 32), (uint32)id, 3);
    PG_RETURN_BOOL(LockAcquire(&tag, ExclusiveLock, false, !PG_GETARG_BOOL(1)) !=
                   LOCKACQUIRE_NOT_AVAIL);
}
