// synclog-dump on healthy and damaged logs: it runs the real binary
// (SYNCLOG_DUMP_BIN) and checks its exit status and output.
//   - healthy: verify says OK (exit 0), list counts every record, print
//     returns exactly the appended records at their positions (raw and hex,
//     whole and between --from/--to), config names the segment size;
//   - the tool never changes the directory (it does not call Log::open,
//     which would add a segment and delete temp files);
//   - one damaged record: verify exits 1 naming segment, offset and reason in
//     every recovery mode; print stops before it (or skips it: skip-damaged);
//   - a torn tail is healthy by default and damage under --mode absolute;
//   - a bad header, a foreign file, a missing directory and bad arguments
//     get clear messages and the documented exit codes;
//   - print shows one line per record with an escaped, bounded preview;
//     --json gives JSON Lines (parsed here with nlohmann) for every record
//     and one object for every summary;
//   - --from/--to/--limit select exactly the records they name, and
//     malformed positions are refused;
//   - stats counts what was written (kinds, bytes, sizes, segments,
//     sessions, sync markers) and the damage found;
//   - a warning while a Log holds the directory, none after close;
//   - print --raw refuses a terminal (a pty).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "segments/format.h"
#include "segments/segment.h"
#include "test_util.h"

namespace synclog::test {
namespace {

namespace fs = std::filesystem;

struct Output {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs synclog-dump with `args`; stdout and stderr go through files, or
// stdout to `stdout_fd` if one is given.
Output dump(const std::vector<std::string>& args, int stdout_fd = -1) {
  static TempDir scratch;
  const fs::path out = scratch.path() / "out", err = scratch.path() / "err";
  std::ofstream(out).close();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o =
        stdout_fd >= 0 ? stdout_fd : ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv{const_cast<char*>(SYNCLOG_DUMP_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(SYNCLOG_DUMP_BIN, argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Output r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string show(const Output& r) {
  return "exit " + std::to_string(r.rc) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

struct Written {
  Position position;
  std::string data;
};

// A closed log over several segments; batch mode, so every append is
// followed by a sync marker (later markers prove earlier records durable).
std::vector<Written> build(const fs::path& dir, size_t count = 400) {
  Config c = small_config(dir);
  auto log = Log::open(c);
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Written> out;
  if (!log) return out;
  for (size_t i = 0; i < count; ++i) {
    std::string rec = make_record(1, i, 100 + (i * 37) % 2000);
    auto at = (*log)->append(rec);
    EXPECT_TRUE(at.has_value()) << at.error().describe();
    if (!at) break;
    out.push_back({*at, rec});
  }
  EXPECT_TRUE((*log)->close().has_value());
  return out;
}

// Every name, size and content in `dir`: to prove the tool changed nothing.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::directory_iterator(dir)) m[e.path().filename()] = slurp(e.path());
  return m;
}

void patch(const fs::path& file, uint64_t offset, const std::string& bytes) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Parses `print --raw`: "SEG:OFF KIND LEN " + LEN bytes + "\n", repeated.
std::vector<Written> parse_raw(const std::string& s) {
  std::vector<Written> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t sp1 = s.find(' ', i), sp2 = s.find(' ', sp1 + 1), sp3 = s.find(' ', sp2 + 1);
    if (sp3 == std::string::npos) break;
    const std::string p = s.substr(i, sp1 - i);
    const size_t colon = p.find(':');
    const size_t len = std::stoull(s.substr(sp2 + 1, sp3 - sp2 - 1));
    out.push_back({Position(std::stoull(p.substr(0, colon)), std::stoull(p.substr(colon + 1))),
                   s.substr(sp3 + 1, len)});
    i = sp3 + 1 + len;
    EXPECT_EQ(s[i], '\n');
    ++i;
  }
  return out;
}

void expect_same(const std::vector<Written>& got, const std::vector<Written>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].position, want[i].position) << i;
    EXPECT_TRUE(got[i].data == want[i].data) << "record " << i << " differs";
  }
}

TEST(Dump, HealthyLog) {
  TempDir tmp;
  const auto written = build(tmp.path(), 800);
  ASSERT_FALSE(written.empty());
  ASSERT_GT(written.back().position.segment(), 2u) << "the log should span several segments";
  // A temp file: Log::open would delete it; the tool must leave it.
  std::ofstream(tmp.path() / "99.recycle.tmp") << "x";
  const auto before = snapshot(tmp.path());
  const std::string dir = tmp.path().string();

  Output v = dump({"verify", dir});
  EXPECT_EQ(v.rc, 0) << show(v);
  EXPECT_TRUE(contains(v.out, "OK")) << show(v);
  EXPECT_TRUE(contains(v.out, std::to_string(written.size()) + " records")) << show(v);

  Output l = dump({"list", dir});
  EXPECT_EQ(l.rc, 0) << show(l);
  uint64_t listed = 0;
  std::istringstream rows(l.out);
  for (std::string line; std::getline(rows, line);) {
    if (!line.ends_with("durable end") && line.find(".seg ") != std::string::npos) {
      std::istringstream cols(line);
      std::string name, size, log_id;
      uint64_t records = 0;
      cols >> name >> size >> log_id >> records;
      listed += records;
    }
  }
  EXPECT_EQ(listed, written.size()) << show(l);
  EXPECT_TRUE(contains(l.out, seg::segment_file_name(1))) << show(l);
  EXPECT_TRUE(contains(l.out, "end record")) << show(l);
  EXPECT_TRUE(contains(l.out, "99.recycle.tmp")) << show(l);

  Output raw = dump({"print", dir, "--raw"});
  EXPECT_EQ(raw.rc, 0) << raw.err;
  expect_same(parse_raw(raw.out), written);

  // --from is inclusive, --to exclusive; any position works as a bound.
  const Position from = written[10].position, to = written[300].position;
  Output part = dump({"print", dir, "--raw", "--from", from.to_string(), "--to", to.to_string()});
  EXPECT_EQ(part.rc, 0) << part.err;
  expect_same(parse_raw(part.out), {written.begin() + 10, written.begin() + 300});
  Output mid = dump({"print", dir, "--raw", "--from",
                     Position(from.segment(), from.offset() + 1).to_string(), "--to",
                     Position(to.segment(), to.offset() + 1).to_string()});
  expect_same(parse_raw(mid.out), {written.begin() + 11, written.begin() + 301});

  Output hex = dump({"print", dir, "--hex", "--to", written[1].position.to_string()});
  EXPECT_EQ(hex.rc, 0) << hex.err;
  EXPECT_TRUE(contains(hex.out, written[0].position.to_string() + " data " +
                                    std::to_string(written[0].data.size()) + " bytes"))
      << hex.out;
  // make_record starts with the thread (u32 1) and the size (u32).
  EXPECT_TRUE(contains(hex.out, "00000000: 0100 0000")) << hex.out;
  EXPECT_TRUE(contains(hex.err, "1 record(s)")) << hex.err;

  Output all = dump({"print", dir, "--all", "--to", written[1].position.to_string()});
  EXPECT_TRUE(contains(all.out, "1:64 session 8 bytes")) << all.out;

  Output cfg = dump({"config", dir});
  EXPECT_EQ(cfg.rc, 0) << show(cfg);
  EXPECT_TRUE(contains(cfg.out, "segment_size    262144 bytes")) << cfg.out;
  EXPECT_TRUE(contains(cfg.out, "format version  7")) << cfg.out;
  EXPECT_TRUE(contains(cfg.out, "does not record")) << cfg.out;

  EXPECT_TRUE(snapshot(tmp.path()) == before) << "synclog-dump changed the log directory";
}

TEST(Dump, DamagedRecord) {
  TempDir tmp;
  const auto written = build(tmp.path());
  ASSERT_GT(written.size(), 100u);
  const Written& victim = written[50];
  // Flip a payload byte: the record's checksum no longer matches.
  const fs::path file = tmp.path() / seg::segment_file_name(victim.position.segment());
  patch(file, victim.position.offset() + seg::kRecordHeaderSize + 20,
        std::string(1, static_cast<char>(victim.data[20] ^ 0x40)));
  const std::string dir = tmp.path().string();
  const std::string where = "segment " + std::to_string(victim.position.segment()) + " offset " +
                            std::to_string(victim.position.offset());

  for (const char* mode : {"tolerate-torn-tail", "point-in-time", "absolute", "skip-damaged"}) {
    Output v = dump({"verify", dir, "--mode", mode});
    EXPECT_EQ(v.rc, 1) << mode << "\n" << show(v);
    EXPECT_TRUE(contains(v.out, "damage: " + where)) << mode << "\n" << show(v);
    EXPECT_TRUE(contains(v.out, "record checksum mismatch")) << mode << "\n" << show(v);
    EXPECT_TRUE(contains(v.out, "DAMAGED")) << mode << "\n" << show(v);
  }
  Output l = dump({"list", dir});
  EXPECT_EQ(l.rc, 1) << show(l);
  EXPECT_TRUE(contains(l.out, "damaged")) << show(l);

  // The default mode refuses proven damage and names the modes that accept
  // it; point-in-time stops before the damage; skip-damaged skips just it.
  Output d = dump({"print", dir, "--raw"});
  EXPECT_EQ(d.rc, 1) << show(d);
  EXPECT_TRUE(contains(d.err, "recovery=point-in-time would end the log")) << show(d);
  Output p = dump({"print", dir, "--raw", "--mode", "point-in-time"});
  EXPECT_EQ(p.rc, 0) << show(p);
  expect_same(parse_raw(p.out), {written.begin(), written.begin() + 50});
  Output s = dump({"print", dir, "--raw", "--mode", "skip-damaged"});
  std::vector<Written> rest(written.begin(), written.begin() + 50);
  rest.insert(rest.end(), written.begin() + 51, written.end());
  expect_same(parse_raw(s.out), rest);
}

TEST(Dump, TornTail) {
  TempDir tmp;
  const auto written = build(tmp.path(), 50);
  // Replace the last end record (written by close) with garbage: an
  // unfinished write after the last sync.
  std::vector<uint64_t> ids;
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    uint64_t id = 0;
    if (seg::parse_segment_file_name(e.path().filename(), &id)) ids.push_back(id);
  }
  std::sort(ids.rbegin(), ids.rend());
  bool patched = false;
  for (uint64_t id : ids) {
    const fs::path file = tmp.path() / seg::segment_file_name(id);
    const std::string bytes = slurp(file);
    auto img = std::as_bytes(std::span(bytes.data(), bytes.size()));
    for (uint32_t off = seg::kHeaderSize;;) {
      auto d = seg::decode_record(img, id, off);
      if (d.status != seg::Decode::ok) break;
      if (d.record.kind == seg::Kind::end) {
        patch(file, off, std::string("\x5a\x5a\x5a\x5a\x07\x00\x00\x01\x11\x22\x33", 11));
        patched = true;
        break;
      }
      off += d.record.framed;
    }
    if (patched) break;
  }
  ASSERT_TRUE(patched);
  const std::string dir = tmp.path().string();
  Output v = dump({"verify", dir});
  EXPECT_EQ(v.rc, 0) << show(v);
  EXPECT_TRUE(contains(v.out, "torn tail")) << show(v);
  EXPECT_TRUE(contains(v.out, "50 records")) << show(v);
  Output a = dump({"verify", dir, "--mode", "absolute"});
  EXPECT_EQ(a.rc, 1) << show(a);
  EXPECT_TRUE(contains(a.out, "torn write")) << show(a);
  Output l = dump({"list", dir});
  EXPECT_EQ(l.rc, 0) << show(l);
  EXPECT_TRUE(contains(l.out, "torn")) << show(l);
  Output p = dump({"print", dir, "--raw"});
  expect_same(parse_raw(p.out), written);
}

TEST(Dump, BadHeader) {
  TempDir tmp;
  build(tmp.path(), 20);
  patch(tmp.path() / seg::segment_file_name(1), 0, "XX");
  const std::string dir = tmp.path().string();
  Output v = dump({"verify", dir});
  EXPECT_EQ(v.rc, 1) << show(v);
  EXPECT_TRUE(contains(v.out, seg::segment_file_name(1))) << show(v);
  EXPECT_TRUE(contains(v.out, "bad magic")) << show(v);
  Output l = dump({"list", dir});
  EXPECT_EQ(l.rc, 1) << show(l);
  EXPECT_TRUE(contains(l.out, "bad header: not a synclog segment (bad magic)")) << show(l);
  Output c = dump({"config", dir});
  EXPECT_EQ(c.rc, 1) << show(c);
  EXPECT_TRUE(contains(c.out, "bad header")) << show(c);
}

TEST(Dump, ForeignFile) {
  TempDir tmp;
  build(tmp.path(), 5);
  std::ofstream(tmp.path() / "notes.txt") << "hello";
  const std::string dir = tmp.path().string();
  for (const char* cmd : {"verify", "list", "print"}) {
    Output r = dump({cmd, dir});
    EXPECT_EQ(r.rc, 1) << cmd << "\n" << show(r);
    EXPECT_TRUE(contains(r.out + r.err, "foreign file 'notes.txt'")) << cmd << "\n" << show(r);
  }
  Output c = dump({"config", dir});
  EXPECT_EQ(c.rc, 1) << show(c);
  EXPECT_TRUE(contains(c.out, "notes.txt")) << show(c);
}

TEST(Dump, EmptyDirectoryIsHealthy) {
  TempDir tmp;
  Output v = dump({"verify", tmp.path().string()});
  EXPECT_EQ(v.rc, 0) << show(v);
  EXPECT_TRUE(contains(v.out, "0 records")) << show(v);
}

TEST(Dump, UsageErrors) {
  Output missing = dump({"verify", "/nonexistent/synclog-dump-test"});
  EXPECT_EQ(missing.rc, 2) << show(missing);
  EXPECT_TRUE(contains(missing.err, "no such directory")) << show(missing);
  TempDir tmp;
  const std::string dir = tmp.path().string();
  Output file = dump({"list", (tmp.path() / "x").string()});
  EXPECT_EQ(file.rc, 2) << show(file);
  Output mode = dump({"verify", dir, "--mode", "lenient"});
  EXPECT_EQ(mode.rc, 2) << show(mode);
  EXPECT_TRUE(contains(mode.err, "unknown recovery mode 'lenient'")) << show(mode);
  Output pos = dump({"print", dir, "--from", "12"});
  EXPECT_EQ(pos.rc, 2) << show(pos);
  EXPECT_TRUE(contains(pos.err, "bad position '12'")) << show(pos);
  Output both = dump({"print", dir, "--hex", "--raw"});
  EXPECT_EQ(both.rc, 2) << show(both);
  Output none = dump({});
  EXPECT_EQ(none.rc, 2) << show(none);
}

using nlohmann::json;

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Every stdout line of a --json run, parsed; a line that is not JSON fails.
std::vector<json> json_lines(const Output& r) {
  std::vector<json> out;
  for (const auto& line : lines(r.out)) {
    json j = json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
    out.push_back(std::move(j));
  }
  return out;
}

json json_object(const Output& r) {
  const auto all = json_lines(r);
  EXPECT_EQ(all.size(), 1u) << show(r);
  return all.empty() ? json() : all[0];
}

std::string hex_of(const std::string& bytes) {
  static constexpr char d[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

// Appends `records` in one session; the positions they got.
std::vector<Written> append_session(const fs::path& dir, const std::vector<std::string>& records) {
  auto log = Log::open(small_config(dir));
  EXPECT_TRUE(log.has_value()) << log.error().describe();
  std::vector<Written> out;
  if (!log) return out;
  for (const auto& r : records) {
    auto at = (*log)->append(r);
    EXPECT_TRUE(at.has_value()) << at.error().describe();
    if (!at) break;
    out.push_back({*at, r});
  }
  EXPECT_TRUE((*log)->close().has_value());
  return out;
}

TEST(Dump, PrintOneLinePerRecord) {
  TempDir tmp;
  const auto written = build(tmp.path(), 800);
  ASSERT_EQ(written.size(), 800u);
  const std::string dir = tmp.path().string();
  Output p = dump({"print", dir});
  ASSERT_EQ(p.rc, 0) << p.err;
  const auto rows = lines(p.out);
  ASSERT_EQ(rows.size(), written.size()) << "stdout must hold one line per record";
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string head = written[i].position.to_string() + " data " +
                             std::to_string(written[i].data.size()) + " bytes \"";
    ASSERT_TRUE(rows[i].starts_with(head)) << rows[i];
    // make_record's bytes are binary: all of it escaped, cut short.
    EXPECT_TRUE(rows[i].ends_with("\"...")) << rows[i];
    EXPECT_LE(rows[i].size(), head.size() + 48 + 4) << rows[i];
    EXPECT_TRUE(std::all_of(rows[i].begin(), rows[i].end(),
                            [](unsigned char c) { return c >= 0x20 && c < 0x7f; }))
        << "a control or non-ASCII byte reached the terminal: " << rows[i];
  }
  EXPECT_TRUE(contains(p.err, "800 record(s)")) << p.err;

  // --all: markers are one line each too, and say what they name.
  Output a = dump({"print", dir, "--all"});
  ASSERT_EQ(a.rc, 0) << a.err;
  Output aj = dump({"print", dir, "--all", "--json"});
  const auto all_rows = lines(a.out);
  EXPECT_EQ(all_rows.size(), json_lines(aj).size());
  EXPECT_GT(all_rows.size(), written.size() * 2) << "batch mode: a sync marker per append";
  EXPECT_TRUE(contains(a.out, "1:64 session 8 bytes (previous session ended at 0:0)\n")) << a.out;
  EXPECT_TRUE(contains(a.out, " sync 16 bytes (durable before this sync: ")) << a.out;
  // Version 6: each marker says when its sync began.
  EXPECT_TRUE(contains(a.out, "; it began at ")) << a.out;
  EXPECT_TRUE(contains(aj.out, "\"began_ns\":")) << aj.out;
}

TEST(Dump, PreviewEscapesAndTruncates) {
  TempDir tmp;
  const std::string quoted = "say \"hi\"\\\n\t\r";
  const std::string binary("\x01\x7f\xff\0z", 5);
  const std::string longer(100, 'a');
  const std::string exact(48, 'b');  // just fits
  const auto w = append_session(tmp.path(), {"hello", quoted, binary, longer, exact});
  ASSERT_EQ(w.size(), 5u);
  Output p = dump({"print", tmp.path().string()});
  ASSERT_EQ(p.rc, 0) << show(p);
  const auto rows = lines(p.out);
  ASSERT_EQ(rows.size(), 5u) << p.out;
  auto head = [&](int i) {
    return w[i].position.to_string() + " data " + std::to_string(w[i].data.size()) + " bytes ";
  };
  EXPECT_EQ(rows[0], head(0) + "\"hello\"");
  EXPECT_EQ(rows[1], head(1) + R"("say \"hi\"\\\n\t\r")");
  EXPECT_EQ(rows[2], head(2) + R"("\x01\x7f\xff\x00z")");
  EXPECT_EQ(rows[3], head(3) + "\"" + std::string(48, 'a') + "\"...");
  EXPECT_EQ(rows[4], head(4) + "\"" + exact + "\"");
  // --hex keeps the full dump.
  Output h = dump({"print", tmp.path().string(), "--hex"});
  EXPECT_TRUE(contains(h.out, "  00000000: 6865 6c6c 6f")) << h.out;
  EXPECT_TRUE(contains(h.out, "  00000060: 6161 6161")) << h.out;
}

TEST(Dump, Json) {
  TempDir tmp;
  const auto written = build(tmp.path(), 300);
  ASSERT_EQ(written.size(), 300u);
  const std::string dir = tmp.path().string();

  Output p = dump({"print", dir, "--json"});
  ASSERT_EQ(p.rc, 0) << p.err;
  const auto recs = json_lines(p);
  ASSERT_EQ(recs.size(), written.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& r = recs[i];
    const Position at = written[i].position;
    ASSERT_EQ(r.at("position"), at.to_string());
    EXPECT_EQ(r.at("segment"), at.segment());
    EXPECT_EQ(r.at("offset"), at.offset());
    EXPECT_EQ(r.at("kind"), "data");
    EXPECT_EQ(r.at("size"), written[i].data.size());
    EXPECT_EQ(r.at("framed"), seg::framed_size(written[i].data.size()));
    EXPECT_EQ(r.at("payload_hex"), hex_of(written[i].data)) << i;
  }
  EXPECT_TRUE(p.err.empty()) << "JSON runs keep stderr for warnings: " << p.err;

  // Markers carry what they name, as positions.
  Output a = dump({"print", dir, "--json", "--all"});
  const auto marks = json_lines(a);
  ASSERT_FALSE(marks.empty());
  EXPECT_EQ(marks.at(0).at("kind"), "session");
  EXPECT_EQ(marks.at(0).at("previous_end"), "0:0");
  size_t syncs = 0;
  for (const auto& m : marks) {
    if (m.at("kind") != "sync") continue;
    ++syncs;
    EXPECT_TRUE(m.at("durable_before").is_string()) << m.dump();
  }
  EXPECT_GT(syncs, 0u);
  EXPECT_EQ(marks.back().at("kind"), "end");

  Output v = dump({"verify", dir, "--json"});
  EXPECT_EQ(v.rc, 0) << show(v);
  const json vj = json_object(v);
  EXPECT_EQ(vj.at("ok"), true);
  EXPECT_EQ(vj.at("records"), written.size());
  EXPECT_EQ(vj.at("mode"), "tolerate-torn-tail");
  EXPECT_TRUE(vj.at("damage").empty());
  EXPECT_TRUE(vj.at("torn_tail").is_null());

  Output l = dump({"list", dir, "--json"});
  EXPECT_EQ(l.rc, 0) << show(l);
  const json lj = json_object(l);
  uint64_t listed = 0;
  for (const auto& s : lj.at("segments")) {
    listed += s.at("records").get<uint64_t>();
    EXPECT_EQ(s.at("name"), seg::segment_file_name(s.at("id").get<uint64_t>()));
  }
  EXPECT_EQ(listed, written.size());
  EXPECT_EQ(lj.at("segments").back().at("end"), "end record");
  EXPECT_EQ(lj.at("recovery").at("records"), written.size());
  EXPECT_EQ(lj.at("lock_file"), true);

  Output c = dump({"config", dir, "--json"});
  EXPECT_EQ(c.rc, 0) << show(c);
  const json cj = json_object(c);
  ASSERT_EQ(cj.at("runs").size(), 1u);
  EXPECT_EQ(cj.at("runs").at(0).at("segment_size"), 262144);
  EXPECT_EQ(cj.at("runs").at(0).at("first_segment"), 1);

  Output s = dump({"stats", dir, "--json"});
  EXPECT_EQ(s.rc, 0) << show(s);
  EXPECT_EQ(json_object(s).at("kinds").at("data").at("records"), written.size());

  // Damage comes out as regions with positions, in every summary.
  const Written& victim = written[40];
  patch(tmp.path() / seg::segment_file_name(victim.position.segment()),
        victim.position.offset() + seg::kRecordHeaderSize + 3,
        std::string(1, static_cast<char>(victim.data[3] ^ 1)));
  Output d = dump({"verify", dir, "--json"});
  EXPECT_EQ(d.rc, 1) << show(d);
  const json dj = json_object(d);
  EXPECT_EQ(dj.at("ok"), false);
  ASSERT_EQ(dj.at("damage").size(), 1u) << dj.dump();
  EXPECT_EQ(dj.at("damage").at(0).at("position"), victim.position.to_string());
  EXPECT_TRUE(contains(dj.at("error").get<std::string>(), "checksum")) << dj.dump();
  Output dl = dump({"list", dir, "--json", "--mode", "skip-damaged"});
  EXPECT_EQ(dl.rc, 1) << show(dl);
  EXPECT_EQ(json_object(dl).at("recovery").at("damage").at(0).at("position"),
            victim.position.to_string());
}

// Records from `b` up to (not including) `e`, as --raw and --json print them.
std::vector<Written> slice(const std::vector<Written>& w, size_t b, size_t e) {
  return {w.begin() + static_cast<long>(b), w.begin() + static_cast<long>(e)};
}

std::vector<Written> from_json(const Output& r) {
  std::vector<Written> out;
  for (const auto& j : json_lines(r)) {
    const std::string hex = j.at("payload_hex");
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    out.push_back(
        {Position(j.at("segment").get<uint64_t>(), j.at("offset").get<uint64_t>()), bytes});
  }
  return out;
}

TEST(Dump, RangeAndLimit) {
  TempDir tmp;
  const auto w = build(tmp.path(), 600);
  ASSERT_EQ(w.size(), 600u);
  const std::string dir = tmp.path().string();
  const std::string p10 = w[10].position.to_string();

  Output lim = dump({"print", dir, "--raw", "--from", p10, "--limit", "7"});
  EXPECT_EQ(lim.rc, 0) << lim.err;
  expect_same(parse_raw(lim.out), slice(w, 10, 17));
  // It says where the next page starts, and that page is the next 7.
  EXPECT_TRUE(contains(lim.err, "the next record is at " + w[17].position.to_string())) << lim.err;
  Output next =
      dump({"print", dir, "--json", "--from", w[17].position.to_string(), "--limit", "7"});
  expect_same(from_json(next), slice(w, 17, 24));

  // --to beats --limit when it comes first, and the reverse.
  Output to_first = dump(
      {"print", dir, "--json", "--from", p10, "--to", w[13].position.to_string(), "--limit", "7"});
  expect_same(from_json(to_first), slice(w, 10, 13));
  EXPECT_FALSE(contains(to_first.err, "next record")) << to_first.err;
  Output lim_first =
      dump({"print", dir, "--from", p10, "--to", w[500].position.to_string(), "--limit", "3"});
  EXPECT_EQ(lines(lim_first.out).size(), 3u) << lim_first.out;

  // Across a segment boundary: the first record of each later segment.
  size_t b = 1;
  while (w[b].position.segment() == w[b - 1].position.segment()) ++b;
  Output across =
      dump({"print", dir, "--json", "--from", w[b - 2].position.to_string(), "--limit", "4"});
  expect_same(from_json(across), slice(w, b - 2, b + 2));
  // --from a segment's start, with no offset a record sits at.
  Output seg_start = dump({"print", dir, "--json", "--from",
                           Position(w[b].position.segment(), 0).to_string(), "--limit", "1"});
  expect_same(from_json(seg_start), slice(w, b, b + 1));

  // --limit counts the records shown: with --all, markers too.
  Output all = dump({"print", dir, "--all", "--limit", "5"});
  EXPECT_EQ(lines(all.out).size(), 5u) << all.out;
  // stats over a range counts just that range.
  Output st = dump({"stats", dir, "--json", "--from", p10, "--to", w[20].position.to_string()});
  EXPECT_EQ(json_object(st).at("kinds").at("data").at("records"), 10) << st.out;
  Output st_lim = dump({"stats", dir, "--json", "--limit", "9"});
  EXPECT_EQ(json_object(st_lim).at("records"), 9) << st_lim.out;

  // from == to is an empty range, not an error.
  Output empty = dump({"print", dir, "--from", p10, "--to", p10});
  EXPECT_EQ(empty.rc, 0) << show(empty);
  EXPECT_TRUE(empty.out.empty()) << empty.out;
}

TEST(Dump, MalformedRangesAreRefused) {
  TempDir tmp;
  build(tmp.path(), 5);
  const std::string dir = tmp.path().string();
  for (const char* bad : {"3", "3:", ":64", "-1:64", "+1:64", " 1:64", "1:64 ", "1:64x", "0x1:64",
                          "1:4294967296", "4294967296:0", "a:b", "1:2:3", ""}) {
    for (const char* flag : {"--from", "--to"}) {
      for (const char* cmd : {"print", "stats"}) {
        Output r = dump({cmd, dir, flag, bad});
        EXPECT_EQ(r.rc, 2) << cmd << " " << flag << " '" << bad << "'\n" << show(r);
        EXPECT_TRUE(contains(r.err, std::string(flag) + ": bad position '" + bad + "'")) << show(r);
        EXPECT_TRUE(r.out.empty()) << show(r);
      }
    }
  }
  Output rev = dump({"print", dir, "--from", "2:64", "--to", "1:64"});
  EXPECT_EQ(rev.rc, 2) << show(rev);
  EXPECT_TRUE(contains(rev.err, "--from 2:64 is after --to 1:64")) << show(rev);
  for (const char* bad : {"0", "-1", "abc", "1.5", "2x", "", " 3"}) {
    Output r = dump({"print", dir, "--limit", bad});
    EXPECT_EQ(r.rc, 2) << bad << "\n" << show(r);
    EXPECT_TRUE(contains(r.err, "--limit: bad count")) << show(r);
  }
  Output ok = dump({"print", dir, "--from", "4294967295:4294967295"});
  EXPECT_EQ(ok.rc, 0) << show(ok);
}

uint32_t nearest_rank(std::vector<uint32_t> v, unsigned p) {
  std::sort(v.begin(), v.end());
  const size_t rank = std::max<size_t>(1, (v.size() * p + 99) / 100);
  return v[rank - 1];
}

TEST(Dump, Stats) {
  TempDir tmp;
  std::vector<std::string> first, second;
  for (size_t i = 0; i < 150; ++i) first.push_back(make_record(1, i, 40 + (i * 53) % 3000));
  for (size_t i = 0; i < 90; ++i) second.push_back(make_record(2, i, 16 + (i * 7) % 500));
  auto w = append_session(tmp.path(), first);
  const auto w2 = append_session(tmp.path(), second);
  w.insert(w.end(), w2.begin(), w2.end());
  ASSERT_EQ(w.size(), 240u);
  const std::string dir = tmp.path().string();

  Output s = dump({"stats", dir, "--json"});
  ASSERT_EQ(s.rc, 0) << show(s);
  const json j = json_object(s);
  std::vector<uint32_t> sizes;
  uint64_t payload = 0, framed = 0;
  std::map<uint64_t, uint64_t> per_segment;
  for (const auto& r : w) {
    sizes.push_back(static_cast<uint32_t>(r.data.size()));
    payload += r.data.size();
    framed += seg::framed_size(r.data.size());
    ++per_segment[r.position.segment()];
  }
  const json& data = j.at("kinds").at("data");
  EXPECT_EQ(data.at("records"), w.size());
  EXPECT_EQ(data.at("payload_bytes"), payload);
  EXPECT_EQ(data.at("framed_bytes"), framed);
  const json& d = j.at("data_sizes");
  EXPECT_EQ(d.at("min"), *std::min_element(sizes.begin(), sizes.end()));
  EXPECT_EQ(d.at("max"), *std::max_element(sizes.begin(), sizes.end()));
  EXPECT_EQ(d.at("median"), nearest_rank(sizes, 50));
  EXPECT_EQ(d.at("p99"), nearest_rank(sizes, 99));
  EXPECT_EQ(j.at("sessions").size(), 2u);
  EXPECT_EQ(j.at("sessions").at(0).at("previous_end"), "0:0");
  EXPECT_EQ(j.at("kinds").at("session").at("records"), 2);
  EXPECT_GE(j.at("kinds").at("sync").at("records").get<uint64_t>(), w.size());
  EXPECT_EQ(j.at("sync_markers").at("count"), j.at("kinds").at("sync").at("records"));
  EXPECT_EQ(j.at("kinds").at("end").at("records").get<uint64_t>(), j.at("segments").size())
      << "every segment here ends with an end record";
  uint64_t kinds_total = 0;
  for (const auto& [name, k] : j.at("kinds").items())
    kinds_total += k.at("records").get<uint64_t>();
  EXPECT_EQ(j.at("records"), kinds_total);
  for (const auto& seg_stats : j.at("segments")) {
    EXPECT_EQ(seg_stats.at("data"), per_segment[seg_stats.at("id").get<uint64_t>()])
        << seg_stats.dump();
  }
  EXPECT_TRUE(j.at("damage").at("regions").empty());
  EXPECT_TRUE(j.at("damage").at("torn_tail").is_null());

  // The text form has the same figures.
  Output t = dump({"stats", dir});
  ASSERT_EQ(t.rc, 0) << show(t);
  bool data_row = false;
  for (const auto& line : lines(t.out)) {
    std::istringstream cols(line);
    std::string kind;
    uint64_t n = 0, p = 0, f = 0;
    if (cols >> kind >> n >> p >> f && kind == "data") {
      data_row = true;
      EXPECT_EQ(n, w.size()) << line;
      EXPECT_EQ(p, payload) << line;
      EXPECT_EQ(f, framed) << line;
    }
  }
  EXPECT_TRUE(data_row) << t.out;
  EXPECT_TRUE(contains(t.out, "min " + std::to_string(d.at("min").get<uint32_t>()) + ", median " +
                                  std::to_string(d.at("median").get<uint32_t>()) + ", p99 " +
                                  std::to_string(d.at("p99").get<uint32_t>())))
      << t.out;
  EXPECT_TRUE(contains(t.out, "sessions: 2")) << t.out;
  EXPECT_TRUE(contains(t.out, "damage: none")) << t.out;

  // Damage: the default mode refuses it and says how to count around it.
  const Written& victim = w[30];
  patch(tmp.path() / seg::segment_file_name(victim.position.segment()),
        victim.position.offset() + seg::kRecordHeaderSize + 9,
        std::string(1, static_cast<char>(victim.data[9] ^ 0x10)));
  Output refused = dump({"stats", dir});
  EXPECT_EQ(refused.rc, 1) << show(refused);
  EXPECT_TRUE(contains(refused.err, "--mode skip-damaged")) << show(refused);
  Output skipped = dump({"stats", dir, "--json", "--mode", "skip-damaged"});
  EXPECT_EQ(skipped.rc, 1) << show(skipped);
  const json sj = json_object(skipped);
  ASSERT_EQ(sj.at("damage").at("regions").size(), 1u) << sj.dump();
  EXPECT_EQ(sj.at("damage").at("regions").at(0).at("position"), victim.position.to_string());
  EXPECT_EQ(sj.at("kinds").at("data").at("records"), w.size() - 1);
  Output skipped_text = dump({"stats", dir, "--mode", "skip-damaged"});
  EXPECT_TRUE(contains(skipped_text.out, "damage: 1 region(s)")) << skipped_text.out;
}

TEST(Dump, WarnsWhileTheLogIsOpen) {
  TempDir tmp;
  build(tmp.path(), 10);
  const std::string dir = tmp.path().string();
  const std::string warning = "log is open by pid " + std::to_string(::getpid());
  {
    auto log = Log::open(small_config(tmp.path()));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->append("while open").has_value());
    for (const char* cmd : {"verify", "list", "print", "stats", "config"}) {
      Output r = dump({cmd, dir});
      EXPECT_TRUE(contains(r.err, warning)) << cmd << "\n" << show(r);
      EXPECT_TRUE(contains(r.err, "output may be incomplete")) << show(r);
    }
    Output j = dump({"print", dir, "--json"});
    EXPECT_TRUE(contains(j.err, warning)) << show(j);
    for (const auto& line : json_lines(j)) EXPECT_TRUE(line.is_object());
    // The probe left the lock where it was: a second open is still refused,
    // and the log goes on working.
    auto second = Log::open(small_config(tmp.path()));
    ASSERT_FALSE(second.has_value());
    EXPECT_TRUE(contains(second.error().describe(), "in use")) << second.error().describe();
    ASSERT_TRUE((*log)->append("after the probe").has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  for (const char* cmd : {"verify", "print", "stats"}) {
    Output r = dump({cmd, dir});
    EXPECT_EQ(r.rc, 0) << show(r);
    EXPECT_FALSE(contains(r.err, "warning")) << cmd << "\n" << show(r);
  }
}

TEST(Dump, RawRefusesATerminal) {
  TempDir tmp;
  const auto w = append_session(tmp.path(), {"one", "two"});
  ASSERT_EQ(w.size(), 2u);
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) GTEST_SKIP() << "no pseudo-terminals here";
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  ASSERT_EQ(::isatty(slave), 1);
  const std::string dir = tmp.path().string();
  Output raw = dump({"print", dir, "--raw"}, slave);
  EXPECT_EQ(raw.rc, 2) << show(raw);
  EXPECT_TRUE(contains(raw.err, "refusing to write them to a terminal")) << show(raw);
  // The other forms are text and go to a terminal fine.
  Output text = dump({"print", dir}, slave);
  EXPECT_EQ(text.rc, 0) << show(text);
  ::close(slave);
  ::close(master);
  // A pipe or a file is not a terminal.
  Output file = dump({"print", dir, "--raw"});
  EXPECT_EQ(file.rc, 0) << show(file);
  expect_same(parse_raw(file.out), w);
}

// fsck's lost+found (a log at the root of its filesystem) is accepted as
// Log::open accepts it; a plain file of that name is still foreign.
TEST(Dump, LostAndFound) {
  TempDir tmp;
  build(tmp.path(), 5);
  fs::create_directory(tmp.path() / "lost+found");
  const std::string dir = tmp.path().string();
  for (const char* cmd : {"verify", "list", "print", "stats", "config"}) {
    Output r = dump({cmd, dir});
    EXPECT_EQ(r.rc, 0) << cmd << "\n" << show(r);
  }
  EXPECT_TRUE(json_object(dump({"config", dir, "--json"})).at("foreign_files").empty());
  fs::remove(tmp.path() / "lost+found");
  std::ofstream(tmp.path() / "lost+found") << "x";
  for (const char* cmd : {"verify", "config"}) {
    Output r = dump({cmd, dir});
    EXPECT_EQ(r.rc, 1) << cmd << "\n" << show(r);
    EXPECT_TRUE(contains(r.out + r.err, "lost+found")) << cmd << "\n" << show(r);
  }
}

// Empty records (format version 4): print, verify and stats show them as
// data records of 0 bytes, at their positions, never as the end.
TEST(Dump, EmptyRecords) {
  TempDir tmp;
  std::vector<std::string> recs = {"", "a", "", "", std::string(20, 'b'), ""};
  std::vector<Written> w = append_session(tmp.path(), recs);
  {
    auto log = Log::open(small_config(tmp.path()));
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    const std::string none, x = "x";
    const std::span<const std::byte> batch[] = {{}, std::as_bytes(std::span(x)), {}};
    auto at = (*log)->append_batch(batch);
    ASSERT_TRUE(at.has_value()) << at.error().describe();
    for (size_t i = 0; i < 3; ++i) w.push_back({(*at)[i], i == 1 ? x : none});
    ASSERT_TRUE((*log)->close().has_value());
  }
  ASSERT_EQ(w.size(), 9u);
  const std::string dir = tmp.path().string();

  Output v = dump({"verify", dir});
  EXPECT_EQ(v.rc, 0) << show(v);
  EXPECT_TRUE(contains(v.out, "9 records")) << show(v);

  Output raw = dump({"print", dir, "--raw"});
  EXPECT_EQ(raw.rc, 0) << raw.err;
  expect_same(parse_raw(raw.out), w);
  // From an empty record's position, inside a batch too.
  Output from = dump({"print", dir, "--raw", "--from", w[7].position.to_string()});
  expect_same(parse_raw(from.out), {w.begin() + 7, w.end()});

  Output p = dump({"print", dir});
  ASSERT_EQ(p.rc, 0) << show(p);
  const auto rows = lines(p.out);
  ASSERT_EQ(rows.size(), w.size()) << p.out;
  EXPECT_EQ(rows[0], w[0].position.to_string() + " data 0 bytes \"\"");
  EXPECT_EQ(rows[8], w[8].position.to_string() + " data 0 bytes \"\"");

  Output j = dump({"print", dir, "--json"});
  const auto js = json_lines(j);
  ASSERT_EQ(js.size(), w.size());
  EXPECT_EQ(js[2].at("size"), 0);
  EXPECT_EQ(js[2].at("framed"), 8);
  EXPECT_EQ(js[2].at("payload_hex"), "");

  Output s = dump({"stats", dir, "--json"});
  ASSERT_EQ(s.rc, 0) << show(s);
  const json sj = json_object(s);
  EXPECT_EQ(sj.at("kinds").at("data").at("records"), 9);  // a batch's records included
  EXPECT_EQ(sj.at("data_sizes").at("min"), 0);
  EXPECT_EQ(sj.at("data_sizes").at("max"), 20);
}

TEST(Dump, TransformedRecordsShowHowTheyAreStoredAndDecryptOnlyWithAKey) {
  TempDir dir, kd;
  const fs::path key_file = kd.path() / "keys";
  std::ofstream(key_file) << "4 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);
  Config cfg = small_config(dir.path());
  cfg.compression = Compression::zstd;
  cfg.encryption = Encryption::aes_256_gcm;
  cfg.encryption_key_file = key_file;
  const std::string big(2000, 'z');
  {
    auto log = Log::open(cfg);
    ASSERT_TRUE(log.has_value()) << log.error().describe();
    ASSERT_TRUE((*log)->append(big).has_value());
    ASSERT_TRUE((*log)->append_batch(std::vector<std::string_view>{"k1=v1", "k2=v2"}).has_value());
    ASSERT_TRUE((*log)->close().has_value());
  }
  const std::string d = dir.path().string();
  Output sealed = dump({"print", d});
  EXPECT_EQ(sealed.rc, 0) << show(sealed);
  EXPECT_TRUE(contains(sealed.out, "1:80 data")) << sealed.out;
  EXPECT_TRUE(contains(sealed.out, "[zstd+aes-256-gcm] (encrypted; pass --key-file to decrypt)"))
      << sealed.out;
  EXPECT_FALSE(contains(sealed.out, "zzzz")) << sealed.out;
  Output opened = dump({"print", d, "--key-file", key_file.string()});
  EXPECT_EQ(opened.rc, 0) << show(opened);
  EXPECT_TRUE(contains(opened.out, "1:80 data 2000 bytes [zstd+aes-256-gcm]")) << opened.out;
  EXPECT_TRUE(contains(opened.out, "k2=v2")) << opened.out;
  EXPECT_FALSE(contains(opened.out + opened.err, "00112233445566778899")) << show(opened);
  Output verify = dump({"verify", d, "--key-file", key_file.string()});
  EXPECT_EQ(verify.rc, 0) << show(verify);
  Output config = dump({"config", d});
  EXPECT_EQ(config.rc, 0) << show(config);
  EXPECT_TRUE(contains(config.out, "aes-256-gcm under key id 4")) << config.out;
}

}  // namespace
}  // namespace synclog::test
