// WAL capture, as the rest of the extension sees it (see
// control/parts/34_wal_capture.sql for the design).
#pragma once

#include <cstdint>

namespace decoupled {

// decoupled.capture is 'wal' and the WAL carries logical information.
bool capture_from_wal_wanted();

// Whether the catalog has capture_resyncs (1.1: a catalog not updated yet
// has not; the library keeps maintaining it without setting tables aside).
bool catalog_has_capture_resyncs();

// What the capture worker has published as captured: every transaction
// committed before it is in its table's pending changes, for any snapshot
// taken after this call (it publishes once that has committed).
uint64_t captured_through();

// Whether the catalog keeps the pending changes of WAL-captured tables
// unlogged (capture_ticked, capture_lagging, capture_unlogged_intact: a
// catalog not updated yet has not, and they stay logged).
bool catalog_has_unlogged_pending();

// Waits until the capture worker has taken in every transaction committed
// before the call, at most timeout_ms (a worker that is restarting may come
// back meanwhile).  True when it did, or when there is nothing to wait for
// (wal_level below logical); false when time ran out.  Callers ask only
// while some table is captured from the WAL (capture_relations), whatever
// decoupled.capture says: a switch to triggers releases them one by one.
bool wait_for_capture(int timeout_ms);

// The end of what was inserted into the WAL so far: a position a flush
// can reach.
uint64_t inserted_position();

// Flushes the WAL through everything inserted so far (an asynchronous
// commit may still be in WAL buffers, and decoding reads what is flushed);
// returns that position.
uint64_t flush_inserted();

// The capture worker decodes in its own process, with the output plugin
// (capture_plugin.cpp): what one tells the other.
//
// The collection whose change the plugin is turning into a line (0: none).
// An error raised there — a row whose text passes
// decoupled.capture_max_row_size, a type's output function failing — is
// that table's, and counts against it as a failure to write its changes
// does: one table's change must not stop capture of every table.
extern int64_t capture_decoding_table;

// Set by the worker while it decodes: whether the plugin leaves out the
// changes of collection `id` committed at `commit_lsn`, which the worker
// would skip anyway (a table set aside and not taken again since).  The
// plugin must not even turn them into lines: that is what failed.
extern bool (*capture_leaves_out)(int64_t id, uint64_t commit_lsn);

}  // namespace decoupled
