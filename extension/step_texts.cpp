// The statement texts a view's step derives, kept per backend (brief C13,
// C14.3).
//
// Why.  A step of a view maintained by kept sums derives its statements
// from the written plan: it reads the plan's query tree, walks it, and
// deparses the result to SQL.  The text is the same at every step (the
// step's time is a parameter, storage is named by lifetime id), and the
// plan kept for it (kept_statements.hpp) is found by that text — yet
// making the text again was about a third of what _stage_sums cost a
// small step, with ten views stepping ten times a second
// (docs/performance.md).
//
// What.  Texts are kept per (plan, kind) in this backend.  They go, all
// of them, whenever the catalog moved (its shared epoch: a view created,
// dropped or changed), any relation is invalidated in this backend (a
// plan, an input or its storage changed — or a mere ANALYZE: a text is
// cheap to make again), or a transaction aborts (what it saw of the
// catalog may never have been committed).  A kept text is only a faster
// way to the text the step would make; the plan kept for it is planned
// again by PostgreSQL whenever what it reads changes.
//
// C-style: callers may longjmp through these functions.
extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
}

#include "shmem.hpp"
#include "step_texts.hpp"

namespace {

struct TextKey {
    Oid plan;
    int kind;
};

struct TextEntry {
    TextKey key;
    char* text;
    bool flag;
};

HTAB* texts = nullptr;
MemoryContext texts_context = nullptr;
uint64 texts_epoch = 0;
bool callbacks_registered = false;

void forget_texts() {
    if (texts_context != nullptr) MemoryContextReset(texts_context);
    texts = nullptr;
}

void forget_on_relcache(Datum, Oid) { forget_texts(); }

void forget_on_abort(XactEvent event, void*) {
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) forget_texts();
}

// The table of texts, empty if the catalog moved since they were made.
HTAB* current_texts() {
    if (!callbacks_registered) {
        CacheRegisterRelcacheCallback(forget_on_relcache, (Datum)0);
        RegisterXactCallback(forget_on_abort, nullptr);
        callbacks_registered = true;
    }
    uint64 epoch = pg_atomic_read_u64(&decoupled::shared_state()->catalog_epoch);
    if (epoch != texts_epoch) {
        forget_texts();
        texts_epoch = epoch;
    }
    if (texts == nullptr) {
        if (texts_context == nullptr)
            texts_context = AllocSetContextCreate(TopMemoryContext, "pg_decoupled step texts",
                                                  ALLOCSET_SMALL_SIZES);
        HASHCTL ctl;
        ctl.keysize = sizeof(TextKey);
        ctl.entrysize = sizeof(TextEntry);
        ctl.hcxt = texts_context;
        texts = hash_create("pg_decoupled step texts", 64, &ctl,
                            HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    }
    return texts;
}

TextKey text_key(Oid plan, decoupled::StepText kind) {
    TextKey key;
    memset(&key, 0, sizeof(key));  // hashed as bytes, padding included
    key.plan = plan;
    key.kind = static_cast<int>(kind);
    return key;
}

}  // namespace

namespace decoupled {

const char* kept_step_text(Oid plan, StepText kind, bool* flag) {
    TextKey key = text_key(plan, kind);
    auto* entry = static_cast<TextEntry*>(hash_search(current_texts(), &key, HASH_FIND, nullptr));
    if (entry == nullptr) return nullptr;
    if (flag != nullptr) *flag = entry->flag;
    // A copy in the caller's context: an invalidation while the caller runs
    // it (taking a lock reads them) empties the table.
    return pstrdup(entry->text);
}

void keep_step_text(Oid plan, StepText kind, const char* text, bool flag) {
    TextKey key = text_key(plan, kind);
    HTAB* table = current_texts();
    char* copy = MemoryContextStrdup(texts_context, text);
    bool found = false;
    auto* entry = static_cast<TextEntry*>(hash_search(table, &key, HASH_ENTER, &found));
    entry->text = copy;
    entry->flag = flag;
}

}  // namespace decoupled
