// Planner statistics of collections' storage, for whom may read them.
//
// Why.  A collection's history views in decoupled_storage are PUBLIC (the
// history gate checks the reader when they run), and their owner may read
// cur and dead.  PostgreSQL decides whether the planner may call a function
// that is not leakproof on a column's statistics (its most common values,
// its histogram) by the privileges of whoever the scan is checked as: here
// the views' owner.  So any role's planner would call its own leaky
// operator on the values of a collection it may not read, while estimating
// a read of the history views or an AS OF read of a registered table, long
// before the gate runs.  These hooks hand cur's and dead's statistics (and
// those of their indexes) to the planner as PostgreSQL hands a table's:
// usable with any function only while planning for a role that may SELECT
// the collection's relation, else only with leakproof ones.  A superuser,
// a replica (as the view's owner, who reads its inputs) and a reader
// allowed to read the collection plan as before.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_index.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include <cstdio>

#include "storage_stats.hpp"

namespace {

get_relation_stats_hook_type prev_relation_stats_hook = nullptr;
get_index_stats_hook_type prev_index_stats_hook = nullptr;

// The collection whose storage `relid` is (c<id>_cur, c<id>_dead, ...), or 0.
int64 storage_collection(Oid relid) {
    Oid storage = get_namespace_oid("decoupled_storage", true);
    if (!OidIsValid(storage) || get_rel_namespace(relid) != storage) return 0;
    char* name = get_rel_name(relid);
    long id = 0;
    if (name == nullptr || sscanf(name, "c%ld_", &id) != 1) return 0;
    return id;
}

// May the role being planned for read collection `id`'s values?
bool may_read(int64 id) {
    if (superuser()) return true;
    Oid relation = decoupled::collection_relation(id);
    return OidIsValid(relation) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relation)) &&
           pg_class_aclcheck(relation, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}

// The statistics of column `attnum` of `relid` in `vardata`, as
// examine_variable() would read them, with acl_ok by may_read().
void supply(Oid relid, AttrNumber attnum, bool inh, int64 id, VariableStatData* vardata) {
    vardata->statsTuple = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid),
                                          Int16GetDatum(attnum), BoolGetDatum(inh));
    vardata->freefunc = ReleaseSysCache;
    // No statistics: nothing to protect (PostgreSQL says so too).
    vardata->acl_ok = !HeapTupleIsValid(vardata->statsTuple) || may_read(id);
}

bool relation_stats(PlannerInfo* root, RangeTblEntry* rte, AttrNumber attnum,
                    VariableStatData* vardata) {
    int64 id = rte->rtekind == RTE_RELATION ? storage_collection(rte->relid) : 0;
    if (id == 0)
        return prev_relation_stats_hook && prev_relation_stats_hook(root, rte, attnum, vardata);
    supply(rte->relid, attnum, rte->inh, id, vardata);
    return true;
}

bool index_stats(PlannerInfo* root, Oid indexoid, AttrNumber attnum, VariableStatData* vardata) {
    Oid table = IndexGetRelation(indexoid, true);
    int64 id = OidIsValid(table) ? storage_collection(table) : 0;
    if (id == 0)
        return prev_index_stats_hook && prev_index_stats_hook(root, indexoid, attnum, vardata);
    // A partial index's statistics are not the table's: PostgreSQL leaves
    // them unused, and so does this.
    HeapTuple index = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
    if (!HeapTupleIsValid(index)) return false;
    bool partial = !heap_attisnull(index, Anum_pg_index_indpred, nullptr);
    ReleaseSysCache(index);
    if (partial) {
        vardata->statsTuple = nullptr;
        vardata->acl_ok = true;
        return true;
    }
    supply(indexoid, attnum, false, id, vardata);
    return true;
}

}  // namespace

namespace decoupled {

Oid collection_relation(int64 lifetime_id) {
    Oid nsp = get_namespace_oid("decoupled", true);
    Oid objects = OidIsValid(nsp) ? get_relname_relid("catalog_objects", nsp) : InvalidOid;
    Oid pkey = OidIsValid(nsp) ? get_relname_relid("catalog_objects_pkey", nsp) : InvalidOid;
    if (!OidIsValid(objects) || !OidIsValid(pkey) || !ActiveSnapshotSet()) return InvalidOid;
    Relation rel = table_open(objects, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, get_attnum(objects, "lifetime_id"), BTEqualStrategyNumber, F_INT8EQ,
                Int64GetDatum(lifetime_id));
    SysScanDesc scan = systable_beginscan(rel, pkey, true, GetActiveSnapshot(), 1, &key);
    HeapTuple row = systable_getnext(scan);
    Oid relation = InvalidOid;
    if (row != nullptr) {
        bool isnull = true;
        Datum d =
            heap_getattr(row, get_attnum(objects, "relation"), RelationGetDescr(rel), &isnull);
        if (!isnull) relation = DatumGetObjectId(d);
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return relation;
}

void install_storage_stats_hooks() {
    prev_relation_stats_hook = get_relation_stats_hook;
    get_relation_stats_hook = relation_stats;
    prev_index_stats_hook = get_index_stats_hook;
    get_index_stats_hook = index_stats;
}

}  // namespace decoupled
