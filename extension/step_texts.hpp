// The statement texts a view's step derives, kept per backend (brief C13,
// C14.3): see step_texts.cpp.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// Which of a step's derived statements a text is.
enum class StepText {
    kChangeSums,  // _stage_sums: the changes' counts and sums per group
    kKeptRows,    // _stage_kept: the touched groups' rows from the state
};

// A copy (palloc'd) of the text kept for statement `kind` of the view whose
// written plan is `plan` (and its `flag`), or nullptr if there is none.
const char* kept_step_text(Oid plan, StepText kind, bool* flag);

// Keeps `text` (copied) and `flag` for statement `kind` of `plan`.
void keep_step_text(Oid plan, StepText kind, const char* text, bool flag);

}  // namespace decoupled
