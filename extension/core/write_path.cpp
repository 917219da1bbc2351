#include "write_path.hpp"

namespace decoupled {

InsertPath insert_path(const WriteShape& shape) noexcept {
    if (!shape.max_diff || *shape.max_diff <= 0) return InsertPath::None;
    if (*shape.min_diff <= 0) return InsertPath::Consolidated;
    return *shape.max_diff == 1 ? InsertPath::Copies : InsertPath::Multiplied;
}

RetractPath retract_path(const WriteShape& shape) noexcept {
    if (!shape.min_diff || *shape.min_diff >= 0) return RetractPath::None;
    return shape.min_ts == shape.max_ts ? RetractPath::OneTime : RetractPath::General;
}

bool writes_directly(const WriteShape& shape) noexcept {
    return shape.min_diff && *shape.min_diff > 0;
}

bool compacts_pending(int64_t blocks) noexcept { return blocks >= kCompactPendingBlocks; }

bool retract_by_scan(int64_t retractions, double cur_rows) noexcept {
    return retractions > kScanRetractions && static_cast<double>(retractions) * 30 > cur_rows;
}

}  // namespace decoupled
