// The server's side of the relay (brief C8): publishing wake-ups at commit
// into the external relay's segment, and the state decoupled.relay shows.
#pragma once

#include "core/relay_segment.hpp"

namespace decoupled {

// Called from commit callbacks: never throws, never blocks, never raises.
// With decoupled.relay = external it publishes into the segment named by
// decoupled.relay_name, attaching (again) at most once a second while it
// finds none; otherwise it does nothing (the in-process relay reads the
// shared-memory epochs itself).
void relay_publish(relay::Topic topic) noexcept;

}  // namespace decoupled
