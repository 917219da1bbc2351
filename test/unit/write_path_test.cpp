#include "write_path.hpp"

#include <gtest/gtest.h>

using decoupled::InsertPath;
using decoupled::RetractPath;
using decoupled::WriteShape;

namespace {

WriteShape shape(int64_t min_diff, int64_t max_diff, int64_t min_ts, int64_t max_ts) {
    return WriteShape{min_diff, max_diff, min_ts, max_ts};
}

}  // namespace

TEST(WritePath, NothingToWrite) {
    WriteShape empty;
    EXPECT_EQ(decoupled::insert_path(empty), InsertPath::None);
    EXPECT_EQ(decoupled::retract_path(empty), RetractPath::None);
    EXPECT_FALSE(decoupled::writes_directly(empty));
}

TEST(WritePath, InsertsOnly) {
    EXPECT_EQ(decoupled::insert_path(shape(1, 1, 5, 5)), InsertPath::Copies);
    EXPECT_EQ(decoupled::insert_path(shape(1, 3, 5, 9)), InsertPath::Multiplied);
    EXPECT_EQ(decoupled::retract_path(shape(1, 3, 5, 9)), RetractPath::None);
    EXPECT_TRUE(decoupled::writes_directly(shape(1, 1, 5, 5)));
    EXPECT_TRUE(decoupled::writes_directly(shape(2, 7, 5, 9)));
}

TEST(WritePath, MixedSignsConsolidate) {
    // An insert and a retraction of the same row at one time cancel out:
    // only consolidation sees that, so nothing mixed goes straight to cur.
    EXPECT_EQ(decoupled::insert_path(shape(-1, 1, 5, 5)), InsertPath::Consolidated);
    EXPECT_EQ(decoupled::retract_path(shape(-1, 1, 5, 5)), RetractPath::OneTime);
    EXPECT_FALSE(decoupled::writes_directly(shape(-1, 1, 5, 5)));
}

TEST(WritePath, ZeroMultiplicitiesConsolidate) {
    // A staged zero (never written by capture, but a stage is anyone's) is
    // neither a copy nor a retraction.
    EXPECT_EQ(decoupled::insert_path(shape(0, 1, 5, 5)), InsertPath::Consolidated);
    EXPECT_EQ(decoupled::insert_path(shape(0, 0, 5, 5)), InsertPath::None);
    EXPECT_EQ(decoupled::retract_path(shape(0, 0, 5, 5)), RetractPath::None);
    EXPECT_FALSE(decoupled::writes_directly(shape(0, 1, 5, 5)));
}

TEST(WritePath, RetractionsOnly) {
    EXPECT_EQ(decoupled::insert_path(shape(-2, -1, 5, 5)), InsertPath::None);
    EXPECT_EQ(decoupled::retract_path(shape(-2, -1, 5, 5)), RetractPath::OneTime);
    EXPECT_EQ(decoupled::retract_path(shape(-2, -1, 5, 6)), RetractPath::General);
}

TEST(WritePath, RetractionsFoundByScanOnlyWhenMany) {
    // A few retractions probe the hash index, however small the table.
    EXPECT_FALSE(decoupled::retract_by_scan(1, 10));
    EXPECT_FALSE(decoupled::retract_by_scan(decoupled::kScanRetractions, 100));
    // Many: a scan once they are more than a thirtieth of the rows.
    EXPECT_TRUE(decoupled::retract_by_scan(100000, 200000));
    EXPECT_TRUE(decoupled::retract_by_scan(50000, 1000000));
    EXPECT_FALSE(decoupled::retract_by_scan(20000, 1000000));
    // An empty table: the number alone decides.
    EXPECT_TRUE(decoupled::retract_by_scan(20000, 0));
}

TEST(WritePath, PendingCompactedOnlyOnceLarge) {
    // A few pages cost a tick less than a new file.
    EXPECT_FALSE(decoupled::compacts_pending(0));
    EXPECT_FALSE(decoupled::compacts_pending(decoupled::kCompactPendingBlocks - 1));
    // What a burst leaves (11,000 pages after a 100,000-row UPDATE).
    EXPECT_TRUE(decoupled::compacts_pending(decoupled::kCompactPendingBlocks));
    EXPECT_TRUE(decoupled::compacts_pending(11000));
}
