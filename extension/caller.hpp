// Who called in: the caller frames of the public entry points.
//
// See caller.cpp.  Code outside it only pushes a frame around work it does
// with the extension's rights on a caller's behalf (subscribe.cpp) and asks
// who the caller is.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// What the implementation of an entry point may know of its caller,
// recorded while still running as the caller.
struct CallerFrame {
    Oid user;               // the effective user (current_user) that called in
    char* search_path;      // its effective search_path, every schema explicit
    char* current_schema;   // current_schema() of the caller, NULL if none
    CallerFrame* outer;
};

// Records the current user, search path and current schema into `frame`
// and makes it the innermost frame.  Pair with pop_caller_frame in a
// PG_FINALLY block.
void push_caller_frame(CallerFrame* frame);
void pop_caller_frame(CallerFrame* frame);

// The innermost frame, or nullptr outside any entry point.
const CallerFrame* current_caller_frame();

// Whether the caller (the session's user outside any entry point) may
// SELECT `relation`; false for a relation that no longer exists.
bool caller_can_select(Oid relation);

// While set, frames record `schema` as the caller's current schema: the
// schema a statement such as CREATE MATERIALIZED VIEW s.v names, where the
// entry point would otherwise create in the current one.  Reset with
// nullptr in a PG_FINALLY block; a transaction's abort resets it too.
void set_target_schema(const char* schema);

}  // namespace decoupled
