#include "keyed_changes.hpp"

#include <utility>

namespace decoupled {

bool record_split(std::string_view literal, std::vector<std::string_view>* fields) {
    fields->clear();
    if (literal.size() < 2 || literal.front() != '(' || literal.back() != ')') return false;
    std::size_t start = 1;
    bool quoted = false;
    for (std::size_t i = 1; i < literal.size(); ++i) {
        char c = literal[i];
        if (c == '\\') {
            if (++i >= literal.size() - 1) return false;  // escapes nothing, or the ')'
        } else if (c == '"') {
            // Inside quotes "" is a quote; either way the state flips twice.
            quoted = !quoted;
        } else if (!quoted && (c == ',' || i == literal.size() - 1)) {
            if (c != ',' && c != ')') return false;
            fields->push_back(literal.substr(start, i - start));
            start = i + 1;
        } else if (!quoted && c == ')') {
            return false;  // a ')' before the end
        }
    }
    return !quoted;
}

std::optional<std::string> record_field_value(std::string_view raw) {
    if (raw.empty()) return std::nullopt;
    std::string value;
    value.reserve(raw.size());
    bool quoted = false;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c == '\\' && i + 1 < raw.size()) {
            value += raw[++i];
        } else if (c == '"') {
            if (quoted && i + 1 < raw.size() && raw[i + 1] == '"') {
                value += '"';
                ++i;
            } else {
                quoted = !quoted;
            }
        } else {
            value += c;
        }
    }
    return value;
}

namespace {

// A row or key as a message shows it: wide values (a key TOASTed out of
// line runs to kilobytes) are cut, so that what the message says about it
// still fits where health keeps errors.
std::string shown(std::string_view text) {
    constexpr std::size_t kShown = 64;
    if (text.size() <= kShown) return std::string(text);
    std::size_t cut = kShown;  // not inside a UTF-8 character
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return std::string(text.substr(0, cut)) + "…(" + std::to_string(text.size()) + " bytes)";
}

// `row` ("(d,v1,...)") with its mz_diff replaced by `diff`.
std::string with_diff(std::string_view row, const char* diff) {
    std::size_t end = row.find_first_of(",)");
    if (end == std::string_view::npos) end = row.size();
    return std::string("(") + diff + std::string(row.substr(end));
}

}  // namespace

KeyedChanges::KeyedChanges(std::vector<int> key_fields, std::size_t columns)
    : key_fields_(std::move(key_fields)), columns_(columns) {}

bool KeyedChanges::fail(std::string message) {
    error_ = std::move(message);
    return false;
}

bool KeyedChanges::key_of(const std::string& row, std::string* key) {
    std::vector<std::string_view> fields;
    if (!record_split(row, &fields)) return fail("malformed captured row: " + shown(row));
    key->clear();
    for (std::size_t i = 0; i < key_fields_.size(); ++i) {
        int f = key_fields_[i];
        if (f < 0 || static_cast<std::size_t>(f) >= fields.size())
            return fail("captured row has no key field " + std::to_string(f) + ": " + shown(row));
        if (i > 0) *key += ',';
        *key += fields[f];
    }
    return true;
}

// A plain insertion is only queued: most batches insert and never retract,
// and reading each row's key would be most of their cost.  The keys of the
// queued insertions are read, in order, when the next line needs them.
bool KeyedChanges::insert(std::string row, const std::vector<int>& masked) {
    if (masked.empty()) {
        last_retraction_.reset();
        entries_.push_back(Entry{Kind::kRow, std::move(row), 0, {}});
        return true;
    }
    if (!last_retraction_)
        return fail("an update's unchanged values come without its old row: " + shown(row));
    std::size_t source = *last_retraction_;
    last_retraction_.reset();
    if (entries_[source].kind == Kind::kRetractLookup) needs_row_[entries_[source].source] = true;
    std::string key;
    if (!catch_up()) return false;
    // A key left out of the WAL (an unchanged TOASTed key) is the old
    // row's: the row's own fields there are empty.
    if (masks_key(masked) ? !key_of_entry(source, &key) : !key_of(row, &key)) return false;
    entries_.push_back(Entry{Kind::kMaskedInsert, std::move(row), source, masked});
    keys_[key] = KeyState{true, entries_.size() - 1};
    indexed_ = entries_.size();
    return true;
}

bool KeyedChanges::masks_key(const std::vector<int>& masked) const {
    for (int m : masked)
        for (int f : key_fields_)
            if (m == f) return true;
    return false;
}

// The key of entries_[e]: its row's; an insertion's whose key was left out,
// its old row's; a retraction's, the key it retracts.
bool KeyedChanges::key_of_entry(std::size_t e, std::string* key) {
    const Entry& entry = entries_[e];
    switch (entry.kind) {
        case Kind::kRow:
            return key_of(entry.text, key);
        case Kind::kMaskedInsert:
            return masks_key(entry.masked) ? key_of_entry(entry.source, key)
                                           : key_of(entry.text, key);
        case Kind::kRetractLookup: {
            const std::string& literal = key_literals_[entry.source];
            *key = literal.substr(1, literal.size() - 2);
            return true;
        }
        case Kind::kRetractEntry:
            return key_of_entry(entry.source, key);
    }
    return fail("unknown captured entry");
}

bool KeyedChanges::catch_up() {
    std::string key;
    for (; indexed_ < entries_.size(); ++indexed_) {
        if (!key_of(entries_[indexed_].text, &key)) return false;
        keys_[key] = KeyState{true, indexed_};
    }
    return true;
}

bool KeyedChanges::retract_key(const std::string& key_literal) {
    std::vector<std::string_view> fields;
    if (!record_split(key_literal, &fields) || fields.size() != key_fields_.size())
        return fail("malformed captured key: " + shown(key_literal));
    if (!catch_up()) return false;
    std::string key(key_literal.substr(1, key_literal.size() - 2));
    auto it = keys_.find(key);
    auto known = known_.find(key);
    if (it != keys_.end()) {
        if (!it->second.present)
            return fail("a change retracts key " + shown(key_literal) + ", which is already gone");
        entries_.push_back(Entry{Kind::kRetractEntry, {}, it->second.entry, {}});
        it->second.present = false;
    } else if (known != known_.end()) {
        entries_.push_back(Entry{Kind::kRow, with_diff(known->second, "-1"), 0, {}});
        keys_.emplace(std::move(key), KeyState{false, 0});
    } else {
        std::vector<std::string> values;
        for (std::string_view f : fields) {
            std::optional<std::string> v = record_field_value(f);
            if (!v) return fail("a captured key has a NULL: " + shown(key_literal));
            values.push_back(std::move(*v));
        }
        lookups_.push_back(std::move(values));
        key_literals_.push_back(key_literal);
        needs_row_.push_back(false);
        marked_.push_back(false);
        resolved_.emplace_back();
        entries_.push_back(Entry{Kind::kRetractLookup, {}, lookups_.size() - 1, {}});
        keys_.emplace(std::move(key), KeyState{false, 0});
    }
    indexed_ = entries_.size();
    last_retraction_ = entries_.size() - 1;
    return true;
}

bool KeyedChanges::retract_row(std::string row) {
    std::string key;
    if (!catch_up() || !key_of(row, &key)) return false;
    entries_.push_back(Entry{Kind::kRow, std::move(row), 0, {}});
    keys_[key] = KeyState{false, 0};
    indexed_ = entries_.size();
    last_retraction_ = entries_.size() - 1;
    return true;
}

bool KeyedChanges::resolve(std::size_t i, const std::string& row) {
    if (i >= resolved_.size()) return fail("no lookup " + std::to_string(i));
    if (resolved_[i] || marked_[i]) return fail("a key has more than one live row: " + shown(row));
    resolved_[i] = row;
    return true;
}

bool KeyedChanges::mark(std::size_t i) {
    if (i >= resolved_.size()) return fail("no lookup " + std::to_string(i));
    bool fits = columns_ > 0;
    for (int f : key_fields_) fits = fits && f >= 1 && static_cast<std::size_t>(f) <= columns_;
    if (!fits || needs_row_[i] || resolved_[i] || marked_[i])
        return fail("key " + shown(key_literals_[i]) + " cannot be retracted by its key");
    marked_[i] = true;
    return true;
}

// "(0,k1,...)": the key's fields where the table has them, NULL elsewhere.
std::string KeyedChanges::marker(std::size_t i) const {
    std::vector<std::string_view> fields;
    record_split(key_literals_[i], &fields);  // checked by retract_key
    std::vector<std::string_view> row(columns_ + 1);
    row[0] = "0";
    for (std::size_t k = 0; k < key_fields_.size(); ++k) row[key_fields_[k]] = fields[k];
    std::string out = "(";
    for (std::size_t f = 0; f < row.size(); ++f) {
        if (f > 0) out += ',';
        out += row[f];
    }
    return out + ')';
}

bool KeyedChanges::rows(std::vector<std::string>* out) {
    out->clear();
    out->reserve(entries_.size());
    std::vector<std::string_view> from, into;
    for (const Entry& e : entries_) {
        switch (e.kind) {
            case Kind::kRow:
                out->push_back(e.text);
                break;
            case Kind::kRetractLookup: {
                if (marked_[e.source]) {
                    out->push_back(marker(e.source));
                    break;
                }
                const std::optional<std::string>& row = resolved_[e.source];
                if (!row) {
                    std::string key;
                    for (const std::string& v : lookups_[e.source])
                        key += (key.empty() ? "" : ", ") + v;
                    return fail("the row with key " + shown("(" + key + ")") + " is not in the table's history");
                }
                // "(v1,...)" -> "(-1,v1,...)"
                out->push_back(row->size() > 2 ? "(-1," + row->substr(1) : "(-1)");
                break;
            }
            case Kind::kRetractEntry:
                out->push_back(with_diff((*out)[e.source], "-1"));
                break;
            case Kind::kMaskedInsert: {
                const std::string& old = (*out)[e.source];
                if (!record_split(old, &from) || !record_split(e.text, &into) ||
                    from.size() != into.size())
                    return fail("an update's old and new rows do not match: " + shown(e.text));
                std::string row = "(";
                for (std::size_t f = 0; f < into.size(); ++f) {
                    bool take = false;
                    for (int m : e.masked) take = take || static_cast<std::size_t>(m) == f;
                    if (f > 0) row += ',';
                    row += take ? from[f] : into[f];
                }
                row += ')';
                out->push_back(std::move(row));
                break;
            }
        }
    }
    for (const auto& [key, state] : keys_) {
        auto it = known_.find(key);
        if (it != known_.end()) {
            known_bytes_ -= it->first.size() + it->second.size();
            known_.erase(it);
        }
        if (!state.present) continue;
        const std::string& row = (*out)[state.entry];
        known_bytes_ += key.size() + row.size();
        known_.emplace(key, row);
    }
    if (known_bytes_ > known_bytes_limit_) forget_known();
    return true;
}

void KeyedChanges::forget_known() {
    known_.clear();
    known_bytes_ = 0;
}

void KeyedChanges::clear() {
    indexed_ = 0;
    entries_.clear();
    lookups_.clear();
    key_literals_.clear();
    needs_row_.clear();
    marked_.clear();
    resolved_.clear();
    keys_.clear();
    last_retraction_.reset();
    error_.clear();
}

}  // namespace decoupled
