// A registered table's tick without SQL (brief C14.3): see index_tick.cpp.
#pragma once

extern "C" {
#include "postgres.h"

#include "utils/snapshot.h"
}

namespace decoupled {

// The storage one tick writes.
struct IndexedTick {
    const char* name;     // the table's, for messages
    Oid pending;          // its captured rows: (mz_diff, columns...)
    Oid cur;              // (mz_rowid, mz_ts, mz_hash, columns...)
    Oid dead;             // (mz_rowid, valid_from, valid_to, columns...)
    int ncols;            // the table's columns
    const bool* is_key;   // which of them are its primary key's (none: no key)
    int64 ts;             // the tick's time
    Snapshot snapshot;    // which captured rows it moves
    // Its owner appended history the table does not hold (append()): a
    // captured retraction by key then takes the newest current row of its
    // key, or none where history holds none.
    bool appended;
};

// Moves the captured rows of `tick.pending` that `tick.snapshot` sees into
// history at `tick.ts`, consolidated per row, and sets how many
// retractions there were and how many found a copy older than ts (the
// caller reports a difference).  Returns false, having written nothing,
// when the storage is not laid out as this path expects or the captured
// rows are too many to consolidate in memory: the caller then runs the
// general statement.
bool tick_by_index(const IndexedTick& tick, int64* wanted, int64* moved);

}  // namespace decoupled
