// Record literals: how one value is written as a field of a composite
// value's text form, the form record_in reads back (WAL capture emits each
// captured row this way, as a row of its collection's pending table).
// Pure logic, unit-tested.
#pragma once

#include <cstddef>
#include <string>

namespace decoupled {

// The bytes `value` (a type's text output, never NULL: a NULL field is
// written as nothing) takes as a record field: as is, or double-quoted with
// '"' and '\' doubled when it is empty or holds a quote, a backslash, a
// parenthesis, a comma or white space.
std::size_t record_field_size(const char* value);

// Writes those bytes to `out`, which has room for record_field_size(value).
void record_field_write(const char* value, char* out);

// The same as a string, for tests and C++-only callers.
std::string record_field(const char* value);

}  // namespace decoupled
