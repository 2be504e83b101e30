#include "synclog/config.h"

#include <charconv>
#include <cstring>
#include <functional>
#include <span>

#include "segments/format.h"
#include "segments/fragments.h"

namespace synclog {
namespace {

constexpr uint64_t kMaxRecordLimit = uint64_t{1} << 30;
// Maxima of the durations and byte totals (docs/config.md): far above any
// useful value, and low enough that a deadline of now() plus one, in
// nanoseconds, and a total plus a segment never overflow.
constexpr auto kMaxPace = std::chrono::hours(1);  // interval, lag_bound, window
constexpr auto kMaxAllocationTimeout = std::chrono::hours(24);
constexpr uint64_t kMaxTotalBytes = uint64_t{1} << 60;  // max_total_size, cdc_max_size

template <class E>
struct Named {
  const char* name;
  E value;
};

constexpr Named<BackendKind> kBackends[] = {
    {"msync", BackendKind::msync},   {"msync-pool", BackendKind::msync_pool},
    {"uring", BackendKind::uring},   {"aio", BackendKind::aio},
    {"pwrite", BackendKind::pwrite}, {"auto", BackendKind::auto_select}};
constexpr Named<SegmentKind> kKinds[] = {{"mmap", SegmentKind::mmap},
                                         {"direct", SegmentKind::direct},
                                         {"buffered", SegmentKind::buffered},
                                         {"auto", SegmentKind::auto_select}};
constexpr Named<SyncMode> kModes[] = {
    {"periodic", SyncMode::periodic}, {"batch", SyncMode::batch}, {"group", SyncMode::group}};
constexpr Named<RecoveryMode> kRecovery[] = {
    {"tolerate-torn-tail", RecoveryMode::tolerate_torn_tail},
    {"point-in-time", RecoveryMode::point_in_time},
    {"absolute", RecoveryMode::absolute},
    {"skip-damaged", RecoveryMode::skip_damaged}};
constexpr Named<TailPolicy> kTails[] = {{"pad", TailPolicy::pad}, {"rewrite", TailPolicy::rewrite}};
constexpr Named<DirectSync> kDirectSyncs[] = {{"auto", DirectSync::auto_select},
                                              {"dsync", DirectSync::dsync},
                                              {"fdatasync", DirectSync::fdatasync}};
constexpr Named<FailurePolicy> kPolicies[] = {{"stop", FailurePolicy::stop},
                                              {"abort", FailurePolicy::abort}};
constexpr Named<Compression> kCompressions[] = {
    {"none", Compression::none}, {"lz4", Compression::lz4}, {"zstd", Compression::zstd}};
constexpr Named<Encryption> kEncryptions[] = {{"none", Encryption::none},
                                              {"aes-256-gcm", Encryption::aes_256_gcm}};
// The GCM tag every encrypted record carries (transform.h has the same).
constexpr uint64_t kTagBytes = 16;

template <class E, size_t N>
const char* name_of(const Named<E> (&table)[N], E v) {
  for (const auto& n : table) {
    if (n.value == v) return n.name;
  }
  return "?";
}

template <class E, size_t N>
std::string allowed(const Named<E> (&table)[N]) {
  std::string s;
  for (const auto& n : table) s += (s.empty() ? "" : " | ") + std::string(n.name);
  return s;
}

std::unexpected<Error> bad(std::string_view key, std::string_view value, const std::string& want) {
  return make_error(Errc::invalid_config, "config key '" + std::string(key) + "': bad value '" +
                                              std::string(value) + "' (expected " + want + ")");
}

template <class E, size_t N>
Result<void> parse_enum(const Named<E> (&table)[N], std::string_view key, std::string_view value,
                        E* out) {
  for (const auto& n : table) {
    if (value == n.name) {
      *out = n.value;
      return {};
    }
  }
  return bad(key, value, allowed(table));
}

// "123" followed by an optional unit from `units` (suffix, multiplier).
Result<uint64_t> parse_scaled(std::string_view key, std::string_view value,
                              std::span<const std::pair<const char*, uint64_t>> units,
                              const std::string& want) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || p == value.data()) return bad(key, value, want);
  std::string_view unit(p, value.data() + value.size() - p);
  for (auto [suffix, mult] : units) {
    if (unit == suffix) {
      if (mult != 0 && n > UINT64_MAX / mult) return bad(key, value, want + ", without overflow");
      return n * mult;
    }
  }
  return bad(key, value, want);
}

constexpr std::pair<const char*, uint64_t> kSizeUnits[] = {
    {"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
constexpr std::pair<const char*, uint64_t> kTimeUnits[] = {{"us", 1}, {"ms", 1000}, {"s", 1000000}};

Result<uint64_t> parse_size(std::string_view key, std::string_view value) {
  return parse_scaled(key, value, kSizeUnits, "a byte count such as 4096, 64KiB, 32MiB or 1GiB");
}

Result<std::chrono::microseconds> parse_duration(std::string_view key, std::string_view value) {
  auto us = parse_scaled(key, value, kTimeUnits, "a duration such as 500us, 10ms or 2s");
  if (!us) return std::unexpected(us.error());
  return std::chrono::microseconds(*us);
}

Result<bool> parse_bool(std::string_view key, std::string_view value) {
  if (value == "true" || value == "on" || value == "1") return true;
  if (value == "false" || value == "off" || value == "0") return false;
  return bad(key, value, "true | false | on | off | 1 | 0");
}

Result<uint32_t> parse_count(std::string_view key, std::string_view value) {
  uint32_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || p != value.data() + value.size()) {
    return bad(key, value, "a whole number");
  }
  return n;
}

Result<int> parse_int(std::string_view key, std::string_view value) {
  int n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || p != value.data() + value.size()) {
    return bad(key, value, "a whole number");
  }
  return n;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

std::string duration_text(std::chrono::microseconds d) { return std::to_string(d.count()) + "us"; }

std::unexpected<Error> invalid(const std::string& message) {
  return make_error(Errc::invalid_config, message);
}

}  // namespace

SegmentKind segment_kind_for(BackendKind backend) {
  switch (backend) {
    case BackendKind::msync:
    case BackendKind::msync_pool:
      return SegmentKind::mmap;
    case BackendKind::uring:
    case BackendKind::aio:
      return SegmentKind::direct;
    case BackendKind::pwrite:
      return SegmentKind::buffered;
    case BackendKind::auto_select:
      break;
  }
  return SegmentKind::auto_select;
}

const char* to_string(BackendKind v) { return name_of(kBackends, v); }
const char* to_string(SegmentKind v) { return name_of(kKinds, v); }
const char* to_string(SyncMode v) { return name_of(kModes, v); }
const char* to_string(RecoveryMode v) { return name_of(kRecovery, v); }
const char* to_string(TailPolicy v) { return name_of(kTails, v); }
const char* to_string(DirectSync v) { return name_of(kDirectSyncs, v); }
const char* to_string(FailurePolicy v) { return name_of(kPolicies, v); }
const char* to_string(Compression v) { return name_of(kCompressions, v); }
const char* to_string(Encryption v) { return name_of(kEncryptions, v); }

Result<void> Config::set(std::string_view key, std::string_view value) {
  auto assign = [](auto result, auto* field) -> Result<void> {
    if (!result) return std::unexpected(result.error());
    *field = *result;
    return {};
  };
  if (key == "dir") {
    if (value.empty()) return bad(key, value, "a directory path");
    dir = std::string(value);
    return {};
  }
  if (key == "archive_command") {
    // Empty means off, so that to_string() of a config without one parses.
    archive_command = std::string(value);
    return {};
  }
  if (key == "archive_dir") {
    // Empty means off, as for archive_command.
    archive_dir = std::string(value);
    return {};
  }
  if (key == "cdc_dir") {
    // Empty means off, as for archive_command.
    cdc_dir = std::string(value);
    return {};
  }
  if (key == "cdc_max_size") return assign(parse_size(key, value), &cdc_max_size);
  if (key == "backend") return parse_enum(kBackends, key, value, &backend);
  if (key == "segment_kind") return parse_enum(kKinds, key, value, &segment_kind);
  if (key == "mode") return parse_enum(kModes, key, value, &mode);
  if (key == "recovery") return parse_enum(kRecovery, key, value, &recovery);
  if (key == "tail") return parse_enum(kTails, key, value, &tail);
  if (key == "direct_sync") return parse_enum(kDirectSyncs, key, value, &direct_sync);
  if (key == "on_sync_failure") return parse_enum(kPolicies, key, value, &on_sync_failure);
  if (key == "compression") return parse_enum(kCompressions, key, value, &compression);
  if (key == "compression_level") return assign(parse_int(key, value), &compression_level);
  if (key == "encryption") return parse_enum(kEncryptions, key, value, &encryption);
  if (key == "encryption_key_file") {
    // Empty means none, so that to_string() of a config without one parses.
    encryption_key_file = std::string(value);
    return {};
  }
  if (key == "interval") return assign(parse_duration(key, value), &interval);
  if (key == "lag_bound") return assign(parse_duration(key, value), &lag_bound);
  if (key == "window") return assign(parse_duration(key, value), &window);
  if (key == "allocation_timeout") {
    auto d = parse_duration(key, value);
    if (!d) return std::unexpected(d.error());
    allocation_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
    return {};
  }
  if (key == "segment_size") return assign(parse_size(key, value), &segment_size);
  if (key == "max_total_size") return assign(parse_size(key, value), &max_total_size);
  if (key == "max_record") return assign(parse_size(key, value), &max_record);
  if (key == "spare_segments") return assign(parse_count(key, value), &spare_segments);
  if (key == "sync_threads") return assign(parse_count(key, value), &sync_threads);
  if (key == "queue_depth") return assign(parse_count(key, value), &queue_depth);
  if (key == "syncs_in_flight") return assign(parse_count(key, value), &syncs_in_flight);
  if (key == "block_size") return assign(parse_count(key, value), &block_size);
  if (key == "recycle") return assign(parse_bool(key, value), &recycle);
  if (key == "prezero") return assign(parse_bool(key, value), &prezero);
  if (key == "metrics") return assign(parse_bool(key, value), &metrics);
  if (key == "create_dir") return assign(parse_bool(key, value), &create_dir);
  if (key == "group_read") return assign(parse_bool(key, value), &group_read);
  return make_error(
      Errc::invalid_config,
      "unknown config key '" + std::string(key) +
          "' (known: dir, backend, segment_kind, mode, interval, lag_bound, window, "
          "segment_size, spare_segments, recycle, prezero, max_total_size, max_record, "
          "allocation_timeout, recovery, sync_threads, queue_depth, syncs_in_flight, tail, "
          "direct_sync, block_size, metrics, on_sync_failure, create_dir, group_read, "
          "archive_command, archive_dir, cdc_dir, cdc_max_size, compression, compression_level, "
          "encryption, "
          "encryption_key_file)");
}

Result<Config> Config::parse(std::string_view text) {
  Config c;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (trim(item).empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return make_error(Errc::invalid_config,
                        "config item '" + trim(item) + "' is not of the form key=value");
    }
    if (auto r = c.set(trim(item.substr(0, eq)), trim(item.substr(eq + 1))); !r) {
      return std::unexpected(r.error());
    }
  }
  return c;
}

uint64_t Config::max_unfragmented_size() const {
  // Half a segment, so a record always fits in a fresh segment even after a
  // session record and sync markers, and a switch wastes at most half of one.
  // Limits are about stored bytes: a record is stored compressed only where
  // that is smaller, so its worst case is its plain size plus the tag.
  const uint64_t half = segment_size / 2 - seg::kHeaderSize;
  const uint64_t tag = encryption != Encryption::none ? kTagBytes : 0;
  return std::min<uint64_t>(half, seg::kMaxPayload) - tag;
}

uint64_t Config::max_record_size() const {
  return max_record != 0 ? max_record : max_unfragmented_size();
}

Result<void> Config::validate() const {
  if (dir.empty()) return invalid("config key 'dir': the log directory is not set");
  if (segment_size < (64ull << 10) || segment_size > (1ull << 30) || segment_size % 4096 != 0) {
    return invalid("config key 'segment_size': " + std::to_string(segment_size) +
                   " is not a multiple of 4096 between 64KiB and 1GiB");
  }
  if (spare_segments < 1 || spare_segments > 64) {
    return invalid("config key 'spare_segments': " + std::to_string(spare_segments) +
                   " is outside 1..64");
  }
  if (max_total_size != 0 && max_total_size < (uint64_t{spare_segments} + 2) * segment_size) {
    return invalid("config key 'max_total_size': " + std::to_string(max_total_size) +
                   " cannot hold the active segment, one more and " +
                   std::to_string(spare_segments) + " spare(s) of segment_size " +
                   std::to_string(segment_size) + " (0 means unbounded)");
  }
  if (max_record > kMaxRecordLimit) {
    return invalid("config key 'max_record': " + std::to_string(max_record) +
                   " is above 1GiB (a reader holds a whole record in memory)");
  }
  const auto tag = static_cast<uint32_t>(encryption != Encryption::none ? kTagBytes : 0);
  if (max_total_size != 0 && max_record > max_unfragmented_size()) {
    // The active segment, the segments the largest record spans and the
    // spares must fit together, or that record could never be written.
    const uint64_t need = (uint64_t{seg::fragment_segments_needed(max_record, segment_size, tag)} +
                           spare_segments + 1) *
                          segment_size;
    if (max_total_size < need) {
      return invalid("config key 'max_record': a record of " + std::to_string(max_record) +
                     " bytes spans up to " +
                     std::to_string(seg::fragment_segments_needed(max_record, segment_size, tag)) +
                     " segments of segment_size " + std::to_string(segment_size) +
                     ", which with the active segment and " + std::to_string(spare_segments) +
                     " spare(s) needs max_total_size >= " + std::to_string(need) + " (it is " +
                     std::to_string(max_total_size) + ")");
    }
  }
  for (const auto& [key, value] :
       {std::pair<const char*, std::chrono::microseconds>{"interval", interval},
        {"lag_bound", lag_bound},
        {"window", window}}) {
    if (value > kMaxPace) {
      return invalid(std::string("config key '") + key + "': " + duration_text(value) +
                     " is above the maximum 3600s (1h)");
    }
  }
  if (allocation_timeout > kMaxAllocationTimeout) {
    return invalid(
        "config key 'allocation_timeout': " + std::to_string(allocation_timeout.count()) +
        "ms is above the maximum 86400s (24h)");
  }
  for (const auto& [key, value] :
       {std::pair<const char*, uint64_t>{"max_total_size", max_total_size},
        {"cdc_max_size", cdc_max_size}}) {
    if (value > kMaxTotalBytes) {
      return invalid(std::string("config key '") + key + "': " + std::to_string(value) +
                     " is above the maximum 1EiB (2^60 bytes; 0 means unbounded)");
    }
  }
  if (interval.count() <= 0) return invalid("config key 'interval': must be greater than 0");
  if (window.count() <= 0) return invalid("config key 'window': must be greater than 0");
  if (lag_bound.count() < 0) return invalid("config key 'lag_bound': must not be negative");
  if (allocation_timeout.count() < 1) {
    return invalid("config key 'allocation_timeout': must be at least 1ms");
  }
  if (sync_threads < 1 || sync_threads > 64) {
    return invalid("config key 'sync_threads': " + std::to_string(sync_threads) +
                   " is outside 1..64");
  }
  if (queue_depth < 1 || queue_depth > 4096) {
    return invalid("config key 'queue_depth': " + std::to_string(queue_depth) +
                   " is outside 1..4096");
  }
  if (syncs_in_flight < 1 || syncs_in_flight > 64) {
    return invalid("config key 'syncs_in_flight': " + std::to_string(syncs_in_flight) +
                   " is outside 1..64");
  }
  if (syncs_in_flight > 1) {
    // Syncs in flight together must write disjoint blocks, each made
    // durable by its own writes: direct segments whose syncs end on a block
    // boundary. Batch mode only: periodic and group modes pace syncs by time.
    const std::string why =
        "config key 'syncs_in_flight': " + std::to_string(syncs_in_flight) + " needs ";
    const bool direct =
        backend == BackendKind::uring || backend == BackendKind::aio ||
        (backend == BackendKind::auto_select && segment_kind == SegmentKind::direct);
    if (!direct) {
      return invalid(why + "backend=uring, backend=aio or segment_kind=direct (backend is " +
                     synclog::to_string(backend) + ")");
    }
    if (tail != TailPolicy::pad) return invalid(why + "tail=pad (tail is rewrite)");
    if (mode != SyncMode::batch) {
      return invalid(why + "mode=batch (mode is " + synclog::to_string(mode) + ")");
    }
  }
  if (block_size != 0 &&
      (block_size < 512 || block_size > 4096 || (block_size & (block_size - 1)) != 0)) {
    return invalid("config key 'block_size': " + std::to_string(block_size) +
                   " is not 0 (probe) or a power of two from 512 to 4096");
  }
  if (!archive_dir.empty() && (!archive_command.empty() || archive)) {
    return invalid(std::string("config key 'archive_dir': set together with ") +
                   (archive ? "the archive hook (Config::archive)" : "'archive_command'") +
                   "; set at most one");
  }
  if (!archive_command.empty() && archive) {
    return invalid(
        "config key 'archive_command': set together with the archive hook (Config::archive); "
        "set at most one");
  }
  for (size_t i = 0; i < archive_command.size(); ++i) {
    if (archive_command[i] != '%') continue;
    const char next = i + 1 < archive_command.size() ? archive_command[i + 1] : '\0';
    if (next != 'p' && next != 'f' && next != '%') {
      return invalid("config key 'archive_command': '" + archive_command + "' has '%" +
                     (next ? std::string(1, next) : std::string()) + "' at offset " +
                     std::to_string(i) + " (allowed: %p the segment's path, %f its file name, " +
                     "%% a percent sign)");
    }
    ++i;
  }
  if (cdc_dir.empty() && cdc_max_size != 0) {
    return invalid("config key 'cdc_max_size': set without cdc_dir (change data capture is off)");
  }
  if (cdc_max_size != 0 && cdc_max_size < (uint64_t{spare_segments} + 2) * segment_size) {
    // Spares are linked as they are made: the directory holds the active
    // segment, the next and the spares before the consumer can free any.
    return invalid("config key 'cdc_max_size': " + std::to_string(cdc_max_size) +
                   " cannot hold the active segment, one more and " +
                   std::to_string(spare_segments) + " spare(s) of segment_size " +
                   std::to_string(segment_size) + " (0 means unbounded)");
  }
  switch (compression) {
    case Compression::none:
      if (compression_level != 0) {
        return invalid("config key 'compression_level': " + std::to_string(compression_level) +
                       " is set but compression is none");
      }
      break;
    case Compression::lz4:
      if (compression_level < 0 || compression_level > 65537) {
        return invalid("config key 'compression_level': " + std::to_string(compression_level) +
                       " is outside 0..65537 (lz4 acceleration; 0 = 1, the best ratio)");
      }
      break;
    case Compression::zstd:
      if (compression_level < 0 || compression_level > 19) {
        return invalid("config key 'compression_level': " + std::to_string(compression_level) +
                       " is outside 0..19 (zstd level; 0 = 3)");
      }
      break;
  }
  const bool key_file = !encryption_key_file.empty();
  const bool key_source = static_cast<bool>(encryption_keys);
  if (encryption == Encryption::none && (key_file || key_source)) {
    return invalid(std::string("config key '") +
                   (key_file ? "encryption_key_file" : "encryption_keys") +
                   "': a key source is set but encryption is none");
  }
  if (encryption != Encryption::none) {
    if (key_file && key_source) {
      return invalid(
          "config keys 'encryption_key_file' and 'encryption_keys': both are set; set exactly one "
          "key source");
    }
    if (!key_file && !key_source) {
      return invalid(std::string("config key 'encryption': ") + synclog::to_string(encryption) +
                     " needs a key source: encryption_key_file or Config::encryption_keys");
    }
  }
  // An auto on either side takes the other's choice; two explicit values
  // must fit.
  const SegmentKind needs = segment_kind_for(backend);
  if (needs != SegmentKind::auto_select && segment_kind != SegmentKind::auto_select &&
      needs != segment_kind) {
    return invalid(std::string("config keys 'backend' and 'segment_kind': backend '") +
                   synclog::to_string(backend) + "' cannot sync '" +
                   synclog::to_string(segment_kind) +
                   "' segments (msync, msync-pool: mmap; uring, aio: direct; pwrite: buffered)");
  }
  return {};
}

std::string Config::to_string() const {
  std::string s;
  auto add = [&](const char* k, const std::string& v) {
    s += (s.empty() ? "" : ",") + (k + ("=" + v));
  };
  add("dir", dir.string());
  add("backend", synclog::to_string(backend));
  add("segment_kind", synclog::to_string(segment_kind));
  add("mode", synclog::to_string(mode));
  add("interval", duration_text(interval));
  add("lag_bound", duration_text(lag_bound));
  add("window", duration_text(window));
  add("segment_size", std::to_string(segment_size));
  add("spare_segments", std::to_string(spare_segments));
  add("recycle", recycle ? "true" : "false");
  add("prezero", prezero ? "true" : "false");
  add("max_total_size", std::to_string(max_total_size));
  add("max_record", std::to_string(max_record));
  add("allocation_timeout", std::to_string(allocation_timeout.count() * 1000) + "us");
  add("recovery", synclog::to_string(recovery));
  add("sync_threads", std::to_string(sync_threads));
  add("queue_depth", std::to_string(queue_depth));
  add("syncs_in_flight", std::to_string(syncs_in_flight));
  add("tail", synclog::to_string(tail));
  add("direct_sync", synclog::to_string(direct_sync));
  add("block_size", std::to_string(block_size));
  add("metrics", metrics ? "true" : "false");
  add("on_sync_failure", synclog::to_string(on_sync_failure));
  add("create_dir", create_dir ? "true" : "false");
  add("group_read", group_read ? "true" : "false");
  add("archive_command", archive_command);
  add("archive_dir", archive_dir.string());
  add("cdc_dir", cdc_dir.string());
  add("cdc_max_size", std::to_string(cdc_max_size));
  add("compression", synclog::to_string(compression));
  add("compression_level", std::to_string(compression_level));
  add("encryption", synclog::to_string(encryption));
  add("encryption_key_file", encryption_key_file.string());
  return s;
}

}  // namespace synclog
