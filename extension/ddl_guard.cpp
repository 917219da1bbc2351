// PostgreSQL's own DDL on the extension's objects (issue 10, brief C15.1).
//
// A ProcessUtility hook that does three small things before PostgreSQL runs
// a utility statement:
//
//  * DROP TABLE / VIEW / MATERIALIZED VIEW / FOREIGN TABLE without CASCADE
//    of the relation of a live collection or sink that other catalog
//    objects depend on is refused with the catalog's own error (2BP01,
//    naming the dependent views and sinks, hinting decoupled.drop()), not
//    with PostgreSQL's, whose detail would name a private written plan.
//  * ALTER TYPE ... RENAME VALUE of an enum, and ALTER TYPE ... ADD / DROP /
//    ALTER ATTRIBUTE of a composite type, that a live collection or sink
//    uses are refused: history matches rows by their text.
//  * DROP EXTENSION pg_decoupled first takes every relation it will drop
//    (and every table a capture trigger of it sits on) without waiting
//    while holding any: workers and sessions read the catalog in their own
//    order, and a DROP that locked tables one by one as it went deadlocked
//    with them (see lock_extension_relations).  Then it gives registered
//    tables the replica identity registration changed back, as
//    unregister_table does (give_back_replica_identities).
//  * It remembers whether the DROP (or DROP OWNED) statement being executed
//    cascades, for the sql_drop event trigger (decoupled._drop_cascades()):
//    an object the statement reaches is dropped through the catalog, and
//    its catalog dependents with it only if the statement said CASCADE.
//
// Unrelated statements cost a node-tag switch.  The catalog is read on
// behalf of an unprivileged session as catalog_access.hpp describes.
//
// No C++ objects live here: ereport may longjmp through this file.
extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include "catalog_access.hpp"
#include "caller.hpp"
#include "ddl_guard.hpp"
#include "familiar_ddl.hpp"
#include "gucs.hpp"
#include "read_rewrite.hpp"
#include "write_locks.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_drop_cascades);
PG_FUNCTION_INFO_V1(decoupled_dropping_owned_by);
PG_FUNCTION_INFO_V1(decoupled_alter_keeps_shape);
}

namespace {

ProcessUtility_hook_type prev_process_utility = nullptr;

// The DropBehavior of the innermost DROP / DROP OWNED statement being
// executed, -1 while the innermost utility statement is something else.
int current_drop_behavior = -1;

// The roles of the innermost DROP OWNED statement being executed (a list
// of OIDs in the statement's memory), NIL while the innermost utility
// statement is something else.
List* current_drop_owned_roles = NIL;

// Whether the innermost utility statement is an ALTER TABLE that leaves a
// registered table's shape, key and capture as they are
// (alter_keeps_shape): _check_relation_ddl lets it through.
bool current_alter_keeps_shape = false;

// Whether DROP EXTENSION is giving registered tables their own replica
// identity back (give_back_replica_identities): the extension's own ALTER
// TABLE, which _check_relation_ddl lets through.  Its event triggers fire
// whatever session_replication_role says, so that role cannot be the way.
bool giving_back_identities = false;

// A named trigger that is no capture trigger of the extension.
bool own_trigger(const AlterTableCmd* cmd) {
    return cmd->name != nullptr && strncmp(cmd->name, "decoupled_capture_", 18) != 0;
}

// A constraint that neither is nor replaces the table's primary key.
bool not_the_key(const AlterTableStmt* stmt, const AlterTableCmd* cmd) {
    if (cmd->subtype == AT_AddConstraint) {
        const auto* c = reinterpret_cast<const Constraint*>(cmd->def);
        return c != nullptr && IsA(c, Constraint) &&
               (c->contype == CONSTR_CHECK || c->contype == CONSTR_FOREIGN);
    }
    // AT_DropConstraint, AT_ValidateConstraint: by name.
    Oid rel = RangeVarGetRelid(stmt->relation, NoLock, true);
    if (!OidIsValid(rel) || cmd->name == nullptr) return false;
    Oid con = get_relation_constraint_oid(rel, cmd->name, true);
    if (!OidIsValid(con)) return false;
    HeapTuple tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(con));
    if (!HeapTupleIsValid(tuple)) return false;
    char type = reinterpret_cast<Form_pg_constraint>(GETSTRUCT(tuple))->contype;
    ReleaseSysCache(tuple);
    return type == CONSTRAINT_CHECK || type == CONSTRAINT_FOREIGN;
}

// ALTER TABLE subcommands that change neither a table's columns nor its
// key nor how its writes are captured: defaults, statistics, storage,
// options (decoupled.* options take another path: familiar_ddl.cpp),
// CHECK and foreign-key constraints, NOT NULL, the owner, clustering, the
// owner's own triggers.  Everything else on a registered table stays
// refused: its history is kept in its shape, and read with the extension's
// rights (row security, refused at registration, stays off).
bool alter_keeps_shape(const AlterTableStmt* stmt) {
    if (stmt->objtype != OBJECT_TABLE || stmt->cmds == NIL) return false;
    ListCell* lc;
    foreach (lc, stmt->cmds) {
        const auto* cmd = lfirst_node(AlterTableCmd, lc);
        switch (cmd->subtype) {
            case AT_ColumnDefault:
            case AT_SetStatistics:
            case AT_SetOptions:
            case AT_ResetOptions:
            case AT_SetStorage:
            case AT_SetCompression:
            case AT_SetRelOptions:
            case AT_ResetRelOptions:
            case AT_SetNotNull:
            case AT_DropNotNull:
            case AT_ChangeOwner:
            case AT_ClusterOn:
            case AT_DropCluster:
                break;
            case AT_EnableTrig:
            case AT_EnableAlwaysTrig:
            case AT_EnableReplicaTrig:
            case AT_DisableTrig:
                if (!own_trigger(cmd)) return false;
                break;
            case AT_AddConstraint:
            case AT_DropConstraint:
            case AT_ValidateConstraint:
                if (!not_the_key(stmt, cmd)) return false;
                break;
            default:
                return false;
        }
    }
    return true;
}

bool extension_installed() {
    return !creating_extension && OidIsValid(get_extension_oid("pg_decoupled", true));
}

// Runs `sql` as the catalog reader; the function it calls raises the
// catalog's error itself when it refuses.
void call_catalog_check(const char* sql, int nargs, Oid* types, Datum* args) {
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    if (SPI_execute_with_args(sql, nargs, types, args, nullptr, false, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not check the statement against the pg_decoupled catalog");
    SPI_finish();
    decoupled::restore_user(saved);
}

// May the current user drop `relid` (its owner or its schema's)?
bool may_drop(Oid relid) {
    return pg_class_ownercheck(relid, GetUserId()) ||
           pg_namespace_ownercheck(get_rel_namespace(relid), GetUserId());
}

// The relation kind a DROP of `type` removes ('\0' for other objects).
char dropped_relkind(ObjectType type) {
    switch (type) {
        case OBJECT_TABLE:
            return RELKIND_RELATION;
        case OBJECT_VIEW:
            return RELKIND_VIEW;
        case OBJECT_MATVIEW:
            return RELKIND_MATVIEW;
        case OBJECT_FOREIGN_TABLE:
            return RELKIND_FOREIGN_TABLE;
        default:
            return '\0';
    }
}

void check_relation_drop(DropStmt* stmt) {
    char relkind = dropped_relkind(stmt->removeType);
    if (stmt->behavior == DROP_CASCADE || relkind == '\0' || !extension_installed()) return;
    int n = 0;
    Datum* rels = static_cast<Datum*>(palloc(sizeof(Datum) * (list_length(stmt->objects) + 1)));
    ListCell* cell;
    foreach (cell, stmt->objects) {
        RangeVar* rv = makeRangeVarFromNameList(castNode(List, lfirst(cell)));
        Oid relid = RangeVarGetRelid(rv, NoLock, true);
        // A relation of another kind, or one the caller may not drop:
        // PostgreSQL's own error comes first.
        if (OidIsValid(relid) && get_rel_relkind(relid) == relkind && may_drop(relid))
            rels[n++] = ObjectIdGetDatum(relid);
    }
    if (n == 0) return;
    ArrayType* array = construct_array(rels, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT);
    Oid types[1] = {OIDARRAYOID};
    Datum args[1] = {PointerGetDatum(array)};
    call_catalog_check("SELECT decoupled._refuse_relation_drop($1)", 1, types, args);
}

// Whether `stmt` is a DROP EXTENSION of pg_decoupled by its owner (anyone
// else gets PostgreSQL's error, before any lock is taken on their behalf).
bool drops_this_extension(DropStmt* stmt) {
    if (stmt->removeType != OBJECT_EXTENSION) return false;
    ListCell* cell;
    foreach (cell, stmt->objects) {
        if (strcmp(strVal(lfirst(cell)), "pg_decoupled") != 0) continue;
        Oid ext = get_extension_oid("pg_decoupled", true);
        return OidIsValid(ext) && pg_extension_ownercheck(ext, GetUserId());
    }
    return false;
}

// Whether `stmt` is a DROP SCHEMA ... CASCADE of pg_decoupled's own schema
// by its owner: that drops the extension too, and is handled as DROP
// EXTENSION is (without CASCADE it fails on the extension's objects).
bool drops_extension_schema(DropStmt* stmt) {
    if (stmt->removeType != OBJECT_SCHEMA || stmt->behavior != DROP_CASCADE) return false;
    // The control file fixes the schema (schema = decoupled, not relocatable).
    Oid schema = get_namespace_oid("decoupled", true);
    if (!OidIsValid(schema) || !OidIsValid(get_extension_oid("pg_decoupled", true))) return false;
    ListCell* cell;
    foreach (cell, stmt->objects) {
        Oid nsp = get_namespace_oid(strVal(lfirst(cell)), true);
        if (OidIsValid(nsp) && nsp == schema) return pg_namespace_ownercheck(nsp, GetUserId());
    }
    return false;
}

// The role that owns pg_decoupled, InvalidOid if it is not installed.
Oid extension_owner() {
    Oid ext = get_extension_oid("pg_decoupled", true);
    if (!OidIsValid(ext)) return InvalidOid;
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(ext));
    SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, nullptr, 1, &key);
    HeapTuple tuple = systable_getnext(scan);
    Oid owner = HeapTupleIsValid(tuple)
                    ? reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple))->extowner
                    : InvalidOid;
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return owner;
}

// The roles a DROP OWNED names (those that exist).
List* drop_owned_roles(DropOwnedStmt* stmt) {
    List* roles = NIL;
    ListCell* cell;
    foreach (cell, stmt->roles) {
        Oid role = get_rolespec_oid(lfirst_node(RoleSpec, cell), true);
        if (OidIsValid(role)) roles = lappend_oid(roles, role);
    }
    return roles;
}

// DROP OWNED BY roles: what they own in the catalog's terms goes through
// the catalog first (_drop_owned_catalog says why), for a caller who may
// drop what they own (anyone else gets PostgreSQL's error first).
void drop_owned_catalog(DropOwnedStmt* stmt, List* roles) {
    if (roles == NIL || !extension_installed()) return;
    ListCell* role;
    foreach (role, roles)
        if (!has_privs_of_role(GetUserId(), lfirst_oid(role))) return;
    int n = 0;
    Datum* oids = static_cast<Datum*>(palloc(sizeof(Datum) * list_length(roles)));
    foreach (role, roles) oids[n++] = ObjectIdGetDatum(lfirst_oid(role));
    ArrayType* array = construct_array(oids, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT);
    // A catalog not yet updated to 1.1 has no such function.
    List* name = list_make2(makeString(pstrdup("decoupled")),
                            makeString(pstrdup("_drop_owned_catalog")));
    Oid types[2] = {OIDARRAYOID, BOOLOID};
    if (!OidIsValid(LookupFuncName(name, 2, types, true))) return;
    Datum args[2] = {PointerGetDatum(array), BoolGetDatum(stmt->behavior == DROP_CASCADE)};
    call_catalog_check("SELECT decoupled._drop_owned_catalog($1, $2)", 2, types, args);
}

// Whether `stmt` is a DROP OWNED BY the role that owns pg_decoupled, by a
// caller with that role's privileges (PostgreSQL's own rule for DROP
// OWNED): that drops the extension too, and is handled as DROP EXTENSION
// is.
bool drops_owned_extension(DropOwnedStmt* stmt) {
    Oid owner = extension_owner();
    if (!OidIsValid(owner)) return false;
    ListCell* cell;
    foreach (cell, stmt->roles) {
        Oid role = get_rolespec_oid(lfirst_node(RoleSpec, cell), true);
        if (role == owner) return has_privs_of_role(GetUserId(), role);
    }
    return false;
}

// The relations DROP EXTENSION pg_decoupled takes ACCESS EXCLUSIVE locks
// on: the extension's own and its storage, tables with its capture
// triggers, and registered tables whose replica identity registration
// changed (give_back_replica_identities).  In OID order.
List* extension_relations() {
    MemoryContext caller = CurrentMemoryContext;
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    if (SPI_execute("SELECT c.oid FROM pg_catalog.pg_class c "
                    " WHERE c.relnamespace OPERATOR(pg_catalog.=) ANY (ARRAY["
                    "   pg_catalog.to_regnamespace('decoupled'),"
                    "   pg_catalog.to_regnamespace('decoupled_storage')]::pg_catalog.oid[]) "
                    "   AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,S,f}'::pg_catalog.char[]) "
                    "UNION "
                    "SELECT t.tgrelid FROM pg_catalog.pg_trigger t "
                    "  JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid "
                    " WHERE p.pronamespace OPERATOR(pg_catalog.=) "
                    "       pg_catalog.to_regnamespace('decoupled') "
                    "UNION "
                    "SELECT r.oid FROM decoupled.catalog_objects o "
                    "  JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) o.relation::pg_catalog.oid "
                    " WHERE o.kind OPERATOR(pg_catalog.=) 'table' AND o.dropped_at IS NULL "
                    "   AND o.definition OPERATOR(pg_catalog.?) 'replica_identity' "
                    "ORDER BY 1",
                    true, 0) != SPI_OK_SELECT)
        elog(ERROR, "could not list the relations of pg_decoupled");
    List* relids = NIL;
    MemoryContext outer = MemoryContextSwitchTo(caller);
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull;
        Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (!isnull) relids = lappend_oid(relids, DatumGetObjectId(d));
    }
    MemoryContextSwitchTo(outer);
    SPI_finish();
    decoupled::restore_user(saved);
    return relids;
}

// DROP EXTENSION locks each object as it reaches it, in dependency order;
// the controller, replicas, the capture worker and sessions lock catalog
// tables in theirs.  Each holding what the other wants next, one of them
// died of `deadlock detected` (often the DROP right after a server start,
// when every replica registers).  So all are taken first, and a busy one is
// waited for holding nothing: the wait is an ordinary lock wait (visible in
// pg_locks, subject to lock_timeout) that cannot close a cycle.
void lock_extension_relations() {
    List* relids = extension_relations();
    for (;;) {
        Oid busy = decoupled::lock_all_without_waiting(relids, AccessExclusiveLock);
        if (!OidIsValid(busy)) return;
        LockRelationOid(busy, AccessExclusiveLock);
        UnlockRelationOid(busy, AccessExclusiveLock);
    }
}

// Registration set REPLICA IDENTITY FULL on tables without a primary key
// (C14.1); unregister_table gives a table its own back, and so does DROP
// EXTENSION, right before PostgreSQL drops the extension (its locks are
// already held: extension_relations).
void give_back_replica_identities() {
    // A catalog not yet updated from 1.0 has no such function: it keeps
    // what 1.0 did.
    List* name = list_make2(makeString(pstrdup("decoupled")),
                            makeString(pstrdup("_give_back_replica_identities")));
    if (!OidIsValid(LookupFuncName(name, 0, nullptr, true))) return;
    giving_back_identities = true;
    PG_TRY();
    { call_catalog_check("SELECT decoupled._give_back_replica_identities()", 0, nullptr, nullptr); }
    PG_FINALLY();
    { giving_back_identities = false; }
    PG_END_TRY();
}

// Refuses `change` of a type a live collection or sink uses; a caller who
// does not own the type gets PostgreSQL's error instead.
void check_type_change(Oid typid, const char* change) {
    if (!OidIsValid(typid) || !pg_type_ownercheck(typid, GetUserId())) return;
    Oid types[2] = {OIDOID, TEXTOID};
    Datum args[2] = {ObjectIdGetDatum(typid), CStringGetTextDatum(change)};
    call_catalog_check("SELECT decoupled._refuse_type_change($1, $2)", 2, types, args);
}

// ALTER TYPE ... RENAME VALUE changes the text of an enum's values.
void check_enum_rename(AlterEnumStmt* stmt) {
    if (stmt->oldVal == nullptr || !extension_installed()) return;
    check_type_change(LookupTypeNameOid(nullptr, makeTypeNameFromNameList(stmt->typeName), true),
                      "rename a value of");
}

// Whether `stmt` changes the columns of its relation's row type: ALTER
// TYPE ... ADD / DROP / ALTER ATTRIBUTE, and ALTER TABLE (VIEW, FOREIGN
// TABLE) ... ADD / DROP COLUMN or ALTER COLUMN TYPE.  (RENAME is a
// RenameStmt: the text of the values stays.)
bool changes_row_type(AlterTableStmt* stmt) {
    ListCell* cell;
    foreach (cell, stmt->cmds) {
        auto* cmd = lfirst_node(AlterTableCmd, cell);
        switch (cmd->subtype) {
            case AT_AddColumn:
            case AT_AddColumnToView:
            case AT_DropColumn:
            case AT_AlterColumnType:
                return true;
            default:
                break;
        }
    }
    return false;
}

// Such a change alters the text of the row type's values, which a column
// of a collection or sink may hold (a table's row type is a composite type
// like any).  Also of the relations it reaches beyond the one named: the
// tables inheriting from it (unless ONLY) and the typed tables of a
// composite type (ALTER TYPE ... CASCADE), with theirs.
void check_composite_change(AlterTableStmt* stmt) {
    if (!extension_installed() || !changes_row_type(stmt)) return;
    Oid relid = RangeVarGetRelid(stmt->relation, NoLock, true);
    if (!OidIsValid(relid)) return;
    const char* change =
        stmt->objtype == OBJECT_TYPE ? "change the attributes of" : "change the columns of";
    List* reached = NIL;
    if (stmt->objtype == OBJECT_TYPE) {
        // The typed tables of the type, and what inherits from them.
        Oid type = get_rel_type_id(relid);
        Relation classes = table_open(RelationRelationId, AccessShareLock);
        SysScanDesc scan = systable_beginscan(classes, InvalidOid, false, nullptr, 0, nullptr);
        HeapTuple tuple;
        while ((tuple = systable_getnext(scan)) != nullptr) {
            auto* form = (Form_pg_class)GETSTRUCT(tuple);
            if (form->reloftype == type)
                reached = list_concat(reached, find_all_inheritors(form->oid, NoLock, nullptr));
        }
        systable_endscan(scan);
        table_close(classes, AccessShareLock);
        reached = lcons_oid(relid, reached);
    } else if (stmt->relation->inh) {
        reached = find_all_inheritors(relid, NoLock, nullptr);
    } else {
        reached = list_make1_oid(relid);
    }
    ListCell* cell;
    foreach (cell, reached) check_type_change(get_rel_type_id(lfirst_oid(cell)), change);
}

// ALTER DOMAIN ... ADD CONSTRAINT on a domain a collection uses.  By a role
// that is not a superuser: its check would run with the extension's rights
// wherever history or a sink of the collection is written (creation refuses
// such domains: _check_columns).  NOT VALID, by anyone: rows of history
// written before it that break it could no longer be read back as the
// domain (capture, retractions), and capture would stall for every table.
// A superuser's validated constraint is checked against the storage too.
// SET NOT NULL is such a constraint: by a role that is not a superuser, a
// NULL its writers committed just before, still in the WAL, could no
// longer be read back as the domain.
void check_domain_constraint(AlterDomainStmt* stmt) {
    if (!extension_installed()) return;
    if (stmt->subtype == 'O') {
        if (superuser()) return;
        check_type_change(
            LookupTypeNameOid(nullptr, makeTypeNameFromNameList(stmt->typeName), true),
            "set NOT NULL on");
        return;
    }
    if (stmt->subtype != 'C') return;
    auto* constraint = castNode(Constraint, stmt->def);
    bool not_valid = constraint->skip_validation;
    if (superuser() && !not_valid) return;
    check_type_change(LookupTypeNameOid(nullptr, makeTypeNameFromNameList(stmt->typeName), true),
                      not_valid ? "add a NOT VALID constraint to" : "add a constraint to");
}

// The number of columns of relation `relid` (pg_class.relnatts), dropped
// ones included.
int relation_natts(Oid relid) {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple)) return 0;
    int natts = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relnatts;
    ReleaseSysCache(tuple);
    return natts;
}

// CREATE OR REPLACE VIEW of a view a maintained view reads.  (A written
// plan itself, in decoupled_storage, is the catalog's own to refuse.)
// Returns the view being replaced, if any, and its number of columns in
// *natts: a replacement may add columns to its row type, which a
// collection or sink may use (check_view_columns, once it ran).
Oid check_view_replace(ViewStmt* stmt, int* natts) {
    if (!stmt->replace) return InvalidOid;
    Oid relid = RangeVarGetRelid(stmt->view, NoLock, true);
    if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_VIEW ||
        get_rel_namespace(relid) == get_namespace_oid("decoupled_storage", true))
        return InvalidOid;
    decoupled::refuse_replacing(RelationRelationId, relid,
                                psprintf("view %s", get_rel_name(relid)));
    *natts = relation_natts(relid);
    return relid;
}

// After CREATE OR REPLACE VIEW: PostgreSQL only lets a replacement add
// columns at the end, so a view that kept its number of columns kept its
// row type (a new body alone changes no value's text) and is left alone;
// one that grew changes the text of every value of its row type, which
// is refused like ALTER TABLE ... ADD COLUMN (check_composite_change).
void check_view_columns(Oid view, int natts_before) {
    CommandCounterIncrement();
    if (relation_natts(view) != natts_before)
        check_type_change(get_rel_type_id(view), "add columns to the view of");
}

// ALTER FUNCTION of a function a maintained view reads, changing what it
// computes (its settings — search_path first —, volatility, strictness or
// security): refused like CREATE OR REPLACE.  Its cost, rows, parallel
// safety, leakproofness and support function only change plans.
void check_function_alter(AlterFunctionStmt* stmt) {
    bool changes_meaning = false;
    ListCell* lc;
    foreach (lc, stmt->actions) {
        const char* action = lfirst_node(DefElem, lc)->defname;
        changes_meaning |= strcmp(action, "set") == 0 || strcmp(action, "volatility") == 0 ||
                           strcmp(action, "strict") == 0 || strcmp(action, "security") == 0;
    }
    if (!changes_meaning) return;
    Oid fn = LookupFuncWithArgs(stmt->objtype, stmt->func, true);
    if (!OidIsValid(fn)) return;  // PostgreSQL says it does not exist
    decoupled::refuse_replacing(ProcedureRelationId, fn,
                                psprintf("function %s", format_procedure(fn)));
}

// ALTER FUNCTION ... OWNER TO of a SECURITY DEFINER function a maintained
// view reads: it runs as its owner, so the owner is part of what it
// computes (current_user, the privileges it reads with).
void check_function_owner(AlterOwnerStmt* stmt) {
    if (stmt->objectType != OBJECT_FUNCTION && stmt->objectType != OBJECT_PROCEDURE &&
        stmt->objectType != OBJECT_ROUTINE)
        return;
    Oid fn = LookupFuncWithArgs(stmt->objectType, castNode(ObjectWithArgs, stmt->object), true);
    if (!OidIsValid(fn)) return;
    HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
    if (!HeapTupleIsValid(tuple)) return;
    bool definer = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple))->prosecdef;
    ReleaseSysCache(tuple);
    if (!definer) return;
    decoupled::refuse_replacing(ProcedureRelationId, fn,
                                psprintf("the owner of function %s", format_procedure(fn)));
}

// REASSIGN OWNED BY: the same for every SECURITY DEFINER function the
// roles own.
void check_reassign_owned(ReassignOwnedStmt* stmt) {
    Oid types[3] = {OIDOID, OIDOID, TEXTOID};
    List* check =
        list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup("_refuse_replacing")));
    if (!OidIsValid(LookupFuncName(check, 3, types, true))) return;  // a 1.0 catalog
    int n = 0;
    Datum* roles = static_cast<Datum*>(palloc(sizeof(Datum) * Max(list_length(stmt->roles), 1)));
    ListCell* lc;
    foreach (lc, stmt->roles) {
        Oid role = get_rolespec_oid(lfirst_node(RoleSpec, lc), true);
        if (OidIsValid(role)) roles[n++] = ObjectIdGetDatum(role);
    }
    if (n == 0) return;
    Oid array_type = OIDARRAYOID;
    Datum array = PointerGetDatum(construct_array(roles, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
    // One row, every function checked: the check is an aggregate's argument
    // (it is STABLE, so a subquery's unused output would be dropped).
    call_catalog_check(
        "SELECT pg_catalog.count(decoupled._refuse_replacing("
        "    'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid,"
        "    'the owner of function ' OPERATOR(pg_catalog.||) p.oid::pg_catalog.regprocedure::pg_catalog.text))"
        "  FROM pg_catalog.pg_proc p"
        " WHERE p.prosecdef AND p.proowner OPERATOR(pg_catalog.=) ANY ($1)",
        1, &array_type, &array);
}

// DROP ROLE of a role that created live views or sinks: their computations
// run as that role (definition->'owner', which no pg_shdepend row
// records), so they would stall for good under a dangling role id — that
// a dump carries, and a restore may find taken by another role.
void check_role_drop(DropRoleStmt* stmt) {
    int n = 0;
    Datum* roles = static_cast<Datum*>(palloc(sizeof(Datum) * Max(list_length(stmt->roles), 1)));
    ListCell* lc;
    foreach (lc, stmt->roles) {
        Oid role = get_rolespec_oid(lfirst_node(RoleSpec, lc), true);
        if (OidIsValid(role)) roles[n++] = ObjectIdGetDatum(role);
    }
    if (n == 0) return;
    Oid array_type = OIDARRAYOID;
    Datum array = PointerGetDatum(construct_array(roles, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
    MemoryContext caller = CurrentMemoryContext;
    char* role_name = nullptr;
    char* objects = nullptr;
    decoupled::SavedUser saved = decoupled::become_catalog_reader();
    SPI_connect();
    if (SPI_execute_with_args(
            "SELECT r.rolname::pg_catalog.text,"
            "       pg_catalog.string_agg(pg_catalog.format('%s \"%s\"', o.kind, o.name), ', '"
            "                             ORDER BY o.lifetime_id)"
            "  FROM decoupled.catalog_objects o"
            "  JOIN pg_catalog.pg_roles r"
            "    ON r.oid OPERATOR(pg_catalog.=) (o.definition OPERATOR(pg_catalog.->>) 'owner')::pg_catalog.oid"
            " WHERE o.dropped_at IS NULL AND r.oid OPERATOR(pg_catalog.=) ANY ($1)"
            " GROUP BY r.rolname ORDER BY 1 LIMIT 1",
            1, &array_type, &array, nullptr, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "could not check the statement against the pg_decoupled catalog");
    if (SPI_processed > 0) {
        role_name = MemoryContextStrdup(
            caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
        objects = MemoryContextStrdup(
            caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
    }
    SPI_finish();
    decoupled::restore_user(saved);
    if (role_name != nullptr)
        ereport(ERROR,
                (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
                 errmsg("role \"%s\" cannot be dropped because it created objects of the "
                        "pg_decoupled catalog",
                        role_name),
                 errdetail("Created by it (they are computed as it): %s.", objects),
                 errhint("Drop them with decoupled.drop() first.")));
}

// The checks above, then PostgreSQL (or the hook before ours).
void run_checked(const decoupled::UtilityCall& call, PlannedStmt* pstmt) {
    Node* stmt = pstmt->utilityStmt;
    int behavior = -1;
    // Whether the statement removes the extension, by whichever path: its
    // relations are then taken first, and the registered tables' replica
    // identities given back before PostgreSQL drops them.
    bool removes_extension = false;
    List* drop_owned = NIL;  // a DROP OWNED's roles
    // Read after PG_TRY (the statement's own longjmp never returns here).
    volatile Oid replaced_view = InvalidOid;
    volatile int replaced_natts = 0;
    switch (nodeTag(stmt)) {
        case T_DropStmt:
            check_relation_drop(castNode(DropStmt, stmt));
            removes_extension = drops_this_extension(castNode(DropStmt, stmt)) ||
                                drops_extension_schema(castNode(DropStmt, stmt));
            behavior = castNode(DropStmt, stmt)->behavior;
            break;
        case T_DropOwnedStmt:
            removes_extension = drops_owned_extension(castNode(DropOwnedStmt, stmt));
            behavior = castNode(DropOwnedStmt, stmt)->behavior;
            drop_owned = drop_owned_roles(castNode(DropOwnedStmt, stmt));
            break;
        case T_AlterEnumStmt:
            check_enum_rename(castNode(AlterEnumStmt, stmt));
            break;
        case T_AlterTableStmt:
            check_composite_change(castNode(AlterTableStmt, stmt));
            break;
        case T_AlterDomainStmt:
            check_domain_constraint(castNode(AlterDomainStmt, stmt));
            break;
        case T_ViewStmt:
            if (extension_installed()) {
                int natts = 0;
                replaced_view = check_view_replace(castNode(ViewStmt, stmt), &natts);
                replaced_natts = natts;
            }
            break;
        case T_AlterFunctionStmt:
            if (extension_installed()) check_function_alter(castNode(AlterFunctionStmt, stmt));
            break;
        case T_AlterOwnerStmt:
            if (extension_installed()) check_function_owner(castNode(AlterOwnerStmt, stmt));
            break;
        case T_ReassignOwnedStmt:
            if (extension_installed()) check_reassign_owned(castNode(ReassignOwnedStmt, stmt));
            break;
        case T_DropRoleStmt:
            if (extension_installed()) check_role_drop(castNode(DropRoleStmt, stmt));
            break;
        default:
            break;
    }
    if (removes_extension) {
        lock_extension_relations();
        give_back_replica_identities();
    }
    int outer = current_drop_behavior;
    current_drop_behavior = behavior;
    List* outer_owned = current_drop_owned_roles;
    current_drop_owned_roles = drop_owned;
    bool outer_keeps_shape = current_alter_keeps_shape;
    current_alter_keeps_shape =
        IsA(stmt, AlterTableStmt) && alter_keeps_shape(castNode(AlterTableStmt, stmt));
    // A drop records who issued it: the catalog's sql_drop trigger runs
    // with the extension's rights, and a schema's owner may drop what
    // others made there (DROP SCHEMA ... CASCADE) — not their views' and
    // sinks' history (_on_sql_drop asks _caller()).
    // So does any statement that may drop objects by cascade: ALTER TABLE
    // ... DROP COLUMN, ALTER TYPE ... DROP ATTRIBUTE, ALTER DOMAIN ... DROP
    // CONSTRAINT, each with CASCADE.  Without a frame the trigger saw its
    // own rights, and a role that may alter a type another role's view
    // reads dropped that view and its history.
    bool drops = (behavior >= 0 || IsA(stmt, AlterTableStmt) || IsA(stmt, AlterDomainStmt)) &&
                 extension_installed();
    decoupled::CallerFrame* frame = nullptr;
    if (drops) {
        frame = static_cast<decoupled::CallerFrame*>(palloc0(sizeof(decoupled::CallerFrame)));
        decoupled::push_caller_frame(frame);
    }
    List* volatile owned_first = drop_owned != NIL && !removes_extension ? drop_owned : NIL;
    PG_TRY();
    {
        // Inside the statement's frame, where a sink dropped knows it goes
        // with its creator's objects (_dropping_owned_by).
        if (owned_first != NIL) drop_owned_catalog(castNode(DropOwnedStmt, stmt), owned_first);
        if (prev_process_utility)
            prev_process_utility(pstmt, call.query_string, call.read_only_tree, call.context,
                                 call.params, call.query_env, call.dest, call.qc);
        else
            standard_ProcessUtility(pstmt, call.query_string, call.read_only_tree, call.context,
                                    call.params, call.query_env, call.dest, call.qc);
    }
    PG_FINALLY();
    {
        current_drop_behavior = outer;
        current_drop_owned_roles = outer_owned;
        current_alter_keeps_shape = outer_keeps_shape;
        if (frame != nullptr) decoupled::pop_caller_frame(frame);
    }
    PG_END_TRY();
    if (OidIsValid(replaced_view)) check_view_columns(replaced_view, replaced_natts);
}

// COPY t TO of a registered table reads the table itself, which is its
// latest state: with decoupled.as_of set it becomes COPY (SELECT ... FROM
// t) TO, whose query the read rewrite turns into a read at that time, as
// every other read of t is.
PlannedStmt* copy_as_of(PlannedStmt* pstmt) {
    auto* stmt = castNode(CopyStmt, pstmt->utilityStmt);
    if (stmt->is_from || stmt->relation == nullptr || !decoupled::as_of_set() ||
        !ActiveSnapshotSet() || !extension_installed())
        return pstmt;
    Oid relid = RangeVarGetRelid(stmt->relation, NoLock, true);
    if (!OidIsValid(relid) || !decoupled::reads_are_rewritten(relid)) return pstmt;
    // The columns COPY itself would write: the list given, else every
    // column that is neither dropped nor generated.  A list PostgreSQL
    // refuses (a generated column, one named twice, an unknown one) is
    // left to it, unchanged.
    List* names = NIL;
    if (stmt->attlist == NIL) {
        // User columns are numbered 1..n, dropped ones included.
        for (AttrNumber a = 1;; ++a) {
            HeapTuple tuple = SearchSysCacheAttNum(relid, a);
            if (!HeapTupleIsValid(tuple)) break;
            auto* att = reinterpret_cast<Form_pg_attribute>(GETSTRUCT(tuple));
            if (!att->attisdropped && att->attgenerated == '\0')
                names = lappend(names, pstrdup(NameStr(att->attname)));
            ReleaseSysCache(tuple);
        }
    } else {
        ListCell* lc;
        foreach (lc, stmt->attlist) {
            const char* name = strVal(lfirst(lc));
            AttrNumber a = get_attnum(relid, name);
            if (a <= 0 || get_attgenerated(relid, a) != '\0') return pstmt;
            ListCell* seen;
            foreach (seen, names)
                if (strcmp(static_cast<char*>(lfirst(seen)), name) == 0) return pstmt;
            names = lappend(names, pstrdup(name));
        }
    }
    if (names == NIL) return pstmt;
    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfoString(&sql, "SELECT ");
    ListCell* lc;
    foreach (lc, names)
        appendStringInfo(&sql, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
                         quote_identifier(static_cast<char*>(lfirst(lc))));
    appendStringInfo(&sql, " FROM %s",
                     quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
                                                get_rel_name(relid)));
    List* raw = raw_parser(sql.data, RAW_PARSE_DEFAULT);
    PlannedStmt* copy = static_cast<PlannedStmt*>(copyObjectImpl(pstmt));
    auto* rewritten = castNode(CopyStmt, copy->utilityStmt);
    rewritten->query = linitial_node(RawStmt, raw)->stmt;
    rewritten->relation = nullptr;
    rewritten->attlist = NIL;
    return copy;
}

void guard_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                   ProcessUtilityContext context, ParamListInfo params,
                   QueryEnvironment* query_env, DestReceiver* dest, QueryCompletion* qc) {
    if (IsA(pstmt->utilityStmt, CopyStmt)) pstmt = copy_as_of(pstmt);
    decoupled::UtilityCall call{run_checked, query_string, read_only_tree, context,
                                params,      query_env,    dest,           qc};
    // PostgreSQL's statements on the extension's objects (familiar_ddl.cpp).
    if (decoupled::familiar_ddl_candidate(pstmt->utilityStmt) && extension_installed()) {
        (void)decoupled::run_familiar_ddl(pstmt, query_string, qc, call);
        return;
    }
    run_checked(call, pstmt);
}

}  // namespace

// NULL unless the innermost utility statement running is a DROP or DROP
// OWNED; then whether it cascades.
// decoupled._alter_keeps_shape(): whether the ALTER TABLE being executed
// changes nothing of a registered table that its history or capture
// depends on (alter_keeps_shape above).
Datum decoupled_alter_keeps_shape(PG_FUNCTION_ARGS) {
    (void)fcinfo;
    PG_RETURN_BOOL(current_alter_keeps_shape || giving_back_identities);
}

// decoupled._dropping_owned_by(role oid) -> boolean: whether the innermost
// utility statement is a DROP OWNED BY `role` (among others).
Datum decoupled_dropping_owned_by(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(!PG_ARGISNULL(0) &&
                   list_member_oid(current_drop_owned_roles, PG_GETARG_OID(0)));
}

Datum decoupled_drop_cascades(PG_FUNCTION_ARGS) {
    (void)fcinfo;
    if (current_drop_behavior < 0) PG_RETURN_NULL();
    PG_RETURN_BOOL(current_drop_behavior == DROP_CASCADE);
}

void decoupled::refuse_replacing(Oid cls, Oid obj, const char* what) {
    if (!extension_installed()) return;
    Oid types[3] = {OIDOID, OIDOID, TEXTOID};
    // A catalog not yet updated to 1.1 has no such check (and nothing to
    // check it with): this library keeps maintaining it as it is.
    List* name =
        list_make2(makeString(pstrdup("decoupled")), makeString(pstrdup("_refuse_replacing")));
    if (!OidIsValid(LookupFuncName(name, 3, types, true))) return;
    Datum args[3] = {ObjectIdGetDatum(cls), ObjectIdGetDatum(obj), CStringGetTextDatum(what)};
    call_catalog_check("SELECT decoupled._refuse_replacing($1, $2, $3)", 3, types, args);
}

void decoupled::install_ddl_guard() {
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = guard_utility;
}
