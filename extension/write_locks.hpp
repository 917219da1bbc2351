// Maintenance never waits for a transaction that creates views.
//
// Why.  A view's creation locks its inputs' storage SHARE (to build
// arrangements and time indexes) and their bound rows FOR UPDATE, and holds
// both until its transaction ends.  One transaction that creates several
// views takes those locks view after view, outside the global lock order
// (docs/architecture.md, "One lock order"), so a tick, a replica's step or a
// publication round that waited for one of them while holding what a later
// creation in that transaction needs deadlocked with it (40P01).  So
// maintenance takes such locks without waiting and tries again later
// (replicas and adapterd see ZD004, below): a worker is never part of a
// cycle, and the user's transaction goes on.
#pragma once

extern "C" {
#include "postgres.h"

#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
}

namespace decoupled {

// SQLSTATE ZD004: what maintenance needs is locked by another transaction
// (one creating views, say); the step is tried again shortly.
#define DECOUPLED_ERRCODE_BUSY MAKE_SQLSTATE('Z', 'D', '0', '0', '4')

// Set in the controller's process: its ticks never wait for a table's
// storage (a session's tick waits, holding none of it, as it promises to
// move what committed before it).
extern bool ticks_never_wait;

// ROW EXCLUSIVE on c<id>_cur and then c<id>_dead if nobody holds a
// conflicting lock: InvalidOid, or the relation that was busy (a lock it
// got stays held until the (sub)transaction ends).  A relation that does
// not exist is no obstacle.
Oid lock_storage_for_writes(int64 id);

// `mode` on every relation of `relids` at once, in a subtransaction,
// without waiting: InvalidOid once all are held, or the first that was busy
// (and none held).  The DDL guard takes DROP EXTENSION's relations so too.
Oid lock_all_without_waiting(List* relids, LOCKMODE mode);

// ROW EXCLUSIVE on the storage of every collection in ids[0..n), so; with
// `holder`, the place in ids of the collection whose relation was busy.
Oid lock_all_storage_for_writes(const int64* ids, int n, int* holder = nullptr);

}  // namespace decoupled
