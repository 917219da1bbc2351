// The timestamp oracle (oracle.cpp) for C++ callers in the server.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// A write timestamp, strictly greater than every one handed out before and
// at least `at_least` (decoupled._next_timestamp).
int64 next_timestamp(int64 at_least);

}  // namespace decoupled
