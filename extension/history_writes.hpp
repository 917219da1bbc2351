// Writing a collection's history from C, without statements (brief C14.3):
// what a registered table's tick (index_tick.cpp) and a view step's replacement
// of rows (replace_rows.cpp) share.
//
// Rows are compared by their binary image (datum_image_eq's equality):
// the statements compared their text.  Equal images print equally; the
// rows compared here were read from storage or computed by one query, so
// a row that prints equally has the same image too, but for values whose
// text hides a difference (NaN payloads) — such a row is retracted and
// written again rather than kept, which history shows as the same row
// retracted and inserted at one time: the same contents.
//
// Rows written to cur and dead wait in a buffer and go to the table a few
// pages at a time (table_multi_insert: one WAL record and one buffer lock
// per page instead of per row), each followed by its index entries, as
// COPY writes: the relation's constraints checked and every index
// maintained, so indexes made after the storage (arrangements) are kept
// as by an INSERT.  Nothing reads a written row before the writer ends:
// the writes' command is not visible to the snapshot they read with.
//
// C-style C++: nothing with a destructor lives in a frame an ereport may
// leave.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/htup.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"
}

namespace decoupled {

// The columns of cur and dead before a collection's own: cur (mz_rowid,
// mz_ts, mz_hash), dead (mz_rowid, valid_from, valid_to).
constexpr int kHistoryPrefix = 3;

// How a collection's columns are stored, for comparing images.
struct ImageColumns {
    int n;
    int16* typlen;
    bool* typbyval;
};

// The `n` columns of `desc` from attribute index `from`.
ImageColumns image_columns(TupleDesc desc, int from, int n);

// Copies values[from .. from+n) into the current memory context, varlenas
// detoasted (so that images compare by bytes); palloc'd arrays.
void copy_images(const ImageColumns& cols, const Datum* values, const bool* nulls, Datum** out,
                 bool** out_nulls);

// A hash of the images (as copied by copy_images), and a total order on
// them.
uint32 image_hash(const ImageColumns& cols, const Datum* values, const bool* nulls);
int image_cmp(const ImageColumns& cols, const Datum* a, const bool* a_nulls, const Datum* b,
              const bool* b_nulls);

// Whether values (as stored, maybe toasted) have the images of `copy`.
bool same_images(const ImageColumns& cols, const Datum* values, const bool* nulls,
                 const Datum* copy, const bool* copy_nulls);

// The next row an index probe of history storage (cur, pending) finds,
// visible to the scan's snapshot, into `slot` (a heap tuple slot of the
// scanned table); false at the end.  As index_getnext_slot, including the
// marking of index entries whose rows are dead to everyone, but without
// pruning each heap page it visits (heap_page_prune_opt): the extension
// never updates a table's stored rows or pending ones in place (only a
// view's, replace_current), so pruning frees no room for an update there,
// and a tick probing random keys of a large table pruned a
// page per probe — a third of its time in one profile (docs/
// performance.md).  VACUUM prunes those pages, all at once.  For probes,
// a row or two per key: a walk over many rows of one page is cheaper with
// index_getnext_slot, which keeps the page pinned between rows (the change
// times' walks keep it).  Tables of another access method take
// index_getnext_slot.
bool next_stored_row(IndexScanDesc scan, TupleTableSlot* slot);

// Whether `rel` holds a row `snapshot` sees: a scan that stops at the
// first one.  *blocks (if given): the relation's size as the scan read it.
bool holds_visible_row(Relation rel, Snapshot snapshot, BlockNumber* blocks = nullptr);

// Whether the first `n` columns of `desc` are `names` of `types`.
bool starts_with_columns(TupleDesc desc, const char* const* names, const Oid* types, int n);

// `ncols` columns of `desc` from position `from` (0-based) as an anonymous
// record, as ROW(...) of them is (blessed, in the current memory context),
// and a row of them printed as ROW(...)::text prints it (`record_out`:
// fmgr_info(F_RECORD_OUT, ...); TOASTed values are taken in).
TupleDesc columns_record(TupleDesc desc, int from, int ncols);
char* record_text(TupleDesc record, FmgrInfo* record_out, const Datum* values, const bool* nulls);

// A range table entry of `rel` for an executor state that writes it.
RangeTblEntry* relation_rte(Relation rel);

// Whether `cur` and `dead` are plain tables laid out as _create_storage
// made them, with `ncols` columns of their own (the first `ncols` columns
// of `like` from `like_from`: names and types), and written by nothing
// but the extension (no trigger, no row security).
bool history_laid_out(Relation cur, Relation dead, TupleDesc like, int like_from, int ncols);

// Rows on their way into one table, a few pages at a time (above): the
// history's writes and the capture worker's into pending.
struct InsertBuffer {
    ResultRelInfo* target;
    TupleTableSlot** slots;  // made as needed, kept as long as the EState
    int made;
    int used;
    Size bytes;
    // Which of the table's columns an index holds as a compressible
    // variable-length value (by attribute number - 1); null when none.
    bool* indexed_wide;
};
// For `target` (opened, its indexes too) of an EState that outlives it.
void init_insert_buffer(InsertBuffer* b, ResultRelInfo* target);
// An empty slot for the next row; its values filled, add_buffered takes it
// (a copy of the row of its own, checked against the table's constraints
// as an INSERT would), writing the buffer when it is full.
TupleTableSlot* buffered_slot(EState* estate, InsertBuffer* b);
void add_buffered(EState* estate, InsertBuffer* b, TupleTableSlot* slot);
// The buffered rows into the table, then their index entries.
void flush_buffered(EState* estate, InsertBuffer* b);
// The columns of pending before a collection's own: mz_diff.
constexpr int kPendingPrefix = 1;

// Whether `pending` is a plain table laid out as _create_storage made it
// (mz_diff first) and written by nothing but the extension (no trigger, no
// row security).
bool pending_laid_out(Relation pending);

// Rows into a collection's pending changes (open, RowExclusiveLock) at the
// current command id, a few pages at a time with its indexes maintained:
// the capture worker's writes and a table's contents taken again.
struct PendingWriter {
    EState* estate;
    ResultRelInfo* target;
    InsertBuffer rows;
};
void begin_pending_writes(PendingWriter* w, Relation pending, Snapshot snapshot);
// An empty slot for the next row (mz_diff, then the collection's columns);
// filled, add_buffered(w->estate, &w->rows, slot) takes it.
TupleTableSlot* pending_slot(PendingWriter* w);
// Writes what is buffered, then closes the indexes.
void end_pending_writes(PendingWriter* w);

// Everything the writes of one statement's worth of history share.
struct HistoryWriter {
    Relation cur_rel;
    EState* estate;
    ResultRelInfo* cur;
    ResultRelInfo* dead;
    TupleDesc row_desc;  // the collection's columns as an anonymous record, once needed
    FmgrInfo record_out;
    Oid rowid_seq;
    int ncols;
    Snapshot snapshot;
    InsertBuffer cur_rows;
    InsertBuffer dead_rows;
    TupleTableSlot* replacement;  // replace_current's row
};

// Opens the indexes of `cur` and `dead` (open, locked RowExclusiveLock)
// for writes at the current command id; `snapshot` is the one the caller
// reads with.
void begin_history_writes(HistoryWriter* w, Relation cur, Relation dead, int ncols,
                          Snapshot snapshot);
// Writes what is buffered, then closes the indexes.
void end_history_writes(HistoryWriter* w);

// hashtext(ROW(columns)::text): the mz_hash every write stores.
int32 row_text_hash(HistoryWriter* w, Datum* values, bool* nulls);

// Inserts a row into cur at `ts` with a new row id.
void insert_current(HistoryWriter* w, const Datum* values, const bool* nulls, int64 ts,
                    int32 mz_hash);

// Moves cur's row at `tid` (whose tuple is `tuple`) to dead, retracted at
// ts.
void retract_current(HistoryWriter* w, ItemPointer tid, HeapTuple tuple, int64 ts);

// The collection's columns (0-based among its `ncols`) that an index of
// `cur` covers, palloc'd: a row replaced by one equal in them can keep its
// place (replace_current).  False when an index covers one of the
// history's own columns (mz_ts changes with every write) or the whole row:
// no replacement could.
bool in_place_columns(Relation cur, int ncols, int** cols, int* n);

// A hash and a total order of rows (images, as copy_images makes them) by
// columns cols[0..n) of `all`.
uint32 columns_hash(const ImageColumns& all, const int* cols, int n, const Datum* values,
                    const bool* nulls);
int columns_cmp(const ImageColumns& all, const int* cols, int n, const Datum* a,
                const bool* a_nulls, const Datum* b, const bool* b_nulls);

// Retracts cur's row at `tid` (whose tuple is `tuple`) at ts and inserts a
// row of `values` at ts with a new row id, as retract_current and
// insert_current would, but as one update of the row: the new row takes
// the old one's place (a HOT update, when the indexed columns are equal
// and the page has room: no index entry, one WAL record).
void replace_current(HistoryWriter* w, ItemPointer tid, HeapTuple tuple, const Datum* values,
                     const bool* nulls, int64 ts, int32 mz_hash);

}  // namespace decoupled
