// PostgreSQL's own statements on the extension's objects (familiar_ddl.cpp).
#pragma once

extern "C" {
#include "postgres.h"

#include "tcop/utility.h"
}

namespace decoupled {

// One ProcessUtility call as the hook received it; `run` carries a
// statement on through the rest of the hook (its checks, then PostgreSQL).
struct UtilityCall {
    void (*run)(const UtilityCall& call, PlannedStmt* pstmt);
    const char* query_string;
    bool read_only_tree;
    ProcessUtilityContext context;
    ParamListInfo params;
    QueryEnvironment* query_env;
    DestReceiver* dest;
    QueryCompletion* qc;
};

// Might `stmt` be one of those statements?  A node-tag switch and a look
// at its options: cheap enough for every utility statement.
bool familiar_ddl_candidate(const Node* stmt);

// Runs `pstmt` as the statement on the extension's objects it stands for
// (through `call.run` for whatever PostgreSQL itself executes).  Called only
// for a candidate while the extension is installed; never
// modifies `pstmt` (it may be a cached plan's).  Always returns true.
bool run_familiar_ddl(PlannedStmt* pstmt, const char* query_string, QueryCompletion* qc,
                      const UtilityCall& call);

}  // namespace decoupled
