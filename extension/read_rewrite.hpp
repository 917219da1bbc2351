// Reads of registered tables (read_rewrite.cpp): the parse-analysis rewrite,
// the plan-time choice of its branch, and the plans that choice invalidates.
#pragma once

namespace decoupled {

void install_read_rewrite();

// decoupled.as_of changed between set and unset: the cached plans made for
// the other state are planned again at their next use.
void as_of_mode_changed(bool now_set);

}  // namespace decoupled
