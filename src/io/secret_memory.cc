#include "io/secret_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace synclog::io {
namespace {

// Pages are never unmapped: a freed slot is wiped and kept for the next
// secret, so the pool stays as small as the most keys held at once.
class Pool {
 public:
  std::byte* take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) grow();
    std::byte* p = free_.back();
    free_.pop_back();
    return p;
  }
  void give(std::byte* p) {
    wipe(p, kSecretSize);
    std::lock_guard lock(mu_);
    free_.push_back(p);
  }

 private:
  void grow() {
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* m = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || ::madvise(m, page, MADV_DONTDUMP) != 0) {
      std::fprintf(stderr, "synclog: cannot map memory excluded from core dumps for keys\n");
      std::abort();
    }
    auto* base = static_cast<std::byte*>(m);
    for (size_t off = page; off >= kSecretSize; off -= kSecretSize) {
      free_.push_back(base + off - kSecretSize);
    }
  }

  std::mutex mu_;
  std::vector<std::byte*> free_;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: secrets may outlive statics
  return *p;
}

}  // namespace

void wipe(void* p, size_t n) { ::explicit_bzero(p, n); }

SecretBytes::SecretBytes() : p_(pool().take()) {}

SecretBytes::SecretBytes(std::span<const std::byte, kSecretSize> from) : p_(pool().take()) {
  std::memcpy(p_, from.data(), kSecretSize);
}

SecretBytes::SecretBytes(const SecretBytes& o) : p_(pool().take()) {
  std::memcpy(p_, o.p_, kSecretSize);
}

SecretBytes& SecretBytes::operator=(const SecretBytes& o) {
  if (this != &o) std::memcpy(p_, o.p_, kSecretSize);
  return *this;
}

SecretBytes::~SecretBytes() { pool().give(p_); }

}  // namespace synclog::io
