#include "synclog/config.h"

#include <gtest/gtest.h>

namespace synclog {
namespace {

TEST(Config, ParsesEveryKey) {
  auto c = Config::parse(
      "dir=/tmp/x, backend=msync, segment_kind=mmap, mode=group, interval=5ms, lag_bound=1s,"
      "window=250us, segment_size=8MiB, spare_segments=3, recycle=false, prezero=off,"
      "max_total_size=1GiB, allocation_timeout=2s, recovery=skip-damaged, sync_threads=2,"
      "queue_depth=16, tail=rewrite");
  ASSERT_TRUE(c.has_value()) << c.error().describe();
  EXPECT_EQ(c->dir, "/tmp/x");
  EXPECT_EQ(c->mode, SyncMode::group);
  EXPECT_EQ(c->interval, std::chrono::milliseconds(5));
  EXPECT_EQ(c->lag_bound, std::chrono::seconds(1));
  EXPECT_EQ(c->window, std::chrono::microseconds(250));
  EXPECT_EQ(c->segment_size, 8u << 20);
  EXPECT_EQ(c->spare_segments, 3u);
  EXPECT_FALSE(c->recycle);
  EXPECT_FALSE(c->prezero);
  EXPECT_EQ(c->max_total_size, 1u << 30);
  EXPECT_EQ(c->allocation_timeout, std::chrono::seconds(2));
  EXPECT_EQ(c->recovery, RecoveryMode::skip_damaged);
  EXPECT_EQ(c->sync_threads, 2u);
  EXPECT_EQ(c->queue_depth, 16u);
  EXPECT_EQ(c->tail, TailPolicy::rewrite);
  EXPECT_TRUE(c->validate().has_value());
}

TEST(Config, ToStringRoundTrips) {
  auto c = Config::parse("dir=/d,mode=periodic,interval=3ms,segment_size=1MiB,recycle=false");
  ASSERT_TRUE(c.has_value());
  auto again = Config::parse(c->to_string());
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  EXPECT_EQ(again->to_string(), c->to_string());
}

// backend=auto and segment_kind=auto are the defaults; an auto on one side
// takes the other's choice, two explicit values must fit.
TEST(Config, BackendAndSegmentKindDefaultToAuto) {
  const Config d;
  EXPECT_EQ(d.backend, BackendKind::auto_select);
  EXPECT_EQ(d.segment_kind, SegmentKind::auto_select);
  EXPECT_NE(d.to_string().find("backend=auto,segment_kind=auto,"), std::string::npos)
      << d.to_string();
  for (const char* text :
       {"dir=/d", "dir=/d,backend=msync", "dir=/d,backend=msync-pool", "dir=/d,backend=uring",
        "dir=/d,backend=aio", "dir=/d,backend=pwrite", "dir=/d,segment_kind=mmap",
        "dir=/d,segment_kind=direct", "dir=/d,segment_kind=buffered",
        "dir=/d,backend=pwrite,segment_kind=auto", "dir=/d,backend=auto,segment_kind=direct"}) {
    auto c = Config::parse(text);
    ASSERT_TRUE(c.has_value()) << text << ": " << c.error().describe();
    EXPECT_TRUE(c->validate().has_value()) << text;
    auto again = Config::parse(c->to_string());
    ASSERT_TRUE(again.has_value()) << again.error().describe();
    EXPECT_EQ(again->backend, c->backend) << text;
    EXPECT_EQ(again->segment_kind, c->segment_kind) << text;
  }
  EXPECT_EQ(segment_kind_for(BackendKind::msync), SegmentKind::mmap);
  EXPECT_EQ(segment_kind_for(BackendKind::msync_pool), SegmentKind::mmap);
  EXPECT_EQ(segment_kind_for(BackendKind::uring), SegmentKind::direct);
  EXPECT_EQ(segment_kind_for(BackendKind::aio), SegmentKind::direct);
  EXPECT_EQ(segment_kind_for(BackendKind::pwrite), SegmentKind::buffered);
  EXPECT_EQ(segment_kind_for(BackendKind::auto_select), SegmentKind::auto_select);
}

TEST(Config, DirectSyncDefaultsToAutoAndParsesEachValue) {
  EXPECT_EQ(Config{}.direct_sync, DirectSync::auto_select);
  for (auto [text, value] :
       {std::pair{"auto", DirectSync::auto_select}, std::pair{"dsync", DirectSync::dsync},
        std::pair{"fdatasync", DirectSync::fdatasync}}) {
    auto c = Config::parse(std::string("dir=/d,direct_sync=") + text);
    ASSERT_TRUE(c.has_value()) << c.error().describe();
    EXPECT_EQ(c->direct_sync, value);
    EXPECT_NE(c->to_string().find(std::string("direct_sync=") + text), std::string::npos)
        << c->to_string();
    auto again = Config::parse(c->to_string());
    ASSERT_TRUE(again.has_value()) << again.error().describe();
    EXPECT_EQ(again->direct_sync, value);
  }
  auto bad = Config::parse("dir=/d,direct_sync=sometimes");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("auto | dsync | fdatasync"), std::string::npos)
      << bad.error().message;
}

struct BadCase {
  const char* text;
  const char* message_part;
};

class ConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrors, NameTheProblem) {
  auto c = Config::parse(GetParam().text);
  Result<void> r = c ? c->validate() : Result<void>(std::unexpected(c.error()));
  ASSERT_FALSE(r.has_value()) << GetParam().text << " was accepted";
  EXPECT_EQ(r.error().code, Errc::invalid_config);
  EXPECT_NE(r.error().message.find(GetParam().message_part), std::string::npos)
      << "message: " << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConfigErrors,
    ::testing::Values(
        BadCase{"dir=/d,colour=blue", "unknown config key 'colour'"},
        BadCase{"dir=/d,mode=sometimes", "periodic | batch | group"},
        BadCase{"dir=/d,backend=floppy", "msync | msync-pool | uring | aio | pwrite | auto"},
        BadCase{"dir=/d,segment_kind=tape", "mmap | direct | buffered | auto"},
        BadCase{"dir=/d,recovery=hope",
                "tolerate-torn-tail | point-in-time | absolute | skip-damaged"},
        BadCase{"dir=/d,tail=wag", "pad | rewrite"},
        BadCase{"dir=/d,interval=10parsecs", "config key 'interval'"},
        BadCase{"dir=/d,interval=0ms", "'interval': must be greater than 0"},
        BadCase{"dir=/d,window=0us", "'window'"},
        // Each duration and size has a maximum (docs/config.md): a deadline
        // of now() plus it, in nanoseconds, must not overflow.
        BadCase{"dir=/d,allocation_timeout=10000000000s", "'allocation_timeout': "},
        BadCase{"dir=/d,allocation_timeout=86401s", "is above the maximum 86400s (24h)"},
        BadCase{"dir=/d,interval=10000000000s", "'interval': "},
        BadCase{"dir=/d,interval=3601s", "is above the maximum 3600s (1h)"},
        BadCase{"dir=/d,window=7200s", "'window': "},
        BadCase{"dir=/d,lag_bound=10000000000s", "'lag_bound': "},
        BadCase{"dir=/d,max_total_size=18446744073709551615", "'max_total_size': "},
        BadCase{"dir=/d,cdc_dir=/c,cdc_max_size=18446744073709551615", "'cdc_max_size': "},
        BadCase{"dir=/d,segment_size=12345", "'segment_size': 12345 is not a multiple of 4096"},
        BadCase{"dir=/d,segment_size=4KiB", "between 64KiB and 1GiB"},
        BadCase{"dir=/d,segment_size=2GiB", "between 64KiB and 1GiB"},
        BadCase{"dir=/d,segment_size=lots", "'segment_size': bad value 'lots'"},
        BadCase{"dir=/d,spare_segments=0", "'spare_segments': 0 is outside 1..64"},
        BadCase{"dir=/d,spare_segments=-1", "'spare_segments': bad value '-1'"},
        BadCase{"dir=/d,max_total_size=1MiB", "'max_total_size'"},
        BadCase{"dir=/d,recycle=maybe", "true | false"},
        BadCase{"dir=/d,sync_threads=0", "'sync_threads'"},
        BadCase{"dir=/d,queue_depth=100000", "'queue_depth'"},
        BadCase{"dir=/d,backend=uring,segment_kind=mmap", "backend 'uring' cannot sync 'mmap'"},
        BadCase{"dir=/d,backend=msync,segment_kind=direct", "backend 'msync' cannot sync 'direct'"},
        BadCase{"dir=/d,backend=pwrite,segment_kind=mmap", "backend 'pwrite' cannot sync"},
        BadCase{"mode=batch", "'dir': the log directory is not set"},
        BadCase{"dir=/d,justakey", "is not of the form key=value"},
        BadCase{"dir=", "'dir': bad value ''"}));

}  // namespace
}  // namespace synclog

namespace synclog {
namespace {

TEST(ConfigToml, ParsesTheSameKeys) {
  auto c = Config::parse_toml(R"(
dir = "/var/lib/wal"
backend = "uring"
segment_kind = "direct"
mode = "group"
window = "500us"
segment_size = "64MiB"
spare_segments = 2
recycle = false
max_total_size = 1073741824
)");
  ASSERT_TRUE(c.has_value()) << c.error().describe();
  EXPECT_EQ(c->dir, "/var/lib/wal");
  EXPECT_EQ(c->backend, BackendKind::uring);
  EXPECT_EQ(c->window, std::chrono::microseconds(500));
  EXPECT_EQ(c->segment_size, 64u << 20);
  EXPECT_EQ(c->spare_segments, 2u);
  EXPECT_FALSE(c->recycle);
  EXPECT_EQ(c->max_total_size, 1u << 30);
  EXPECT_TRUE(c->validate().has_value());
}

TEST(ConfigToml, ErrorsNameTheLineAndKey) {
  struct Case {
    const char* text;
    const char* part;
  } cases[] = {
      {"dir = \"/d\"\ncolour = \"blue\"\n", "wal.toml:2: unknown config key 'colour'"},
      {"mode = \"often\"\n", "wal.toml:1: config key 'mode': bad value 'often'"},
      {"segment_size = 1.5\n", "'segment_size' must be a string, an integer or a boolean"},
      {"[synclog]\nmode = \"batch\"\n", "'synclog' must be a string"},
      {"dir = \n", "wal.toml:1: not valid TOML"},
      {"spare_segments = -3\n", "'spare_segments': bad value '-3'"},
  };
  for (const auto& c : cases) {
    auto r = Config::parse_toml(c.text, "wal.toml");
    ASSERT_FALSE(r.has_value()) << c.text;
    EXPECT_EQ(r.error().code, Errc::invalid_config);
    EXPECT_NE(r.error().message.find(c.part), std::string::npos) << r.error().message;
  }
}

TEST(ConfigToml, MissingFileIsNamed) {
  auto r = Config::load_file("/nonexistent/synclog.toml");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("/nonexistent/synclog.toml"), std::string::npos);
}

TEST(ConfigToml, DirectoryIsABadConfigPath) {
  auto r = Config::load_file("/tmp");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid_config) << r.error().describe();
  EXPECT_NE(r.error().message.find("/tmp"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace synclog
