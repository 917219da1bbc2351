// Sessions and their holds (brief C4, C7.1, C7.4).
//
// A session attaches to the live incarnation of its adapter at its first
// protected operation and stays attached to that incarnation: once it is
// retired, the session's next protected operation fails instead of
// silently moving to a successor.  Attachments are backend-local, one per
// adapter the session used; one made by a transaction that aborts is
// forgotten.
//
// Holds live in shared memory, one slot per hold, tagged with the session
// (pid and backend start) and the owner incarnation.  Each backend has its
// own decoupled.max_holds_per_session slots (by its PGPROC number), so one
// session can never take the slots another needs; beyond its quota a
// session gets 53400.  The durable part is
// one row per (incarnation, collection) in decoupled.catalog_holds at or
// below every session hold of that owner: acquire_hold writes it only when
// a hold is new or stronger, adapterd raises or removes it lazily (the
// coalesced weakening).  Holds registered by a (sub)transaction that aborts
// are removed; a session's holds end with the session.
//
// No C++ objects live here: every function may longjmp.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/tuplestore.h"
}

#include <cstring>

#include "gucs.hpp"
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_session_attachment);
PG_FUNCTION_INFO_V1(decoupled_session_attach);
PG_FUNCTION_INFO_V1(decoupled_hold_register);
PG_FUNCTION_INFO_V1(decoupled_hold_release);
PG_FUNCTION_INFO_V1(decoupled_shared_holds);
PG_FUNCTION_INFO_V1(decoupled_backend_start);
PG_FUNCTION_INFO_V1(decoupled_hold_advance);
PG_FUNCTION_INFO_V1(decoupled_publication_in_flight);
PG_FUNCTION_INFO_V1(decoupled_hold_confirm);
PG_FUNCTION_INFO_V1(decoupled_request_hold_publication);
PG_FUNCTION_INFO_V1(decoupled_claim_incarnation);
}

namespace {

// ---------------------------------------------------------------------------
// The session's attachment
// ---------------------------------------------------------------------------

// One per adapter the session used: attaching to a second adapter (SET
// decoupled.adapter) must not make it forget the first, whose retired
// incarnation would then be replaced by its successor unnoticed.
struct Attachment {
    char adapter[NAMEDATALEN];
    int64 incarnation;
    bool in_xact;  // made by the current transaction: undone if it aborts
};
constexpr int kMaxAttachments = 16;
Attachment attachments[kMaxAttachments];
int nattachments = 0;

Attachment* attachment_of(const char* adapter) {
    for (int i = 0; i < nattachments; ++i)
        if (strcmp(attachments[i].adapter, adapter) == 0) return &attachments[i];
    return nullptr;
}

// An abort forgets the attachments its transaction made, and only those.
void forget_attachments_of_xact() {
    int kept = 0;
    for (int i = 0; i < nattachments; ++i)
        if (!attachments[i].in_xact) attachments[kept++] = attachments[i];
    nattachments = kept;
}

// ---------------------------------------------------------------------------
// Holds registered by the current transaction, with the subtransaction
// that registered them, so that an abort removes exactly those.
// ---------------------------------------------------------------------------

struct PendingHold {
    int64 hold_id;
    SubTransactionId subxact;
};

PendingHold* pending = nullptr;
int npending = 0;
int pending_capacity = 0;
bool callbacks_registered = false;
bool exit_callback_registered = false;

void remember_pending(int64 hold_id) {
    if (npending == pending_capacity) {
        int capacity = pending_capacity ? pending_capacity * 2 : 16;
        Size size = sizeof(PendingHold) * capacity;
        pending = static_cast<PendingHold*>(
            pending ? repalloc(pending, size) : MemoryContextAlloc(TopMemoryContext, size));
        pending_capacity = capacity;
    }
    pending[npending++] = {hold_id, GetCurrentSubTransactionId()};
}

// Frees the slots of holds matching `match`; returns how many.
template <typename Match>
int free_slots(Match match) {
    decoupled::SharedState* s = decoupled::shared_state();
    int freed = 0;
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    for (int i = 0; i < s->nholds; ++i) {
        decoupled::HoldSlot& h = s->holds[i];
        if (h.in_use && match(h)) {
            h.in_use = false;
            freed++;
        }
    }
    LWLockRelease(s->holds_lock);
    return freed;
}

void drop_pending(SubTransactionId subxact, bool all) {
    int kept = 0;
    for (int i = 0; i < npending; ++i) {
        if (all || pending[i].subxact == subxact) {
            int64 id = pending[i].hold_id;
            free_slots([id](const decoupled::HoldSlot& h) { return h.hold_id == id; });
        } else {
            pending[kept++] = pending[i];
        }
    }
    npending = kept;
}

void on_xact(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            npending = 0;
            for (int i = 0; i < nattachments; ++i) attachments[i].in_xact = false;
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            drop_pending(InvalidSubTransactionId, true);
            forget_attachments_of_xact();
            break;
        default:
            break;
    }
}

void on_subxact(SubXactEvent event, SubTransactionId mine, SubTransactionId parent, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        drop_pending(mine, false);
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        for (int i = 0; i < npending; ++i)
            if (pending[i].subxact == mine) pending[i].subxact = parent;
    }
}

void ensure_callbacks() {
    if (callbacks_registered) return;
    RegisterXactCallback(on_xact, nullptr);
    RegisterSubXactCallback(on_subxact, nullptr);
    callbacks_registered = true;
}

// A session's holds end with it.
void release_session_holds(int, Datum) {
    pid_t pid = MyProcPid;
    free_slots([pid](const decoupled::HoldSlot& h) { return h.pid == pid; });
}

}  // namespace

// decoupled._session_attachment(adapter text) -> bigint: the incarnation of
// `adapter` this session is attached to, or NULL.
Datum decoupled_session_attachment(PG_FUNCTION_ARGS) {
    char* adapter = text_to_cstring(PG_GETARG_TEXT_PP(0));
    const Attachment* a = attachment_of(adapter);
    if (a == nullptr) PG_RETURN_NULL();
    PG_RETURN_INT64(a->incarnation);
}

// decoupled._session_attach(adapter text, incarnation bigint)
Datum decoupled_session_attach(PG_FUNCTION_ARGS) {
    ensure_callbacks();
    char* adapter = text_to_cstring(PG_GETARG_TEXT_PP(0));
    Attachment* a = attachment_of(adapter);
    if (a == nullptr) {
        if (nattachments == kMaxAttachments)
            ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                            errmsg("a session attaches to at most %d adapters", kMaxAttachments),
                            errhint("Use fewer values of decoupled.adapter in one session.")));
        a = &attachments[nattachments++];
        strlcpy(a->adapter, adapter, sizeof(a->adapter));
    }
    a->incarnation = PG_GETARG_INT64(1);
    a->in_xact = true;
    PG_RETURN_VOID();
}

// decoupled._claim_incarnation(candidate bigint) -> bigint: `candidate` (the
// incarnation sequence's next value), or, when this server has already
// handed out one at or above it, the next number above all of them.  A
// catalog dropped and created again restarts the sequence while sessions of
// the dropped one may still be attached to its incarnations and hold under
// them (in shared memory): a number handed out again would pass those off
// as the new catalog's.  The caller moves the sequence past the result.
Datum decoupled_claim_incarnation(PG_FUNCTION_ARGS) {
    int64 candidate = PG_GETARG_INT64(0);
    decoupled::SharedState* s = decoupled::shared_state_if_any();
    if (s == nullptr || candidate <= 0) PG_RETURN_INT64(candidate);
    uint64 seen = pg_atomic_read_u64(&s->incarnations_seen);
    for (;;) {
        uint64 claimed = Max(static_cast<uint64>(candidate), seen + 1);
        if (pg_atomic_compare_exchange_u64(&s->incarnations_seen, &seen, claimed))
            PG_RETURN_INT64(static_cast<int64>(claimed));
    }
}

// Whether slot `h` is one of this session's holds.
static bool mine(const decoupled::HoldSlot& h) {
    return h.in_use && h.pid == MyProcPid && h.backend_start == MyStartTimestamp;
}

[[noreturn]] static void quota_exceeded(int quota) {
    ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                    errmsg("this session already has %d holds, the most one session may have",
                           quota),
                    errdetail("decoupled.max_holds_per_session is %d; each running subscription "
                              "counts as a hold.", quota),
                    errhint("Release holds with decoupled.release_hold() or close "
                            "subscriptions, or raise decoupled.max_holds_per_session and "
                            "restart the server.")));
    pg_unreachable();
}

// decoupled._hold_register(incarnation, lifetime_id, frontier, subscription)
// -> hold id.  The slot comes from this backend's own share: a slot there
// that is not this session's was left by an earlier backend with the same
// PGPROC (it cannot be a live peer's) and is free.
Datum decoupled_hold_register(PG_FUNCTION_ARGS) {
    ensure_callbacks();
    if (!exit_callback_registered) {
        before_shmem_exit(release_session_holds, 0);
        exit_callback_registered = true;
    }
    decoupled::SharedState* s = decoupled::shared_state();
    if (MyProc == nullptr || MyProc->pgprocno < 0 || MyProc->pgprocno >= MaxBackends)
        elog(ERROR, "this process cannot take session holds");
    int first = MyProc->pgprocno * s->holds_per_backend;
    int64 id = 0;
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    for (int i = first; i < first + s->holds_per_backend; ++i) {
        decoupled::HoldSlot& h = s->holds[i];
        if (mine(h)) continue;
        id = s->next_hold_id++;
        h.in_use = true;
        h.hold_id = id;
        h.incarnation = PG_GETARG_INT64(0);
        h.lifetime_id = PG_GETARG_INT64(1);
        h.frontier = PG_GETARG_INT64(2);
        h.pid = MyProcPid;
        h.backend_start = MyStartTimestamp;
        h.subscription = PG_GETARG_BOOL(3);
        h.pending = false;
        h.failed = false;
        break;
    }
    LWLockRelease(s->holds_lock);
    if (id == 0) quota_exceeded(s->holds_per_backend);
    remember_pending(id);
    PG_RETURN_INT64(id);
}

// decoupled._hold_release(hold_id bigint, any_session boolean) -> bigint:
// the collection it held.  Only the session that acquired a hold may
// release it, unless any_session.
Datum decoupled_hold_release(PG_FUNCTION_ARGS) {
    int64 id = PG_GETARG_INT64(0);
    bool any_session = PG_GETARG_BOOL(1);
    decoupled::SharedState* s = decoupled::shared_state();
    int64 lifetime_id = 0;
    bool found = false, foreign = false;
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    for (int i = 0; i < s->nholds && !found; ++i) {
        decoupled::HoldSlot& h = s->holds[i];
        if (!h.in_use || h.hold_id != id) continue;
        found = true;
        foreign = h.pid != MyProcPid || h.backend_start != MyStartTimestamp;
        if (!foreign || any_session) {
            lifetime_id = h.lifetime_id;
            h.in_use = false;
        }
    }
    LWLockRelease(s->holds_lock);
    if (!found)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("hold " INT64_FORMAT
                                                                  " does not exist", id)));
    if (foreign && !any_session)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("hold " INT64_FORMAT " belongs to another session", id),
                        errhint("Members of decoupled_admin may release any hold.")));
    PG_RETURN_INT64(lifetime_id);
}

// decoupled._shared_holds() -> (hold_id, incarnation, lifetime_id, frontier,
// session_pid, subscription): every session hold now.
Datum decoupled_shared_holds(PG_FUNCTION_ARGS) {
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    InitMaterializedSRF(fcinfo, 0);
    decoupled::SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->holds_lock, LW_SHARED);
    for (int i = 0; i < s->nholds; ++i) {
        const decoupled::HoldSlot& h = s->holds[i];
        if (!h.in_use) continue;
        Datum values[6] = {Int64GetDatum(h.hold_id), Int64GetDatum(h.incarnation),
                           Int64GetDatum(h.lifetime_id), Int64GetDatum(h.frontier),
                           Int32GetDatum(h.pid), BoolGetDatum(h.subscription)};
        bool nulls[6] = {false, false, false, false, false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    LWLockRelease(s->holds_lock);
    return (Datum)0;
}

// decoupled._backend_start() -> timestamptz: with the pid, what identifies
// this session (pg_stat_activity.backend_start).
Datum decoupled_backend_start(PG_FUNCTION_ARGS) { PG_RETURN_TIMESTAMPTZ(MyStartTimestamp); }

namespace decoupled {

// Moves this session's hold `hold_id` up to `frontier` (never down): the
// weakening is published lazily, like a release.  Also called directly by
// subscribe().
void advance_hold(int64 hold_id, int64 frontier) {
    SharedState* s = shared_state();
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    for (int i = 0; i < s->nholds; ++i) {
        HoldSlot& h = s->holds[i];
        if (h.in_use && h.hold_id == hold_id && h.pid == MyProcPid) {
            if (frontier > h.frontier) h.frontier = frontier;
            break;
        }
    }
    LWLockRelease(s->holds_lock);
}

// Frees this session's hold `hold_id`, if it still exists.
void forget_hold(int64 hold_id) {
    free_slots([hold_id](const HoldSlot& h) { return h.hold_id == hold_id && h.pid == MyProcPid; });
}

}  // namespace decoupled

// decoupled._hold_advance(hold_id bigint, frontier bigint)
Datum decoupled_hold_advance(PG_FUNCTION_ARGS) {
    decoupled::advance_hold(PG_GETARG_INT64(0), PG_GETARG_INT64(1));
    PG_RETURN_VOID();
}

// ---------------------------------------------------------------------------
// Durable protection through adapterd
//
// adapterd is the one writer of its incarnation's durable holds.  A session
// whose hold is not covered by the committed durable hold marks it pending
// and waits until adapterd has committed protection for it; adapterd also
// publishes the weakening.  A publication raises durable holds to the lowest
// session hold it saw: a session that registers while one is in flight
// cannot trust the durable row it reads and asks for confirmation instead.
// ---------------------------------------------------------------------------

namespace {

constexpr long kConfirmTimeoutMs = 10000;

// adapterd's slot for `incarnation`, or -1.  It reads fields of both locks
// (the slot's kind and use under `lock`, its incarnation under holds_lock):
// the caller holds both, `lock` taken first.
int adapterd_slot(decoupled::SharedState* s, int64 incarnation) {
    Assert(LWLockHeldByMe(s->lock) && LWLockHeldByMe(s->holds_lock));
    for (int i = 0; i < s->nspecs; ++i) {
        const decoupled::SpecSlot& spec = s->specs[i];
        if (spec.in_use && spec.incarnation == incarnation && strcmp(spec.kind, "adapterd") == 0)
            return i;
    }
    return -1;
}

void wake_adapterd(decoupled::SharedState* s, int64 incarnation) {
    LWLockAcquire(s->lock, LW_SHARED);
    LWLockAcquire(s->holds_lock, LW_SHARED);
    int slot = adapterd_slot(s, incarnation);
    if (slot >= 0 && s->specs[slot].latch) SetLatch(s->specs[slot].latch);
    LWLockRelease(s->holds_lock);
    LWLockRelease(s->lock);
}

[[noreturn]] void not_confirmed(int64 incarnation) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("adapter incarnation " INT64_FORMAT " did not protect the hold in time",
                           incarnation),
                    errdetail("A new or stronger hold is durable only once its adapterd has "
                              "committed it."),
                    errhint("Check decoupled.adapters and decoupled.supervised.")));
    pg_unreachable();
}

}  // namespace

// decoupled._publication_in_flight(incarnation) -> boolean
Datum decoupled_publication_in_flight(PG_FUNCTION_ARGS) {
    decoupled::SharedState* s = decoupled::shared_state();
    int64 incarnation = PG_GETARG_INT64(0);
    LWLockAcquire(s->lock, LW_SHARED);
    LWLockAcquire(s->holds_lock, LW_SHARED);
    int slot = adapterd_slot(s, incarnation);
    bool in_flight = slot >= 0 && s->specs[slot].pub_started != s->specs[slot].pub_committed;
    LWLockRelease(s->holds_lock);
    LWLockRelease(s->lock);
    PG_RETURN_BOOL(in_flight);
}

// decoupled._hold_confirm(hold_id bigint, incarnation bigint): waits until
// adapterd committed durable protection for the hold.
Datum decoupled_hold_confirm(PG_FUNCTION_ARGS) {
    int64 id = PG_GETARG_INT64(0);
    int64 incarnation = PG_GETARG_INT64(1);
    decoupled::SharedState* s = decoupled::shared_state();
    auto find = [&]() -> decoupled::HoldSlot* {
        for (int i = 0; i < s->nholds; ++i)
            if (s->holds[i].in_use && s->holds[i].hold_id == id) return &s->holds[i];
        return nullptr;
    };
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    decoupled::HoldSlot* h = find();
    if (h) {
        h->pending = true;
        h->failed = false;
    }
    LWLockRelease(s->holds_lock);
    if (!h) elog(ERROR, "hold " INT64_FORMAT " vanished", id);
    wake_adapterd(s, incarnation);

    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kConfirmTimeoutMs);
    ConditionVariablePrepareToSleep(&s->holds_cv);
    for (;;) {
        LWLockAcquire(s->holds_lock, LW_SHARED);
        h = find();
        bool pending = h && h->pending;
        bool failed = h && h->failed;
        LWLockRelease(s->holds_lock);
        if (!pending) {
            ConditionVariableCancelSleep();
            if (failed)
                ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION),
                                errmsg("hold " INT64_FORMAT " is below its collection's compaction "
                                       "bound", id),
                                errdetail("History before the bound may already be compacted."),
                                errhint("Hold a later time.")));
            break;
        }
        long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (remaining <= 0) {
            ConditionVariableCancelSleep();
            not_confirmed(incarnation);
        }
        (void)ConditionVariableTimedSleep(&s->holds_cv, Min(remaining, 100L), PG_WAIT_EXTENSION);
    }
    PG_RETURN_VOID();
}

// decoupled._request_hold_publication(incarnation bigint) -> boolean: asks
// adapterd for a hold publication now and waits for it; false when no
// adapterd runs that incarnation.
Datum decoupled_request_hold_publication(PG_FUNCTION_ARGS) {
    int64 incarnation = PG_GETARG_INT64(0);
    decoupled::SharedState* s = decoupled::shared_state();
    LWLockAcquire(s->lock, LW_SHARED);
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    int slot = adapterd_slot(s, incarnation);
    uint64 target = 0;
    if (slot >= 0) {
        s->specs[slot].publish_requested = true;
        target = s->specs[slot].pub_started + 1;
    }
    LWLockRelease(s->holds_lock);
    LWLockRelease(s->lock);
    if (slot < 0) PG_RETURN_BOOL(false);
    wake_adapterd(s, incarnation);
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kConfirmTimeoutMs);
    ConditionVariablePrepareToSleep(&s->holds_cv);
    for (;;) {
        LWLockAcquire(s->holds_lock, LW_SHARED);
        bool done = s->specs[slot].incarnation != incarnation ||
                    s->specs[slot].pub_committed >= target;
        LWLockRelease(s->holds_lock);
        if (done) break;
        long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (remaining <= 0) {
            ConditionVariableCancelSleep();
            not_confirmed(incarnation);
        }
        (void)ConditionVariableTimedSleep(&s->holds_cv, Min(remaining, 100L), PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    PG_RETURN_BOOL(true);
}

namespace decoupled {

HeldCollection* snapshot_holds(int slot, int64 incarnation, bool publish, int* count) {
    SharedState* s = shared_state();
    HeldCollection* held =
        static_cast<HeldCollection*>(palloc(sizeof(HeldCollection) * (s->nholds + 1)));
    int n = 0;
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    s->specs[slot].incarnation = incarnation;
    if (publish) s->specs[slot].pub_started++;
    for (int i = 0; i < s->nholds; ++i) {
        const HoldSlot& h = s->holds[i];
        if (!h.in_use || h.incarnation != incarnation) continue;
        int j = 0;
        while (j < n && held[j].lifetime_id != h.lifetime_id) ++j;
        if (j == n) held[n++] = {h.lifetime_id, h.frontier, -1};
        held[j].min_frontier = Min(held[j].min_frontier, h.frontier);
        if (h.pending)
            held[j].min_pending =
                held[j].min_pending < 0 ? h.frontier : Min(held[j].min_pending, h.frontier);
    }
    LWLockRelease(s->holds_lock);
    *count = n;
    return held;
}

void confirm_holds(int slot, int64 incarnation, bool published, const HeldCollection* held,
                   int count, const int64* failed, int nfailed) {
    SharedState* s = shared_state();
    LWLockAcquire(s->holds_lock, LW_EXCLUSIVE);
    if (published) {
        s->specs[slot].pub_committed = s->specs[slot].pub_started;
        s->specs[slot].publish_requested = false;  // only once it is committed
    }
    for (int i = 0; i < s->nholds; ++i) {
        HoldSlot& h = s->holds[i];
        if (!h.in_use || !h.pending || h.incarnation != incarnation) continue;
        // Only what the committed round covered: a hold registered since,
        // or stronger than what was written, waits for the next round.
        for (int j = 0; j < count; ++j) {
            if (held[j].lifetime_id != h.lifetime_id || held[j].min_pending < 0 ||
                h.frontier < held[j].min_pending)
                continue;
            h.pending = false;
            for (int k = 0; k < nfailed; ++k)
                if (failed[2 * k] == h.lifetime_id && h.frontier < failed[2 * k + 1])
                    h.failed = true;
        }
    }
    LWLockRelease(s->holds_lock);
    ConditionVariableBroadcast(&s->holds_cv);
}

bool publication_requested(int slot) {
    SharedState* s = shared_state();
    LWLockAcquire(s->holds_lock, LW_SHARED);
    bool requested = s->specs[slot].publish_requested;
    LWLockRelease(s->holds_lock);
    return requested;
}

// Whether incarnation `incarnation` of an adapter is live in the catalog,
// as the active snapshot sees it; *adapter: its adapter, or "".
static bool incarnation_live(int64 incarnation, char** adapter) {
    *adapter = pstrdup("");
    Oid nsp = get_namespace_oid("decoupled", false);
    Oid relid = get_relname_relid("catalog_adapter_incarnations", nsp);
    Oid index = get_relname_relid("catalog_adapter_incarnations_incarnation_key", nsp);
    if (!OidIsValid(relid) || !OidIsValid(index))
        elog(ERROR, "catalog table decoupled.catalog_adapter_incarnations or its key is missing");
    Relation rel = table_open(relid, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, get_attnum(relid, "incarnation"), BTEqualStrategyNumber, F_INT8EQ,
                Int64GetDatum(incarnation));
    SysScanDesc scan = systable_beginscan(rel, index, true, GetActiveSnapshot(), 1, &key);
    HeapTuple row = systable_getnext(scan);
    bool live = false;
    if (row != nullptr) {
        bool isnull;
        Datum name = heap_getattr(row, get_attnum(relid, "adapter"), RelationGetDescr(rel),
                                  &isnull);
        if (!isnull) *adapter = TextDatumGetCString(name);
        (void)heap_getattr(row, get_attnum(relid, "retired_at"), RelationGetDescr(rel), &isnull);
        live = isnull;
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return live;
}

bool retired_hold(int64 lifetime_id, int64* incarnation, char** adapter) {
    SharedState* s = shared_state_if_any();
    if (s == nullptr || MyProc == nullptr || MyProc->pgprocno < 0) return false;
    // This session's slots only: its share of them.
    int first = MyProc->pgprocno * s->holds_per_backend;
    int n = 0;
    int64* held = static_cast<int64*>(palloc(sizeof(int64) * Max(s->holds_per_backend, 1)));
    LWLockAcquire(s->holds_lock, LW_SHARED);
    for (int i = first; i < first + s->holds_per_backend && i < s->nholds; ++i)
        if (mine(s->holds[i]) && s->holds[i].lifetime_id == lifetime_id)
            held[n++] = s->holds[i].incarnation;
    LWLockRelease(s->holds_lock);
    for (int i = 0; i < n; ++i) {
        if (incarnation_live(held[i], adapter)) continue;
        *incarnation = held[i];
        return true;
    }
    return false;
}

bool holds_pending(int64 incarnation) {
    SharedState* s = shared_state();
    bool any = false;
    LWLockAcquire(s->holds_lock, LW_SHARED);
    for (int i = 0; i < s->nholds && !any; ++i)
        any = s->holds[i].in_use && s->holds[i].pending && s->holds[i].incarnation == incarnation;
    LWLockRelease(s->holds_lock);
    return any;
}

}  // namespace decoupled
