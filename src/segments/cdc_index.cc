#include "segments/cdc_index.h"

#include <cerrno>
#include <charconv>
#include <vector>

#include "io/file.h"
#include "segments/segment.h"

namespace synclog::seg {
namespace {
constexpr size_t kMaxIndexBytes = 64;
constexpr std::string_view kCompleted = "COMPLETED\n";
}  // namespace

std::string cdc_index_name(uint64_t segment_id) {
  std::string name = segment_file_name(segment_id);
  return name.substr(0, name.size() - 4) + "_cdc.idx";
}

std::string encode_cdc_index(const CdcIndex& index) {
  return std::to_string(index.offset) + "\n" + (index.completed ? std::string(kCompleted) : "");
}

std::optional<CdcIndex> parse_cdc_index(const std::string& text) {
  CdcIndex out;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out.offset);
  if (ec != std::errc() || p == text.data() || p == text.data() + text.size() || *p != '\n') {
    return std::nullopt;
  }
  const std::string_view rest(p + 1, text.data() + text.size() - (p + 1));
  if (rest == kCompleted) {
    out.completed = true;
  } else if (!rest.empty()) {
    return std::nullopt;
  }
  // Leading zeros or a sign would parse but are not what is written.
  if (encode_cdc_index(out) != text) return std::nullopt;
  return out;
}

Result<std::optional<CdcIndex>> load_cdc_index(const std::filesystem::path& cdc_dir, uint64_t id) {
  const auto path = cdc_dir / cdc_index_name(id);
  auto file = io::File::open(path, io::File::Mode::read);
  if (!file) {
    if (file.error().sys_errno == ENOENT) return std::optional<CdcIndex>();
    return std::unexpected(file.error());
  }
  std::vector<std::byte> buf(kMaxIndexBytes);
  auto n = file->read_at(0, buf);
  if (!n) return std::unexpected(n.error());
  auto parsed = parse_cdc_index(std::string(reinterpret_cast<const char*>(buf.data()), *n));
  if (!parsed) {
    return make_error(Errc::bad_directory,
                      "CDC index file " + path.string() +
                          " does not parse (expected \"<offset>\\n\" and optionally "
                          "\"COMPLETED\\n\")");
  }
  return std::optional<CdcIndex>(*parsed);
}

Result<void> store_cdc_index(const std::filesystem::path& cdc_dir, uint64_t id,
                             const CdcIndex& index, uint32_t perms) {
  // The temp name ends in ".tmp": a consumer listing the directory skips it.
  const auto path = cdc_dir / cdc_index_name(id);
  const auto tmp = cdc_dir / (cdc_index_name(id) + ".tmp");
  const std::string text = encode_cdc_index(index);
  // Synced before the rename: after a power loss the name holds the old
  // index or this one, never an empty file. The rename itself is not
  // synced: losing it leaves the older, smaller offset, which is still
  // durable.
  return io::replace_file(path, tmp, std::as_bytes(std::span(text)), perms);
}

}  // namespace synclog::seg
