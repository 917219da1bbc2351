// A replica step's bounds (step_deadline.cpp).
#pragma once

namespace decoupled {

// Whether this transaction is a replica's step (decoupled._bound_step ran
// in it): a view owner's computation then never waits long for a lock
// (enter_owner, written_plan.cpp).
bool in_replica_step();

// How long a replica step's computation waits for a lock on what the view
// reads before it gives up (lock_timeout, SQLSTATE 55P03): the replica
// tries that view again shortly and steps its other objects meanwhile, as
// for storage another transaction holds (ZD004).
constexpr const char* kStepLockTimeout = "10ms";

}  // namespace decoupled
