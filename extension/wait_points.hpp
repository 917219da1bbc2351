// Debug wait points (brief C2, C5.6 tests): named places where a test can
// hold a backend or a replica's step, deterministically, at the dangerous
// moment — instead of hoping a kill lands there.
//
// A point is honoured only in sessions whose decoupled.wait_points (a
// superuser-only setting, empty by default) names it.  There, reaching the
// point takes a shared advisory lock on the point's key for the rest of the
// transaction: it passes at once unless a test holds the key exclusively
// (decoupled.arm_wait_point), and then waits — as an ordinary lock wait,
// which pg_locks and isolation tests see — until the test releases it.
#pragma once

namespace decoupled {

// May raise (a cancel or a deadlock while waiting): call it only where a
// PostgreSQL error may unwind the frame.
void wait_point(const char* name);

}  // namespace decoupled
