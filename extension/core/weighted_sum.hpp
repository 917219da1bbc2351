// The sum of diff * value over a group's changes, for kept sums of integers
// (brief C13.2): what a view step adds to a group's kept sum.
//
// Why.  The step summed `diff::numeric * value::numeric`: two conversions,
// a multiplication and an addition in numeric, each allocating, for every
// changed row of every view — with ten views over one table under writers
// that arithmetic was a visible part of the replica's CPU.  A product of
// two 64-bit integers fits in 128 bits, and so do sums of many of them: the
// aggregate (extension/weighted_sum_aggregate.cpp) adds them here and
// carries into numeric only when a sum would overflow, so the result is
// exact, as numeric's was.  Pure logic, no allocation, unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>

namespace decoupled {

// A 128-bit integer aligned as a 64-bit one, as PostgreSQL's own int128:
// the aggregate's state lives in memory PostgreSQL allocates, aligned to 8
// bytes only, and the compiler may store a 16-byte-aligned __int128 with
// instructions that fault on anything less (a sum that overflowed crashed
// the server).
typedef __int128 int128_a8 __attribute__((aligned(8)));

struct WeightedSum {
    int128_a8 sum = 0;
    bool any = false;  // something was added (NULL values are not)
};
static_assert(alignof(WeightedSum) <= 8, "palloc'd state must need no more than 8-byte alignment");

// Adds diff * value to s->sum and returns true; false, with s unchanged,
// when the sum would overflow 128 bits: the caller carries s->sum away,
// sets it to 0 and adds again (a single product never overflows).
bool weighted_add(WeightedSum* s, int64_t diff, int64_t value);

// Room int128_decimal needs: a sign, 39 digits and a NUL.
constexpr std::size_t kInt128DecimalSize = 41;

// Writes the decimal text of v, NUL-terminated, into buf (of at least
// kInt128DecimalSize bytes); returns its length.
std::size_t int128_decimal(__int128 v, char* buf);

}  // namespace decoupled
