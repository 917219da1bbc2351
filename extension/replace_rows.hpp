// A view step's replacement of rows without SQL (brief C13.2, C14.3): see
// replace_rows.cpp.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

struct Replacement {
    const char* name;  // the view's, for messages
    Oid stage;     // the scratch holding the rows staged at ts
    Oid cur;       // the view's history
    Oid dead;
    int ncols;     // the view's columns
    Datum tids;    // a tid[] of the cur rows replaced, or 0: every row of cur
    int64 ts;      // the step's time
};

// Replaces the rows of `r.cur` at `r.tids` (or all) with the rows staged in
// `r.stage`, consolidated per row: a staged row that one of them already is
// stays, the others are inserted at ts and the other old rows move to dead
// at ts, oldest copy first.  Sets how many old rows were to be retracted
// and how many were (only copies older than ts move: the caller reports a
// difference), and how many staged rows are not at ts (an error for the
// caller).  Errors if the storage or the stage is not laid out as
// _create_storage made them.
void replace_rows(const Replacement& r, int64* wanted, int64* moved, int64* outside);

}  // namespace decoupled
