#include "shmem.hpp"

#include "gucs.hpp"

extern "C" {
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
}

namespace decoupled {

namespace {

constexpr const char* kTrancheName = "pg_decoupled";

shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;
SharedState* state = nullptr;

Size shared_state_size() {
    return add_size(offsetof(SharedState, specs),
                    mul_size(sizeof(SpecSlot), static_cast<Size>(guc_max_workers)));
}

// Every backend that may run SQL has a PGPROC numbered below MaxBackends
// (known by the time shmem_request_hook runs, in PostgreSQL 15).
Size holds_size() {
    return mul_size(sizeof(HoldSlot), mul_size(static_cast<Size>(MaxBackends),
                                               static_cast<Size>(guc_max_holds_per_session)));
}

void request_shmem() {
    if (prev_shmem_request_hook) prev_shmem_request_hook();
    RequestAddinShmemSpace(add_size(shared_state_size(), holds_size()));
    RequestNamedLWLockTranche(kTrancheName, 2);
}

void startup_shmem() {
    if (prev_shmem_startup_hook) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    state = static_cast<SharedState*>(ShmemInitStruct("pg_decoupled", shared_state_size(), &found));
    if (!found) {
        memset(state, 0, shared_state_size());
        LWLockPadded* locks = GetNamedLWLockTranche(kTrancheName);
        state->lock = &locks[0].lock;
        state->holds_lock = &locks[1].lock;
        state->next_hold_id = 1;
        ConditionVariableInit(&state->observed_cv);
        ConditionVariableInit(&state->upper_cv);
        ConditionVariableInit(&state->holds_cv);
        pg_atomic_init_u64(&state->incarnations_seen, 0);
        pg_atomic_init_u64(&state->catalog_epoch, 0);
        pg_atomic_init_u64(&state->frontier_epoch, 0);
        pg_atomic_init_u64(&state->relay_fanouts, 0);
        pg_atomic_init_u64(&state->relay_last_fanout, 0);
        SpinLockInit(&state->oracle_mutex);
        SpinLockInit(&state->capture_mutex);
        ConditionVariableInit(&state->capture_cv);
        state->state = ControllerState::NotRunning;
    }
    bool holds_found = false;
    state->holds = static_cast<HoldSlot*>(ShmemInitStruct("pg_decoupled holds", holds_size(),
                                                          &holds_found));
    if (!holds_found) memset(state->holds, 0, holds_size());
    state->holds_per_backend = guc_max_holds_per_session;
    state->nholds = MaxBackends * guc_max_holds_per_session;
    LWLockRelease(AddinShmemInitLock);
}

}  // namespace

const char* slot_state_name(SlotState s) {
    switch (s) {
        case SlotState::Planned: return "planned";
        case SlotState::Pending: return "pending";
        case SlotState::Starting: return "starting";
        case SlotState::Running: return "running";
        case SlotState::Backoff: return "backoff";
        case SlotState::Stopping: return "stopping";
        case SlotState::NoProcess: return "no worker process";
    }
    return "unknown";
}

const char* controller_state_name(ControllerState s) {
    switch (s) {
        case ControllerState::NotRunning: return "not running";
        case ControllerState::WaitingForExtension: return "waiting for extension";
        case ControllerState::Following: return "following";
        case ControllerState::RefusingCatalog: return "refusing catalog";
        case ControllerState::Failing: return "retrying";
        case ControllerState::WaitingForRestore: return "waiting for restore";
    }
    return "unknown";
}

void install_shmem_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

SharedState* shared_state_if_any() { return state; }

SharedState* shared_state() {
    if (!state)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("pg_decoupled shared memory is not initialized"),
                        errhint("Add pg_decoupled to shared_preload_libraries and restart.")));
    return state;
}

void wake_workers() {
    SharedState* s = shared_state();
    LWLockAcquire(s->lock, LW_SHARED);
    for (int i = 0; i < s->nspecs; ++i)
        if (s->specs[i].in_use && s->specs[i].pid != 0 && s->specs[i].latch)
            SetLatch(s->specs[i].latch);
    LWLockRelease(s->lock);
}

namespace {

int claimed_slot = -1;

void release_claimed_slot(int, Datum) {
    SharedState* s = shared_state();
    LWLockAcquire(s->lock, LW_EXCLUSIVE);
    if (claimed_slot >= 0 && s->specs[claimed_slot].pid == MyProcPid) {
        s->specs[claimed_slot].pid = 0;
        s->specs[claimed_slot].latch = nullptr;
    }
    LWLockRelease(s->lock);
    wake_controller();
}

}  // namespace

bool claim_slot(int slot, uint32 generation, SpecSlot* spec) {
    SharedState* s = shared_state();
    bool claimed = false;
    LWLockAcquire(s->lock, LW_EXCLUSIVE);
    SpecSlot& mine = s->specs[slot];
    if (mine.in_use && mine.generation == generation && mine.pid == 0) {
        mine.pid = MyProcPid;
        mine.latch = MyLatch;
        mine.state = SlotState::Running;
        *spec = mine;
        claimed = true;
    }
    LWLockRelease(s->lock);
    if (claimed) {
        claimed_slot = slot;
        on_shmem_exit(release_claimed_slot, 0);
    }
    return claimed;
}

int claim_own_slot(Datum main_arg, SpecSlot* spec) {
    int slot = DatumGetInt32(main_arg);
    uint32 generation;
    memcpy(&generation, MyBgworkerEntry->bgw_extra, sizeof(generation));
    if (!claim_slot(slot, generation, spec)) proc_exit(0);
    return slot;
}

void wake_controller() {
    SharedState* s = shared_state();
    LWLockAcquire(s->lock, LW_SHARED);
    Latch* latch = s->controller_latch;
    if (latch) SetLatch(latch);
    LWLockRelease(s->lock);
}

}  // namespace decoupled
