// Shared memory of pg_decoupled: what the controller observed and plans,
// the session holds, the timestamp oracle and the catalog epoch.
//
// What protects what:
//   lock          (LWLock) the controller's pid, latch and observation, and
//                 the supervision slots: nspecs, specs_truncated and every
//                 SpecSlot field except adapterd's four below;
//   holds_lock    (LWLock) the hold slots, next_hold_id, and adapterd's
//                 fields of its SpecSlot (incarnation, pub_started,
//                 pub_committed, publish_requested);
//   oracle_mutex  (spinlock) oracle_ready and oracle_last;
//   capture_mutex (spinlock) capture, the WAL capture worker's state;
//   catalog_epoch, frontier_epoch and the relay's counters (atomics) need
//                 no lock.
// Whoever needs both LWLocks takes `lock` first, then `holds_lock`.  The
// condition variables: observed_cv is broadcast when the controller
// publishes an observation, upper_cv after a commit that advanced an
// upper, holds_cv when adapterd committed protection for waiting holds.
#pragma once

extern "C" {
#include "postgres.h"

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
}

namespace decoupled {

enum class ControllerState : int {
    NotRunning = 0,         // no controller process attached
    WaitingForExtension,    // connected, the extension is not installed
    Following,              // reading a supported catalog
    RefusingCatalog,        // the catalog's schema version is not supported
    Failing,                // the last catalog read failed; retrying with backoff
    WaitingForRestore,      // pg_restore is loading a dumped catalog
};

const char* controller_state_name(ControllerState state);

// How the controller sees one supervised process.
enum class SlotState : int {
    Planned = 0,  // declared; no process is started for this kind yet
    Pending,      // to be started as soon as its backoff allows
    Starting,     // registered with the postmaster, not yet running
    Running,      // the process claimed its slot (pid set)
    Backoff,      // exited; restarts at next_start_ms
    Stopping,     // no longer declared; asked to stop
    NoProcess,    // the postmaster had no background worker slot; retried at next_start_ms
};

const char* slot_state_name(SlotState state);

// A process the catalog declares that got no slot (decoupled.max_workers
// are all in use): never started, and said so.
constexpr int kLeftOutShown = 16;
struct LeftOutSpec {
    char kind[16];
    char name[NAMEDATALEN];
    char cluster[NAMEDATALEN];
    char deployment[NAMEDATALEN];
    int64 replica_id;
};

// One supervised process.  Slots outlive the controller, which is how a new
// controller adopts running replicas: their pids are still here.
struct SpecSlot {
    bool in_use;
    bool wanted;      // declared by the catalog at the last pass
    SlotState state;
    uint32 generation;  // bumped on reuse; a worker checks it when claiming
    pid_t pid;          // set by the worker itself, cleared when it exits
    Latch* latch;       // the worker's, for catalog-change wake-ups
    int failures;
    int64 started_ms;
    int64 next_start_ms;
    bool no_process_reported;  // its "could not start" said (NoProcess), until it starts
    char kind[16];
    char name[NAMEDATALEN];
    char cluster[NAMEDATALEN];
    char deployment[NAMEDATALEN];
    int64 replica_id;
    // adapterd only, under holds_lock (not lock): the incarnation it runs,
    // and its hold publications (started != committed: one is in flight).
    // Reset by the controller, holding both locks, when it reuses the slot.
    int64 incarnation;
    uint64 pub_started;
    uint64 pub_committed;
    bool publish_requested;
};

// WAL capture (bgworker/capture_worker.cpp), under capture_mutex.  Every
// transaction whose commit record starts before captured_through is in its
// collection's pending changes (committed).
struct CaptureShared {
    pid_t pid;                   // the capture worker, 0 when none runs
    Latch* latch;                // set to ask it for a pass now
    uint64 captured_through;     // an XLogRecPtr
    TimestampTz progress_at;     // when captured_through last moved (or was confirmed)
    TimestampTz error_at;        // 0: the last pass succeeded
    int64 error_lifetime_id;     // the table whose changes failed, 0 if none
    char last_error[256];
};

// One hold of one session (brief C4.1): sessions aggregate their holds here,
// under the durable protection of their adapter incarnation.
struct HoldSlot {
    bool in_use;
    int64 hold_id;
    int64 incarnation;
    int64 lifetime_id;
    int64 frontier;
    pid_t pid;
    TimestampTz backend_start;  // with pid: the session (pids are reused)
    bool subscription;          // held by a running decoupled.subscribe()
    bool pending;               // waits for adapterd to commit its durable protection
    bool failed;                // adapterd could not protect it (below the bound)
};

struct SharedState {
    LWLock* lock;        // the controller's state and the supervision slots
    LWLock* holds_lock;  // guards holds[], next_hold_id and adapterd's SpecSlot fields
    int64 next_hold_id;
    // MaxBackends * decoupled.max_holds_per_session slots, a shared-memory
    // area of its own.  Backend number b (its PGPROC's pgprocno) takes its
    // holds from slots [b * per_backend, (b + 1) * per_backend) only: no
    // session can use up what another may need.
    HoldSlot* holds;
    int nholds;
    int holds_per_backend;

    // The highest incarnation (of a replica or an adapter) this server has
    // handed out since it started, in any life of the extension: a catalog
    // created again restarts its sequence, and a number handed out again
    // would pass a session's attachment or hold of the dropped catalog off
    // as the new one's (extension/sessions.cpp, _claim_incarnation).
    pg_atomic_uint64 incarnations_seen;

    // Bumped after every committed catalog change; backends compare it with
    // the value their caches were built at.
    pg_atomic_uint64 catalog_epoch;
    // Bumped after every commit that advanced an upper; the in-process relay
    // fans out what moved since it last looked.
    pg_atomic_uint64 frontier_epoch;
    // The in-process relay's own record (written by it alone).
    pg_atomic_uint64 relay_fanouts;
    pg_atomic_uint64 relay_last_fanout;  // a TimestampTz; 0: never

    // Timestamp oracle (extension/oracle.cpp), under its own spinlock.
    slock_t oracle_mutex;
    bool oracle_ready;   // seeded from the durable high-water mark
    int64 oracle_last;   // the last timestamp handed out

    slock_t capture_mutex;
    CaptureShared capture;
    ConditionVariable capture_cv;   // broadcast when captured_through moves

    ConditionVariable observed_cv;  // broadcast after each publication
    ConditionVariable upper_cv;     // broadcast after a commit that advanced an upper
    ConditionVariable holds_cv;     // broadcast by adapterd after it committed holds

    // The controller process, if any.
    pid_t controller_pid;
    Latch* controller_latch;

    // Its latest observation of the catalog.
    ControllerState state;
    int32 observed_schema_version;     // 0 when none was read
    int64 observed_catalog_version;    // 0 when none was read
    TimestampTz observed_at;
    uint64 publications;               // bumped on every publication

    // What it supervises: slots [0, nspecs) may be in use.
    int nspecs;
    bool specs_truncated;  // more were desired than decoupled.max_workers slots
    // Those left without a slot at the last pass: how many, and the first
    // few (listed by decoupled.supervised as `no slot`).
    int specs_left_out;
    LeftOutSpec left_out[kLeftOutShown];
    SpecSlot specs[FLEXIBLE_ARRAY_MEMBER];
};

// Installed from _PG_init.
void install_shmem_hooks();

SharedState* shared_state();
// The same, or nullptr where the library was not preloaded.
SharedState* shared_state_if_any();

// Wake the controller now: a hint, polling catches up without it.
void wake_controller();

// Wake every supervised worker (after a catalog change): also a hint.
void wake_workers();

// A supervised worker's side of its slot.  claim_slot records this
// process in slot `slot` unless a newer generation reused it or a live
// process holds it (a duplicate start after a controller restart), copies
// the slot into *spec, and arranges for release at exit, which wakes the
// controller.
bool claim_slot(int slot, uint32 generation, SpecSlot* spec);

// The start of every supervised background worker: claims the slot its
// main argument names, with the generation the controller put in
// bgw_extra, or exits (status 0) when it may not.  Returns the slot.
int claim_own_slot(Datum main_arg, SpecSlot* spec);

// Session holds (sessions.cpp): move one of this session's holds up, or
// forget it.
void advance_hold(int64 hold_id, int64 frontier);
void forget_hold(int64 hold_id);

// adapterd's side (sessions.cpp).  One entry per collection its sessions
// hold: the lowest hold, and the lowest hold still waiting for durable
// protection (-1: none).
struct HeldCollection {
    int64 lifetime_id;
    int64 min_frontier;
    int64 min_pending;
};
// Snapshots the holds of `incarnation` (palloc'd array); with `publish`
// marks a publication as started.  `slot` is adapterd's supervision slot.
HeldCollection* snapshot_holds(int slot, int64 incarnation, bool publish, int* count);
// After the snapshot's transaction committed: confirms the pending holds it
// covered — failing those below the bound of `failed`, (collection, bound)
// pairs — and wakes their sessions.
void confirm_holds(int slot, int64 incarnation, bool published, const HeldCollection* held,
                   int count, const int64* failed, int nfailed);
// Whether adapterd of `slot` was asked for a publication now, and whether
// sessions wait for it.
bool publication_requested(int slot);
bool holds_pending(int64 incarnation);

// Whether this session holds collection `lifetime_id` under an adapter
// incarnation that is no longer live (retired, or of a catalog dropped
// since): *incarnation is then that one, *adapter its adapter ("" if the
// catalog no longer knows it).  Reads the catalog directly (no privilege
// checked): the reader's gate asks when a read under its hold fails.
bool retired_hold(int64 lifetime_id, int64* incarnation, char** adapter);

}  // namespace decoupled
