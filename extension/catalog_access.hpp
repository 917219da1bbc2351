// Reading the private catalog on behalf of an unprivileged session.
//
// The read rewrite, the history gate, the oracle seed and the commit-time
// permission check all run in the reader's or writer's session but must read
// catalog tables PUBLIC cannot.  They switch to the bootstrap superuser for
// the catalog query only; transaction abort restores the caller's identity
// if the query fails.
#pragma once

extern "C" {
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "miscadmin.h"
}

namespace decoupled {

struct SavedUser {
    Oid userid;
    int sec_context;
};

inline SavedUser become_catalog_reader() {
    SavedUser saved;
    GetUserIdAndSecContext(&saved.userid, &saved.sec_context);
    SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
                           saved.sec_context | SECURITY_LOCAL_USERID_CHANGE);
    return saved;
}

inline void restore_user(SavedUser saved) {
    SetUserIdAndSecContext(saved.userid, saved.sec_context);
}

}  // namespace decoupled
