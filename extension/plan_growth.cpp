// Plans over history made again when it grows (plan_growth.hpp).
extern "C" {
#include "postgres.h"

#include "access/relation.h"
#include "access/multixact.h"
#include "access/transam.h"
#include "commands/vacuum.h"
#include "storage/bufmgr.h"
#include "storage/lockdefs.h"
#include "utils/rel.h"
}

#include "plan_growth.hpp"

namespace {

// The fewest pages a plan is taken to have been made for: the planner
// itself assumes ten for a relation never analyzed, and a scan of a few
// dozen pages costs a step little.
constexpr BlockNumber kAssumedPages = 16;

// After a write to `rel`: its size recorded if it outgrew its record.
void replan_if_grown(Relation rel) {
    BlockNumber blocks = RelationGetNumberOfBlocks(rel);
    BlockNumber relpages = rel->rd_rel->relpages;
    if (blocks <= 2 * Max(relpages, kAssumedPages)) return;
    // Its size recorded as VACUUM records it (in place, whatever becomes
    // of this transaction), its tuple density kept where one is known:
    // the record is the next check's baseline, and changing it
    // invalidates the relation, so every plan over it is made again.
    double reltuples = rel->rd_rel->reltuples;
    double tuples = reltuples >= 0 && relpages > 0 ? reltuples / relpages * blocks : -1;
    bool frozenxid_updated = false, minmulti_updated = false;
    vac_update_relstats(rel, blocks, tuples, Min(rel->rd_rel->relallvisible, blocks),
                        rel->rd_rel->relhasindex, InvalidTransactionId, InvalidMultiXactId,
                        &frozenxid_updated, &minmulti_updated, true);
}

void replan_if_grown(Oid relid) {
    if (!OidIsValid(relid)) return;
    // The writer holds RowExclusiveLock on it already.
    Relation rel = relation_open(relid, AccessShareLock);
    replan_if_grown(rel);
    relation_close(rel, AccessShareLock);
}

}  // namespace

namespace decoupled {

void replan_if_storage_grew(Oid cur_relid, Oid dead_relid) {
    replan_if_grown(cur_relid);
    replan_if_grown(dead_relid);
}

}  // namespace decoupled
