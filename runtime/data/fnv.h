// 64-bit FNV-1a (standard: offset basis 14695981039346656037, prime
// 1099511628211): the checksum of checkpoint shards. Not cryptographic; it
// detects corruption and staleness.
//
// Corpus, tokenizer and validation-split fingerprints use the same loop from
// kPplabFingerprintBasis, a basis that differs from FNV-1a's (a digit was
// dropped long ago). They are identifiers, not checksums, and keep that basis
// so that existing token caches, tokenizers and splits stay valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pplab {

constexpr uint64_t kFnv1a64Offset = 14695981039346656037ULL;
constexpr uint64_t kPplabFingerprintBasis = 1469598103934665603ULL;

// Continues hash `h` over `n` bytes at `data`.
inline uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Offset) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

inline uint64_t Fnv1a64(const std::string& s, uint64_t h = kFnv1a64Offset) { return Fnv1a64(s.data(), s.size(), h); }

// A pplab fingerprint (see above) of `n` bytes, continuing `h`.
inline uint64_t PplabFingerprint(const void* data, size_t n, uint64_t h = kPplabFingerprintBasis) {
  return Fnv1a64(data, n, h);
}
inline uint64_t PplabFingerprint(const std::string& s, uint64_t h = kPplabFingerprintBasis) {
  return Fnv1a64(s.data(), s.size(), h);
}

// `h` as 16 hex digits.
inline std::string FnvHex(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace pplab
