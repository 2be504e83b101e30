// The one place synclog-dump reads records: the records replay returns, in
// log order, as recovery's extents describe them, through the streaming
// segment reader that recovery and Log::read use (a window of a segment in
// memory, never the file).
#pragma once

#include <filesystem>
#include <functional>

#include "dump.h"
#include "segments/format.h"
#include "segments/recovery.h"
#include "segments/transform.h"
#include "synclog/error.h"
#include "synclog/position.h"

namespace synclog::dump {

// Called for each record at `at`, range.from <= at < range.to (range.limit
// is the caller's business). A batch record comes as itself (kind batch,
// its payload the 8-byte batch header, framed 16), then each of its records
// as a data record at its own position (framed: its entry's bytes), so that
// data records are what replay returns and framed bytes still add up. The record and its payload
// stay valid only during the call. Return false to stop the walk.
using RecordVisitor = std::function<bool(Position at, const seg::RecordView& record)>;

// An error only if a segment file cannot be read.
// `keys` decrypts encrypted records; without them (null) they are visited
// sealed (RecordView::sealed), a batch as one record. `version`, if given,
// holds the format version of the header of the segment being visited (0
// if it does not decode): which sync markers carry a time.
[[nodiscard]] Result<void> walk_records(const std::filesystem::path& dir, const seg::Recovered& rec,
                                        const Range& range, const RecordVisitor& visit,
                                        seg::Keyring* keys = nullptr, uint32_t* version = nullptr);

}  // namespace synclog::dump
