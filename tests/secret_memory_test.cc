// Key material stays out of core dumps and is wiped when freed: the pages
// io::SecretBytes uses carry the dd (MADV_DONTDUMP) flag, a freed slot
// holds zeros, and a process that opened an encrypted log from a key file
// holds the master key nowhere a core dump would include.
#include "io/secret_memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace synclog::test {
namespace {

struct Region {
  uintptr_t begin = 0, end = 0;
  bool readable = false;
  bool dont_dump = false;
  std::string name;
};

// Every mapping of this process, from /proc/self/smaps.
std::vector<Region> regions() {
  std::vector<Region> out;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t b = 0, e = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &b, &e, perms) == 3 &&
        line.find('-') < line.find(' ')) {
      Region r{b, e, perms[0] == 'r', false, {}};
      const auto last = line.find_last_of(' ');
      if (last != std::string::npos) r.name = line.substr(last + 1);
      out.push_back(r);
    } else if (line.rfind("VmFlags:", 0) == 0 && !out.empty()) {
      out.back().dont_dump = (line + " ").find(" dd ") != std::string::npos;
    }
  }
  return out;
}

TEST(SecretMemory, SecretsLiveInPagesCoreDumpsExclude) {
  io::SecretBytes s;
  const auto at = reinterpret_cast<uintptr_t>(s.data());
  bool found = false;
  for (const Region& r : regions()) {
    if (at >= r.begin && at < r.end) {
      found = true;
      EXPECT_TRUE(r.dont_dump) << "the page of a secret lacks the dd flag";
    }
  }
  EXPECT_TRUE(found);
  io::SecretBytes copy(s);
  EXPECT_NE(copy.data(), s.data());
}

TEST(SecretMemory, AFreedSecretIsWiped) {
  const std::byte* where = nullptr;
  {
    io::SecretBytes s;
    std::memset(s.data(), 0xa5, io::kSecretSize);
    where = s.data();
  }
  // The pool keeps its pages mapped: the freed slot can be looked at.
  std::byte seen[io::kSecretSize];
  std::memcpy(seen, where, sizeof seen);
  for (std::byte b : seen) ASSERT_EQ(b, std::byte{0}) << "a freed secret kept its bytes";
}

constexpr const char* kHex = "3c1f8e77a2d94b06c5e13a7f9b2d604e81f7a3c95d2e6b04a7c1f93e58d20b6a";
constexpr uint8_t kMask = 0x5a;

// Whether memory that a core dump would hold (readable, without dd) holds
// the key whose bytes XOR kMask are `masked`. Read through /proc/self/mem,
// which fails instead of faulting on what cannot be read.
int key_in_dumped_memory(const std::array<uint8_t, 32>& masked) {
  const int mem = ::open("/proc/self/mem", O_RDONLY);
  if (mem < 0) return 2;
  std::vector<uint8_t> buf;
  int found = 0;
  for (const Region& r : regions()) {
    if (!r.readable || r.dont_dump || r.name == "[vvar]" || r.name == "[vsyscall]") continue;
    buf.resize(r.end - r.begin);
    const ssize_t n = ::pread(mem, buf.data(), buf.size(), static_cast<off_t>(r.begin));
    if (n <= 0) continue;
    for (ssize_t i = 0; i + 32 <= n; ++i) {
      if ((buf[i] ^ kMask) != masked[0]) continue;
      bool all = true;
      for (size_t k = 1; k < 32 && all; ++k) all = (buf[i + k] ^ kMask) == masked[k];
      if (all) {
        std::fprintf(stderr, "master key found in %s at %#lx\n", r.name.c_str(),
                     static_cast<unsigned long>(r.begin + i));
        found = 1;
      }
    }
  }
  ::close(mem);
  return found;
}

TEST(SecretMemory, AProcessThatOpenedAnEncryptedLogHoldsItsKeyOnlyInDumpExcludedMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Their runtimes reserve terabytes of readable address space (shadow
  // memory, the allocator's region): too much to read through.
  GTEST_SKIP() << "not under a sanitizer";
#endif
  TempDir dir, kd;
  const auto key_file = kd.path() / "keys";
  std::ofstream(key_file) << "1 " << kHex << "\n";
  ::chmod(key_file.c_str(), 0600);
  std::array<uint8_t, 32> masked{};
  for (size_t i = 0; i < 32; ++i) {
    masked[i] = static_cast<uint8_t>(std::stoi(std::string(kHex + 2 * i, 2), nullptr, 16) ^ kMask);
  }
  // In a child, so that no key stays in this test process.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Config cfg = small_config(dir.path());
    cfg.encryption = Encryption::aes_256_gcm;
    cfg.encryption_key_file = key_file;
    for (int session = 0; session < 2; ++session) {
      auto log = Log::open(cfg);
      if (!log) ::_exit(3);
      for (int i = 0; i < 50; ++i) {
        if (!(*log)->append("record " + std::to_string(i)).has_value()) ::_exit(3);
      }
      if (session == 1) {
        // The log open, reading and writing: what a core file would show.
        auto rec = (*log)->read(Position{});
        if (!rec || !rec->next().has_value()) ::_exit(3);
        ::_exit(key_in_dumped_memory(masked));
      }
      if (!(*log)->close().has_value()) ::_exit(3);
    }
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the master key is in memory a core dump holds; "
                                       "2: /proc/self/mem unreadable; 3: the log failed";
}

}  // namespace
}  // namespace synclog::test
