// Plans kept for the statements a view's step derives (brief C13, C14.3).
//
// A step derives its statements from the written plan and deparses them;
// for a view, the text is the same at every step (the step's time is a
// parameter, the storage names fixed by the view's lifetime id).  Planning
// that text again at every step was a large part of what a small step cost,
// so the text is prepared once per backend and user, kept, and executed
// from PostgreSQL's plan cache, which plans it again whenever a relation it
// reads changes.  Texts that change at every step (a list of touched group
// keys) run once, as before, and are never kept.
//
// Callers are inside SPI_connect.  No C++ objects: callers may longjmp.
#pragma once

extern "C" {
#include "postgres.h"

#include "executor/spi.h"
}

namespace decoupled {

// The plan kept in this backend for `sql` (generic, with `nargs` parameters
// of `types`) as the current user, prepared on first use; nullptr when the
// cache is full of plans this transaction uses (then run `sql` once).
SPIPlanPtr kept_statement(const char* sql, int nargs, const Oid* types);

// The plan to run `sql` with: the kept one when `keep` and the cache has
// room, otherwise one planned for this call only (SPI_finish frees it).
SPIPlanPtr statement_plan(const char* sql, int nargs, const Oid* types, bool keep = true);

// Runs `sql` without parameters like SPI_execute(sql, read_only, count),
// from its kept plan when there is one.
int execute_kept(const char* sql, bool read_only, long count);

// Executes `plan` with one parameter of `type` (none if `value` is null),
// sending its rows to `dest` (a scratch's receiver, say); returns the SPI
// result code.
int execute_into(SPIPlanPtr plan, const Datum* value, Oid type, DestReceiver* dest);

}  // namespace decoupled
