// What Log::open does to cdc_dir before a session links segments into it.
#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "io/file.h"
#include "io/links.h"
#include "log/cdc.h"
#include "segments/format.h"
#include "segments/segment.h"

namespace synclog {
namespace {

constexpr const char* kProbeName = ".synclog-cdc-probe";

std::unexpected<Error> bad_cdc_dir(const Config& c, const std::string& why, int err = 0) {
  return make_error(Errc::invalid_config, "config key 'cdc_dir': " + c.cdc_dir.string() + " " + why,
                    err);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

Result<void> check_cdc_dir(const Config& config, const std::filesystem::path& probe_from) {
  if (auto r = io::check_writable_dir(config.cdc_dir); !r) {
    return bad_cdc_dir(config, "is not usable: " + r.error().message, r.error().sys_errno);
  }
  auto inside = io::same_or_inside(config.cdc_dir, config.dir);
  if (!inside) return std::unexpected(inside.error());
  if (*inside) {
    return bad_cdc_dir(config, "is the log directory " + config.dir.string() +
                                   " or inside it; it must be a directory of its own");
  }
  // Same st_dev is not enough: a bind mount of the same filesystem refuses
  // links across it too (EXDEV). Only a link answers.
  const auto probe = config.cdc_dir / kProbeName;
  if (auto r = io::remove_file(probe); !r && r.error().sys_errno != ENOENT) return r;
  if (auto r = io::link_file(probe_from, probe); !r) {
    if (r.error().sys_errno == EXDEV) {
      return bad_cdc_dir(config,
                         "is not on the same filesystem (mount) as the log directory " +
                             config.dir.string() +
                             ": segments are hard-linked into it, and link() fails "
                             "across filesystems (EXDEV)",
                         EXDEV);
    }
    return bad_cdc_dir(config, "refuses a hard link from the log directory: " + r.error().message,
                       r.error().sys_errno);
  }
  return io::remove_file(probe);
}

Result<void> settle_cdc_dir(const Config& config, const seg::Recovered& rec) {
  const auto& dir = config.cdc_dir;
  auto names = io::list_dir(dir);
  if (!names) return std::unexpected(names.error());
  // Two passes, whatever order the directory lists its names in. First
  // every stale name goes, durably: a consumer that moves on from a
  // segment this open completes must never land on a link about to
  // disappear. Temp indexes go then too, before any index is rewritten
  // through the same temp name.
  std::vector<std::pair<uint64_t, std::string>> kept;
  bool removed = false;
  for (const auto& name : *names) {
    if (ends_with(name, "_cdc.idx.tmp")) {
      if (auto r = io::remove_file(dir / name); !r && r.error().sys_errno != ENOENT) return r;
      removed = true;
      continue;
    }
    uint64_t id = 0;
    if (!seg::parse_segment_file_name(name, &id)) continue;
    const bool discarded =
        std::find(rec.discard.begin(), rec.discard.end(), id) != rec.discard.end();
    if (id < rec.next_id && !discarded) {
      kept.emplace_back(id, name);
      continue;
    }
    auto index = seg::load_cdc_index(dir, id);
    if (!index) return std::unexpected(index.error());
    if (*index && (*index)->offset > seg::kHeaderSize) {
      return make_error(Errc::bad_directory,
                        "cdc_dir " + dir.string() + " holds segment " + name +
                            " whose index claims durable records up to offset " +
                            std::to_string((*index)->offset) + ", but the log in " +
                            config.dir.string() +
                            " has no such records there (another log's CDC directory?); "
                            "consume or move it first");
    }
    // A spare of a session that crashed, or a segment past the recovered
    // end: no durable record, and the id may be used again.
    for (const auto& n : {seg::cdc_index_name(id), name}) {
      if (auto r = io::remove_file(dir / n); !r && r.error().sys_errno != ENOENT) return r;
    }
    removed = true;
  }
  if (removed) {
    if (auto r = io::sync_dir(dir); !r) return r;
  }
  std::sort(kept.begin(), kept.end());
  for (const auto& [id, name] : kept) {
    auto index = seg::load_cdc_index(dir, id);
    if (!index) return std::unexpected(index.error());
    if (*index && (*index)->completed) continue;
    uint64_t end = 0;
    if (rec.kept.contains(id)) {
      // Still in the log: where recovery ends it (a torn tail, or a
      // point-in-time stop, is not the consumer's either).
      end = seg::kHeaderSize;
      for (const auto& e : rec.extents) {
        if (e.segment == id) end = std::max<uint64_t>(end, e.end);
      }
    } else {
      // Released from the log before it was marked: it was complete then.
      auto file = io::File::open(dir / name, io::File::Mode::read);
      if (!file) return std::unexpected(file.error());
      auto size = file->size();
      if (!size) return std::unexpected(size.error());
      end = *size;
    }
    if (auto r = seg::store_cdc_index(dir, id, {end, true}, config.file_perms()); !r) return r;
  }
  return {};
}

}  // namespace synclog
