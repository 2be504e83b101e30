// Memory for key material: 32-byte slots in pages that core dumps exclude
// (MADV_DONTDUMP), wiped when freed, so neither a core file nor a freed
// heap chunk holds a key.
#pragma once

#include <array>
#include <cstddef>
#include <span>

namespace synclog::io {

inline constexpr size_t kSecretSize = 32;

// Overwrites n bytes at p with zeros in a way the compiler keeps.
void wipe(void* p, size_t n);

// One 32-byte secret in a slot of the dump-excluded pool. Copies take a
// slot of their own; every slot is wiped when its holder is destroyed. A
// process that cannot map the pool aborts (a key must never fall back to
// ordinary memory).
class SecretBytes {
 public:
  SecretBytes();
  explicit SecretBytes(std::span<const std::byte, kSecretSize> from);
  SecretBytes(const SecretBytes& o);
  SecretBytes& operator=(const SecretBytes& o);
  ~SecretBytes();

  std::span<std::byte, kSecretSize> bytes() {
    return std::span<std::byte, kSecretSize>(p_, kSecretSize);
  }
  std::span<const std::byte, kSecretSize> bytes() const {
    return std::span<const std::byte, kSecretSize>(p_, kSecretSize);
  }
  const std::byte* data() const { return p_; }
  std::byte* data() { return p_; }

 private:
  std::byte* p_;
};

}  // namespace synclog::io
