// decoupled._weighted_sum(diff bigint, value bigint) -> numeric: the
// aggregate a kept-sums step sums a group's changes with (sum of
// diff * value, NULL values skipped, NULL when there is none), in 128-bit
// integers (core/weighted_sum.hpp) instead of numeric.  Its state is plain
// data in the aggregate's memory context; an overflow of the 128 bits is
// carried into a numeric, so the sum is exact whatever it adds.
//
// C-style C++: nothing with a destructor lives in a frame an ereport may
// leave.
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
}

#include "core/weighted_sum.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(decoupled_weighted_sum_step);
PG_FUNCTION_INFO_V1(decoupled_weighted_sum_final);
}

namespace {

struct State {
    decoupled::WeightedSum sum;
    Datum carried;  // numeric, or 0 while nothing overflowed
};
// palloc aligns to MAXIMUM_ALIGNOF only (core/weighted_sum.hpp says why).
static_assert(alignof(State) <= MAXIMUM_ALIGNOF, "State must fit palloc's alignment");

Datum numeric_of(__int128 v) {
    char buf[decoupled::kInt128DecimalSize];
    decoupled::int128_decimal(v, buf);
    return DirectFunctionCall3(numeric_in, CStringGetDatum(buf), ObjectIdGetDatum(InvalidOid),
                               Int32GetDatum(-1));
}

}  // namespace

// (state internal, diff bigint, value bigint) -> internal; not strict: a
// NULL value leaves the state as it is.
Datum decoupled_weighted_sum_step(PG_FUNCTION_ARGS) {
    MemoryContext aggcontext;
    if (!AggCheckCallContext(fcinfo, &aggcontext))
        elog(ERROR, "decoupled._weighted_sum_step called in non-aggregate context");
    State* state = PG_ARGISNULL(0) ? nullptr : reinterpret_cast<State*>(PG_GETARG_POINTER(0));
    if (PG_ARGISNULL(1) || PG_ARGISNULL(2)) {
        if (state == nullptr) PG_RETURN_NULL();
        PG_RETURN_POINTER(state);
    }
    if (state == nullptr) {
        state = static_cast<State*>(MemoryContextAllocZero(aggcontext, sizeof(State)));
        state->sum = decoupled::WeightedSum{};
    }
    int64 diff = PG_GETARG_INT64(1);
    int64 value = PG_GETARG_INT64(2);
    if (!decoupled::weighted_add(&state->sum, diff, value)) {
        MemoryContext caller = MemoryContextSwitchTo(aggcontext);
        Datum moved = numeric_of(state->sum.sum);
        state->carried = state->carried == 0
                             ? moved
                             : DirectFunctionCall2(numeric_add, state->carried, moved);
        MemoryContextSwitchTo(caller);
        state->sum.sum = 0;
        (void)decoupled::weighted_add(&state->sum, diff, value);
    }
    PG_RETURN_POINTER(state);
}

// (state internal) -> numeric
Datum decoupled_weighted_sum_final(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0)) PG_RETURN_NULL();
    const State* state = reinterpret_cast<const State*>(PG_GETARG_POINTER(0));
    if (!state->sum.any) PG_RETURN_NULL();
    Datum total = numeric_of(state->sum.sum);
    if (state->carried != 0) total = DirectFunctionCall2(numeric_add, state->carried, total);
    PG_RETURN_DATUM(total);
}
