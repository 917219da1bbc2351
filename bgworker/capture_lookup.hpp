// The live rows of a batch's keys, by index probes (bgworker/capture_lookup.cpp
// says why).  Include after postgres.h.
#pragma once

namespace decoupled {

// Called for each live row found: the lookup's number and the row as the
// text of a record of the table's columns, "(v1,...)".
typedef void (*KeyRowFound)(int lookup, const char* row, void* arg);
// Called instead for a lookup whose row is not needed and nothing pending
// touches: it is current in history, and retracted there by its key.
typedef void (*KeyRowCurrent)(int lookup, void* arg);

// For each lookup i in [0, nlookups) — the text of its key columns in
// texts[i * nkeys + k], k in the order of key_fields (each the 1-based
// position of a key column among the table's columns) — the rows with that
// key among collection `id`'s current and pending rows, net of pending's
// retractions, as this transaction sees them now (its own earlier writes
// to pending included).  A lookup whose row is not needed (!need_row[i])
// reads only pending: when nothing there has its key, `current` is called
// and cur is not read.  Returns false, having done nothing, when cur or
// pending has no plain btree index on exactly the key: the caller then
// asks a statement.
bool probe_live_rows(int64 id, const int* key_fields, int nkeys, int nlookups, char** texts,
                     const bool* need_row, KeyRowFound found, KeyRowCurrent current, void* arg);

}  // namespace decoupled
