// The DDL guard (ddl_guard.cpp): PostgreSQL's statements checked against
// the pg_decoupled catalog before they run.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

void install_ddl_guard();

// Refuses, with the catalog's error, a CREATE OR REPLACE of function or
// view `obj` (of catalog `cls`: pg_proc or pg_class) that a maintained
// view's written plan reads, directly or through views and function bodies.
// `what` names it in the error.  Nothing happens without the extension.
void refuse_replacing(Oid cls, Oid obj, const char* what);

}  // namespace decoupled
