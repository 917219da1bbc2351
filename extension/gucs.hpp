// The decoupled.* configuration parameters.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

extern char* guc_database;      // decoupled.database: where the catalog lives
extern int guc_poll_interval;   // decoupled.poll_interval: ms between catalog polls
extern int guc_max_workers;     // decoupled.max_workers: supervised process slots
extern char* guc_adapter;       // decoupled.adapter: the adapter a session attaches to
extern char* guc_replica_conninfo;  // decoupled.replica_conninfo: how workers connect
extern int guc_status_history_retention;  // decoupled.status_history_retention, seconds
extern int guc_capture;                   // decoupled.capture: CaptureMode
enum CaptureMode { kCaptureWal = 0, kCaptureTrigger = 1 };
extern int guc_capture_max_row_size;         // decoupled.capture_max_row_size, kB
extern int guc_capture_unticked_wal_limit;  // decoupled.capture_unticked_wal_limit, MB (0: logged)
extern int guc_table_tick_interval;       // decoupled.table_tick_interval, ms (0: off)
extern int guc_bound_publication_interval;  // decoupled.bound_publication_interval, ms (0: off)
extern int guc_step_timeout;  // decoupled.step_timeout, ms (0: off): replicas' statement_timeout
extern int guc_step_work_mem;                // decoupled.step_work_mem, kB (-1: work_mem)
extern int guc_hold_publication_interval;   // decoupled.hold_publication_interval, ms
extern int guc_max_holds_per_session;       // decoupled.max_holds_per_session: holds per backend
extern int guc_relay;                       // decoupled.relay: RelayMode
enum RelayMode { kRelayInProcess = 0, kRelayExternal = 1 };
extern char* guc_relay_name;                // decoupled.relay_name: the external segment
extern char* guc_wait_points;               // decoupled.wait_points: debug wait points honoured

void define_gucs();

// A worker's session settings after it connected (core/worker_settings.hpp),
// over the database's and the role's defaults.
void pin_worker_settings();

// decoupled.as_of (as_of.cpp): whether it holds a time.
bool as_of_set();
// Whether reads in the current security context see it (as_of.cpp).
bool as_of_applies();

// Turns off the planner settings `names` (nullptr-terminated) until
// AtEOXact_GUC(true, level) with the level returned, or the transaction's
// abort: for kept plans whose shape must not depend on the statistics of
// the moment they were (or will be again) made.
int planner_settings_off(const char* const* names);

}  // namespace decoupled
