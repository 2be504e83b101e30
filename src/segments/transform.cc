#include "segments/transform.h"

#include <lz4.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "io/secret_file.h"
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

Result<io::SecretBytes> derive_segment_key(std::span<const std::byte, kKeySize> master,
                                           uint64_t log_id, uint64_t segment_id) {
  static constexpr char kLabel[] = "synclog segment key";
  std::byte info[sizeof kLabel - 1 + 16];
  std::memcpy(info, kLabel, sizeof kLabel - 1);
  store(info + sizeof kLabel - 1, log_id);
  store(info + sizeof kLabel - 1 + 8, segment_id);
  io::SecretBytes out;
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), &EVP_PKEY_CTX_free);
  size_t n = kKeySize;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), as_uchar(master.data()),
                                 static_cast<int>(master.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), as_uchar(info), sizeof info) <= 0 ||
      EVP_PKEY_derive(ctx.get(), as_uchar(out.data()), &n) <= 0 || n != kKeySize) {
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

uint32_t key_check_value(const io::SecretBytes& data_key) {
  static constexpr char kLabel[] = "synclog key check";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), data_key.data(), static_cast<int>(kKeySize),
           reinterpret_cast<const unsigned char*>(kLabel), sizeof kLabel - 1, mac, &n) == nullptr ||
      n < 4) {
    return 0;
  }
  uint32_t v = 0;
  std::memcpy(&v, mac, sizeof v);
  OPENSSL_cleanse(mac, sizeof mac);
  return v == 0 ? 1 : v;
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

const char* decompress(uint32_t code, std::span<const std::byte> stored, uint64_t max_raw,
                       std::vector<std::byte>* out) {
  if (stored.size() <= kRawLenSize) return "compressed record too short";
  uint32_t raw = 0;
  std::memcpy(&raw, stored.data(), sizeof raw);
  if (raw > kMaxPayload) return "compressed record claims more than 16MiB-1 bytes";
  if (raw > max_raw) return "compressed record claims more than its segment can hold plain";
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

MasterKey Keyring::keep(EncryptionKey& k) {
  MasterKey m{k.id, io::SecretBytes(k.bytes)};
  io::wipe(k.bytes.data(), k.bytes.size());
  std::lock_guard lock(mu_);
  keys_.insert_or_assign(m.id, m.bytes);
  return m;
}

Result<MasterKey> Keyring::current() {
  auto k = source_(std::nullopt);
  if (!k) {
    return make_error(Errc::invalid_config,
                      "the encryption key source gave no current key: " + k.error().message);
  }
  return keep(*k);
}

Result<MasterKey> Keyring::get(uint32_t key_id, uint64_t segment) {
  {
    std::lock_guard lock(mu_);
    if (auto it = keys_.find(key_id); it != keys_.end()) return MasterKey{key_id, it->second};
  }
  auto k = source_ ? source_(key_id) : make_error(Errc::invalid_config, "no key source");
  if (!k || k->id != key_id) {
    if (k) io::wipe(k->bytes.data(), k->bytes.size());
    return make_error(Errc::invalid_config,
                      "segment " + std::to_string(segment) + " is encrypted under key id " +
                          std::to_string(key_id) + ", which the key source does not have" +
                          (k ? std::string(" (it returned key id ") + std::to_string(k->id) + ")"
                             : ": " + k.error().message));
  }
  return keep(*k);
}

Result<SegmentCipher> Keyring::cipher(uint32_t key_id, uint64_t log_id, uint64_t segment,
                                      uint64_t salt, std::optional<uint32_t> check) {
  auto master = get(key_id, segment);
  if (!master) return std::unexpected(master.error());
  auto key = derive_segment_key(master->bytes.bytes(), log_id, segment);
  if (!key) return std::unexpected(key.error());
  if (check) {
    const uint32_t v = key_check_value(*key);
    if (v == 0) {
      return make_error(Errc::unsupported, "libcrypto failed to compute a key check value");
    }
    if (v != *check) {
      return make_error(Errc::invalid_config,
                        "wrong key for key id " + std::to_string(key_id) + " in segment " +
                            std::to_string(segment) +
                            ": the key source gives key bytes under that id whose check value "
                            "does not match the segment header's; give the key the segment was "
                            "written under (nothing was read as damage or dropped)");
    }
  }
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
  // Reserved once: a vector that grew would free a buffer holding keys.
  keys.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  size_t line_no = 0;
  auto wipe_all = [&] {
    for (auto& k : keys) io::wipe(k.bytes.data(), k.bytes.size());
  };
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    EncryptionKey k;
    auto fail = [&](const std::string& why) {
      io::wipe(k.bytes.data(), k.bytes.size());
      wipe_all();
      return make_error(Errc::invalid_config, "encryption key file " + origin + " line " +
                                                  std::to_string(line_no) + ": " + why +
                                                  " (expected '<key id> <64 hex digits>')");
    };
    const size_t sp = line.find_first_of(" \t");
    if (sp == std::string_view::npos) return fail("no key after the key id");
    const std::string_view id_text = line.substr(0, sp);
    std::string_view hex = line.substr(sp);
    while (!hex.empty() && (hex.front() == ' ' || hex.front() == '\t')) hex.remove_prefix(1);
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
    io::wipe(k.bytes.data(), k.bytes.size());
  }
  if (keys.empty()) {
    return make_error(Errc::invalid_config, "encryption key file " + origin + " holds no key");
  }
  return keys;
}

KeySource key_source_from(std::vector<EncryptionKey> keys, std::string origin) {
  auto held = std::make_shared<std::vector<MasterKey>>();
  held->reserve(keys.size());
  for (auto& k : keys) {
    held->push_back(MasterKey{k.id, io::SecretBytes(k.bytes)});
    io::wipe(k.bytes.data(), k.bytes.size());
  }
  // (The EncryptionKey it returns is the caller's to wipe: Keyring does.)
  return [held = std::move(held),
          origin = std::move(origin)](std::optional<uint32_t> id) -> Result<EncryptionKey> {
    // Built in place in the returned value: no copy left in this frame.
    auto give = [](const MasterKey& m) {
      Result<EncryptionKey> k{std::in_place};
      k->id = m.id;
      std::memcpy(k->bytes.data(), m.bytes.data(), k->bytes.size());
      return k;
    };
    if (!id) return give(held->back());
    for (const auto& k : *held) {
      if (k.id == *id) return give(k);
    }
    return make_error(Errc::invalid_config,
                      "key id " + std::to_string(*id) + " is not in " + origin);
  };
}

Result<KeySource> key_source_from_file(const std::filesystem::path& path) {
  auto text = io::read_secret_file(path);
  if (!text) return std::unexpected(text.error());
  auto keys = parse_key_file(*text, path.string());
  io::wipe(text->data(), text->size());
  if (!keys) return std::unexpected(keys.error());
  return key_source_from(std::move(*keys), path.string());
}

}  // namespace synclog::seg
