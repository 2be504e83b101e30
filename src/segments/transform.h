// Record transforms (docs/format.md, "Transformed records"): compression and
// AES-256-GCM encryption of one stored frame's payload, the per-segment key
// derivation, and the keyring that holds master keys. Computation over bytes
// and library calls (LZ4, zstd, OpenSSL libcrypto) only: no syscalls here.
//
// A writer builds a stored payload as plain -> (compress) -> (encrypt); a
// reader undoes it in the other order after the record's CRC validated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "io/secret_memory.h"
#include "synclog/config.h"
#include "synclog/error.h"

namespace synclog::seg {

// Record word flags (bits 28-31).
inline constexpr uint32_t kCompressionShift = 28;
inline constexpr uint32_t kCompressionMask = 3u << kCompressionShift;
inline constexpr uint32_t kEncryptedFlag = 1u << 30;
inline constexpr uint32_t kReservedFlag = 1u << 31;
inline constexpr uint32_t kCompressionLz4 = 1;
inline constexpr uint32_t kCompressionZstd = 2;

inline constexpr uint32_t kTagSize = 16;    // the GCM tag after the ciphertext
inline constexpr uint32_t kRawLenSize = 4;  // the plain length before compressed bytes
inline constexpr size_t kKeySize = 32;      // AES-256
inline constexpr size_t kNonceSize = 12;

// A segment's data key and the header's nonce salt: everything a record's
// encryption needs besides its offset and word.
// Key bytes live in io::SecretBytes: out of core dumps, wiped when freed.
struct SegmentCipher {
  io::SecretBytes key;
  uint64_t segment_id = 0;
  uint64_t salt = 0;
};

// HKDF-SHA256 over the master key, info = "synclog segment key" || log_id
// || segment_id (little-endian u64s), no salt.
[[nodiscard]] Result<io::SecretBytes> derive_segment_key(
    std::span<const std::byte, kKeySize> master, uint64_t log_id, uint64_t segment_id);

// A master key as the library holds it once the key source gave it.
struct MasterKey {
  uint32_t id = 0;
  io::SecretBytes bytes;
};
// nonce = offset:u32 || salt:u64; aad = segment_id:u64 || offset:u32 || word:u32.
std::array<std::byte, kNonceSize> record_nonce(uint32_t offset, uint64_t salt);
std::array<std::byte, 16> record_aad(uint64_t segment_id, uint32_t offset, uint32_t word);
// The key check value a version-7 encrypted segment's header holds: the
// first 4 bytes of HMAC-SHA256(data key, "synclog key check"). A key that
// does not give it is the wrong key, told apart from damage. 0 if libcrypto
// failed (never a valid check value: a 0 result is stored as 1).
uint32_t key_check_value(const io::SecretBytes& data_key);
// A fresh random salt for a new segment header (never 0).
[[nodiscard]] Result<uint64_t> random_salt();

// Compresses `plain` (its pieces in order) into *out as raw_len:u32 ||
// compressor output, and returns its size; 0 when that would not be
// smaller than `limit` (the caller then stores the record plain). *out is
// a reused scratch buffer.
size_t compress(Compression c, int level, std::span<const std::span<const std::byte>> plain,
                size_t limit, std::vector<std::byte>* out);
// Undoes compress() for compression code `code` (1 lz4, 2 zstd) into *out;
// the reason on failure. A raw length above `max_raw` (what the record's
// segment can hold plain) is refused before any work.
const char* decompress(uint32_t code, std::span<const std::byte> stored, uint64_t max_raw,
                       std::vector<std::byte>* out);

// Encrypts the pieces (n bytes in all) into out[0, n) and the tag into
// out[n, n + 16). False if libcrypto failed (nothing to retry).
[[nodiscard]] bool encrypt(const SegmentCipher& c, uint32_t offset, uint32_t word,
                           std::span<const std::span<const std::byte>> pieces, std::byte* out);
// Decrypts stored (ciphertext || tag) into *out; false if the tag does not
// authenticate (tampering or the wrong key), and *out is then cleared.
[[nodiscard]] bool decrypt(const SegmentCipher& c, uint32_t offset, uint32_t word,
                           std::span<const std::byte> stored, std::vector<std::byte>* out);

// Master keys by id, from a KeySource, fetched once each. Thread-safe.
// Errors never carry key bytes.
class Keyring {
 public:
  explicit Keyring(KeySource source) : source_(std::move(source)) {}
  // The key new segments are written under.
  [[nodiscard]] Result<MasterKey> current();
  // The key a segment header names; `segment` names the segment in errors.
  [[nodiscard]] Result<MasterKey> get(uint32_t key_id, uint64_t segment);
  // A segment's cipher for reading: its key from the header's key id.
  // With `check` (a version-7 header's key check value), a key that does
  // not give it fails with Errc::invalid_config, "wrong key for key id N in
  // segment S": never damage, so no recovery mode drops anything for it.
  [[nodiscard]] Result<SegmentCipher> cipher(uint32_t key_id, uint64_t log_id, uint64_t segment,
                                             uint64_t salt,
                                             std::optional<uint32_t> check = std::nullopt);

 private:
  KeySource source_;
  std::mutex mu_;
  std::map<uint32_t, io::SecretBytes> keys_;
  // Copies a key the source gave into keys_ and wipes the source's copy.
  MasterKey keep(EncryptionKey& k);
};

// Parses a key file's text: "<key id> <64 hex digits>" per line (blank
// lines and lines starting with '#' are skipped); the last key is the
// current one. Errors name the line, never its key bytes. Copies of key
// bytes it makes on the way are wiped; the caller wipes `text`.
[[nodiscard]] Result<std::vector<EncryptionKey>> parse_key_file(std::string_view text,
                                                                const std::string& origin);
// A KeySource over parsed keys; it holds them in io::SecretBytes and wipes
// `keys`.
KeySource key_source_from(std::vector<EncryptionKey> keys, std::string origin);
// Reads and parses a key file (io::read_secret_file refuses one others may
// read) and wipes its text; the one way every caller loads a key file.
[[nodiscard]] Result<KeySource> key_source_from_file(const std::filesystem::path& path);

}  // namespace synclog::seg
