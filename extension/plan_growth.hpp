// Plans over history made again when it grows (brief C13.1, C14.3).
//
// A step reads its inputs' changes through cached plans — the kept plans
// of its derived statements (kept_statements.hpp), the plan cache's —
// which PostgreSQL plans again only when a relation they read is
// invalidated: an ANALYZE or a VACUUM of it, a change of its definition.
// A collection's `dead` is often empty (compaction empties it at every
// round when changes are rare), and a VACUUM then records it as empty: a
// plan made after that reads its two or three changes by scanning it,
// which is right for a table of one page.  When a large UPDATE or DELETE
// then fills it, every step of every view over the collection scanned all
// of it until autovacuum next analyzed it — up to a minute later; ten
// views under writers took more than half a core doing that
// (docs/performance.md).
//
// So whoever writes history checks, after writing, whether `cur` or `dead`
// grew past twice the size pg_class records for it (relpages, at least
// kAssumedPages), and if so records its size there as VACUUM does (in
// place; its tuple density kept where one is known).  That invalidates
// the relation: every backend plans its statements over it again at their
// next use, scaled to its current size.  The record is also the next
// check's baseline, so a relation that keeps growing costs one such
// update each time it doubles, not one a write, and a VACUUM that finds
// it empty again resets it.
//
// C-style: callers may longjmp through this.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// After writing to a collection's cur and dead (their relids; InvalidOid
// skips one): records the size of either that grew past twice what
// pg_class says, and so makes every plan over it again.
void replan_if_storage_grew(Oid cur_relid, Oid dead_relid);

}  // namespace decoupled
