// Errors of a role's code that the extension runs: owner_errors.hpp says
// why.  C-style C++: nothing with a destructor lives in these frames.
extern "C" {
#include "postgres.h"

#include "utils/elog.h"
}

#include "owner_errors.hpp"

namespace {

void recode_reserved(void*) {
    int code = geterrcode();
    if (!decoupled::reserved_sqlstate(code)) return;
    errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION);
    errcontext("raised with SQLSTATE %s, which pg_decoupled keeps for its own conditions",
               unpack_sql_state(code));
}

}  // namespace

bool decoupled::reserved_sqlstate(int sqlerrcode) {
    int category = ERRCODE_TO_CATEGORY(sqlerrcode);
    return category == MAKE_SQLSTATE('Z', 'D', '0', '0', '0') ||
           category == ERRCODE_CONNECTION_EXCEPTION;
}

void decoupled::mark_owner_errors(OwnerErrors* e) {
    e->callback.callback = recode_reserved;
    e->callback.arg = nullptr;
    e->callback.previous = error_context_stack;
    error_context_stack = &e->callback;
}

void decoupled::unmark_owner_errors(OwnerErrors* e) {
    Assert(error_context_stack == &e->callback);
    error_context_stack = e->callback.previous;
}
