// F5: the format does not depend on the backend. A log written with each
// backend opens, replays and continues with every other one.
#include <gtest/gtest.h>

#include "test_util.h"

namespace synclog::test {
namespace {

const char* const kBackends[] = {"msync", "msync-pool", "uring", "aio", "pwrite"};

Config config_for(const std::string& backend, const std::filesystem::path& dir) {
  Config c = small_config(dir);
  c = Config::parse("backend=" + backend).value();
  c.dir = dir;
  c.segment_size = 256 << 10;
  c.sync_threads = 2;
  c.segment_kind = backend == "uring" || backend == "aio" ? SegmentKind::direct
                   : backend == "pwrite"                  ? SegmentKind::buffered
                                                          : SegmentKind::mmap;
  return c;
}

bool available(const std::string& backend) {
  TempDir dir;
  auto log = Log::open(config_for(backend, dir.path()));
  return log.has_value() || log.error().code != Errc::unsupported;
}

using Pair = std::tuple<const char*, const char*>;
class CrossBackend : public ::testing::TestWithParam<Pair> {};

TEST_P(CrossBackend, WriteWithOneReplayAndContinueWithTheOther) {
  const std::string a = std::get<0>(GetParam());
  const std::string b = std::get<1>(GetParam());
  if (!available(a) || !available(b)) GTEST_SKIP() << a << " or " << b << " cannot run here";
  TempDir dir;
  std::vector<std::string> all;
  uint64_t seq = 0;
  auto session = [&](const std::string& backend, size_t count) {
    auto log = Log::open(config_for(backend, dir.path()));
    ASSERT_TRUE(log.has_value()) << backend << ": " << log.error().describe();
    auto before = read_all(**log);
    ASSERT_EQ(before.size(), all.size()) << backend << " replay";
    for (size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(before[i].data, all[i]) << backend << " " << i;
    for (size_t i = 0; i < count; ++i) {
      all.push_back(make_record(0, seq, 20 + (seq * 37) % 3000));
      ++seq;
      ASSERT_TRUE((*log)->append(all.back()).has_value());
    }
    ASSERT_TRUE((*log)->close().has_value());
  };
  session(a, 300);  // more than one segment
  session(b, 300);
  session(a, 10);
  session(b, 0);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CrossBackend,
                         ::testing::Combine(::testing::ValuesIn(kBackends),
                                            ::testing::ValuesIn(kBackends)),
                         [](const auto& info) {
                           std::string n = std::string(std::get<0>(info.param)) + "_then_" +
                                           std::get<1>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace synclog::test
