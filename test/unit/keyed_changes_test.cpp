// Retractions located by the primary key (brief C14.2): the WAL gives an
// update's and a delete's key; history gets the whole old row, found in the
// batch or looked up once per key.
#include <gtest/gtest.h>

#include "keyed_changes.hpp"

using decoupled::KeyedChanges;
using decoupled::record_field_value;
using decoupled::record_split;

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string_view> f;
    EXPECT_TRUE(record_split(s, &f)) << s;
    return {f.begin(), f.end()};
}

std::vector<std::string> rows(KeyedChanges& k) {
    std::vector<std::string> out;
    EXPECT_TRUE(k.rows(&out)) << k.error();
    return out;
}

}  // namespace

TEST(RecordSplit, FieldsKeepTheirQuotes) {
    EXPECT_EQ(split("(1,abc,,\"a,b\")"), (std::vector<std::string>{"1", "abc", "", "\"a,b\""}));
    EXPECT_EQ(split("(\"say \"\"hi\"\"\",\"x)y\")"),
              (std::vector<std::string>{"\"say \"\"hi\"\"\"", "\"x)y\""}));
    EXPECT_EQ(split("(\"back\\\\slash\")"), (std::vector<std::string>{"\"back\\\\slash\""}));
    EXPECT_EQ(split("()"), (std::vector<std::string>{""}));
}

TEST(RecordSplit, MalformedLiteralsAreRefused) {
    std::vector<std::string_view> f;
    for (const char* bad : {"", "(", "1,2", "(1,2", "(\"open)", "(a)b)", "(a\\)"})
        EXPECT_FALSE(record_split(bad, &f)) << bad;
}

TEST(RecordFieldValue, UndoesQuotingAndTellsNull) {
    EXPECT_FALSE(record_field_value("").has_value());
    EXPECT_EQ(*record_field_value("\"\""), "");
    EXPECT_EQ(*record_field_value("\"a,b\""), "a,b");
    EXPECT_EQ(*record_field_value("\"say \"\"hi\"\"\""), "say \"hi\"");
    EXPECT_EQ(*record_field_value("\"back\\\\slash\""), "back\\slash");
    EXPECT_EQ(*record_field_value("plain"), "plain");
}

TEST(KeyedChanges, InsertsPassThrough) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.insert("(1,7,x)"));
    ASSERT_TRUE(k.insert("(1,8,y)"));
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(1,7,x)", "(1,8,y)"}));
}

TEST(KeyedChanges, ARowInsertedInTheBatchIsRetractedFromMemory) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.insert("(1,7,x)"));
    ASSERT_TRUE(k.retract_key("(7)"));  // update of 7
    ASSERT_TRUE(k.insert("(1,7,y)"));
    ASSERT_TRUE(k.retract_key("(7)"));  // delete of 7
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(1,7,x)", "(-1,7,x)", "(1,7,y)", "(-1,7,y)"}));
}

TEST(KeyedChanges, AnOlderRowIsLookedUpOncePerKey) {
    KeyedChanges k({2, 1});  // key columns in the table's order: a composite key
    ASSERT_TRUE(k.retract_key("(\"a b\",3)"));
    ASSERT_TRUE(k.insert("(1,3,\"a b\",new)"));
    ASSERT_TRUE(k.retract_key("(\"a b\",3)"));
    ASSERT_TRUE(k.insert("(1,3,\"a b\",newer)"));
    ASSERT_EQ(k.lookups().size(), 1u);
    EXPECT_EQ(k.lookups()[0], (std::vector<std::string>{"a b", "3"}));
    ASSERT_TRUE(k.resolve(0, "(3,\"a b\",old)"));
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,3,\"a b\",old)", "(1,3,\"a b\",new)",
                                                 "(-1,3,\"a b\",new)", "(1,3,\"a b\",newer)"}));
}

TEST(KeyedChanges, UnchangedToastedValuesComeFromTheOldRow) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.retract_key("(5)"));
    ASSERT_TRUE(k.insert("(1,5,2,)", {3}));  // field 3 was not in the WAL
    ASSERT_TRUE(k.retract_key("(5)"));
    ASSERT_TRUE(k.insert("(1,5,3,)", {3}));
    ASSERT_TRUE(k.resolve(0, "(5,1,\"long text\")"));
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,5,1,\"long text\")", "(1,5,2,\"long text\")",
                                                 "(-1,5,2,\"long text\")",
                                                 "(1,5,3,\"long text\")"}));
}

TEST(KeyedChanges, AKeyChangeTakesTheOldKeysRow) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.insert("(1,1,big)"));
    ASSERT_TRUE(k.retract_key("(1)"));
    ASSERT_TRUE(k.insert("(1,2,)", {2}));  // UPDATE SET id = 2, value unchanged
    ASSERT_TRUE(k.retract_key("(2)"));
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(1,1,big)", "(-1,1,big)", "(1,2,big)",
                                                 "(-1,2,big)"}));
}

TEST(KeyedChanges, AnUnchangedToastedKeyIsTheOldRowsKey) {
    // A key too wide to stay in the row: an UPDATE that leaves it alone
    // logs the old key, and the new row's key field is not in the WAL.
    KeyedChanges k({1});
    ASSERT_TRUE(k.retract_key("(wide)"));
    ASSERT_TRUE(k.insert("(1,,1)", {1}));     // UPDATE SET v = 1
    ASSERT_TRUE(k.retract_key("(wide)"));     // UPDATE SET v = 2, in the same batch
    ASSERT_TRUE(k.insert("(1,,2)", {1}));
    ASSERT_EQ(k.lookups().size(), 1u);
    ASSERT_TRUE(k.resolve(0, "(wide,0)"));
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,wide,0)", "(1,wide,1)", "(-1,wide,1)",
                                                 "(1,wide,2)"}));
    k.clear();
    EXPECT_EQ(k.known(), 1u);                 // known by its key, not by an empty field
    ASSERT_TRUE(k.retract_key("(wide)"));     // a DELETE in the next batch
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,wide,2)"}));
}

TEST(KeyedChanges, ErrorsCutWideValues) {
    // What goes wrong with a key of kilobytes still fits where health keeps
    // errors, cut between characters.
    KeyedChanges k({1});
    std::string wide = "(1," + std::string(62, 'x') + "\u00e9" + std::string(5000, 'y') + ",v)";
    std::string key = "(" + std::string(62, 'x') + "\u00e9" + std::string(5000, 'y') + ")";
    ASSERT_TRUE(k.insert(wide));
    ASSERT_TRUE(k.retract_key(key));
    EXPECT_FALSE(k.retract_key(key));
    EXPECT_LT(k.error().size(), 200u);
    EXPECT_NE(k.error().find("which is already gone"), std::string::npos) << k.error();
    EXPECT_NE(k.error().find("5066 bytes"), std::string::npos) << k.error();
    EXPECT_EQ(k.error().find('\xC3'), std::string::npos) << k.error();  // é not cut in two
}

TEST(KeyedChanges, FullRowRetractionsMixIn) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.retract_row("(-1,4,a)"));
    ASSERT_TRUE(k.insert("(1,4,b)"));
    ASSERT_TRUE(k.retract_key("(4)"));
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,4,a)", "(1,4,b)", "(-1,4,b)"}));
}

TEST(KeyedChanges, MissingOrDoubledRowsAreErrors) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.retract_key("(9)"));
    std::vector<std::string> out;
    EXPECT_FALSE(k.rows(&out));
    EXPECT_NE(k.error().find("(9)"), std::string::npos) << k.error();
    ASSERT_TRUE(k.resolve(0, "(9,x)"));
    EXPECT_FALSE(k.resolve(0, "(9,y)"));
    EXPECT_FALSE(k.retract_key("(9)"));  // already gone
    EXPECT_FALSE(k.retract_key("(1,2)"));    // one key column
    EXPECT_FALSE(k.retract_key("()"));       // a NULL key
    k.clear();
    EXPECT_TRUE(k.retract_key("(9)"));
    KeyedChanges fresh({1});
    EXPECT_FALSE(fresh.insert("(1,10,)", {2}));  // masked without a retraction before it
}

TEST(KeyedChanges, RowsLeftByEarlierBatchesRetractWithoutALookup) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.retract_key("(1)"));
    ASSERT_TRUE(k.insert("(1,1,b)"));
    ASSERT_TRUE(k.insert("(1,2,x)"));
    ASSERT_TRUE(k.retract_key("(3)"));  // a delete: key 3 is gone
    ASSERT_TRUE(k.resolve(0, "(1,a)"));
    ASSERT_TRUE(k.resolve(1, "(3,z)"));
    rows(k);
    k.clear();
    EXPECT_EQ(k.known(), 2u);  // 1 and 2; 3 was deleted
    ASSERT_TRUE(k.retract_key("(1)"));
    ASSERT_TRUE(k.insert("(1,1,)", {2}));  // its unchanged value from the known row
    ASSERT_TRUE(k.retract_key("(2)"));
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,1,b)", "(1,1,b)", "(-1,2,x)"}));
    k.clear();
    EXPECT_EQ(k.known(), 1u);  // 2 is gone
    ASSERT_TRUE(k.retract_key("(1)"));
    EXPECT_TRUE(k.lookups().empty());
}

TEST(KeyedChanges, ForgottenOrFailedBatchesLookUpAgain) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.insert("(1,1,a)"));
    rows(k);
    k.clear();
    k.forget_known();  // e.g. the table was truncated, or the pass failed
    ASSERT_TRUE(k.retract_key("(1)"));
    EXPECT_EQ(k.lookups().size(), 1u);
    std::vector<std::string> out;
    EXPECT_FALSE(k.rows(&out));  // unresolved: nothing becomes known
    k.clear();
    EXPECT_EQ(k.known(), 0u);
}

TEST(KeyedChanges, KnownRowsAreDroppedPastTheirLimit) {
    KeyedChanges k({1});
    k.set_known_bytes_limit(20);
    ASSERT_TRUE(k.insert("(1,1,short)"));
    ASSERT_TRUE(k.retract_key("(0)"));
    ASSERT_TRUE(k.resolve(0, "(0,z)"));
    rows(k);
    k.clear();
    EXPECT_EQ(k.known(), 1u);
    ASSERT_TRUE(k.insert("(1,2,\"a much longer row\")"));
    ASSERT_TRUE(k.retract_key("(1)"));
    EXPECT_TRUE(k.lookups().empty());
    rows(k);
    k.clear();
    EXPECT_EQ(k.known(), 0u);  // over the limit: all dropped at once
    ASSERT_TRUE(k.retract_key("(2)"));
    EXPECT_EQ(k.lookups().size(), 1u);
}

TEST(KeyedChanges, BatchesThatOnlyInsertReadNoKeys) {
    KeyedChanges k({1});
    ASSERT_TRUE(k.insert("(1,1,a)"));
    ASSERT_TRUE(k.insert("not a row"));  // not even parsed
    std::vector<std::string> out;
    ASSERT_TRUE(k.rows(&out));
    EXPECT_EQ(out, (std::vector<std::string>{"(1,1,a)", "not a row"}));
    k.clear();
    EXPECT_EQ(k.known(), 0u);
    ASSERT_TRUE(k.insert("(1,2,b)"));
    ASSERT_TRUE(k.insert("(1,3,c)"));
    ASSERT_TRUE(k.retract_key("(2)"));  // reads the keys queued before it
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(1,2,b)", "(1,3,c)", "(-1,2,b)"}));
    ASSERT_TRUE(k.insert("bad"));
    EXPECT_FALSE(k.retract_key("(3)"));  // the queued row is read now, and refused
}

TEST(KeyedChanges, RowsNobodyNeedsAreRetractedByTheirKey) {
    KeyedChanges k({3, 1}, 3);  // a composite key: columns 3 and 1 of three
    ASSERT_TRUE(k.retract_key("(\"x,y\",7)"));  // an update of (7, "x,y")
    ASSERT_TRUE(k.insert("(1,7,new,\"x,y\")"));
    ASSERT_TRUE(k.retract_key("(b,8)"));  // a delete
    ASSERT_EQ(k.lookups().size(), 2u);
    EXPECT_FALSE(k.needs_row(0));
    EXPECT_FALSE(k.needs_row(1));
    ASSERT_TRUE(k.mark(0));
    ASSERT_TRUE(k.mark(1));
    EXPECT_FALSE(k.mark(1));             // once
    EXPECT_FALSE(k.resolve(1, "(8,z,b)"));  // and not also found
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(0,7,,\"x,y\")", "(1,7,new,\"x,y\")",
                                                 "(0,8,,b)"}));
    k.clear();
    EXPECT_EQ(k.known(), 1u);  // the inserted row: its next retraction is literal
    ASSERT_TRUE(k.retract_key("(\"x,y\",7)"));
    EXPECT_TRUE(k.lookups().empty());
    EXPECT_EQ(rows(k), (std::vector<std::string>{"(-1,7,new,\"x,y\")"}));
}

TEST(KeyedChanges, ARowWhoseValuesAreTakenIsNotMarked) {
    KeyedChanges k({1}, 2);
    ASSERT_TRUE(k.retract_key("(5)"));
    ASSERT_TRUE(k.insert("(1,5,)", {2}));  // its unchanged TOASTed value
    EXPECT_TRUE(k.needs_row(0));
    EXPECT_FALSE(k.mark(0));
    KeyedChanges unsized({1});  // no width given: never marked
    ASSERT_TRUE(unsized.retract_key("(5)"));
    EXPECT_FALSE(unsized.mark(0));
    KeyedChanges narrow({3}, 2);  // a key field past the columns
    ASSERT_TRUE(narrow.retract_key("(5)"));
    EXPECT_FALSE(narrow.mark(0));
}
