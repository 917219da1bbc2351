// Computing a materialized view's plan (or a query derived from it) as the
// view's owner, at a time, into a staging relation: shared by the full
// computation (written_plan.cpp) and the incremental steps (delta_plan.cpp).
// No C++ objects: callers may longjmp through these.
#pragma once

extern "C" {
#include "postgres.h"

#include "utils/rel.h"
}

#include "owner_errors.hpp"

namespace decoupled {

struct OwnerScope {
    Oid saved_user;
    int saved_context;
    int guc_level;
    OwnerErrors errors;
};

// Switches to `owner` under SECURITY_RESTRICTED_OPERATION with the pinned
// settings (search_path pg_catalog, ISO output, ...), the TimeZone and
// DateStyle order of the view whose written plan is `plan` (its creator's),
// and decoupled.as_of = ts; leave_owner restores everything, settings the
// owner's code changed included.  An error in between is cleaned up by the
// (sub)transaction's abort.  In between, errors are the owner's
// (owner_errors.hpp): none passes for one of the extension's conditions.
void enter_owner(Oid plan, Oid owner, int64 ts, OwnerScope* scope);
void leave_owner(OwnerScope* scope);
// Inside an owner scope: no parallel workers (a step that costs what
// changed would pay more to start them than to run).
void serial_only();

// The staging query: ($1, diff, row key, row hash, row...) for every row
// of `from` (a FROM item with alias d), whose row is `cols` (e.g. "d.*" or
// "d.x1, d.x2"); the row key is the row's text, the same wherever a view's
// rows are staged.  $1 is the step's time (stage_rows binds it), so the
// text of a view's step is the same at every step.
char* staging_sql(const char* diff, const char* cols, const char* from);

// The schema-qualified, quoted name of `relid`, locked for reading until the
// transaction ends so that finalize_dropped() cannot remove it under the
// step; a relation dropped before that (its view was dropped meanwhile)
// is an error, never a NULL name.
char* locked_relation_name(Oid relid);

// Runs `sql` through SPI with $1 = ts and adds every row to `target` (a
// scratch relation's rows live in memory: scratch.hpp),
// whose row type must match; returns the number of rows.  With `keep`, from
// a plan kept for the text (only for texts the same at every step).  With
// `read_scratch`, `sql` may read that scratch too.
uint64 stage_rows(Relation target, const char* sql, int64 ts, bool keep,
                  Oid read_scratch = InvalidOid);

// Whether a filter of touched groups names them by literals: its text is
// new at every step, and a plan kept for it would be used once.  One
// without (`true`, a subquery, a read of the view's dstate) recurs.
bool names_literals(const char* filter);

}  // namespace decoupled
