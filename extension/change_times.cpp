// decoupled._change_times(inputs bigint[], from_ts bigint, to_ts bigint,
//                         max_count integer) -> bigint[]
//
// The times in [from_ts, to_ts) at which any of `inputs` changed, ascending,
// at most `max_count`: a row inserted (cur.mz_ts, dead.valid_from) or
// retracted (dead.valid_to) then.  Every view step starts here (C5.3, C13).
//
// Insertion and retraction times are found by skipping through the time
// indexes — one probe per distinct time, each the smallest time after the
// previous one — so a time at which 100,000 rows changed costs what a time
// with one row does.  A row retracted in the window that was inserted in it
// too is read directly (such rows are few: those retracted since the view's
// upper).  The statement's text depends on the inputs only, so its plan is
// kept (kept_statements.hpp) instead of planned at every step — and planned
// and run with sequential and bitmap scans off: a plan made while an
// input's dead was empty (just compacted) read all of it with a sequential
// scan for every probe once it had grown again, which made this a tenth of
// a 1,000-change step.
//
// No C++ objects: this may longjmp.
extern "C" {
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
}

#include "gucs.hpp"
#include "kept_statements.hpp"
#include "storage_names.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_change_times);
}

namespace {

// The distinct values of `column` in [$1, $2) of `relation`, at most $3,
// by successive index probes.
void skip_scan(StringInfo sql, const char* relation, const char* column) {
    appendStringInfo(sql,
                     "(WITH RECURSIVE s(t, n) AS ("
                     "   SELECT (SELECT pg_catalog.min(%2$s) FROM %1$s "
                     "            WHERE %2$s OPERATOR(pg_catalog.>=) $1 "
                     "              AND %2$s OPERATOR(pg_catalog.<) $2), 1 "
                     "   UNION ALL "
                     "   SELECT (SELECT pg_catalog.min(%2$s) FROM %1$s "
                     "            WHERE %2$s OPERATOR(pg_catalog.>) s.t "
                     "              AND %2$s OPERATOR(pg_catalog.<) $2), "
                     "          s.n OPERATOR(pg_catalog.+) 1 "
                     "     FROM s WHERE s.t IS NOT NULL AND s.n OPERATOR(pg_catalog.<) $3) "
                     " SELECT t FROM s WHERE t IS NOT NULL)",
                     relation, column);
}

}  // namespace

Datum decoupled_change_times(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 4; ++i)
        if (PG_ARGISNULL(i)) elog(ERROR, "_change_times: argument %d must not be null", i + 1);
    ArrayType* inputs = PG_GETARG_ARRAYTYPE_P(0);
    Datum* ids;
    bool* nulls;
    int n;
    deconstruct_array(inputs, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE, &ids, &nulls, &n);
    if (n == 0) PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));

    StringInfoData branches;
    initStringInfo(&branches);
    for (int i = 0; i < n; ++i) {
        if (nulls[i]) elog(ERROR, "_change_times: an input id is null");
        int64 id = DatumGetInt64(ids[i]);
        char* cur = decoupled::storage_name(id, "cur");
        char* dead = decoupled::storage_name(id, "dead");
        if (i > 0) appendStringInfoString(&branches, " UNION ");
        skip_scan(&branches, cur, "mz_ts");
        appendStringInfoString(&branches, " UNION ");
        skip_scan(&branches, dead, "valid_to");
        appendStringInfo(&branches,
                         " UNION (SELECT DISTINCT valid_from FROM %s "
                         "         WHERE valid_to OPERATOR(pg_catalog.>=) $1 "
                         "           AND valid_from OPERATOR(pg_catalog.>=) $1 "
                         "           AND valid_from OPERATOR(pg_catalog.<) $2 "
                         "         ORDER BY 1 LIMIT $3)",
                         dead);
    }
    char* sql = psprintf(
        "SELECT coalesce(pg_catalog.array_agg(t ORDER BY t), '{}'::pg_catalog.int8[]) "
        "  FROM (SELECT t FROM (%s) x(t) ORDER BY t LIMIT $3) y",
        branches.data);

    Oid types[3] = {INT8OID, INT8OID, INT4OID};
    Datum args[3] = {PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), PG_GETARG_DATUM(3)};
    MemoryContext caller = CurrentMemoryContext;
    SPI_connect();
    static const char* const probes_only[] = {"enable_seqscan", "enable_bitmapscan", nullptr};
    int level = decoupled::planner_settings_off(probes_only);
    int rc = SPI_execute_plan(decoupled::statement_plan(sql, 3, types), args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "could not read the change times");
    AtEOXact_GUC(true, level);
    bool isnull = false;
    Datum times = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    MemoryContext spi = MemoryContextSwitchTo(caller);
    Datum result = datumCopy(times, false, -1);
    MemoryContextSwitchTo(spi);
    SPI_finish();
    PG_RETURN_DATUM(result);
}
