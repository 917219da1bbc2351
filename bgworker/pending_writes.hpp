// Captured rows into a collection's pending table without a statement
// (bgworker/pending_writes.cpp says why).  Include after postgres.h.
#pragma once

namespace decoupled {

// Reads each of `rows` (text: a record of pending's columns, "(diff,v1,...)")
// as `owner`, in a security-restricted operation, and inserts it into
// collection `id`'s pending table.  Returns false, having written nothing,
// when pending is not laid out as the extension made it (the caller then
// writes through a statement).
bool write_pending_rows(int64 id, Oid owner, const Datum* rows, int n);

}  // namespace decoupled
