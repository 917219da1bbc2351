// Record literals as WAL capture writes them: read back by record_in, every
// value must come out as it went in.
#include <gtest/gtest.h>

#include "record_text.hpp"

using decoupled::record_field;
using decoupled::record_field_size;

TEST(RecordText, PlainValuesStayAsTheyAre) {
    EXPECT_EQ(record_field("42"), "42");
    EXPECT_EQ(record_field("-1.5e10"), "-1.5e10");
    EXPECT_EQ(record_field("2026-12-01"), "2026-12-01");
    EXPECT_EQ(record_field("{1,2}"), "\"{1,2}\"");  // the comma needs quotes
}

TEST(RecordText, EmptyStringIsQuotedSoItIsNotNull) {
    // A NULL field is written as nothing; the empty string must differ.
    EXPECT_EQ(record_field(""), "\"\"");
}

TEST(RecordText, SpecialCharactersAreQuotedAndEscaped) {
    EXPECT_EQ(record_field("a,b"), "\"a,b\"");
    EXPECT_EQ(record_field("(x)"), "\"(x)\"");
    EXPECT_EQ(record_field("two words"), "\"two words\"");
    EXPECT_EQ(record_field("tab\there"), "\"tab\there\"");
    EXPECT_EQ(record_field("line\nbreak"), "\"line\nbreak\"");
    EXPECT_EQ(record_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    EXPECT_EQ(record_field("back\\slash"), "\"back\\\\slash\"");
}

TEST(RecordText, SizeMatchesWhatIsWritten) {
    for (const char* v : {"", "x", "a b", "\"\"", "\\\\", "(,)", "plain"})
        EXPECT_EQ(record_field_size(v), record_field(v).size()) << v;
}

TEST(RecordText, NonAsciiBytesPassThrough) {
    EXPECT_EQ(record_field("h\xc3\xa9llo"), "h\xc3\xa9llo");
}
