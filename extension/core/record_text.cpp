#include "record_text.hpp"

#include <cstring>

namespace decoupled {

namespace {

// The characters record_in treats specially, as record_out tests them
// (isspace in the C locale).
bool special(char c) {
    return c == '"' || c == '\\' || c == '(' || c == ')' || c == ',' || c == ' ' || c == '\t' ||
           c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool needs_quotes(const char* value) {
    if (*value == '\0') return true;
    for (const char* p = value; *p; ++p)
        if (special(*p)) return true;
    return false;
}

}  // namespace

std::size_t record_field_size(const char* value) {
    std::size_t n = std::strlen(value);
    if (!needs_quotes(value)) return n;
    std::size_t size = n + 2;
    for (const char* p = value; *p; ++p)
        if (*p == '"' || *p == '\\') ++size;
    return size;
}

void record_field_write(const char* value, char* out) {
    if (!needs_quotes(value)) {
        std::memcpy(out, value, std::strlen(value));
        return;
    }
    *out++ = '"';
    for (const char* p = value; *p; ++p) {
        if (*p == '"' || *p == '\\') *out++ = *p;
        *out++ = *p;
    }
    *out = '"';
}

std::string record_field(const char* value) {
    std::string s(record_field_size(value), '\0');
    record_field_write(value, s.data());
    return s;
}

}  // namespace decoupled
