// Waking waiters for uppers (wait_functions.cpp) from C++ in the server.
#pragma once

namespace decoupled {

// The current transaction advanced an upper: at its commit, wake
// wait_for_upper() callers and the replica workers
// (decoupled._notify_upper_at_commit).
void notify_upper_at_commit();

}  // namespace decoupled
