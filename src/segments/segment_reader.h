// SegmentReader: the one way records are read back from a segment file, by
// recovery, the Reader and Tailer, and synclog-dump. It reads through a
// window of bounded size instead of loading the file, so memory stays at the
// window (plus the largest record it meets) however large segments are, and
// it reads from whatever offset it is asked for first, so a reader that
// starts mid-segment never reads the bytes before its start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "io/file.h"
#include "segments/format.h"
#include "segments/transform.h"
#include "synclog/error.h"

namespace synclog::seg {

class SegmentReader {
 public:
  // Sequential reads fetch this much at a time.
  static constexpr size_t kWindow = size_t{1} << 20;

  // Opens segment `id` at `path`. No byte at or past `limit` is read: a
  // segment still being written is read up to the durable position only.
  // `window` is the read size (smaller for readers that need a header only).
  // Errors are the open's, with errno kept (ENOENT: the file is gone).
  [[nodiscard]] static Result<SegmentReader> open(const std::filesystem::path& path, uint64_t id,
                                                  uint64_t limit = UINT64_MAX,
                                                  size_t window = kWindow);

  uint64_t id() const { return id_; }
  // The file's size when opened.
  uint64_t file_size() const { return size_; }
  // Where readable bytes end: the file size or the limit.
  uint64_t end() const { return std::min(size_, limit_); }
  // Moves the limit (a tailer's durable position grew); never past the file.
  void set_limit(uint64_t limit);

  // Master keys for encrypted records (nullptr: none configured; an
  // encrypted record is then an error naming the segment and key id). The
  // keyring must outlive the reader.
  void set_keys(Keyring* keys) { keys_ = keys; }
  // Records as stored: transformed payloads are not decoded (synclog-dump
  // without a key).
  void set_raw(bool raw) { raw_ = raw; }
  // Without keys, returns encrypted records as stored (RecordView::sealed)
  // instead of failing: a tool that shows what it can.
  void set_sealed_ok(bool ok) { sealed_ok_ = ok; }
  // The segment's header, read once (for transformed records).
  [[nodiscard]] Result<SegmentHeader> header();

  // The record at `offset`, as decode_record judges it, with a transformed
  // record's payload decrypted and decompressed (a record that fails that
  // is bad and marked as damage). The payload stays valid until the next
  // call.
  [[nodiscard]] Result<Decoded> record(uint32_t offset);
  // The same without decrypting or decompressing: the checksum's verdict
  // and the stored payload, for a walk that only steps over records.
  [[nodiscard]] Result<Decoded> frame(uint32_t offset);
  // Bytes [offset, offset + n), fewer where readable bytes end. Valid until
  // the next call.
  [[nodiscard]] Result<std::span<const std::byte>> bytes(uint64_t offset, size_t n);

 private:
  SegmentReader(io::File file, uint64_t id, uint64_t size, uint64_t limit, size_t window)
      : file_(std::move(file)), id_(id), size_(size), limit_(limit), window_(window) {}
  // Makes the buffer hold [offset, offset + n), or everything readable from
  // offset if less.
  [[nodiscard]] Result<void> cover(uint64_t offset, size_t n);
  // The plain form of a transformed record that decoded as valid.
  [[nodiscard]] Result<Decoded> untransform(Decoded d);

  io::File file_;
  uint64_t id_ = 0;
  uint64_t size_ = 0;
  uint64_t limit_ = UINT64_MAX;
  size_t window_ = kWindow;
  std::vector<std::byte> buf_;  // the segment's bytes [base_, base_ + buf_.size())
  uint64_t base_ = 0;
  Keyring* keys_ = nullptr;
  bool raw_ = false;
  bool sealed_ok_ = false;
  std::optional<SegmentHeader> header_;
  std::optional<SegmentCipher> cipher_;
  std::vector<std::byte> plain_;     // a decrypted payload
  std::vector<std::byte> inflated_;  // a decompressed payload
};

// Where a walk of segment `segment` that must not read before `begin` can
// start to reach the record at `at` without reading the bytes before it:
// `at` itself if a record starts there, or the batch record holding the
// inner record whose position `at` is. None for any other offset (the
// caller then walks from `begin`). Checksums make this safe: a record that
// validates at an offset was written there (F2).
[[nodiscard]] Result<std::optional<uint32_t>> start_of(SegmentReader& segment, uint64_t begin,
                                                       uint64_t at);

}  // namespace synclog::seg
