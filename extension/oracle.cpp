// The timestamp oracle: milliseconds since the Unix epoch that never go
// backwards, across restarts and crashes too.
//
// Writers get strictly increasing timestamps from shared memory.  The
// durable high-water mark is what committed data already uses: every
// committed write advances some collection's upper past its timestamps in
// the same transaction, and drops fold their upper into
// decoupled.catalog_oracle.  The first caller after a start seeds the oracle
// from that mark, so a clock that jumps back cannot make time regress.
extern "C" {
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/timestamp.h"
}

#include <algorithm>

#include "catalog_access.hpp"
#include "oracle.hpp"
#include "shmem.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_next_timestamp);
PG_FUNCTION_INFO_V1(decoupled_oracle_now);
}

namespace {

int64 wall_clock_ms() {
    // TimestampTz counts microseconds since 2000-01-01.
    return GetCurrentTimestamp() / 1000 +
           (int64)(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

int64 durable_high_water() {
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    // The uppers the oracle handed out: registered tables' (ticks) and
    // those of views without inputs.  Not a source's, which runs ahead to
    // its next tick (up to a day), nor a view's over one: seeding from those
    // put every write hours ahead of the clock after a restart.  (Every
    // other view's upper is at most its inputs'.)
    int rc = SPI_execute(
        "SELECT greatest((SELECT max(f.upper) FROM decoupled.catalog_frontiers f"
        "                   JOIN decoupled.catalog_objects o USING (lifetime_id)"
        "                  WHERE o.kind = 'table'"
        "                     OR (o.kind = 'materialized view'"
        "                         AND o.definition->'inputs' = '[]'::jsonb)),"
        "                (SELECT high_water FROM decoupled.catalog_oracle))::bigint",
        true, 1);
    if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "could not read the oracle");
    bool isnull = false;
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    int64 mark = isnull ? 0 : DatumGetInt64(d);
    SPI_finish();
    decoupled::restore_user(saved);
    return mark;
}

void ensure_seeded(decoupled::SharedState* s) {
    SpinLockAcquire(&s->oracle_mutex);
    bool ready = s->oracle_ready;
    SpinLockRelease(&s->oracle_mutex);
    if (ready) return;
    // Read outside the spinlock; two seeders agree, the max keeps it safe.
    int64 mark = durable_high_water();
    SpinLockAcquire(&s->oracle_mutex);
    s->oracle_last = std::max(s->oracle_last, mark);
    s->oracle_ready = true;
    SpinLockRelease(&s->oracle_mutex);
}

}  // namespace

int64 decoupled::next_timestamp(int64 at_least) {
    decoupled::SharedState* s = decoupled::shared_state();
    ensure_seeded(s);
    int64 now = wall_clock_ms();
    SpinLockAcquire(&s->oracle_mutex);
    int64 ts = std::max({now, s->oracle_last + 1, at_least});
    s->oracle_last = ts;
    SpinLockRelease(&s->oracle_mutex);
    return ts;
}

// decoupled._next_timestamp(at_least bigint) -> a write timestamp, strictly
// greater than every one handed out before and at least `at_least`.
Datum decoupled_next_timestamp(PG_FUNCTION_ARGS) {
    PG_RETURN_INT64(decoupled::next_timestamp(PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0)));
}

// decoupled.oracle_now() -> the current oracle time without allocating one:
// cheap for readers, never behind any timestamp handed out.
Datum decoupled_oracle_now(PG_FUNCTION_ARGS) {
    decoupled::SharedState* s = decoupled::shared_state();
    ensure_seeded(s);
    int64 now = wall_clock_ms();
    SpinLockAcquire(&s->oracle_mutex);
    int64 ts = std::max(now, s->oracle_last);
    SpinLockRelease(&s->oracle_mutex);
    PG_RETURN_INT64(ts);
}
