#include "segments/transform.h"

#include <lz4.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <string>

#include "segments/format.h"

namespace synclog::seg {
namespace {

template <class T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// One cipher context per thread, reset per record: no allocation per append.
EVP_CIPHER_CTX* cipher_ctx() {
  struct Deleter {
    void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
  };
  thread_local std::unique_ptr<EVP_CIPHER_CTX, Deleter> ctx(EVP_CIPHER_CTX_new());
  return ctx.get();
}

ZSTD_CCtx* zstd_cctx() {
  struct Deleter {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  };
  thread_local std::unique_ptr<ZSTD_CCtx, Deleter> ctx(ZSTD_createCCtx());
  return ctx.get();
}

ZSTD_DCtx* zstd_dctx() {
  struct Deleter {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
  };
  thread_local std::unique_ptr<ZSTD_DCtx, Deleter> ctx(ZSTD_createDCtx());
  return ctx.get();
}

const auto* as_uchar(const std::byte* p) { return reinterpret_cast<const unsigned char*>(p); }
auto* as_uchar(std::byte* p) { return reinterpret_cast<unsigned char*>(p); }

}  // namespace

Result<std::array<std::byte, kKeySize>> derive_segment_key(const EncryptionKey& master,
                                                           uint64_t log_id, uint64_t segment_id) {
  static constexpr char kLabel[] = "synclog segment key";
  std::byte info[sizeof kLabel - 1 + 16];
  std::memcpy(info, kLabel, sizeof kLabel - 1);
  store(info + sizeof kLabel - 1, log_id);
  store(info + sizeof kLabel - 1 + 8, segment_id);
  std::array<std::byte, kKeySize> out{};
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), &EVP_PKEY_CTX_free);
  size_t n = out.size();
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), as_uchar(master.bytes.data()),
                                 static_cast<int>(master.bytes.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), as_uchar(info), sizeof info) <= 0 ||
      EVP_PKEY_derive(ctx.get(), as_uchar(out.data()), &n) <= 0 || n != out.size()) {
    return make_error(Errc::unsupported, "libcrypto failed to derive a segment key (HKDF-SHA256)");
  }
  return out;
}

std::array<std::byte, kNonceSize> record_nonce(uint32_t offset, uint64_t salt) {
  std::array<std::byte, kNonceSize> n{};
  store(n.data(), offset);
  store(n.data() + 4, salt);
  return n;
}

std::array<std::byte, 16> record_aad(uint64_t segment_id, uint32_t offset, uint32_t word) {
  std::array<std::byte, 16> a{};
  store(a.data(), segment_id);
  store(a.data() + 8, offset);
  store(a.data() + 12, word);
  return a;
}

Result<uint64_t> random_salt() {
  uint64_t salt = 0;
  while (salt == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&salt), sizeof salt) != 1) {
      return make_error(Errc::unsupported, "libcrypto has no random bytes for a segment salt");
    }
  }
  return salt;
}

size_t compress(Compression c, int level, std::span<const std::span<const std::byte>> plain,
                size_t limit, std::vector<std::byte>* out) {
  // The compressors take one buffer: gather into a reused one first.
  thread_local std::vector<std::byte> gathered;
  size_t n = 0;
  for (const auto& p : plain) n += p.size();
  std::span<const std::byte> src;
  if (plain.size() == 1) {
    src = plain[0];
  } else {
    gathered.resize(n);
    size_t at = 0;
    for (const auto& p : plain) {
      if (!p.empty()) std::memcpy(gathered.data() + at, p.data(), p.size());
      at += p.size();
    }
    src = gathered;
  }
  if (limit <= kRawLenSize) return 0;
  const size_t room = limit - kRawLenSize - 1;  // must come out smaller than limit
  size_t bound = 0;
  if (c == Compression::lz4) bound = static_cast<size_t>(LZ4_compressBound(static_cast<int>(n)));
  if (c == Compression::zstd) bound = ZSTD_compressBound(n);
  if (out->size() < kRawLenSize + bound) out->resize(kRawLenSize + bound);
  store(out->data(), static_cast<uint32_t>(n));
  size_t made = 0;
  if (c == Compression::lz4) {
    const int r =
        LZ4_compress_fast(reinterpret_cast<const char*>(src.data()),
                          reinterpret_cast<char*>(out->data() + kRawLenSize), static_cast<int>(n),
                          static_cast<int>(bound), level == 0 ? 1 : level);
    if (r <= 0) return 0;
    made = static_cast<size_t>(r);
  } else if (c == Compression::zstd) {
    const size_t r = ZSTD_compressCCtx(zstd_cctx(), out->data() + kRawLenSize, bound, src.data(), n,
                                       level == 0 ? 3 : level);
    if (ZSTD_isError(r)) return 0;
    made = r;
  } else {
    return 0;
  }
  // Not smaller: stored plain (a compressor failure lands here too, and
  // storing plain is always correct).
  if (made > room) return 0;
  return kRawLenSize + made;
}

const char* decompress(uint32_t code, std::span<const std::byte> stored,
                       std::vector<std::byte>* out) {
  if (stored.size() <= kRawLenSize) return "compressed record too short";
  uint32_t raw = 0;
  std::memcpy(&raw, stored.data(), sizeof raw);
  if (raw > kMaxPayload) return "compressed record claims more than 16MiB-1 bytes";
  out->resize(raw);
  const auto body = stored.subspan(kRawLenSize);
  if (code == kCompressionLz4) {
    const int r = LZ4_decompress_safe(reinterpret_cast<const char*>(body.data()),
                                      reinterpret_cast<char*>(out->data()),
                                      static_cast<int>(body.size()), static_cast<int>(raw));
    if (r < 0 || static_cast<uint32_t>(r) != raw) return "record fails to decompress";
    return nullptr;
  }
  if (code == kCompressionZstd) {
    const size_t r = ZSTD_decompressDCtx(zstd_dctx(), out->data(), raw, body.data(), body.size());
    if (ZSTD_isError(r) || r != raw) return "record fails to decompress";
    return nullptr;
  }
  return "reserved record flags set";
}

bool encrypt(const SegmentCipher& c, uint32_t offset, uint32_t word,
             std::span<const std::span<const std::byte>> pieces, std::byte* out) {
  EVP_CIPHER_CTX* ctx = cipher_ctx();
  if (!ctx) return false;
  const auto nonce = record_nonce(offset, c.salt);
  const auto aad = record_aad(c.segment_id, offset, word);
  int n = 0;
  if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceSize, nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx, nullptr, nullptr, as_uchar(c.key.data()), as_uchar(nonce.data())) !=
          1 ||
      EVP_EncryptUpdate(ctx, nullptr, &n, as_uchar(aad.data()), aad.size()) != 1) {
    return false;
  }
  std::byte* at = out;
  for (const auto& p : pieces) {
    if (p.empty()) continue;
    if (EVP_EncryptUpdate(ctx, as_uchar(at), &n, as_uchar(p.data()), static_cast<int>(p.size())) !=
        1) {
      return false;
    }
    at += n;
  }
  if (EVP_EncryptFinal_ex(ctx, as_uchar(at), &n) != 1) return false;
  at += n;
  return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagSize, at) == 1;
}

bool decrypt(const SegmentCipher& c, uint32_t offset, uint32_t word,
             std::span<const std::byte> stored, std::vector<std::byte>* out) {
  out->clear();
  if (stored.size() < kTagSize) return false;
  const size_t len = stored.size() - kTagSize;
  out->resize(len);
  EVP_CIPHER_CTX* ctx = cipher_ctx();
  if (!ctx) return false;
  const auto nonce = record_nonce(offset, c.salt);
  const auto aad = record_aad(c.segment_id, offset, word);
  std::byte tag[kTagSize];
  std::memcpy(tag, stored.data() + len, kTagSize);
  int n = 0;
  bool ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceSize, nullptr) == 1 &&
            EVP_DecryptInit_ex(ctx, nullptr, nullptr, as_uchar(c.key.data()),
                               as_uchar(nonce.data())) == 1 &&
            EVP_DecryptUpdate(ctx, nullptr, &n, as_uchar(aad.data()), aad.size()) == 1;
  size_t done = 0;
  if (ok && len > 0) {
    ok = EVP_DecryptUpdate(ctx, as_uchar(out->data()), &n, as_uchar(stored.data()),
                           static_cast<int>(len)) == 1;
    done = static_cast<size_t>(n);
  }
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTagSize, tag) == 1 &&
       EVP_DecryptFinal_ex(ctx, as_uchar(out->data() + done), &n) == 1;
  // Plaintext that failed authentication is never handed out.
  if (!ok) {
    std::memset(out->data(), 0, out->size());
    out->clear();
  }
  return ok;
}

Result<EncryptionKey> Keyring::current() {
  auto k = source_(std::nullopt);
  if (!k) {
    return make_error(Errc::invalid_config,
                      "the encryption key source gave no current key: " + k.error().message);
  }
  std::lock_guard lock(mu_);
  keys_[k->id] = *k;
  return k;
}

Result<EncryptionKey> Keyring::get(uint32_t key_id, uint64_t segment) {
  {
    std::lock_guard lock(mu_);
    if (auto it = keys_.find(key_id); it != keys_.end()) return it->second;
  }
  auto k = source_ ? source_(key_id) : make_error(Errc::invalid_config, "no key source");
  if (!k || k->id != key_id) {
    return make_error(Errc::invalid_config,
                      "segment " + std::to_string(segment) + " is encrypted under key id " +
                          std::to_string(key_id) + ", which the key source does not have" +
                          (k ? std::string(" (it returned key id ") + std::to_string(k->id) + ")"
                             : ": " + k.error().message));
  }
  std::lock_guard lock(mu_);
  keys_[key_id] = *k;
  return k;
}

Result<SegmentCipher> Keyring::cipher(uint32_t key_id, uint64_t log_id, uint64_t segment,
                                      uint64_t salt) {
  auto master = get(key_id, segment);
  if (!master) return std::unexpected(master.error());
  auto key = derive_segment_key(*master, log_id, segment);
  if (!key) return std::unexpected(key.error());
  return SegmentCipher{*key, segment, salt};
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Result<std::vector<EncryptionKey>> parse_key_file(std::string_view text,
                                                  const std::string& origin) {
  std::vector<EncryptionKey> keys;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    auto fail = [&](const std::string& why) {
      return make_error(Errc::invalid_config, "encryption key file " + origin + " line " +
                                                  std::to_string(line_no) + ": " + why +
                                                  " (expected '<key id> <64 hex digits>')");
    };
    const size_t sp = line.find_first_of(" \t");
    if (sp == std::string_view::npos) return fail("no key after the key id");
    const std::string_view id_text = line.substr(0, sp);
    std::string_view hex = line.substr(sp);
    while (!hex.empty() && (hex.front() == ' ' || hex.front() == '\t')) hex.remove_prefix(1);
    EncryptionKey k;
    uint64_t id = 0;
    if (id_text.empty() || id_text.size() > 10) return fail("bad key id");
    for (char ch : id_text) {
      if (ch < '0' || ch > '9') return fail("bad key id");
      id = id * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (id > UINT32_MAX) return fail("key id above 4294967295");
    k.id = static_cast<uint32_t>(id);
    if (hex.size() != 2 * kKeySize) {
      return fail("key of " + std::to_string(hex.size()) + " characters");
    }
    for (size_t i = 0; i < kKeySize; ++i) {
      const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) return fail("key holds a character that is not a hex digit");
      k.bytes[i] = static_cast<std::byte>(hi * 16 + lo);
    }
    for (const auto& other : keys) {
      if (other.id == k.id) return fail("key id " + std::to_string(k.id) + " appears twice");
    }
    keys.push_back(k);
  }
  if (keys.empty()) {
    return make_error(Errc::invalid_config, "encryption key file " + origin + " holds no key");
  }
  return keys;
}

KeySource key_source_from(std::vector<EncryptionKey> keys, std::string origin) {
  return [keys = std::move(keys),
          origin = std::move(origin)](std::optional<uint32_t> id) -> Result<EncryptionKey> {
    if (!id) return keys.back();
    for (const auto& k : keys) {
      if (k.id == *id) return k;
    }
    return make_error(Errc::invalid_config,
                      "key id " + std::to_string(*id) + " is not in " + origin);
  };
}

}  // namespace synclog::seg
