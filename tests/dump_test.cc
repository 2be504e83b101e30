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
//     get clear messages and the documented exit codes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
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

// Runs synclog-dump with `args`; stdout and stderr go through files.
Output dump(const std::vector<std::string>& args) {
  static TempDir scratch;
  const fs::path out = scratch.path() / "out", err = scratch.path() / "err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

  Output hex = dump({"print", dir, "--to", written[1].position.to_string()});
  EXPECT_EQ(hex.rc, 0) << hex.err;
  EXPECT_TRUE(contains(hex.out, written[0].position.to_string() + " data " +
                                    std::to_string(written[0].data.size()) + " bytes"))
      << hex.out;
  // make_record starts with the thread (u32 1) and the size (u32).
  EXPECT_TRUE(contains(hex.out, "00000000: 0100 0000")) << hex.out;
  EXPECT_TRUE(contains(hex.out, "1 record(s)")) << hex.out;

  Output all = dump({"print", dir, "--all", "--to", written[1].position.to_string()});
  EXPECT_TRUE(contains(all.out, "1:64 session 8 bytes")) << all.out;

  Output cfg = dump({"config", dir});
  EXPECT_EQ(cfg.rc, 0) << show(cfg);
  EXPECT_TRUE(contains(cfg.out, "segment_size    262144 bytes")) << cfg.out;
  EXPECT_TRUE(contains(cfg.out, "format version  2")) << cfg.out;
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

}  // namespace
}  // namespace synclog::test
