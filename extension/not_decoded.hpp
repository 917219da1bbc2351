// Writes of a collection's storage are never decoded (brief C14.1).
//
// WAL capture decodes everything the server writes, and it needs only the
// registered tables' own changes: history is read from storage, never from
// the WAL.  Yet under writers most WAL is storage — every tick moves the
// captured rows into `cur`, every view step appends its difference and
// updates its kept state — and the decoder queued each of those rows,
// looked up its relation and handed it to the plugin to be dropped: most of
// the capture worker's work.  Records written in `not_decoded` carry the
// origin that decoding skips before queuing anything (DoNotReplicateId, the
// mark the capture worker gives its own writes; the plugin filters on it).
//
// The mark covers only the body: it is restored on the way out, also by an
// error, so a write the caller's transaction makes afterwards — a user's
// write to a registered table in the transaction that called tick_tables(),
// say — is captured.  No user code runs in a body (writing history never
// runs a user's code, docs/architecture.md), so no write of a registered
// table can happen inside one.  `body` owns nothing with a destructor: an
// error leaves it by longjmp.
#pragma once

extern "C" {
#include "postgres.h"

#include "replication/origin.h"
}

namespace decoupled {

template <typename Body>
void not_decoded(const Body& body) {
    RepOriginId saved = replorigin_session_origin;
    replorigin_session_origin = DoNotReplicateId;
    PG_TRY();
    {
        body();
    }
    PG_FINALLY();
    {
        replorigin_session_origin = saved;
    }
    PG_END_TRY();
}

}  // namespace decoupled
