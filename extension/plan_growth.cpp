// Plans over history made again when it grows (plan_growth.hpp).
extern "C" {
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "storage/lockdefs.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

#include "plan_growth.hpp"
#include "storage_names.hpp"

namespace {

// The fewest pages a plan is taken to have been made for: the planner
// itself assumes ten for a relation never analyzed, and a scan of a few
// dozen pages costs a step little.
constexpr BlockNumber kAssumedPages = 16;

// relid -> its number of pages when this backend last invalidated it.
struct Signalled {
    Oid relid;
    BlockNumber blocks;
};

HTAB* signalled = nullptr;

// An invalidation is sent at commit: after an abort (of the transaction
// or of the subtransaction that registered it) none was, so what this
// backend remembers sending goes too.
void forget() {
    if (signalled != nullptr) hash_destroy(signalled);
    signalled = nullptr;
}

void forget_at_abort(XactEvent event, void*) {
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) forget();
}

void forget_at_subabort(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB) forget();
}

Signalled* signalled_entry(Oid relid) {
    static bool registered = false;
    if (!registered) {
        RegisterXactCallback(forget_at_abort, nullptr);
        RegisterSubXactCallback(forget_at_subabort, nullptr);
        registered = true;
    }
    if (signalled == nullptr) {
        HASHCTL ctl;
        ctl.keysize = sizeof(Oid);
        ctl.entrysize = sizeof(Signalled);
        ctl.hcxt = TopMemoryContext;
        signalled = hash_create("decoupled grown relations", 64, &ctl,
                                HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    }
    bool found = false;
    auto* entry = static_cast<Signalled*>(hash_search(signalled, &relid, HASH_ENTER, &found));
    if (!found) entry->blocks = 0;
    return entry;
}

void replan_if_grown_relid(Oid relid) {
    if (!OidIsValid(relid)) return;
    // The writer holds RowExclusiveLock on it already.
    Relation rel = relation_open(relid, AccessShareLock);
    decoupled::replan_if_grown(rel);
    relation_close(rel, AccessShareLock);
}

}  // namespace

namespace decoupled {

void replan_if_grown(Relation rel) {
    BlockNumber blocks = RelationGetNumberOfBlocks(rel);
    BlockNumber assumed = Max(static_cast<BlockNumber>(rel->rd_rel->relpages), kAssumedPages);
    if (blocks <= 2 * assumed) return;
    Signalled* entry = signalled_entry(RelationGetRelid(rel));
    if (blocks <= 2 * entry->blocks) return;
    // Sent at commit, with the rows that made it grow; nothing if the
    // transaction rolls back.
    CacheInvalidateRelcache(rel);
    entry->blocks = blocks;
}

void replan_if_storage_grew(int64 lifetime_id) {
    replan_if_grown_relid(storage_relid(lifetime_id, "cur"));
    replan_if_grown_relid(storage_relid(lifetime_id, "dead"));
}

}  // namespace decoupled
