// Debug wait points: see wait_points.hpp.
extern "C" {
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
}

#include <cstring>

#include "gucs.hpp"
#include "wait_points.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_wait_point_key);
PG_FUNCTION_INFO_V1(decoupled_wait_point);
}

namespace {

int64 point_key(const char* name, size_t len) {
    return (int64)hash_bytes_extended(reinterpret_cast<const unsigned char*>(name), (int)len,
                                      0x646563);  // "dec"
}

// Whether the comma-separated decoupled.wait_points names `name`.
bool honoured(const char* name) {
    const char* list = decoupled::guc_wait_points;
    if (!list || !*list) return false;
    size_t len = strlen(name);
    for (const char* p = list; *p;) {
        while (*p == ' ' || *p == ',') ++p;
        const char* end = p;
        while (*end && *end != ',') ++end;
        const char* last = end;
        while (last > p && last[-1] == ' ') --last;
        if ((size_t)(last - p) == len && strncmp(p, name, len) == 0) return true;
        p = end;
    }
    return false;
}

}  // namespace

namespace decoupled {

void wait_point(const char* name) {
    if (!honoured(name)) return;
    // The key as pg_advisory_lock(bigint) takes it, shared for the rest of
    // the transaction: waits while a test holds it exclusively.
    uint64 key = (uint64)point_key(name, strlen(name));
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32)(key >> 32), (uint32)key, 1);
    (void)LockAcquire(&tag, ShareLock, false, false);
}

}  // namespace decoupled

// decoupled.wait_point_key(name): the advisory lock key of a point.
extern "C" Datum decoupled_wait_point_key(PG_FUNCTION_ARGS) {
    text* name = PG_GETARG_TEXT_PP(0);
    PG_RETURN_INT64(point_key(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)));
}

// decoupled._wait_point(name): a point in PL/pgSQL code.
extern "C" Datum decoupled_wait_point(PG_FUNCTION_ARGS) {
    decoupled::wait_point(text_to_cstring(PG_GETARG_TEXT_PP(0)));
    PG_RETURN_VOID();
}
