// Reads of registered tables honour decoupled.as_of (brief C2.2, C2.3).
//
// A registered table keeps its own name: `SELECT * FROM t` must return the
// latest state at plain-table cost and, with decoupled.as_of set, the
// collection's state at that time.  At parse analysis every read-only
// reference to a registered table becomes the subquery
//
//     SELECT cols FROM ONLY t WHERE decoupled.as_of() IS NULL
//     UNION ALL SELECT * FROM decoupled_storage.c<id>_history
//
// whose branches are gated by one-time filters: without as_of only the
// first runs; with it only the history view does (which checks readability
// and the reader's SELECT privilege on t).  Without as_of the planner gets
// the first branch alone (see "Plan time" below).  A SELECT the session
// runs itself has that replacement made at plan time instead, only where
// the table alone will not do (see "Decided at plan time").  Targets of
// INSERT/UPDATE/DELETE/MERGE, FOR UPDATE and TABLESAMPLE references (a
// sample is of the table's pages) are left alone: they act on the table
// itself, AS OF a time too (README).
//
// The rewrite applies once.  A tree that already holds it reaches the hook
// again — EXPLAIN calls the hook on its inner query after the statement's
// own analysis (for query jumbling), and SQL deparsed from a tree holding
// the rewrite (a view's definition, the terms of view maintenance) is
// parsed again — so the subquery it made is recognised and left alone:
// else its `ONLY t` branch would become a second union, and EXPLAIN would
// show a plan that never runs.
//
// The subquery is parsed and analysed once per table and backend, and
// copied at each read after that (cached_replacement): parsing and
// analysing it at every statement was a fifth of a single-row SELECT's
// CPU.  The copy holds OIDs, not names (renames cannot make it wrong);
// it goes whenever either relation it reads or any function changes (but
// not when as_of is set or reset), and with the rest of the cache.
//
// No C++ objects live here: parse analysis may longjmp through this file.
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/table.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include "catalog_access.hpp"
#include "ddl_guard.hpp"
#include "gucs.hpp"
#include "read_rewrite.hpp"
#include "shmem.hpp"

namespace {

post_parse_analyze_hook_type prev_post_parse_analyze_hook = nullptr;

// relid -> what a read of it is replaced with: the collection and its
// columns.  Schema and table names are looked up at each rewrite, so a
// renamed schema is followed.
struct ReadEntry {
    Oid relid;
    int64 lifetime_id;
    char* columns;     // quoted, comma-separated
    Oid history_relid;  // decoupled_storage.c<id>_history
    Query* analyzed;    // the replacement, analysed (in trees_context) ...
    uint64 analyzed_in;  // ... while trees_generation is this
};

HTAB* read_cache = nullptr;
MemoryContext cache_context = nullptr;
uint64 cache_epoch = 0;
bool cache_loaded = false;
bool cache_loaded_in_xact = false;  // forget it if this transaction aborts
// This transaction changed the catalog (catalog_changed_in_xact): the
// cache is loaded again whenever the command id moved since, so every
// statement sees the transaction's own registrations, however far its
// catalog writes got when the cache was last loaded.
bool xact_changed_catalog = false;
CommandId cache_cid = InvalidCommandId;
// decoupled.catalog_objects when the cache was loaded (InvalidOid: no
// extension then).  DROP EXTENSION bumps no epoch but drops that table,
// which a syscache probe sees: get_extension_oid scans pg_extension, 4% of
// a single-row writer's CPU when every statement asked it.
Oid cache_catalog_relid = InvalidOid;
// The analysed replacements; reset (and the generation moved on) by
// invalidations of what they read (forget_trees).
MemoryContext trees_context = nullptr;
uint64 trees_generation = 1;
// decoupled._reads_at_plan_time() (see "Decided at plan time"), looked up
// with the cache: InvalidOid when the installed catalog has none.
Oid plan_time_marker = InvalidOid;

void forget_trees() {
    if (trees_context) MemoryContextReset(trees_context);
    ++trees_generation;
}

// A relation's definition changed (InvalidOid: every relation's): the
// trees reading it go.
void forget_trees_of_relation(Datum, Oid relid) {
    if (read_cache == nullptr) return;
    if (!OidIsValid(relid) || hash_search(read_cache, &relid, HASH_FIND, nullptr) != nullptr) {
        forget_trees();
        return;
    }
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, read_cache);
    while (auto* entry = static_cast<ReadEntry*>(hash_seq_search(&seq))) {
        if (entry->history_relid == relid) {
            hash_seq_term(&seq);
            forget_trees();
            return;
        }
    }
}

// The plan-time markers' hash values as plan dependencies (see "Plan
// time" below), remembered when a plan takes one (the GUC's assign hook may
// not read the catalog); 0 while this backend made no such plan.
uint32 marker_hash[2] = {0, 0};

// A function changed (decoupled.as_of, whose OID the trees hold, among
// them).  Not when decoupled.as_of turned set or unset: that calls the
// callbacks for a marker, which no tree reads, and reads that switch
// between AS OF and the latest state would otherwise analyse again at
// every switch.
void forget_trees_of_function(Datum, int, uint32 hash) {
    if (hash != 0 && (hash == marker_hash[0] || hash == marker_hash[1])) return;
    forget_trees();
}
bool in_rewrite = false;   // our own analysis and cache loads are not rewritten
int suppress_depth = 0;    // decoupled._execute_unrewritten()

// Runs as a superuser with search_path pinned to pg_catalog (see
// catalog_access.hpp), with the latest snapshot: a cache built from an older
// snapshot would be tagged with a newer epoch and stay stale.
constexpr const char* kLoadSql = R"sql(
    SELECT o.relation, o.lifetime_id,
           (SELECT string_agg(quote_ident(a.attname::text), ', ' ORDER BY a.attnum)
              FROM pg_attribute a
             WHERE a.attrelid = o.relation AND a.attnum > 0 AND NOT a.attisdropped),
           to_regclass('decoupled_storage.c' || o.lifetime_id || '_history')::oid
      FROM decoupled.catalog_objects o
     WHERE o.kind = 'table' AND o.dropped_at IS NULL
)sql";

void reset_cache() {
    forget_trees();
    plan_time_marker = InvalidOid;
    if (cache_context) MemoryContextReset(cache_context);
    read_cache = nullptr;
    cache_loaded = false;
}

void load_cache(uint64 epoch) {
    reset_cache();
    if (!cache_context)
        cache_context = AllocSetContextCreate(CacheMemoryContext, "pg_decoupled read cache",
                                              ALLOCSET_SMALL_SIZES);
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = sizeof(Oid);
    ctl.entrysize = sizeof(ReadEntry);
    ctl.hcxt = cache_context;
    read_cache = hash_create("pg_decoupled read cache", 16, &ctl,
                             HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

    Oid nsp = get_namespace_oid("decoupled", true);
    Oid catalog_relid = OidIsValid(nsp) ? get_relname_relid("catalog_objects", nsp) : InvalidOid;
    cache_catalog_relid = InvalidOid;
    if (OidIsValid(get_extension_oid("pg_decoupled", true)) && OidIsValid(catalog_relid)) {
        cache_catalog_relid = catalog_relid;
        decoupled::SavedUser saved = decoupled::become_catalog_reader();
        SPI_connect();
        SPIPlanPtr plan = SPI_prepare(kLoadSql, 0, nullptr);
        if (!plan ||
            SPI_execute_snapshot(plan, nullptr, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                 false, 0) != SPI_OK_SELECT)
            elog(ERROR, "could not load registered tables");
        for (uint64 i = 0; i < SPI_processed; ++i) {
            bool relnull, idnull;
            Oid relid = DatumGetObjectId(
                SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &relnull));
            int64 lifetime_id = DatumGetInt64(
                SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &idnull));
            char* columns = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
            if (relnull || idnull || columns == nullptr) continue;
            bool history_null;
            Oid history = DatumGetObjectId(
                SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &history_null));
            bool found;
            auto* entry = static_cast<ReadEntry*>(hash_search(read_cache, &relid, HASH_ENTER, &found));
            entry->lifetime_id = lifetime_id;
            entry->columns = MemoryContextStrdup(cache_context, columns);
            entry->history_relid = history_null ? InvalidOid : history;
            entry->analyzed = nullptr;
            entry->analyzed_in = 0;
        }
        SPI_finish();
        decoupled::restore_user(saved);
        // A cache, not a read the transaction relies on: the lock its load
        // took must not stay to the end of whatever transaction happened
        // to load it (an idle one then held up ALTER EXTENSION UPDATE, and
        // everything queued behind that).  One taken earlier by the
        // transaction itself stays.
        UnlockRelationOid(catalog_relid, AccessShareLock);
    }
    plan_time_marker = OidIsValid(cache_catalog_relid)
                           ? GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
                                             CStringGetDatum("_reads_at_plan_time"),
                                             PointerGetDatum(buildoidvector(nullptr, 0)),
                                             ObjectIdGetDatum(nsp))
                           : InvalidOid;
    cache_epoch = epoch;
    cache_cid = GetCurrentCommandId(false);
    cache_loaded = true;
    cache_loaded_in_xact = true;
}

// The SQL that replaces a read of `relid`, or nullptr when it is not a
// registered table.  Allocated in the current (parse) context.
char* replacement_for(Oid relid) {
    auto* entry = static_cast<ReadEntry*>(hash_search(read_cache, &relid, HASH_FIND, nullptr));
    if (!entry) return nullptr;
    char* relname = get_rel_name(relid);
    char* nspname = relname ? get_namespace_name(get_rel_namespace(relid)) : nullptr;
    if (!relname || !nspname) return nullptr;
    return psprintf("SELECT %s FROM ONLY %s.%s WHERE decoupled.as_of() IS NULL "
                    "UNION ALL SELECT * FROM decoupled_storage.c" INT64_FORMAT "_history",
                    entry->columns, quote_identifier(nspname), quote_identifier(relname),
                    entry->lifetime_id);
}

// A cache (re)loaded by a transaction that aborts may hold that
// transaction's own, never committed, view of the catalog; so may a tree
// analysed in it.
void forget_on_abort(XactEvent event, void*) {
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) {
        if (cache_loaded_in_xact) cache_loaded = false;
        forget_trees();
    }
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
        event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
        event == XACT_EVENT_PREPARE) {
        cache_loaded_in_xact = false;
        xact_changed_catalog = false;
    }
}

// A subtransaction of a transaction that changed the catalog may have
// undone part of that change (a registration rolled back to a savepoint).
void forget_on_subabort(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB && xact_changed_catalog) cache_loaded = false;
}

// System columns (ctid, xmin, ...) are physical: a query using them reads
// the table itself.
bool uses_system_columns(RangeTblEntry* rte) {
    int x = -1;
    while ((x = bms_next_member(rte->selectedCols, x)) >= 0) {
        if (x + FirstLowInvalidHeapAttributeNumber < 0) return true;
    }
    return false;
}

bool is_write_target(Query* q, int rti) {
    if (q->resultRelation == rti) return true;
    if (q->onConflict && q->onConflict->exclRelIndex == rti) return true;
    return get_parse_rowmark(q, rti) != nullptr;
}

Query* analyze_replacement(const char* sql) {
    List* raw = raw_parser(sql, RAW_PARSE_DEFAULT);
    return parse_analyze_fixedparams(linitial_node(RawStmt, raw), sql, nullptr, 0, nullptr);
}

// The analysed replacement of a read of `relid` (in the current context),
// or nullptr when it is not a registered table: a copy of the one kept for
// it, with the locks its analysis took, in the same order; analysed afresh
// (and kept) when there is none, or when taking those locks brought an
// invalidation of it.
Query* cached_replacement(Oid relid) {
    auto* entry = static_cast<ReadEntry*>(hash_search(read_cache, &relid, HASH_FIND, nullptr));
    if (entry == nullptr) return nullptr;
    if (OidIsValid(entry->history_relid) && entry->analyzed != nullptr &&
        entry->analyzed_in == trees_generation) {
        Query* copy = static_cast<Query*>(copyObjectImpl(entry->analyzed));
        LockRelationOid(relid, AccessShareLock);
        LockRelationOid(entry->history_relid, AccessShareLock);
        if (entry->analyzed_in == trees_generation) return copy;
    }
    char* sql = replacement_for(relid);
    if (sql == nullptr) return nullptr;
    Query* analyzed = analyze_replacement(sql);
    if (OidIsValid(entry->history_relid)) {
        if (trees_context == nullptr)
            trees_context = AllocSetContextCreate(CacheMemoryContext, "pg_decoupled read trees",
                                                  ALLOCSET_SMALL_SIZES);
        MemoryContext old = MemoryContextSwitchTo(trees_context);
        entry->analyzed = static_cast<Query*>(copyObjectImpl(analyzed));
        entry->analyzed_in = trees_generation;
        MemoryContextSwitchTo(old);
    }
    return analyzed;
}

// A query that selects columns of its one range table entry, with a WHERE
// clause exactly when `with_quals` and no other clause: that entry, or
// nullptr.
RangeTblEntry* single_source(Query* q, bool with_quals) {
    if (q == nullptr || q->commandType != CMD_SELECT || q->setOperations != nullptr ||
        q->utilityStmt != nullptr || q->hasAggs || q->hasWindowFuncs || q->hasTargetSRFs ||
        q->hasSubLinks || q->hasDistinctOn || q->hasRecursive || q->hasForUpdate ||
        q->cteList != NIL || q->groupClause != NIL || q->groupingSets != NIL ||
        q->havingQual != nullptr || q->distinctClause != NIL || q->sortClause != NIL ||
        q->limitCount != nullptr || q->limitOffset != nullptr || q->rowMarks != NIL ||
        list_length(q->rtable) != 1 || q->jointree == nullptr ||
        list_length(q->jointree->fromlist) != 1 ||
        !IsA(linitial(q->jointree->fromlist), RangeTblRef) ||
        castNode(RangeTblRef, linitial(q->jointree->fromlist))->rtindex != 1 ||
        (q->jointree->quals != nullptr) != with_quals)
        return nullptr;
    auto* rte = linitial_node(RangeTblEntry, q->rtable);
    // Only its columns, as they are.
    ListCell* lc;
    foreach (lc, q->targetList) {
        auto* tle = lfirst_node(TargetEntry, lc);
        auto* var = reinterpret_cast<Var*>(tle->expr);
        if (tle->resjunk || !IsA(var, Var) || var->varno != 1 || var->varlevelsup != 0 ||
            var->varattno <= 0)
            return nullptr;
    }
    return rte;
}

// Whether `fn` is the extension's function `name` (by its catalog entry:
// no name resolution, no privilege check).
bool is_extension_function(Oid fn, const char* name) {
    Oid nsp = get_namespace_oid("decoupled", true);
    if (!OidIsValid(nsp) || get_func_namespace(fn) != nsp) return false;
    char* fname = get_func_name(fn);
    return fname != nullptr && strcmp(fname, name) == 0;
}

// `decoupled.as_of() IS NULL`, the table branch's gate.
bool is_latest_gate(Node* qual) {
    auto* test = reinterpret_cast<NullTest*>(qual);
    if (qual == nullptr || !IsA(qual, NullTest) || test->nulltesttype != IS_NULL ||
        test->argisrow || test->arg == nullptr || !IsA(test->arg, FuncExpr))
        return false;
    auto* call = reinterpret_cast<FuncExpr*>(test->arg);
    return call->args == NIL && is_extension_function(call->funcid, "as_of");
}

// The branches of `q` when it is a bare UNION ALL of two subqueries.
bool union_all_branches(Query* q, Query** left, Query** right) {
    auto* op = reinterpret_cast<SetOperationStmt*>(q->setOperations);
    if (op == nullptr || !IsA(op, SetOperationStmt) || op->op != SETOP_UNION || !op->all ||
        !IsA(op->larg, RangeTblRef) || !IsA(op->rarg, RangeTblRef) || list_length(q->rtable) != 2 ||
        q->cteList != NIL || q->sortClause != NIL || q->limitCount != nullptr ||
        q->limitOffset != nullptr || q->rowMarks != NIL)
        return false;
    RangeTblEntry* l = rt_fetch(castNode(RangeTblRef, op->larg)->rtindex, q->rtable);
    RangeTblEntry* r = rt_fetch(castNode(RangeTblRef, op->rarg)->rtindex, q->rtable);
    if (l->rtekind != RTE_SUBQUERY || r->rtekind != RTE_SUBQUERY) return false;
    *left = l->subquery;
    *right = r->subquery;
    return true;
}

// The table of a rewritten read's table branch, `SELECT <columns> FROM ONLY
// t WHERE decoupled.as_of() IS NULL`, or nullptr.
RangeTblEntry* table_branch(Query* branch) {
    RangeTblEntry* table = single_source(branch, true);
    if (table == nullptr || table->rtekind != RTE_RELATION || table->inh ||
        table->tablesample != nullptr || !is_latest_gate(branch->jointree->quals))
        return nullptr;
    return table;
}

// Whether `q` is a rewritten read, as replacement_for() writes it:
//     SELECT <its columns> FROM ONLY t WHERE decoupled.as_of() IS NULL
//     UNION ALL SELECT <columns> FROM decoupled_storage.c<id>_history
// for a registered table t whose collection is <id>.  Either branch alone
// is no such read, nor is a union that filters or joins: those are
// rewritten as any other query.
bool is_read_rewrite(Query* q) {
    Query* left;
    Query* right;
    if (!union_all_branches(q, &left, &right)) return false;
    RangeTblEntry* table = table_branch(left);
    RangeTblEntry* history = single_source(right, false);
    if (table == nullptr || history == nullptr || history->rtekind != RTE_RELATION) return false;
    auto* entry =
        static_cast<ReadEntry*>(hash_search(read_cache, &table->relid, HASH_FIND, nullptr));
    return entry != nullptr && OidIsValid(entry->history_relid) &&
           history->relid == entry->history_relid;
}

// The subquery checks SELECT on the table itself, as the reader, for the
// columns the reference read — not every column its branch lists: a
// reader granted SELECT on some columns of the table reads them as from
// a plain table (a whole-row reference or none at all is checked as
// PostgreSQL checks it).  Its history branch, which only runs with
// decoupled.as_of set, still needs SELECT on the table (_history_gate).
void check_columns_as_read(Query* sub, RangeTblEntry* reference) {
    Query* left;
    Query* right;
    if (!union_all_branches(sub, &left, &right)) return;
    RangeTblEntry* table = table_branch(left);
    if (table == nullptr || table->relid != reference->relid) return;
    table->selectedCols = bms_copy(reference->selectedCols);
    table->checkAsUser = reference->checkAsUser;
}

// What rewrite_query does with each read of a registered table it finds.
enum class ReadMode {
    kRewrite,     // at analysis: the read becomes the gated union
    kDefer,       // at analysis: left to plan time (see "Decided at plan time")
    kSubstitute,  // at plan time: the gated union, through the rewriter
};

struct RewriteContext {
    ReadMode mode;
    int deferred;  // kDefer: the reads left to plan time
    int replaced;  // kRewrite, kSubstitute: the reads given the union
};

void rewrite_query(Query* q, RewriteContext* context);
bool is_planned_read(Query* q);

// PostgreSQL's walkers take an untyped function pointer; going through
// void(*)() is the sanctioned way to cast one.
using Walker = bool (*)();
Walker as_walker(bool (*fn)(Node*, void*)) {
    return reinterpret_cast<Walker>(reinterpret_cast<void (*)()>(fn));
}

bool rewrite_walker(Node* node, void* context) {
    if (node == nullptr) return false;
    if (IsA(node, Query)) {
        rewrite_query(reinterpret_cast<Query*>(node), static_cast<RewriteContext*>(context));
        return false;
    }
    return expression_tree_walker(node, as_walker(rewrite_walker), context);
}

// The gated union for a read `rte` of a registered table at plan time: the
// replacement the analysis would have made, run through the rewriter as the
// statement's own tree was (the history view expanded, the table's row
// security applied inside), or nullptr when `rte` is no longer registered.
bool views_restricted();

// The union reads the table's history view, which a session that restricts
// views (pg_dump does, 15.8 and later) refuses by that view's internal name:
// say what the user can do instead.
void refuse_where_views_restricted(Oid relid) {
    if (!views_restricted()) return;
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),  // as PostgreSQL's refusal
             errmsg("cannot read registered table \"%s\" through its history while views are "
                    "restricted",
                    get_rel_name(relid)),
             decoupled::as_of_set()
                 ? errdetail("decoupled.as_of is set, and restrict_nonsystem_relation_kind (set "
                             "by pg_dump) refuses the history view that reads AS OF it.")
                 : errdetail("restrict_nonsystem_relation_kind (set by pg_dump) refuses the "
                             "history view this read goes through."),
             errhint("Read the latest state with decoupled.as_of unset; for pg_dump run by a role "
                     "with decoupled.as_of set, run it with PGOPTIONS='-c decoupled.as_of='.")));
}

Query* substitute_replacement(RangeTblEntry* rte) {
    Query* sub = cached_replacement(rte->relid);
    if (sub == nullptr) return nullptr;
    refuse_where_views_restricted(rte->relid);
    check_columns_as_read(sub, rte);
    List* rewritten = QueryRewrite(sub);
    if (list_length(rewritten) != 1) elog(ERROR, "rewriting a read of %u made no single query", rte->relid);
    // The reference's own row security quals were made for the table's
    // columns; the union applies the table's policies inside.
    rte->securityQuals = NIL;
    return linitial_node(Query, rewritten);
}

void rewrite_query(Query* q, RewriteContext* context) {
    if (is_read_rewrite(q)) return;  // rewritten before: see the top of this file
    // At plan time, a union the rewriter expanded (a view's stored read).
    if (context->mode == ReadMode::kSubstitute && is_planned_read(q)) return;
    int rti = 0;
    ListCell* lc;
    foreach (lc, q->rtable) {
        ++rti;
        RangeTblEntry* rte = lfirst_node(RangeTblEntry, lc);
        if (rte->rtekind == RTE_SUBQUERY) {
            rewrite_query(rte->subquery, context);
            continue;
        }
        if (rte->rtekind != RTE_RELATION || rte->tablesample || is_write_target(q, rti) ||
            uses_system_columns(rte))
            continue;
        if (context->mode == ReadMode::kDefer) {
            if (hash_search(read_cache, &rte->relid, HASH_FIND, nullptr) == nullptr) continue;
            // The table branch reads ONLY the table.
            rte->inh = false;
            context->deferred++;
            continue;
        }
        Query* sub = context->mode == ReadMode::kSubstitute ? substitute_replacement(rte)
                                                            : cached_replacement(rte->relid);
        if (!sub) continue;
        if (context->mode == ReadMode::kRewrite) {
            refuse_where_views_restricted(rte->relid);
            check_columns_as_read(sub, rte);
        }
        decoupled::read_entry_through(rte, sub);
        context->replaced++;
    }
    // Sub-selects anywhere else: targets, quals, CTEs, and range-table
    // expressions (function arguments, VALUES).  Subquery entries were
    // handled above.
    query_tree_walker(q, as_walker(rewrite_walker), context,
                      QTW_IGNORE_RT_SUBQUERIES | QTW_IGNORE_JOINALIASES);
}

bool references_relations(Query* q) {
    ListCell* lc;
    foreach (lc, q->rtable) {
        RangeTblEntry* rte = lfirst_node(RangeTblEntry, lc);
        if (rte->rtekind == RTE_RELATION || rte->rtekind == RTE_SUBQUERY) return true;
    }
    return q->cteList != NIL || q->hasSubLinks;
}

// DECLARE CURSOR, EXPLAIN and CREATE TABLE AS carry their analysed query
// inside a utility statement.
Query* inner_query(Query* query) {
    if (query->commandType != CMD_UTILITY || !query->utilityStmt) return query;
    Node* inner = nullptr;
    if (IsA(query->utilityStmt, DeclareCursorStmt))
        inner = reinterpret_cast<DeclareCursorStmt*>(query->utilityStmt)->query;
    else if (IsA(query->utilityStmt, ExplainStmt))
        inner = reinterpret_cast<ExplainStmt*>(query->utilityStmt)->query;
    else if (IsA(query->utilityStmt, CreateTableAsStmt))
        inner = reinterpret_cast<CreateTableAsStmt*>(query->utilityStmt)->query;
    return inner && IsA(inner, Query) ? reinterpret_cast<Query*>(inner) : nullptr;
}

// Loads the cache if it is stale, then rewrites; in_rewrite is reset even
// when either fails.
// Loads the cache again if the catalog moved since it was loaded, or if
// its catalog table is gone (DROP EXTENSION bumps no epoch).  The caller
// sets in_rewrite: loading runs statements of our own.
void refresh_cache() {
    uint64 epoch = pg_atomic_read_u64(&decoupled::shared_state()->catalog_epoch);
    if (!cache_loaded || epoch != cache_epoch ||
        (xact_changed_catalog && cache_cid != GetCurrentCommandId(false)) ||
        (hash_get_num_entries(read_cache) > 0 &&
         !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(cache_catalog_relid))))
        load_cache(epoch);
}

// ---------------------------------------------------------------------------
// Decided at plan time.  A statement the session runs itself — a SELECT
// (or its EXPLAIN) analysed outside any utility command and outside
// planning — keeps its reads of registered tables as they are, as `ONLY t`,
// and is marked by a last AND-ed term of its WHERE clause,
// decoupled._reads_at_plan_time() (always true, never run: the planner hook
// takes it out).  The planner hook then plans those reads of the table
// alone while decoupled.as_of is unset — the plain table's plan, without the
// union the planner would have taken apart again (parsing, copying and
// rewriting it was an eighth of a single-row read's CPU) — and otherwise
// substitutes the gated union, through the rewriter, into its own copy of
// the tree.  The plan dependencies below keep cached plans right when as_of
// turns set or unset.  Trees that may be stored — a view's, a rule's, a
// function body's, a materialized view's — and cursors' keep the union
// made at analysis: they are analysed inside a utility command (or planned
// as cursors, which the hook substitutes for).
// ---------------------------------------------------------------------------

int utility_depth = 0;   // utility commands running (analyse what they store)
int planning_depth = 0;  // plans being made (inlined function bodies are analysed there)

// The last term of q's WHERE clause (the clause itself if it is no AND).
Node* last_qual(Query* q) {
    Node* quals = q->jointree ? q->jointree->quals : nullptr;
    auto* all = reinterpret_cast<BoolExpr*>(quals);
    if (quals != nullptr && IsA(quals, BoolExpr) && all->boolop == AND_EXPR)
        return static_cast<Node*>(llast(all->args));
    return quals;
}

// Whether `node` may be the marker: a call of a boolean function without
// arguments (most WHERE clauses are not, and need no look at the cache).
bool may_be_plan_time_marker(Node* node) {
    auto* call = reinterpret_cast<FuncExpr*>(node);
    return node != nullptr && IsA(node, FuncExpr) && call->args == NIL &&
           call->funcresulttype == BOOLOID;
}

// The marker this file adds carries a location no call has: a parsed one
// has its place in the query text, a stored one -1.  A call written by hand
// is not the marker, wherever it stands: in a view's definition it would
// have kept the view's reads from the union (and reading the latest state
// at any as_of); at top level the analysis adds the marker after it.
constexpr int kMarkerLocation = -2;

// Whether q's WHERE clause ends with the marker.  The caller has loaded
// the cache (the marker's OID comes with it).
bool has_plan_time_marker(Query* q) {
    Node* last = last_qual(q);
    auto* call = reinterpret_cast<FuncExpr*>(last);
    return may_be_plan_time_marker(last) && OidIsValid(plan_time_marker) &&
           call->funcid == plan_time_marker && call->location == kMarkerLocation;
}

void add_plan_time_marker(Query* q) {
    FuncExpr* call =
        makeFuncExpr(plan_time_marker, BOOLOID, NIL, InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
    call->location = kMarkerLocation;
    Node* marker = reinterpret_cast<Node*>(call);
    Node* quals = q->jointree->quals;
    auto* all = reinterpret_cast<BoolExpr*>(quals);
    if (quals == nullptr)
        q->jointree->quals = marker;
    else if (IsA(quals, BoolExpr) && all->boolop == AND_EXPR)
        all->args = lappend(all->args, marker);
    else
        q->jointree->quals = reinterpret_cast<Node*>(makeBoolExpr(AND_EXPR, list_make2(quals, marker), -1));
}

// Takes the marker out of `q` (which has_plan_time_marker found).
void remove_plan_time_marker(Query* q) {
    Node* quals = q->jointree->quals;
    auto* all = reinterpret_cast<BoolExpr*>(quals);
    if (!IsA(quals, BoolExpr)) {
        q->jointree->quals = nullptr;
        return;
    }
    all->args = list_delete_last(all->args);
    if (list_length(all->args) == 1) q->jointree->quals = static_cast<Node*>(linitial(all->args));
}

// Whether the session refuses to read views: pg_dump (15.8 and later)
// sets restrict_nonsystem_relation_kind so.  The gated union reads history
// views, so there a cursor (pg_dump --inserts reads tables through one)
// reads the latest state as a statement does, the table alone.
bool views_restricted() {
    const char* kinds = GetConfigOption("restrict_nonsystem_relation_kind", true, false);
    return kinds != nullptr && strstr(kinds, "view") != nullptr;
}

// Whether the reads of `target` (`query` itself, or the query an EXPLAIN
// of it carries) are left to plan time.
bool defers_to_plan_time(Query* query, Query* target) {
    return utility_depth == 0 && planning_depth == 0 && OidIsValid(plan_time_marker) &&
           target->commandType == CMD_SELECT && target->setOperations == nullptr &&
           target->jointree != nullptr &&
           (query == target || IsA(query->utilityStmt, ExplainStmt) ||
            (IsA(query->utilityStmt, DeclareCursorStmt) && views_restricted()));
}

void rewrite_with_cache(Query* query, Query* target) {
    const bool was_in_rewrite = in_rewrite;  // restored, not cleared: calls nest
    in_rewrite = true;
    PG_TRY();
    {
        refresh_cache();
        // EXPLAIN analyses its query again, inside the utility command.
        if (hash_get_num_entries(read_cache) > 0 && !has_plan_time_marker(target)) {
            if (defers_to_plan_time(query, target)) {
                RewriteContext context{ReadMode::kDefer, 0, 0};
                rewrite_query(target, &context);
                if (context.deferred > 0) add_plan_time_marker(target);
            } else {
                RewriteContext context{ReadMode::kRewrite, 0, 0};
                rewrite_query(target, &context);
            }
        }
    }
    PG_FINALLY();
    { in_rewrite = was_in_rewrite; }
    PG_END_TRY();
}

void rewrite_registered_reads(ParseState* pstate, Query* query, JumbleState* jstate) {
    if (prev_post_parse_analyze_hook) prev_post_parse_analyze_hook(pstate, query, jstate);
    if (in_rewrite || suppress_depth > 0 || creating_extension || !IsNormalProcessingMode() ||
        !ActiveSnapshotSet() || MyDatabaseId == InvalidOid)
        return;
    // Queries parsed in parallel mode are those of parallel-safe functions
    // (the history gate's catalog read): user statements are analyzed before
    // a parallel plan starts, and the cache could not be reloaded there (no
    // latest snapshot in parallel mode).
    if (IsInParallelMode()) return;
    Query* target = inner_query(query);
    if (!target || target->commandType == CMD_UTILITY || !references_relations(target)) return;
    rewrite_with_cache(query, target);
}

ProcessUtility_hook_type prev_process_utility = nullptr;

void count_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                   ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* env,
                   DestReceiver* dest, QueryCompletion* qc) {
    utility_depth++;
    PG_TRY();
    {
        if (prev_process_utility)
            prev_process_utility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
        else
            standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env,
                                    dest, qc);
    }
    PG_FINALLY();
    { utility_depth--; }
    PG_END_TRY();
}

// ---------------------------------------------------------------------------
// Function bodies.  A BEGIN ATOMIC (or RETURN) body of CREATE FUNCTION or
// CREATE PROCEDURE is analysed by transformStmt directly, without the
// analysis hook, and stored as analysed: its reads of a registered table
// read the latest state at any as_of.  So once the function's row exists
// (the hook below, which ProcedureCreate calls for a new and a replaced
// function), its stored body gets the union a view's query gets at
// analysis, and the dependencies that come with it.  A body that reads no
// registered table is left as it is.
// ---------------------------------------------------------------------------

object_access_hook_type prev_object_access = nullptr;

// The queries of a stored body: a RETURN body is one query; a BEGIN ATOMIC
// one a list holding the list of its statements.
List* body_queries(Node* body) {
    if (IsA(body, Query)) return list_make1(body);
    if (IsA(body, List) && list_length(reinterpret_cast<List*>(body)) == 1 &&
        IsA(linitial(reinterpret_cast<List*>(body)), List))
        return static_cast<List*>(linitial(reinterpret_cast<List*>(body)));
    return NIL;
}

void rewrite_function_body(Oid fn) {
    HeapTuple volatile tuple = nullptr;
    Node* volatile body = nullptr;
    volatile int replaced = 0;
    const bool was_in_rewrite = in_rewrite;
    in_rewrite = true;
    PG_TRY();
    {
        // Nothing to read back while no table is registered (most
        // functions, most databases).
        refresh_cache();
        if (hash_get_num_entries(read_cache) > 0) {
            CommandCounterIncrement();  // the row ProcedureCreate just wrote
            tuple = SearchSysCacheCopy1(PROCOID, ObjectIdGetDatum(fn));
            bool isnull = true;
            Datum stored = HeapTupleIsValid(tuple) ? SysCacheGetAttr(PROCOID, tuple,
                                                                    Anum_pg_proc_prosqlbody,
                                                                    &isnull)
                                                   : (Datum)0;
            if (!isnull) body = static_cast<Node*>(stringToNode(TextDatumGetCString(stored)));
            ListCell* lc;
            foreach (lc, body ? body_queries(body) : NIL) {
                RewriteContext context{ReadMode::kRewrite, 0, 0};
                rewrite_query(lfirst_node(Query, lc), &context);
                replaced += context.replaced;
            }
        }
    }
    PG_FINALLY();
    { in_rewrite = was_in_rewrite; }
    PG_END_TRY();
    if (replaced == 0) return;
    Relation rel = table_open(ProcedureRelationId, RowExclusiveLock);
    Datum values[Natts_pg_proc] = {};
    bool nulls[Natts_pg_proc] = {};
    bool replace[Natts_pg_proc] = {};
    values[Anum_pg_proc_prosqlbody - 1] = CStringGetTextDatum(nodeToString(body));
    replace[Anum_pg_proc_prosqlbody - 1] = true;
    HeapTuple updated = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
    CatalogTupleUpdate(rel, &updated->t_self, updated);
    table_close(rel, RowExclusiveLock);
    ObjectAddress function;
    ObjectAddressSet(function, ProcedureRelationId, fn);
    recordDependencyOnExpr(&function, body, NIL, DEPENDENCY_NORMAL);
}

void rewrite_created_function(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id,
                              void* arg) {
    if (prev_object_access) prev_object_access(access, class_id, object_id, sub_id, arg);
    if (access != OAT_POST_CREATE || class_id != ProcedureRelationId) return;
    if (in_rewrite || suppress_depth > 0 || creating_extension || !IsNormalProcessingMode() ||
        !ActiveSnapshotSet() || MyDatabaseId == InvalidOid || IsInParallelMode())
        return;
    // A replaced function (this hook runs for CREATE OR REPLACE too) that a
    // maintained view reads is refused first.
    decoupled::refuse_replacing(ProcedureRelationId, object_id,
                                psprintf("function %s", format_procedure(object_id)));
    rewrite_function_body(object_id);
}

// ---------------------------------------------------------------------------
// Plan time.  While decoupled.as_of is unset, the history branch of every
// rewritten read returns nothing (its gate is false), so the planner gets
// the table branch alone, without its gate: the plan is the plain table's
// (the union's Append, Subquery Scan and gating Result nodes cost about 40%
// over every row of a scan).  While as_of is set the union stays as it is,
// its gates choosing at execution.  A statement whose reads were left to
// plan time gets the union here only where it needs one (see "Decided at
// plan time" above).
//
// A plan made for the latest state holds only while as_of stays unset.  It
// depends on decoupled._planned_latest(), one made while as_of is set and
// reading a rewritten union on decoupled._planned_as_of() — PlanInvalItems,
// as for a function a plan calls; neither function ever runs.  When as_of
// turns set (or unset) the plan cache is told that function changed, so
// exactly the cached plans of the other kind are planned again at their
// next use: prepared statements, PL/pgSQL and SPI plans stay right.  A plan
// kept outside the plan cache is not reached that way (a SQL-language
// function plans all its statements when first called in a transaction):
// one made for the latest state whose first run finds as_of set is
// refused, never run against the table.  Cursors keep the union (their
// gates choose at the first fetch, after which as_of may still change
// before it).  The tree stored for a view, a rule or a function body never
// changes: the choice is made on the planner's copy.
// ---------------------------------------------------------------------------

planner_hook_type prev_planner_hook = nullptr;
ExecutorRun_hook_type prev_executor_run_hook = nullptr;

// DECLARE, and PL/pgSQL's explicit cursors.
constexpr int kCursorOptions =
    CURSOR_OPT_FAST_PLAN | CURSOR_OPT_SCROLL | CURSOR_OPT_NO_SCROLL | CURSOR_OPT_HOLD;

// Whether a plan is a cursor's that keeps the gated union.
bool plans_cursor(int cursor_options) {
    return (cursor_options & kCursorOptions) != 0 && !views_restricted();
}

enum Marker { kPlannedAsOf = 0, kPlannedLatest = 1 };
const char* const kMarkerNames[] = {"_planned_as_of", "_planned_latest"};
// marker_hash: declared with the trees, whose callback reads it.

// Whether `rel` is a collection's history view, decoupled_storage.c<id>_history.
bool is_history_view(Oid rel) {
    Oid nsp = get_namespace_oid("decoupled_storage", true);
    if (!OidIsValid(nsp) || get_rel_namespace(rel) != nsp || get_rel_relkind(rel) != RELKIND_VIEW)
        return false;
    const char* name = get_rel_name(rel);
    long id = 0;
    int end = 0;
    return name != nullptr && sscanf(name, "c%ld_history%n", &id, &end) == 1 &&
           name[end] == '\0' && id > 0;
}

// The table branch of `q` when it is a rewritten read as the planner gets
// it: the rewriter has expanded the history view into a subquery whose
// first range table entry is the view itself (PostgreSQL 15 keeps it there
// for the view's permission check).  Any history view returns nothing while
// as_of is unset, so which table the read is of does not matter here.
Query* planned_read_table_branch(Query* q) {
    Query* left;
    Query* right;
    if (!union_all_branches(q, &left, &right) || table_branch(left) == nullptr) return nullptr;
    RangeTblEntry* history = single_source(right, false);
    if (history == nullptr || history->rtekind != RTE_SUBQUERY || history->subquery == nullptr ||
        history->subquery->rtable == NIL)
        return nullptr;
    auto* view = linitial_node(RangeTblEntry, history->subquery->rtable);
    return view->rtekind == RTE_RELATION && is_history_view(view->relid) ? left : nullptr;
}

bool is_planned_read(Query* q) { return planned_read_table_branch(q) != nullptr; }

// The rewritten reads in a query and the queries below it: range table
// entries, each with its table branch.
struct PlannedReads {
    List* entries = NIL;
    List* branches = NIL;
};

void find_planned_reads(Query* q, PlannedReads* reads);

bool planned_reads_walker(Node* node, void* context) {
    if (node == nullptr) return false;
    if (IsA(node, Query)) {
        find_planned_reads(reinterpret_cast<Query*>(node), static_cast<PlannedReads*>(context));
        return false;
    }
    return expression_tree_walker(node, as_walker(planned_reads_walker), context);
}

void find_planned_reads(Query* q, PlannedReads* reads) {
    ListCell* lc;
    foreach (lc, q->rtable) {
        RangeTblEntry* rte = lfirst_node(RangeTblEntry, lc);
        if (rte->rtekind != RTE_SUBQUERY) continue;
        if (Query* branch = planned_read_table_branch(rte->subquery)) {
            reads->entries = lappend(reads->entries, rte);
            reads->branches = lappend(reads->branches, branch);
        } else {
            find_planned_reads(rte->subquery, reads);
        }
    }
    query_tree_walker(q, as_walker(planned_reads_walker), reads,
                      QTW_IGNORE_RT_SUBQUERIES | QTW_IGNORE_JOINALIASES);
}

// A plan dependency on marker function `m`, or nullptr when the installed
// catalog has none (then nothing may depend on the choice).
PlanInvalItem* marker_dependency(Marker m) {
    Oid nsp = get_namespace_oid("decoupled", true);
    if (!OidIsValid(nsp)) return nullptr;
    Oid fn = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(kMarkerNames[m]),
                             PointerGetDatum(buildoidvector(nullptr, 0)), ObjectIdGetDatum(nsp));
    if (!OidIsValid(fn)) return nullptr;
    auto* item = makeNode(PlanInvalItem);
    item->cacheId = PROCOID;
    item->hashValue = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(fn));
    marker_hash[m] = item->hashValue;
    return item;
}

// A statement whose reads were left to plan time (has_plan_time_marker)
// gets the gated union where the latest state alone will not do: with
// as_of set, for a cursor, or on a catalog without the plan markers.
// Returns the latest-state plan dependency when it is such a statement and
// its reads stay the table's alone, else nullptr.
PlanInvalItem* decide_deferred_reads(Query* parse, int cursor_options) {
    if (parse->commandType != CMD_SELECT || !may_be_plan_time_marker(last_qual(parse)))
        return nullptr;
    PlanInvalItem* volatile latest = nullptr;
    const bool was_in_rewrite = in_rewrite;  // restored, not cleared: calls nest
    in_rewrite = true;
    PG_TRY();
    {
        refresh_cache();
        if (has_plan_time_marker(parse)) {
            remove_plan_time_marker(parse);
            if (!decoupled::as_of_set() && !plans_cursor(cursor_options))
                latest = marker_dependency(kPlannedLatest);
            if (latest == nullptr) {
                RewriteContext context{ReadMode::kSubstitute, 0, 0};
                rewrite_query(parse, &context);
            }
        }
    }
    PG_FINALLY();
    { in_rewrite = was_in_rewrite; }
    PG_END_TRY();
    return latest;
}

// decoupled.as_of set by a role that is not the one reading here (a
// SECURITY DEFINER function's caller): the reads see the latest state,
// which the gates decide at execution — in this backend only, since a
// parallel worker cannot tell whose the value is (as_of_applies).
int without_foreign_parallelism(int cursor_options) {
    if (decoupled::as_of_set() && !decoupled::as_of_applies())
        return cursor_options & ~CURSOR_OPT_PARALLEL_OK;
    return cursor_options;
}

PlannedStmt* plan_reads(Query* parse, const char* query_string, int cursor_options,
                        ParamListInfo bound_params) {
    // Its dependency, when the statement's deferred reads stay the table's.
    PlanInvalItem* deferred_latest = decide_deferred_reads(parse, cursor_options);
    PlannedReads reads;
    if (!plans_cursor(cursor_options)) find_planned_reads(parse, &reads);
    PlanInvalItem* marker = nullptr;
    // A view's step plans its statements as the owner, in a
    // security-restricted operation, always AS OF its time; their plans are
    // kept for the next step.  The as-of marker would have each plan made
    // again at the next step: the replica leaves as_of unset between steps,
    // which invalidates plans made while it was set (a third of a replica's
    // CPU went to planning single-row steps again).  An as-of plan is right
    // without as_of too (its gates choose at execution), so those plans do
    // without the marker.
    if (reads.entries != NIL || deferred_latest != nullptr) {
        bool latest = !decoupled::as_of_set();
        if (deferred_latest != nullptr)
            marker = deferred_latest;  // made with as_of unset
        else if (latest || !InSecurityRestrictedOperation())
            marker = marker_dependency(latest ? kPlannedLatest : kPlannedAsOf);
        if (latest && marker != nullptr) {
            // The planner scribbles on its input anyway: callers that keep
            // the tree (the plan cache) hand it a copy.
            ListCell* e;
            ListCell* b;
            forboth (e, reads.entries, b, reads.branches) {
                auto* branch = static_cast<Query*>(lfirst(b));
                branch->jointree->quals = nullptr;
                static_cast<RangeTblEntry*>(lfirst(e))->subquery = branch;
            }
        }
    }
    PlannedStmt* stmt = nullptr;
    planning_depth++;
    PG_TRY();
    {
        int options = without_foreign_parallelism(cursor_options);
        stmt = prev_planner_hook ? prev_planner_hook(parse, query_string, options, bound_params)
                                 : standard_planner(parse, query_string, options, bound_params);
    }
    PG_FINALLY();
    { planning_depth--; }
    PG_END_TRY();
    if (marker != nullptr) stmt->invalItems = lappend(stmt->invalItems, marker);
    return stmt;
}

// A plan made for the latest state whose first run finds as_of set: one
// kept outside the plan cache across the change.
void run_reads(QueryDesc* query_desc, ScanDirection direction, uint64 count, bool execute_once) {
    if (!query_desc->already_executed && marker_hash[kPlannedLatest] != 0 &&
        decoupled::as_of_applies() && !IsParallelWorker()) {
        ListCell* lc;
        foreach (lc, query_desc->plannedstmt->invalItems) {
            auto* item = lfirst_node(PlanInvalItem, lc);
            if (item->cacheId == PROCOID && item->hashValue == marker_hash[kPlannedLatest])
                ereport(ERROR,
                        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                         errmsg("decoupled.as_of was set after this statement was planned to "
                                "read the latest state"),
                         errdetail("Its plan reads registered tables without their history and "
                                   "was kept outside the plan cache: a SQL-language function "
                                   "plans all its statements when first called in a "
                                   "transaction."),
                         errhint("Set decoupled.as_of before the function is first called in "
                                 "the transaction (or in its SET clause), or write it in "
                                 "PL/pgSQL.")));
        }
    }
    // A parallel plan made where decoupled.as_of counted (a function's
    // statement planned when its caller called it directly), run where it
    // does not (inside another role's SECURITY DEFINER function): its
    // workers cannot tell whose the value is (as_of_applies), so none is
    // started — the leader runs the plan alone, reading the latest state.
    if (decoupled::as_of_set() && !decoupled::as_of_applies() && !IsParallelWorker() &&
        query_desc->plannedstmt->parallelModeNeeded) {
        // As a SET clause of a function: an error leaves it to the
        // (sub)transaction's abort to restore.
        int level = NewGUCNestLevel();
        (void)set_config_option("max_parallel_workers", "0", PGC_USERSET, PGC_S_SESSION,
                                GUC_ACTION_SAVE, true, 0, false);
        if (prev_executor_run_hook)
            prev_executor_run_hook(query_desc, direction, count, execute_once);
        else
            standard_ExecutorRun(query_desc, direction, count, execute_once);
        AtEOXact_GUC(true, level);
        return;
    }
    if (prev_executor_run_hook)
        prev_executor_run_hook(query_desc, direction, count, execute_once);
    else
        standard_ExecutorRun(query_desc, direction, count, execute_once);
}

}  // namespace

namespace decoupled {

void install_read_rewrite() {
    prev_post_parse_analyze_hook = post_parse_analyze_hook;
    post_parse_analyze_hook = rewrite_registered_reads;
    prev_planner_hook = planner_hook;
    planner_hook = plan_reads;
    prev_executor_run_hook = ExecutorRun_hook;
    ExecutorRun_hook = run_reads;
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = count_utility;
    prev_object_access = object_access_hook;
    object_access_hook = rewrite_created_function;
    RegisterXactCallback(forget_on_abort, nullptr);
    RegisterSubXactCallback(forget_on_subabort, nullptr);
    CacheRegisterRelcacheCallback(forget_trees_of_relation, (Datum)0);
    CacheRegisterSyscacheCallback(PROCOID, forget_trees_of_function, (Datum)0);
}

Query* analyze_stored_query(RawStmt* raw, const char* text) {
    Query* volatile analyzed = nullptr;
    utility_depth++;  // as inside CREATE VIEW: the union now, not at plan time
    PG_TRY();
    {
        analyzed = parse_analyze_fixedparams(raw, text, nullptr, 0, nullptr);
    }
    PG_FINALLY();
    { utility_depth--; }
    PG_END_TRY();
    return analyzed;
}

void read_entry_through(RangeTblEntry* rte, Query* sub) {
    rte->rtekind = RTE_SUBQUERY;
    rte->subquery = sub;
    rte->relid = InvalidOid;
    rte->relkind = 0;
    rte->rellockmode = NoLock;
    rte->tablesample = nullptr;
    rte->security_barrier = false;
    rte->lateral = false;
    rte->inh = false;
    rte->requiredPerms = 0;
    rte->checkAsUser = InvalidOid;
    rte->selectedCols = nullptr;
    rte->insertedCols = nullptr;
    rte->updatedCols = nullptr;
    rte->extraUpdatedCols = nullptr;
}

bool reads_are_rewritten(Oid relid) {
    bool found = false;
    const bool was_in_rewrite = in_rewrite;  // restored, not cleared: calls nest
    in_rewrite = true;
    PG_TRY();
    {
        refresh_cache();
        found = hash_search(read_cache, &relid, HASH_FIND, nullptr) != nullptr;
    }
    PG_FINALLY();
    { in_rewrite = was_in_rewrite; }
    PG_END_TRY();
    return found;
}

void catalog_changed_in_xact() {
    xact_changed_catalog = true;
    cache_loaded = false;
}

void as_of_mode_changed(bool now_set) {
    // Plans made for the state just left; a hash of 0 would mean "all".
    uint32 hash = marker_hash[now_set ? kPlannedLatest : kPlannedAsOf];
    if (hash != 0) CallSyscacheCallbacks(PROCOID, hash);
}

}  // namespace decoupled

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_execute_unrewritten);
PG_FUNCTION_INFO_V1(decoupled_reads_at_plan_time);
}

// decoupled._reads_at_plan_time() -> boolean: the mark of a statement whose
// reads of registered tables are decided at plan time.  The planner hook
// takes it out; were it ever run, it would change nothing.
Datum decoupled_reads_at_plan_time(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(true); }

// decoupled._execute_unrewritten(sql text): runs DDL whose queries must name
// a registered table itself (the extension's own views over it).
Datum decoupled_execute_unrewritten(PG_FUNCTION_ARGS) {
    char* sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
    suppress_depth++;
    PG_TRY();
    {
        SPI_connect();
        if (SPI_execute(sql, false, 0) < 0) elog(ERROR, "could not execute: %s", sql);
        SPI_finish();
    }
    PG_FINALLY();
    { suppress_depth--; }
    PG_END_TRY();
    PG_RETURN_VOID();
}
