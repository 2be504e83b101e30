// Compressed and encrypted records (docs/format.md, Transformed records):
// round trips on every backend, limits, damage that only the GCM tag can
// catch, keys (missing, wrong, unknown, rotated) and nonce uniqueness.
#include "segments/transform.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "io/crc32c.h"
#include "segments/format.h"
#include "segments/segment.h"
#include "segments/segment_reader.h"
#include "test_util.h"

namespace synclog::test {
namespace {

constexpr const char* kHex1 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr const char* kHex2 = "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f";
constexpr const char* kHexWrong =
    "0f112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

void write_key_file(const std::filesystem::path& path, const std::string& text,
                    mode_t mode = 0600) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

struct Variant {
  const char* name;
  Compression compression;
  bool encrypt;
};

class KeyDir {
 public:
  KeyDir() : file_(dir_.path() / "keys") {
    write_key_file(file_, std::string("1 ") + kHex1 + "\n");
  }
  const std::filesystem::path& file() const { return file_; }

 private:
  TempDir dir_;
  std::filesystem::path file_;
};

Config transform_config(const std::filesystem::path& dir, const Variant& v,
                        const std::filesystem::path& key_file) {
  Config c = small_config(dir);
  c.compression = v.compression;
  if (v.encrypt) {
    c.encryption = Encryption::aes_256_gcm;
    c.encryption_key_file = key_file;
  }
  return c;
}

std::string compressible(size_t n, int seed) {
  std::string s;
  while (s.size() < n) s += "key-" + std::to_string(seed) + "=value value value;";
  s.resize(n);
  return s;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class TransformRoundTrip : public testing::TestWithParam<Variant> {};

TEST_P(TransformRoundTrip, EveryShapeOfRecordSurvivesReopen) {
  const Variant v = GetParam();
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), v, keys.file());
  cfg.max_record = 600 << 10;  // > segment_size / 2: fragments
  std::vector<Replayed> want;
  for (int session = 0; session < 2; ++session) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    auto add = [&](const std::string& r) {
      auto p = (*log)->append(r);
      ASSERT_TRUE(p.has_value()) << p.error().describe();
      want.push_back({*p, r});
    };
    add("");
    add(compressible(5000, session));
    add(random_bytes(3000, session));
    add(compressible(500 << 10, session));  // fragments
    add("x");
    // Batches: a compressible one (stored packed), one with empty records,
    // a random one (stored plain).
    for (int b = 0; b < 3; ++b) {
      std::vector<std::string> recs;
      for (int i = 0; i < 40; ++i) {
        recs.push_back(b == 0   ? compressible(64, i)
                       : b == 1 ? (i % 3 == 0 ? "" : compressible(16, i))
                                : random_bytes(50, i));
      }
      std::vector<std::string_view> views(recs.begin(), recs.end());
      auto ps = (*log)->append_batch(views);
      ASSERT_TRUE(ps.has_value()) << ps.error().describe();
      for (size_t i = 0; i < recs.size(); ++i) want.push_back({(*ps)[i], recs[i]});
    }
    // Asynchronous appends.
    std::atomic<int> done{0};
    for (int i = 0; i < 20; ++i) {
      const std::string r = compressible(100 + i, i);
      auto p = (*log)->append_async(r, [&](Result<Position> x) {
        EXPECT_TRUE(x.has_value());
        ++done;
      });
      ASSERT_TRUE(p.has_value()) << p.error().describe();
      want.push_back({*p, r});
    }
    ASSERT_TRUE((*log)->sync().has_value());
    while (done.load() < 20) std::this_thread::yield();
    EXPECT_TRUE(same_records(read_all(**log), want));
    // A read from a position inside a batch starts at that record.
    const size_t mid = want.size() - 20 - 40 - 40 - 20;
    auto from = read_all(**log, want[mid].position);
    EXPECT_TRUE(same_records(from, std::vector<Replayed>(want.begin() + mid, want.end())));
    ASSERT_TRUE((*log)->close().has_value());
  }
  RecoveryReport report;
  auto replayed = replay_all(cfg, &report);
  ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
  EXPECT_TRUE(same_records(*replayed, want));
  EXPECT_TRUE(report.damage.empty());
}

TEST_P(TransformRoundTrip, StoredBytesShrinkOnlyForCompressibleData) {
  const Variant v = GetParam();
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), v, keys.file());
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*log)->append(compressible(4000, i)).has_value());
  const Stats a = (*log)->stats();
  EXPECT_EQ(a.bytes, 50u * 4000);
  if (v.compression != Compression::none) {
    EXPECT_LT(a.stored_bytes * 4, a.bytes) << "compressible records did not shrink";
  } else {
    EXPECT_EQ(a.stored_bytes, a.bytes + 50 * seg::kTagSize);
  }
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*log)->append(random_bytes(4000, i)).has_value());
  const Stats b = (*log)->stats();
  // Random bytes never compress: stored plain, plus the tag if encrypted.
  EXPECT_EQ(b.stored_bytes - a.stored_bytes, 50u * (4000 + (v.encrypt ? seg::kTagSize : 0)));
  ASSERT_TRUE((*log)->close().has_value());
}

TEST_P(TransformRoundTrip, ConcurrentWritersAcrossSegmentSwitches) {
  const Variant v = GetParam();
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), v, keys.file());
  constexpr int kThreads = 4, kRounds = 150;
  std::map<Position, std::string> want;
  std::mutex mu;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRounds; ++i) {
          // make_record's bytes repeat: they compress.
          const std::string a = make_record(t, 2 * i, 200 + 37 * (i % 40));
          const std::string b = make_record(t, 2 * i + 1, 64);
          auto p = (*log)->append(a);
          const std::string_view pair[] = {a, b};
          auto ps = (*log)->append_batch(pair);
          ASSERT_TRUE(p.has_value() && ps.has_value());
          std::lock_guard lock(mu);
          want[*p] = a;
          want[(*ps)[0]] = a;
          want[(*ps)[1]] = b;
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  std::vector<Replayed> in_order;
  for (const auto& [p, d] : want) in_order.push_back({p, d});
  EXPECT_TRUE(same_records(*got, in_order));
  EXPECT_GT(in_order.back().position.segment(), 2u) << "no segment switch";
}

INSTANTIATE_TEST_SUITE_P(Variants, TransformRoundTrip,
                         testing::Values(Variant{"lz4", Compression::lz4, false},
                                         Variant{"zstd", Compression::zstd, false},
                                         Variant{"aes", Compression::none, true},
                                         Variant{"lz4_aes", Compression::lz4, true},
                                         Variant{"zstd_aes", Compression::zstd, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- damage -----------------------------------------------------------------

// The first data record's offset, stored length and word in segment 1 of a
// log written by the test below: after the session record at 64.
struct Located {
  uint32_t offset;
  uint32_t word;
};

Located locate(const std::string& file, uint32_t offset) {
  uint32_t word = 0;
  std::memcpy(&word, file.data() + offset + 4, 4);
  return {offset, word};
}

// The offset of the second data record in a segment's bytes (0 if none):
// the first is at 80, after the session record.
uint32_t second_data_record(const std::string& file) {
  for (uint32_t off = 112; off + 8 < file.size(); off += 8) {
    if (((locate(file, off).word >> 24) & 0xf) == 1) return off;
  }
  return 0;
}

// Opens `files`, written into `copy`, with `cfg` (its dir replaced).
Result<std::unique_ptr<Log>> open_copy(const TempDir& copy, const Config& cfg, const Files& files) {
  write_segments(copy.path(), files);
  Config c = cfg;
  c.dir = copy.path();
  return Log::open(c);
}

void recompute_crc(std::string* file, uint64_t segment_id, uint32_t offset) {
  uint32_t word = 0;
  std::memcpy(&word, file->data() + offset + 4, 4);
  std::byte salt[16];
  std::memcpy(salt, &segment_id, 8);
  std::memcpy(salt + 8, &offset, 4);
  std::memcpy(salt + 12, &word, 4);
  uint32_t crc = io::crc32c(0, salt);
  crc = io::crc32c(crc, std::as_bytes(std::span(file->data() + offset + 8, word & 0xffffff)));
  std::memcpy(file->data() + offset, &crc, 4);
}

TEST(TransformDamage, EveryFlippedByteOfAnEncryptedRecordIsDamageNeverARecord) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::none, true}, keys.file());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->append("first record").has_value());
    ASSERT_TRUE((*log)->append("second").has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Files clean = load_segments(dir.path());
  const Located rec = locate(clean.at(1), 80);  // after the session record
  ASSERT_EQ((rec.word >> 24) & 0xf, 1u);
  ASSERT_NE(rec.word & seg::kEncryptedFlag, 0u);
  const uint32_t stored = rec.word & 0xffffff;
  ASSERT_EQ(stored, 12 + seg::kTagSize);
  for (uint32_t i = 0; i < stored; ++i) {
    Files damaged = clean;
    damaged[1][rec.offset + 8 + i] ^= 0x01;
    recompute_crc(&damaged[1], 1, rec.offset);
    TempDir copy;
    write_segments(copy.path(), damaged);
    Config c = cfg;
    c.dir = copy.path();
    auto log = Log::open(c);
    ASSERT_FALSE(log.has_value()) << "byte " << i;
    EXPECT_EQ(log.error().code, Errc::corruption) << log.error().describe();
    EXPECT_NE(log.error().message.find("segment 1 offset 80: record fails authentication"),
              std::string::npos)
        << log.error().message;
    // skip-damaged drops it and reports where; the other record survives.
    c.recovery = RecoveryMode::skip_damaged;
    RecoveryReport report;
    auto replayed = replay_all(c, &report);
    ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
    ASSERT_EQ(replayed->size(), 1u) << "byte " << i;
    EXPECT_EQ((*replayed)[0].data, "second");
    ASSERT_FALSE(report.damage.empty());
    EXPECT_EQ(report.damage[0].at, Position(1, 80));
  }
  // Without the checksum recomputed it is a bad record, as for any record.
  Files damaged = clean;
  damaged[1][rec.offset + 8] ^= 0x01;
  TempDir copy;
  auto log = open_copy(copy, cfg, damaged);
  ASSERT_FALSE(log.has_value());
  EXPECT_NE(log.error().message.find("record checksum mismatch"), std::string::npos)
      << log.error().message;
}

TEST(TransformDamage, AFrameMovedElsewhereFailsAuthenticationEvenWithItsChecksumRedone) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::none, true}, keys.file());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    ASSERT_TRUE((*log)->append("aaaaaaaa").has_value());  // 80, stored 24, framed 32
    ASSERT_TRUE((*log)->append("bbbbbbbb").has_value());  // after a sync marker
    ASSERT_TRUE((*log)->close().has_value());
  }
  Files files = load_segments(dir.path());
  // Copy the first data record's frame over the second one.
  const uint32_t second = second_data_record(files[1]);
  ASSERT_NE(second, 0u);
  std::memcpy(files[1].data() + second, files[1].data() + 80, 32);
  recompute_crc(&files[1], 1, second);
  TempDir copy;
  auto log = open_copy(copy, cfg, files);
  ASSERT_FALSE(log.has_value());
  EXPECT_NE(log.error().message.find("record fails authentication"), std::string::npos)
      << log.error().message;
}

TEST(TransformDamage, AnAuthenticationFailureAtTheTailIsDamageNotATornWrite) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::none, true}, keys.file());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    ASSERT_TRUE((*log)->append("aaaaaaaa").has_value());
    ASSERT_TRUE((*log)->append("bbbbbbbb").has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  Files files = load_segments(dir.path());
  const uint32_t second = second_data_record(files[1]);
  ASSERT_NE(second, 0u);
  // Nothing after the record: no marker proves it durable, so a bad record
  // there would pass for a torn write, but this one has a valid checksum.
  std::fill(files[1].begin() + second + 32, files[1].end(), '\0');
  files[1][second + 8] ^= 0x04;
  recompute_crc(&files[1], 1, second);
  TempDir copy;
  auto log = open_copy(copy, cfg, files);
  ASSERT_FALSE(log.has_value()) << "taken for a torn tail";
  EXPECT_EQ(log.error().code, Errc::corruption);
  EXPECT_NE(log.error().message.find("offset " + std::to_string(second) +
                                     ": record fails authentication"),
            std::string::npos)
      << log.error().message;
}

TEST(TransformDamage, AReadFromInsideATransformedBatchStepsOverEarlierRecordsUndecrypted) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"zstd_aes", Compression::zstd, true}, keys.file());
  std::vector<Position> inner;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    ASSERT_EQ(*(*log)->append(compressible(1000, 1)), Position(1, 80));
    const std::string r = compressible(64, 2);
    const std::string_view batch[] = {r, r, r, r, r, r};
    auto ps = (*log)->append_batch(batch);
    ASSERT_TRUE(ps.has_value());
    inner = *ps;
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  // The first record now fails authentication (its checksum redone).
  Files files = load_segments(dir.path());
  files[1][80 + 8 + 5] ^= 0x20;
  recompute_crc(&files[1], 1, 80);
  {
    std::fstream f(dir.path() / seg::segment_file_name(1),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(80);
    f.write(files[1].data() + 80, 256);
  }
  // From the batch's third record: the walk passes the damaged record on
  // its checksum and never decrypts it.
  auto from = read_all(**log, inner[2]);
  ASSERT_EQ(from.size(), 4u);
  EXPECT_EQ(from[0].position, inner[2]);
  // From the start it is read, and refused.
  auto reader = (*log)->read(Position{});
  ASSERT_TRUE(reader.has_value());
  auto first = reader->next();
  ASSERT_FALSE(first.has_value());
  EXPECT_NE(first.error().message.find("record fails authentication"), std::string::npos);
  ASSERT_TRUE((*log)->close().has_value());
}

// A compressed record whose stored raw length is far above what its
// segment could have held plain (half a segment): damage, never inflated.
// Decompression then costs at most half a segment per record, not 16 MiB.
TEST(TransformDamage, ACompressedRecordClaimingMoreThanItsSegmentCouldHoldIsDamage) {
  for (const Compression compression : {Compression::lz4, Compression::zstd}) {
    TempDir dir;
    Config cfg = small_config(dir.path());
    cfg.compression = compression;
    {
      auto log = Log::open(cfg);
      ASSERT_TRUE(log.has_value()) << log.error().describe();
      ASSERT_EQ(*(*log)->append(compressible(1000, 1)), Position(1, 80));
      ASSERT_TRUE((*log)->close().has_value());
    }
    Files files = load_segments(dir.path());
    std::string& file = files.at(1);
    // 4 MiB of zeros compress to a few KiB: a legitimate compressor output,
    // stored in a 256 KiB segment in place of the record at 80, the rest of
    // the segment zeroed (no markers after it: it is the last record).
    const std::string zeros(4u << 20, '\0');
    const std::span<const std::byte> piece[1] = {std::as_bytes(std::span(zeros))};
    std::vector<std::byte> stored;
    const size_t n = seg::compress(compression, 0, piece, zeros.size(), &stored);
    ASSERT_GT(n, 0u);
    ASSERT_LT(80 + n + 64, file.size());
    std::fill(file.begin() + 80, file.end(), '\0');
    const uint32_t code =
        compression == Compression::lz4 ? seg::kCompressionLz4 : seg::kCompressionZstd;
    const std::span<const std::byte> body[1] = {std::span(stored).first(n)};
    seg::encode_gathered(std::as_writable_bytes(std::span(file)), 1, 80, seg::Kind::data, body,
                         code << seg::kCompressionShift);
    TempDir copy;
    Config c = cfg;
    c.dir = copy.path();
    write_segments(copy.path(), files);
    auto log = Log::open(c);
    if (!log) continue;  // refused as damage: fine too
    for (const auto& r : read_all(**log)) {
      EXPECT_LE(r.data.size(), cfg.max_unfragmented_size())
          << "a " << r.data.size() << "-byte record inflated from a " << cfg.segment_size
          << "-byte segment at " << r.position.to_string();
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
}

TEST(TransformDamage, AReaderFailsOnARecordDamagedAfterOpen) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::lz4, true}, keys.file());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    ASSERT_TRUE((*log)->append(compressible(1000, 1)).has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  Files files = load_segments(dir.path());
  files[1][80 + 8 + 3] ^= 0x40;
  recompute_crc(&files[1], 1, 80);
  {
    std::fstream f(dir.path() / seg::segment_file_name(1),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(80);
    f.write(files[1].data() + 80, 64);
  }
  auto reader = (*log)->read(Position{});
  ASSERT_TRUE(reader.has_value());
  auto rec = reader->next();
  ASSERT_FALSE(rec.has_value()) << "a record that fails authentication was returned";
  EXPECT_EQ(rec.error().code, Errc::corruption);
  EXPECT_NE(rec.error().message.find("record fails authentication"), std::string::npos);
  ASSERT_TRUE((*log)->close().has_value());
}

// A plain frame forged over an encrypted one: the same framed size, its
// public checksum computed, so nothing but the rule that an encrypted
// segment holds no plain user record can catch it.
TEST(TransformDamage, APlainUserRecordForgedIntoAnEncryptedSegmentIsDamage) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::none, true}, keys.file());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    ASSERT_EQ(*(*log)->append("genuine record 1"), Position(1, 80));  // stored 32, framed 40
    ASSERT_TRUE((*log)->append("second").has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Files clean = load_segments(dir.path());
  ASSERT_EQ(locate(clean.at(1), 80).word & 0xffffff, 32u);
  // Plain payloads of 32 bytes that each kind accepts.
  std::string data(32, 'F');
  std::string batch(32, '\0');
  const uint32_t one = 1, len = 16, back = 16;
  std::memcpy(batch.data(), &one, 4);
  std::memcpy(batch.data() + 8, &len, 4);
  std::memcpy(batch.data() + 12, &back, 4);
  std::memset(batch.data() + 16, 'F', 16);
  std::string first(32, 'F');
  const uint64_t total = 24;
  std::memcpy(first.data(), &total, 8);
  const std::pair<seg::Kind, std::string> forged[] = {{seg::Kind::data, data},
                                                      {seg::Kind::batch, batch},
                                                      {seg::Kind::first, first},
                                                      {seg::Kind::middle, data},
                                                      {seg::Kind::last, data}};
  for (const auto& [kind, payload] : forged) {
    Files files = clean;
    seg::encode_record_at(reinterpret_cast<std::byte*>(files[1].data()) + 80, 1, 80, kind,
                          std::as_bytes(std::span(payload)));
    TempDir copy;
    auto log = open_copy(copy, cfg, files);
    ASSERT_FALSE(log.has_value()) << "forged " << seg::to_string(kind) << " record accepted";
    EXPECT_EQ(log.error().code, Errc::corruption) << log.error().describe();
    EXPECT_NE(
        log.error().message.find("segment 1 offset 80: plain user record in an encrypted segment"),
        std::string::npos)
        << log.error().message;
    // skip-damaged drops it; no forged byte is ever returned.
    Config c = cfg;
    c.dir = copy.path();
    c.recovery = RecoveryMode::skip_damaged;
    auto replayed = replay_all(c);
    ASSERT_TRUE(replayed.has_value()) << replayed.error().describe();
    ASSERT_EQ(replayed->size(), 1u) << seg::to_string(kind);
    EXPECT_EQ((*replayed)[0].data, "second");
  }
}

// ---- keys -------------------------------------------------------------------

void expect_no_key_bytes(const std::string& text) {
  for (const char* hex : {kHex1, kHex2, kHexWrong}) {
    EXPECT_EQ(text.find(hex), std::string::npos) << text;
    EXPECT_EQ(text.find(std::string(hex).substr(0, 16)), std::string::npos) << text;
  }
}

TEST(TransformKeys, MissingWrongAndUnknownKeysAreClearErrors) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::none, true}, keys.file());
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    ASSERT_TRUE((*log)->append("secret").has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  expect_no_key_bytes(cfg.to_string());
  // No key source.
  Config none = small_config(dir.path());
  auto a = Log::open(none);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code, Errc::invalid_config);
  EXPECT_NE(a.error().message.find("segment 1 is encrypted under key id 1"), std::string::npos)
      << a.error().message;
  // Unknown key id.
  TempDir other;
  const auto only2 = other.path() / "keys";
  write_key_file(only2, std::string("2 ") + kHex2 + "\n");
  Config unknown = cfg;
  unknown.encryption_key_file = only2;
  auto b = Log::open(unknown);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code, Errc::invalid_config);
  EXPECT_NE(b.error().message.find("key id 1"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("segment 1"), std::string::npos) << b.error().message;
  expect_no_key_bytes(b.error().message);
  // The wrong bytes under the right id: records fail authentication.
  const auto wrong = other.path() / "wrong";
  write_key_file(wrong, std::string("1 ") + kHexWrong + "\n");
  Config bad = cfg;
  bad.encryption_key_file = wrong;
  auto c = Log::open(bad);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, Errc::invalid_config);
  EXPECT_NE(c.error().message.find("wrong key for key id 1 in segment 1"), std::string::npos)
      << c.error().message;
  expect_no_key_bytes(c.error().message);
  // A key file others may read.
  const auto open_file = other.path() / "open";
  write_key_file(open_file, std::string("1 ") + kHex1 + "\n", 0644);
  Config leaky = cfg;
  leaky.encryption_key_file = open_file;
  auto d = Log::open(leaky);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, Errc::invalid_config);
  EXPECT_NE(d.error().message.find("mode 0644"), std::string::npos) << d.error().message;
  // A malformed line names the line, not its bytes.
  const auto typo = other.path() / "typo";
  write_key_file(typo, std::string("1 ") + std::string(kHex1).substr(0, 63) + "z\n");
  Config t = cfg;
  t.encryption_key_file = typo;
  auto e = Log::open(t);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("line 1"), std::string::npos) << e.error().message;
  expect_no_key_bytes(e.error().message);
}

// Wrong key bytes under the right key id are told apart from damage by the
// segment header's key check value: refused in every recovery mode, never
// recorded as a loss, and the log then opens with the right key whole.
TEST(TransformKeys, AWrongKeyIsItsOwnErrorInEveryModeAndLosesNothing) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::lz4, true}, keys.file());
  std::vector<Replayed> want;
  for (int session = 0; session < 2; ++session) {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int i = 0; i < 30; ++i) {
      const std::string r = random_bytes(9000, session * 100 + i);
      auto p = (*log)->append(r);
      ASSERT_TRUE(p.has_value());
      want.push_back({*p, r});
    }
    ASSERT_TRUE((*log)->close().has_value());
  }
  const Files before = load_segments(dir.path());
  ASSERT_GT(before.size(), 2u);
  TempDir other;
  const auto wrong = other.path() / "wrong";
  write_key_file(wrong, std::string("1 ") + kHexWrong + "\n");
  for (RecoveryMode mode : {RecoveryMode::tolerate_torn_tail, RecoveryMode::point_in_time,
                            RecoveryMode::skip_damaged, RecoveryMode::absolute}) {
    Config bad = cfg;
    bad.encryption_key_file = wrong;
    bad.recovery = mode;
    auto log = Log::open(bad);
    ASSERT_FALSE(log.has_value()) << "opened with the wrong key, recovery=" << to_string(mode);
    EXPECT_EQ(log.error().code, Errc::invalid_config) << log.error().describe();
    EXPECT_NE(log.error().message.find("wrong key for key id 1 in segment 1"), std::string::npos)
        << log.error().message;
    expect_no_key_bytes(log.error().message);
  }
  EXPECT_EQ(load_segments(dir.path()), before) << "a refused open wrote into the log";
  RecoveryReport report;
  auto got = replay_all(cfg, &report);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  EXPECT_TRUE(same_records(*got, want));
  EXPECT_TRUE(report.accepted.empty());
  EXPECT_TRUE(report.damage.empty());
  // synclog-dump's reader (a keyring on a segment reader) says the same.
  auto parsed = seg::parse_key_file(std::string("1 ") + kHexWrong, "test");
  ASSERT_TRUE(parsed.has_value());
  seg::Keyring ring(seg::key_source_from(std::move(*parsed), "test"));
  auto reader = seg::SegmentReader::open(dir.path() / seg::segment_file_name(1), 1);
  ASSERT_TRUE(reader.has_value());
  reader->set_keys(&ring);
  auto r = reader->record(80);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("wrong key for key id 1 in segment 1"), std::string::npos)
      << r.error().message;
}

// A version-6 encrypted segment has no key check value: it still opens
// with its key, and a wrong key there can only show as failed records.
TEST(TransformKeys, AVersion6EncryptedSegmentWithoutAKeyCheckValueStillOpens) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::none, true}, keys.file());
  Position at;
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    at = *(*log)->append("written by version 6");
    ASSERT_TRUE((*log)->close().has_value());
  }
  Files files = load_segments(dir.path());
  for (auto& [id, bytes] : files) {
    const uint32_t v6 = 6, zero = 0;
    std::memcpy(bytes.data() + 8, &v6, 4);
    std::memcpy(bytes.data() + 56, &zero, 4);
    const uint32_t crc = io::crc32c(0, std::as_bytes(std::span(bytes.data(), 60)));
    std::memcpy(bytes.data() + 60, &crc, 4);
  }
  TempDir copy;
  write_segments(copy.path(), files);
  Config c = cfg;
  c.dir = copy.path();
  c.recovery = RecoveryMode::absolute;
  auto got = replay_all(c);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  ASSERT_FALSE(got->empty());
  EXPECT_EQ((*got)[0].position, at);
  EXPECT_EQ((*got)[0].data, "written by version 6");
}

TEST(TransformKeys, RotationReadsOldSegmentsAndWritesUnderTheNewKey) {
  TempDir dir;
  TempDir kd;
  const auto k1 = kd.path() / "k1";
  const auto k12 = kd.path() / "k12";
  const auto k2 = kd.path() / "k2";
  write_key_file(k1, std::string("1 ") + kHex1 + "\n");
  write_key_file(k12, std::string("1 ") + kHex1 + "\n2 " + kHex2 + "\n");
  write_key_file(k2, std::string("2 ") + kHex2 + "\n");
  Config cfg = transform_config(dir.path(), {"aes", Compression::zstd, true}, k1);
  std::vector<std::string> want;
  auto session = [&](const std::filesystem::path& key_file, int n) {
    cfg.encryption_key_file = key_file;
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    for (int i = 0; i < n; ++i) {
      want.push_back(compressible(300, i));
      ASSERT_TRUE((*log)->append(want.back()).has_value());
    }
    ASSERT_TRUE((*log)->close().has_value());
  };
  session(k1, 10);
  session(k12, 10);
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*got)[i].data, want[i]);
  // The second session's segment names key 2.
  const Files files = load_segments(dir.path());
  uint32_t key_id = 0;
  std::memcpy(&key_id, files.rbegin()->second.data() + 36, 4);
  EXPECT_EQ(key_id, 2u);
  std::memcpy(&key_id, files.begin()->second.data() + 36, 4);
  EXPECT_EQ(key_id, 1u);
  // Without key 1 the old segment cannot be read: a clear error.
  cfg.encryption_key_file = k2;
  auto log = Log::open(cfg);
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, Errc::invalid_config);
  EXPECT_NE(log.error().message.find("key id 1"), std::string::npos) << log.error().message;
}

TEST(TransformKeys, AKeySourceInCodeServesAsTheKeyFileDoes) {
  TempDir dir;
  int asked_current = 0;
  Config cfg = small_config(dir.path());
  cfg.encryption = Encryption::aes_256_gcm;
  cfg.encryption_keys = [&](std::optional<uint32_t> id) -> Result<EncryptionKey> {
    if (!id) ++asked_current;
    if (id && *id != 7) return make_error(Errc::invalid_argument, "no such key");
    EncryptionKey k;
    k.id = 7;
    for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<std::byte>(i * 3);
    return k;
  };
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->append("kms").has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  auto got = replay_all(cfg);
  ASSERT_TRUE(got.has_value()) << got.error().describe();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].data, "kms");
  EXPECT_GE(asked_current, 1);
}

// ---- config -----------------------------------------------------------------

TEST(TransformConfig, KeysParseValidateAndRoundTrip) {
  auto c = Config::parse(
      "dir=/tmp/x,compression=zstd,compression_level=7,encryption=aes-256-gcm,"
      "encryption_key_file=/k");
  ASSERT_TRUE(c.has_value()) << c.error().describe();
  EXPECT_TRUE(c->validate().has_value());
  auto again = Config::parse(c->to_string());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->to_string(), c->to_string());
  EXPECT_EQ(c->max_unfragmented_size(), Config{}.max_unfragmented_size() - 16);

  auto bad_value = Config::parse("compression=gzip");
  ASSERT_FALSE(bad_value.has_value());
  EXPECT_NE(bad_value.error().message.find("none | lz4 | zstd"), std::string::npos);
  auto check = [](const std::string& text, const std::string& says) {
    auto cfg = Config::parse("dir=/tmp/x," + text);
    ASSERT_TRUE(cfg.has_value()) << text;
    auto r = cfg->validate();
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  check("compression=zstd,compression_level=20", "outside 0..19");
  check("compression=lz4,compression_level=-1", "outside 0..65537");
  check("compression_level=3", "compression is none");
  check("encryption=aes-256-gcm", "needs a key source");
  check("encryption_key_file=/k", "encryption is none");
  Config both = *Config::parse("dir=/tmp/x,encryption=aes-256-gcm,encryption_key_file=/k");
  both.encryption_keys = [](std::optional<uint32_t>) -> Result<EncryptionKey> {
    return EncryptionKey{};
  };
  auto r = both.validate();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("both are set"), std::string::npos);
}

TEST(TransformConfig, LimitsAreAboutStoredBytes) {
  TempDir dir;
  KeyDir keys;
  Config cfg = transform_config(dir.path(), {"aes", Compression::lz4, true}, keys.file());
  const uint64_t max = cfg.max_unfragmented_size();
  ASSERT_EQ(max, cfg.segment_size / 2 - 64 - 16);
  auto log = Log::open(cfg);
  ASSERT_TRUE(log.has_value()) << log.error().describe();
  // Random bytes stay plain: stored at max + 16, the plain limit.
  const std::string biggest = random_bytes(max, 5);
  auto p = (*log)->append(biggest);
  ASSERT_TRUE(p.has_value()) << p.error().describe();
  auto over = (*log)->append(random_bytes(max + 1, 6));
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, Errc::invalid_argument);
  EXPECT_NE(over.error().message.find("16-byte tag"), std::string::npos) << over.error().message;
  auto got = read_all(**log);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, biggest);
  ASSERT_TRUE((*log)->close().has_value());
}

// ---- format and nonces --------------------------------------------------------

TEST(TransformFormat, FlagsAreRefusedWhereTheyCannotBe) {
  std::vector<std::byte> image(256);
  const std::byte payload[8] = {};
  // A sync marker with the encrypted flag: reserved.
  seg::encode_gathered(image, 1, 64, seg::Kind::sync,
                       std::vector<std::span<const std::byte>>{std::span(payload)},
                       seg::kEncryptedFlag);
  auto d = seg::decode_record(image, 1, 64);
  EXPECT_EQ(d.status, seg::Decode::bad);
  EXPECT_STREQ(d.reason, "reserved record flags set");
  // Compression code 3 and bit 31 on data: reserved.
  for (uint32_t flags : {3u << 28, 1u << 31}) {
    seg::encode_gathered(image, 1, 64, seg::Kind::data,
                         std::vector<std::span<const std::byte>>{std::span(payload)}, flags);
    d = seg::decode_record(image, 1, 64);
    EXPECT_EQ(d.status, seg::Decode::bad);
    EXPECT_STREQ(d.reason, "reserved record flags set");
  }
  // A version-5 header with a flag set is refused.
  seg::SegmentHeader h{1, 1 << 20, 4096, 42};
  h.encrypted = true;
  h.key_id = 3;
  h.salt = 99;
  std::byte head[seg::kHeaderSize];
  seg::encode_header(h, head);
  auto back = seg::decode_header(head);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->encrypted);
  EXPECT_EQ(back->key_id, 3u);
  EXPECT_EQ(back->salt, 99u);
  const uint32_t v5 = 5;
  std::memcpy(head + 8, &v5, 4);
  const uint32_t crc = io::crc32c(0, std::span(head, seg::kHeaderSize - 4));
  std::memcpy(head + seg::kHeaderSize - 4, &crc, 4);
  auto old = seg::decode_header(head);
  ASSERT_FALSE(old.has_value());
  EXPECT_NE(old.error().message.find("unknown segment header flags"), std::string::npos);
}

TEST(TransformFormat, KeysAndNoncesDifferForEveryLogSegmentAndOffset) {
  EncryptionKey master;
  master.id = 1;
  std::set<std::array<std::byte, 32>> keys;
  for (uint64_t log : {1ull, 2ull, 1ull << 40})
    for (uint64_t segment : {1ull, 2ull, 3ull, 1ull << 32}) {
      auto k = seg::derive_segment_key(master.bytes, log, segment);
      ASSERT_TRUE(k.has_value());
      std::array<std::byte, 32> copy;
      std::memcpy(copy.data(), k->data(), copy.size());
      EXPECT_TRUE(keys.insert(copy).second) << log << " " << segment;
    }
  std::set<std::array<std::byte, 12>> nonces;
  for (uint64_t salt : {1ull, 2ull})
    for (uint32_t off = 64; off < 64 + 8 * 100; off += 8) {
      EXPECT_TRUE(nonces.insert(seg::record_nonce(off, salt)).second);
    }
  auto s1 = seg::random_salt();
  auto s2 = seg::random_salt();
  ASSERT_TRUE(s1 && s2);
  EXPECT_NE(*s1, *s2);
}

TEST(TransformFormat, TwoLogsUnderOneMasterKeyStoreTheSameRecordDifferently) {
  KeyDir keys;
  TempDir a, b;
  std::string stored[2];
  int i = 0;
  for (const TempDir* d : {&a, &b}) {
    Config cfg = transform_config(d->path(), {"aes", Compression::none, true}, keys.file());
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value());
    auto p = (*log)->append("the same record");
    ASSERT_TRUE(p.has_value());
    ASSERT_EQ(*p, Position(1, 80));
    ASSERT_TRUE((*log)->close().has_value());
    stored[i++] = load_segments(d->path()).at(1).substr(88, 15 + 16);
  }
  EXPECT_NE(stored[0], stored[1]);
  EXPECT_EQ(stored[0].find("the same record"), std::string::npos);
}

}  // namespace
}  // namespace synclog::test
