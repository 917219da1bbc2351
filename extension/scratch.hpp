// Scratch relations in memory (brief C13, C14.3).
//
// A collection's stage (decoupled_storage.c<id>_stage: what an append or a
// view's step stages for the append core) and a kept-sums view's dstate
// (c<id>_dstate: its aggregated changes) hold rows only from the statement
// that stages them to the one that consumes them, within one transaction.
// As heap tables every staged row was inserted and deleted again, and the
// dead space — never reused before a vacuum, since nothing records it as
// free — was read by every later scan: ten views stepping ten times a
// second read hundreds of pages of it per step, most of a busy step's
// scans.  Now their rows live in a tuplestore of the backend, keyed by the
// relation, which is kept only as the row type (and as a name for LIKE).
// Statements read a scratch as an ephemeral named relation registered in
// their SPI connection, as trigger transition tables are read.
//
// Lifetime: a scratch lives until it is cleared or the transaction ends.
// One created in a subtransaction that rolls back goes with it; one that
// an aborted subtransaction wrote into is unusable (an error names it)
// until cleared — the extension's steps stage and consume within one
// subtransaction, so neither happens on a path that continues.
//
// C-style: callers may longjmp through these functions.
#pragma once

extern "C" {
#include "postgres.h"

#include "tcop/dest.h"
#include "utils/tuplestore.h"
#include "utils/relcache.h"
}

namespace decoupled {

// Whether `relid` is a scratch relation (its name is c<id>_stage or
// c<id>_dstate in decoupled_storage).
bool is_scratch(Oid relid);

// Errors unless rows of `desc` can be staged in `target` (the same column
// types, in order).
void check_staged_row_type(TupleDesc desc, Relation target);

// A receiver appending every row it gets to scratch `target` (open, of the
// row type the rows must have: checked at startup); counts them in *rows.
DestReceiver* scratch_receiver(Relation target, uint64* rows);

// The name under which expose_scratch() makes `relid` readable:
// scratch_<relation name>, palloc'd.
char* scratch_name(Oid relid);

// Makes scratch `relid` (created empty if it is not yet) readable as
// scratch_name(relid) by the statements of the current SPI connection,
// and by plans prepared in it.
void expose_scratch(Oid relid);

// Empties scratch `relid`.
void clear_scratch(Oid relid);

// The rows of scratch `relid` (created empty if it is not yet), for a
// reader in C: read them through a read pointer of its own
// (tuplestore_alloc_read_pointer), as a scan of the exposed relation does.
Tuplestorestate* scratch_rows(Oid relid);

}  // namespace decoupled
