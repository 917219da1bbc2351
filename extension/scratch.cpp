// Scratch relations in memory: see scratch.hpp.
extern "C" {
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/queryenvironment.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"
}

#include <cstring>

#include "scratch.hpp"

namespace {

struct Scratch {
    Oid relid;
    TupleDesc desc;                // the relation's row type, copied
    Tuplestorestate* rows;
    SubTransactionId min_writer;   // of the rows held: the outermost writer
    SubTransactionId max_writer;   // and the innermost
    bool lost;                     // an aborted subtransaction took some rows
    Scratch* next;
};

// This transaction's scratches, in TopTransactionContext.
Scratch* scratches = nullptr;
bool callbacks_registered = false;

void empty(Scratch* s) {
    tuplestore_clear(s->rows);
    s->min_writer = s->max_writer = InvalidSubTransactionId;
    s->lost = false;
}

// Ends every tuplestore before the resource owner would report its files
// as leaked; on abort the owner closes them and the memory goes with
// TopTransactionContext.
void at_transaction_end(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            for (Scratch* s = scratches; s; s = s->next) tuplestore_end(s->rows);
            scratches = nullptr;
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            scratches = nullptr;
            break;
    }
}

// The rows a rolled-back subtransaction (or one inside it: every live
// subtransaction with an id at least `aborted` is) wrote go with it.  When
// they are all of a scratch's rows it is emptied; when older rows remain
// too it cannot be split, and is marked lost.
void at_subtransaction_end(SubXactEvent event, SubTransactionId aborted, SubTransactionId,
                           void*) {
    if (event != SUBXACT_EVENT_ABORT_SUB) return;
    for (Scratch* s = scratches; s; s = s->next) {
        if (s->max_writer == InvalidSubTransactionId || s->max_writer < aborted) continue;
        if (s->min_writer >= aborted)
            empty(s);
        else
            s->lost = true;
    }
}

Scratch* find(Oid relid) {
    for (Scratch* s = scratches; s; s = s->next)
        if (s->relid == relid) return s;
    return nullptr;
}

// The scratch of `relid`, created empty on first use in this transaction.
// Its spill files belong to the transaction, not to the subtransaction
// that happens to write first (see write()).
Scratch* scratch_of(Oid relid) {
    if (Scratch* s = find(relid)) {
        if (s->lost)
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("rows staged in \"%s\" were lost to a rolled-back subtransaction",
                                   get_rel_name(relid))));
        return s;
    }
    if (!callbacks_registered) {
        RegisterXactCallback(at_transaction_end, nullptr);
        RegisterSubXactCallback(at_subtransaction_end, nullptr);
        callbacks_registered = true;
    }
    Relation rel = relation_open(relid, AccessShareLock);  // held to the end, as a table's
    MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
    auto* s = static_cast<Scratch*>(palloc0(sizeof(Scratch)));
    s->relid = relid;
    s->desc = CreateTupleDescCopy(RelationGetDescr(rel));
    s->rows = tuplestore_begin_heap(false, false, work_mem);
    s->next = scratches;
    scratches = s;
    MemoryContextSwitchTo(old);
    relation_close(rel, NoLock);
    return s;
}

void write(Scratch* s, TupleTableSlot* slot) {
    SubTransactionId writer = GetCurrentSubTransactionId();
    ResourceOwner owner = CurrentResourceOwner;
    CurrentResourceOwner = TopTransactionResourceOwner;
    tuplestore_putvalues(s->rows, s->desc, slot->tts_values, slot->tts_isnull);
    CurrentResourceOwner = owner;
    if (s->min_writer == InvalidSubTransactionId || writer < s->min_writer) s->min_writer = writer;
    if (writer > s->max_writer) s->max_writer = writer;
}

struct Receiver {
    DestReceiver pub;  // first: the executor sees a DestReceiver
    Relation target;
    Scratch* scratch;
    uint64* rows;
};

bool receive(TupleTableSlot* slot, DestReceiver* self) {
    auto* r = reinterpret_cast<Receiver*>(self);
    slot_getallattrs(slot);
    write(r->scratch, slot);
    (*r->rows)++;
    return true;
}

void startup(DestReceiver* self, int, TupleDesc desc) {
    auto* r = reinterpret_cast<Receiver*>(self);
    decoupled::check_staged_row_type(desc, r->target);
}

void shutdown(DestReceiver*) {}
void destroy(DestReceiver*) {}

}  // namespace

bool decoupled::is_scratch(Oid relid) {
    Oid storage = get_namespace_oid("decoupled_storage", true);
    if (!OidIsValid(storage) || get_rel_namespace(relid) != storage) return false;
    char* name = get_rel_name(relid);
    if (!name || name[0] != 'c') return false;
    const char* p = name + 1;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, "_stage") == 0 || strcmp(p, "_dstate") == 0;
}

void decoupled::check_staged_row_type(TupleDesc desc, Relation target) {
    TupleDesc want = RelationGetDescr(target);
    bool same = desc->natts == want->natts;
    for (int i = 0; same && i < desc->natts; ++i)
        same = TupleDescAttr(desc, i)->atttypid == TupleDescAttr(want, i)->atttypid;
    if (!same)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("the written plan's row type does not match \"%s\"",
                               RelationGetRelationName(target))));
}

DestReceiver* decoupled::scratch_receiver(Relation target, uint64* rows) {
    auto* r = static_cast<Receiver*>(palloc0(sizeof(Receiver)));
    r->pub.receiveSlot = receive;
    r->pub.rStartup = startup;
    r->pub.rShutdown = shutdown;
    r->pub.rDestroy = destroy;
    r->pub.mydest = DestNone;
    r->target = target;
    r->scratch = scratch_of(RelationGetRelid(target));
    r->rows = rows;
    return &r->pub;
}

char* decoupled::scratch_name(Oid relid) {
    char* name = get_rel_name(relid);
    if (!name) elog(ERROR, "scratch relation %u does not exist", relid);
    return psprintf("scratch_%s", name);
}

void decoupled::expose_scratch(Oid relid) {
    Scratch* s = scratch_of(relid);
    auto* enr = static_cast<EphemeralNamedRelation>(palloc0(sizeof(EphemeralNamedRelationData)));
    enr->md.name = scratch_name(relid);
    enr->md.reliddesc = InvalidOid;
    enr->md.tupdesc = s->desc;
    enr->md.enrtype = ENR_NAMED_TUPLESTORE;
    enr->md.enrtuples = static_cast<double>(tuplestore_tuple_count(s->rows));
    enr->reldata = s->rows;
    int rc = SPI_register_relation(enr);
    // Registered before in this connection: the same tuplestore, which
    // lives as long as the transaction.
    if (rc != SPI_OK_REL_REGISTER && rc != SPI_ERROR_REL_DUPLICATE)
        elog(ERROR, "could not expose scratch %s: %s", enr->md.name, SPI_result_code_string(rc));
}

Tuplestorestate* decoupled::scratch_rows(Oid relid) {
    return scratch_of(relid)->rows;
}

void decoupled::clear_scratch(Oid relid) {
    if (Scratch* s = find(relid)) empty(s);
}
