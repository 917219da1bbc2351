// Maintenance never waits for a transaction that creates views.
//
// Why.  A view's creation locks its inputs' storage SHARE (to build
// arrangements and time indexes) and their bound rows FOR UPDATE, and holds
// both until its transaction ends.  One transaction that creates several
// views takes those locks view after view, outside the global lock order
// (docs/architecture.md, "One lock order"), so a tick, a replica's step or a
// publication round that waited for one of them while holding what a later
// creation in that transaction needs deadlocked with it (40P01).  So
// maintenance takes such locks without waiting and tries again later: a
// worker is never part of a cycle, and the user's transaction goes on.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// ROW EXCLUSIVE on c<id>_cur and c<id>_dead if nobody holds a conflicting
// lock; false otherwise (a lock it got stays held until the transaction
// ends).  A relation that does not exist is no obstacle.
bool lock_storage_for_writes(int64 id);

}  // namespace decoupled
