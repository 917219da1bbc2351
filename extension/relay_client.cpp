// The relay as the server sees it: publication into the external segment,
// and decoupled._relay_state() for the decoupled.relay view.
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "datatype/timestamp.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <memory>

#include "gucs.hpp"
#include "relay_client.hpp"
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_relay_state);
}

namespace decoupled {

namespace {

// Milliseconds since the Unix epoch, the segment's clock (PostgreSQL's
// timestamps count from 2000).
constexpr int64_t kUnixToPostgresMs =
    int64_t{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} * SECS_PER_DAY * 1000;

int64_t wall_ms() { return GetCurrentTimestamp() / 1000 + kUnixToPostgresMs; }

// This process's view of the external segment: attached lazily, and
// re-attached every few seconds so that a segment removed and created
// again (a reboot of the relay host's /dev/shm, a relayd --remove) is
// found without a restart.
struct Attachment {
    std::unique_ptr<relay::Segment> segment;
    int64_t next_attempt_ms = 0;
};
constexpr int64_t kRetryMs = 1000;
constexpr int64_t kRecheckMs = 5000;

relay::Segment* external_segment(Attachment& a) noexcept {
    int64_t now = wall_ms();
    if (now >= a.next_attempt_ms) {
        auto fresh = relay::Segment::attach(guc_relay_name ? guc_relay_name : "");
        if (fresh || !a.segment) a.segment = std::move(fresh);
        a.next_attempt_ms = now + (a.segment ? kRecheckMs : kRetryMs);
    }
    return a.segment.get();
}

Attachment publisher;

}  // namespace

void relay_publish(relay::Topic topic) noexcept {
    if (guc_relay != kRelayExternal) return;
    try {
        if (relay::Segment* segment = external_segment(publisher)) segment->publish(topic);
    } catch (...) {
        // A hint lost: followers poll.
    }
}

}  // namespace decoupled

// mode, relay_pid, alive, fanouts, last_fanout_at, followers, segment: one
// row.  For the in-process relay its pid comes from its supervision slot
// and followers (LISTEN sessions) are not counted (NULL); for the external
// relay everything comes from the segment, NULLs when there is none.
extern "C" Datum decoupled_relay_state(PG_FUNCTION_ARGS) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("decoupled._relay_state() must return a row")));
    Datum values[7];
    bool nulls[7] = {false, true, false, true, true, true, true};
    decoupled::SharedState* s = decoupled::shared_state();
    if (decoupled::guc_relay == decoupled::kRelayExternal) {
        values[0] = CStringGetTextDatum("external");
        values[6] = CStringGetTextDatum(decoupled::guc_relay_name);
        nulls[6] = false;
        auto segment = decoupled::relay::Segment::attach(decoupled::guc_relay_name);
        values[2] = BoolGetDatum(segment && segment->relay_alive(decoupled::wall_ms()));
        if (segment) {
            const auto& l = segment->layout();
            int32 pid = l.relayd_pid.load();
            if (pid != 0) {
                values[1] = Int32GetDatum(pid);
                nulls[1] = false;
            }
            values[3] = Int64GetDatum(static_cast<int64>(l.fanouts.load()));
            nulls[3] = false;
            int64 last = l.last_fanout_ms.load();
            if (last != 0) {
                values[4] = TimestampTzGetDatum(
                    static_cast<TimestampTz>(last - decoupled::kUnixToPostgresMs) * 1000);
                nulls[4] = false;
            }
            values[5] = Int32GetDatum(segment->followers());
            nulls[5] = false;
        }
    } else {
        values[0] = CStringGetTextDatum("in_process");
        pid_t pid = 0;
        LWLockAcquire(s->lock, LW_SHARED);
        for (int i = 0; i < s->nspecs; ++i)
            if (s->specs[i].in_use && strcmp(s->specs[i].kind, "relay") == 0) pid = s->specs[i].pid;
        LWLockRelease(s->lock);
        values[2] = BoolGetDatum(pid != 0);
        if (pid != 0) {
            values[1] = Int32GetDatum(pid);
            nulls[1] = false;
        }
        values[3] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->relay_fanouts)));
        nulls[3] = false;
        uint64 last = pg_atomic_read_u64(&s->relay_last_fanout);
        if (last != 0) {
            values[4] = TimestampTzGetDatum(static_cast<TimestampTz>(last));
            nulls[4] = false;
        }
    }
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
