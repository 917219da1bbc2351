// Reading the private catalog on behalf of an unprivileged session.
//
// The read rewrite, the history gate, the oracle seed, the commit-time
// permission check and wait_for_upper run in the reader's or writer's
// session but must read catalog tables PUBLIC cannot.  They switch to the
// bootstrap superuser for the catalog query only — and, because a superuser
// resolving names through the caller's search_path would run the caller's
// functions and operators, they also pin search_path to pg_catalog for the
// duration.  (Inside a parallel worker no GUC may change: the queries that
// can run there are schema-qualified throughout.)  Transaction abort
// restores both if the query fails.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "utils/guc.h"
}

namespace decoupled {

struct SavedUser {
    Oid userid;
    int sec_context;
    int guc_level;  // -1 when search_path was left alone (parallel mode)
};

inline SavedUser become_catalog_reader() {
    SavedUser saved;
    GetUserIdAndSecContext(&saved.userid, &saved.sec_context);
    saved.guc_level = -1;
    if (!IsInParallelMode()) {
        saved.guc_level = NewGUCNestLevel();
        (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
                                GUC_ACTION_SAVE, true, 0, false);
    }
    SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
                           saved.sec_context | SECURITY_LOCAL_USERID_CHANGE |
                               SECURITY_RESTRICTED_OPERATION);
    return saved;
}

inline void restore_user(SavedUser saved) {
    SetUserIdAndSecContext(saved.userid, saved.sec_context);
    if (saved.guc_level >= 0) AtEOXact_GUC(false, saved.guc_level);
}

}  // namespace decoupled
