// Reads of registered tables (read_rewrite.cpp): the parse-analysis rewrite,
// the plan-time choice of its branch, and the plans that choice invalidates.
#pragma once

struct Query;
struct RangeTblEntry;
struct RawStmt;

namespace decoupled {

void install_read_rewrite();

// decoupled.as_of changed between set and unset: the cached plans made for
// the other state are planned again at their next use.
void as_of_mode_changed(bool now_set);

// This transaction changed the catalog (decoupled._begin_catalog_change):
// the registered tables it reads from now on are the ones it sees, its own
// registrations and unregistrations included, not those of the last
// committed version (a view created in the transaction that registers its
// input must find that input a collection).
void catalog_changed_in_xact();

// Parse analysis of a query a relation will store (a view's), as inside
// CREATE VIEW: its reads of registered tables hold the gated union, not
// left to plan time.
Query* analyze_stored_query(RawStmt* raw, const char* text);

// Turns a relation's (or view's) range table entry into a read of `sub`,
// keeping its alias and column names; permissions are `sub`'s own.
void read_entry_through(RangeTblEntry* rte, Query* sub);

// Whether reads of relation `relid` are rewritten: a registered table.
// Needs a transaction and a snapshot.
bool reads_are_rewritten(unsigned int relid);

}  // namespace decoupled
