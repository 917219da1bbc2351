// The captured changes of a table whose retractions are located by its
// primary key (brief C14.2).  With REPLICA IDENTITY DEFAULT the WAL carries
// an UPDATE's and a DELETE's old key, not the old row, and leaves out an
// UPDATE's unchanged TOASTed values; history needs whole rows.  This class
// takes one table's decoded lines in commit order and finds each retracted
// row either among the rows inserted earlier in the same batch or, once
// per key, in storage (a lookup the capture worker answers from the
// collection's current and pending rows, the state before the batch).
// Pure logic, unit-tested.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace decoupled {

// Splits a record literal "(f1,...,fn)" as record_in reads it into the raw
// text of each field (quotes and escapes kept; an empty field is NULL).
// Returns false when `literal` is not one record literal.
bool record_split(std::string_view literal, std::vector<std::string_view>* fields);

// The value a raw field denotes (quotes and escapes undone); nullopt for
// NULL.
std::optional<std::string> record_field_value(std::string_view raw);

class KeyedChanges {
public:
    // `key_fields`: the positions of the key's columns in a row literal of
    // the pending table, whose field 0 is mz_diff (so the first column is 1).
    // `columns`: how many columns the table has, for retractions by key
    // (mark); 0 when they are not written.
    explicit KeyedChanges(std::vector<int> key_fields, std::size_t columns = 0);

    // "(1,v1,...)": an inserted row.  `masked`: fields the WAL did not
    // carry, taken from the row the change's retraction (the line just
    // before) removed.  False (with error()) when it cannot be taken.
    bool insert(std::string row, const std::vector<int>& masked = {});
    // "(k1,...)": the live row with this key is retracted.
    bool retract_key(const std::string& key);
    // "(-1,v1,...)": a retraction that carries its row.
    bool retract_row(std::string row);

    // The keys whose live row must be read from storage, each as the values
    // of its key columns; each key appears once.
    const std::vector<std::vector<std::string>>& lookups() const { return lookups_; }
    // The live row of lookup `i`, as a record literal of the table's
    // columns "(v1,...)".
    bool resolve(std::size_t i, const std::string& row);
    // Whether lookup `i`'s row itself is needed: an update's unchanged
    // values come from it.
    bool needs_row(std::size_t i) const { return needs_row_[i]; }
    // Lookup `i`'s live row is the one history holds for the key (nothing
    // pending touches it) and is not needed: it is retracted by its key, a
    // pending row "(0,k1,...)" with mz_diff 0, the key's fields and NULL
    // elsewhere, which the tick pairs with the copy it finds by the key.
    bool mark(std::size_t i);
    // Whether retractions by key are written at all (a width was given).
    bool marks() const { return columns_ > 0; }

    // The rows to write, as record literals of the pending table, in order.
    // False (with error()) when a lookup found no row.  The keys the batch
    // retracted or updated then become known with the rows it left them (a
    // batch that only inserted reads no keys).
    bool rows(std::vector<std::string>* out);

    std::size_t size() const { return entries_.size(); }
    const std::string& error() const { return error_; }
    // Ends the batch (after rows()); what it left live stays known.
    void clear();

    // The live rows the batches left their keys are kept (up to
    // `known_bytes_limit` of text, then dropped all at once) and retracted
    // without a lookup.  That holds while nothing but these batches changes
    // which row a key has: the caller forgets them when something else may
    // have (a truncation, a switch of capture) and when a batch's writes
    // did not commit.
    void forget_known();
    std::size_t known() const { return known_.size(); }
    void set_known_bytes_limit(std::size_t bytes) { known_bytes_limit_ = bytes; }

private:
    enum class Kind { kRow, kRetractLookup, kRetractEntry, kMaskedInsert };
    struct Entry {
        Kind kind;
        std::string text;         // kRow, kMaskedInsert: the row as captured
        std::size_t source = 0;   // kRetractLookup: lookup; kRetractEntry, kMaskedInsert: entry
        std::vector<int> masked;  // kMaskedInsert
    };
    struct KeyState {
        bool present;       // inserted in this batch and not retracted since
        std::size_t entry;  // the insertion, when present
    };

    bool key_of(const std::string& row, std::string* key);
    bool key_of_entry(std::size_t e, std::string* key);
    bool masks_key(const std::vector<int>& masked) const;
    bool catch_up();
    std::string marker(std::size_t i) const;
    bool fail(std::string message);

    std::vector<int> key_fields_;
    std::size_t columns_;
    std::vector<Entry> entries_;
    std::vector<std::vector<std::string>> lookups_;
    std::vector<std::string> key_literals_;  // per lookup, as captured
    std::vector<bool> needs_row_;
    std::vector<bool> marked_;
    std::vector<std::optional<std::string>> resolved_;
    // The keys of the batch's rows; the plain insertions from indexed_ on
    // are not in it yet (catch_up).
    std::unordered_map<std::string, KeyState> keys_;
    std::size_t indexed_ = 0;
    std::unordered_map<std::string, std::string> known_;  // key -> its live row
    std::size_t known_bytes_ = 0;
    std::size_t known_bytes_limit_ = 16 * 1024 * 1024;
    std::optional<std::size_t> last_retraction_;  // the entry, right after it
    std::string error_;
};

}  // namespace decoupled
