// Errors of a role's code that the extension runs (brief C5, C3.4).
//
// Why.  The extension gives some SQLSTATEs a meaning of its own: class ZD
// is the replica protocol's (ZD001 fenced: the replica's run ends and it
// starts again with backoff; ZD002 dropped meanwhile; ZD003 a lost race;
// ZD004 busy storage, tried again shortly), and class 08 is a lost
// connection to the client (a replica opens a new session).  A view's
// step, a replica's append and capture run code a role wrote — the view's
// query and its functions, a domain's CHECK — and that code may raise any
// SQLSTATE: a view that raised ZD001 kept its whole cluster's replica
// restarting, every other role's views with it.
//
// What.  While a role's code runs, an error it raises with such a
// SQLSTATE is raised as 38000 (external_routine_exception) instead, its
// message kept, with a context line naming the SQLSTATE it asked for: the
// error then stalls the object whose code raised it, as any other error
// does.  Done by an error context callback, so it applies wherever the
// error comes from (PL/pgSQL's RAISE, a parallel worker's error re-thrown
// in the leader, dblink's) and costs nothing when nothing fails.  Other
// SQLSTATEs keep theirs: a role's lock_timeout (55P03) and a step's
// statement timeout (57014) mean what they say.
//
// Include after postgres.h.
#pragma once

extern "C" {
#include "utils/elog.h"
}

namespace decoupled {

struct OwnerErrors {
    ErrorContextCallback callback;
};

// From here to unmark_owner_errors, errors are a role's (above).  An error
// that leaves the frame pops the mark with the rest of the error context
// stack (PG_TRY restores it).
void mark_owner_errors(OwnerErrors* e);
void unmark_owner_errors(OwnerErrors* e);

// Whether the extension keeps `sqlerrcode` for its own conditions.
bool reserved_sqlstate(int sqlerrcode);

}  // namespace decoupled
