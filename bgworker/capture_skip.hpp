// The capture worker's pre-filter: row changes of the extension's own
// relations are not decoded (bgworker/capture_skip.cpp says why and why it
// is safe).  Include after postgres.h and replication/logical.h.
#pragma once

namespace decoupled {

// Reads the relation files of the extension's own relations from the
// current catalog (SPI, in the caller's transaction; never while decoding
// runs).  Until the first call nothing is skipped.
void capture_skip_refresh();

// Nothing is skipped until the next refresh (the extension was dropped).
void capture_skip_forget();

// Whether `record` is a row change of one of those relations: then it has
// been accounted for (its transaction noted) and must not be decoded.
bool capture_skip_record(LogicalDecodingContext* ctx, XLogReaderState* record);

}  // namespace decoupled
