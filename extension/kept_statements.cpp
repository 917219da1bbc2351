// Plans kept for the statements a view's step derives (kept_statements.hpp).
//
// Entries are found by a hash of (user, parameter types, text) and compared
// in full.  The text is the whole key: it names every relation by its
// qualified name and every operator by its schema, and the plan cache
// analyzes it again from its raw form when a relation it names changes, so
// an entry stays right when a lifetime id is reused by other storage.  The
// user is part of the key because a step runs as the view's owner and a
// plan may depend on who runs it (row security).
//
// Memory.  At most kMaxPlans are kept in a backend (a step of a `sums` view
// keeps five, a `linear` one one); when a new one needs room, the least
// recently used entry goes.  An entry used by the current transaction is
// never freed — a statement may be running from it further up the stack —
// so when all of them are in use the new text runs once instead.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include <cstring>

#include "kept_statements.hpp"

namespace {

constexpr long kMaxPlans = 128;
constexpr int kMaxArgs = 4;

struct Key {
    uint32 hash;
    Oid user;
};

struct Entry {
    Key key;  // first: dynahash's key
    char* sql;
    int nargs;
    Oid types[kMaxArgs];
    SPIPlanPtr plan;
    uint64 last_used;
    uint64 used_in;  // the transaction generation that last used it
};

HTAB* entries = nullptr;
MemoryContext cache_context = nullptr;
long nplans = 0;
uint64 use_count = 0;
// Bumped at the end of every transaction: an entry whose used_in is the
// current generation may have a statement running from it.
uint64 generation = 1;

void end_of_transaction(XactEvent event, void*) {
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
        event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
        event == XACT_EVENT_PREPARE)
        generation++;
}

void ensure_cache() {
    if (entries) return;
    cache_context =
        AllocSetContextCreate(TopMemoryContext, "decoupled step plans", ALLOCSET_SMALL_SIZES);
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = sizeof(Key);
    ctl.entrysize = sizeof(Entry);
    ctl.hcxt = cache_context;
    entries = hash_create("decoupled step plans", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    RegisterXactCallback(end_of_transaction, nullptr);
}

void forget(Entry* e) {
    if (e->plan) {
        SPI_freeplan(e->plan);
        nplans--;
    }
    if (e->sql) pfree(e->sql);
    Key key = e->key;
    hash_search(entries, &key, HASH_REMOVE, nullptr);
}

// Frees the least recently used entry no statement may be running from;
// false when there is none.
bool make_room() {
    Entry* oldest = nullptr;
    HASH_SEQ_STATUS status;
    hash_seq_init(&status, entries);
    while (auto* e = static_cast<Entry*>(hash_seq_search(&status)))
        if (e->used_in != generation && (!oldest || e->last_used < oldest->last_used)) oldest = e;
    if (!oldest) return false;
    forget(oldest);
    return true;
}

Key key_of(const char* sql, int nargs, const Oid* types) {
    Oid user = GetUserId();
    uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(sql), strlen(sql));
    h = hash_combine(h, hash_bytes(reinterpret_cast<const unsigned char*>(&user), sizeof(user)));
    if (nargs > 0)
        h = hash_combine(h, hash_bytes(reinterpret_cast<const unsigned char*>(types),
                                       sizeof(Oid) * nargs));
    return Key{h, user};
}

bool same(const Entry* e, const char* sql, int nargs, const Oid* types) {
    return e->nargs == nargs && memcmp(e->types, types, sizeof(Oid) * nargs) == 0 &&
           strcmp(e->sql, sql) == 0;
}

}  // namespace

SPIPlanPtr decoupled::kept_statement(const char* sql, int nargs, const Oid* types) {
    if (nargs > kMaxArgs) return nullptr;
    ensure_cache();
    Key key = key_of(sql, nargs, types);
    bool found = false;
    auto* e = static_cast<Entry*>(hash_search(entries, &key, HASH_FIND, &found));
    if (e && !same(e, sql, nargs, types)) {
        // Another text with the same hash: it goes unless it is in use.
        if (e->used_in == generation) return nullptr;
        forget(e);
        e = nullptr;
    }
    if (!e) {
        if (nplans >= kMaxPlans && !make_room()) return nullptr;
        // Prepared before the entry exists: an error leaves no half entry.
        SPIPlanPtr plan =
            SPI_prepare_cursor(sql, nargs, const_cast<Oid*>(types),
                               CURSOR_OPT_GENERIC_PLAN | CURSOR_OPT_PARALLEL_OK);
        if (!plan)
            elog(ERROR, "could not prepare a step statement: %s",
                 SPI_result_code_string(SPI_result));
        if (SPI_keepplan(plan) != 0) elog(ERROR, "could not keep a step statement's plan");
        e = static_cast<Entry*>(hash_search(entries, &key, HASH_ENTER, &found));
        e->sql = MemoryContextStrdup(cache_context, sql);
        e->nargs = nargs;
        memset(e->types, 0, sizeof(e->types));
        if (nargs > 0) memcpy(e->types, types, sizeof(Oid) * nargs);
        e->plan = plan;
        nplans++;
    }
    e->last_used = ++use_count;
    e->used_in = generation;
    return e->plan;
}

SPIPlanPtr decoupled::statement_plan(const char* sql, int nargs, const Oid* types, bool keep) {
    SPIPlanPtr plan = keep ? kept_statement(sql, nargs, types) : nullptr;
    if (plan) return plan;
    plan = SPI_prepare_cursor(sql, nargs, const_cast<Oid*>(types), CURSOR_OPT_PARALLEL_OK);
    if (!plan) elog(ERROR, "could not prepare %s: %s", sql, SPI_result_code_string(SPI_result));
    return plan;
}

int decoupled::execute_kept(const char* sql, bool read_only, long count) {
    return SPI_execute_plan(statement_plan(sql, 0, nullptr), nullptr, nullptr, read_only, count);
}

int decoupled::execute_into(SPIPlanPtr plan, const Datum* value, Oid type, DestReceiver* dest) {
    SPIExecuteOptions options;
    memset(&options, 0, sizeof(options));
    options.dest = dest;
    if (value) {
        options.params = makeParamList(1);
        options.params->params[0].value = *value;
        options.params->params[0].isnull = false;
        options.params->params[0].pflags = PARAM_FLAG_CONST;
        options.params->params[0].ptype = type;
    }
    return SPI_execute_plan_extended(plan, &options);
}
