// Captured rows into a collection's pending table (brief C14.1).
//
// Why.  The capture worker wrote a flush's rows with two statements: one
// reading the text rows into an array of pending's row type (as the
// table's owner), one inserting that array unnested.  Under single-row
// UPDATE writers the insert was the worker's largest statement, 4.9 us a
// row, most of it building, copying and unnesting the array.
//
// What.  Each row read by record_in of pending's row type, as the owner in
// a security-restricted operation as before (a domain's check runs with
// the owner's rights), then inserted with its indexes maintained as COPY
// does, a few pages at a time (history_writes.hpp, InsertBuffer).  Pending not
// laid out as _create_storage made it — triggers, row security, another
// first column — is written by the statements.
//
// Written in PostgreSQL's C style: no C++ object with a destructor lives
// in these frames.
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include "../extension/history_writes.hpp"
#include "../extension/owner_errors.hpp"
#include "../extension/storage_names.hpp"
#include "pending_writes.hpp"

namespace decoupled {

bool write_pending_rows(int64 id, Oid owner, const Datum* rows, int n) {
    Oid relid = storage_relid(id, "pending");
    if (!OidIsValid(relid)) return false;
    Relation pending = table_open(relid, RowExclusiveLock);
    if (!pending_laid_out(pending)) {
        table_close(pending, NoLock);
        return false;
    }
    TupleDesc desc = RelationGetDescr(pending);
    Oid rowtype = pending->rd_rel->reltype;
    MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
                                                  "pg_decoupled pending rows", ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(context);

    // Read as the owner: every row, before anything is written.
    FmgrInfo record_in;
    fmgr_info(F_RECORD_IN, &record_in);
    HeapTupleHeader* read = (HeapTupleHeader*)palloc(sizeof(HeapTupleHeader) * Max(n, 1));
    Oid user;
    int sec_context;
    GetUserIdAndSecContext(&user, &sec_context);
    SetUserIdAndSecContext(owner, sec_context | SECURITY_RESTRICTED_OPERATION);
    int level = NewGUCNestLevel();  // what the owner's code sets goes with it
    OwnerErrors errors;
    mark_owner_errors(&errors);
    for (int i = 0; i < n; i++) {
        char* literal = TextDatumGetCString(rows[i]);
        read[i] = DatumGetHeapTupleHeader(InputFunctionCall(&record_in, literal, rowtype, -1));
        pfree(literal);
        CHECK_FOR_INTERRUPTS();
    }
    unmark_owner_errors(&errors);
    AtEOXact_GUC(false, level);
    SetUserIdAndSecContext(user, sec_context);

    // Written as the worker, indexes and constraints as for a statement's
    // insert.
    PushActiveSnapshot(GetTransactionSnapshot());
    PendingWriter w;
    begin_pending_writes(&w, pending, GetActiveSnapshot());
    for (int i = 0; i < n; i++) {
        HeapTupleData tuple;
        tuple.t_len = HeapTupleHeaderGetDatumLength(read[i]);
        ItemPointerSetInvalid(&tuple.t_self);
        tuple.t_tableOid = InvalidOid;
        tuple.t_data = read[i];
        TupleTableSlot* slot = pending_slot(&w);
        heap_deform_tuple(&tuple, desc, slot->tts_values, slot->tts_isnull);
        add_buffered(w.estate, &w.rows, slot);
    }
    end_pending_writes(&w);
    PopActiveSnapshot();
    table_close(pending, NoLock);
    MemoryContextSwitchTo(caller);
    MemoryContextDelete(context);
    return true;
}

}  // namespace decoupled
