// 64-bit FNV-1a: the checksum of checkpoints and the fingerprint of corpora
// and tokenizers. Not cryptographic; it detects corruption and staleness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pplab {

constexpr uint64_t kFnvOffset = 1469598103934665603ULL;

// Continues hash `h` over `n` bytes at `data`.
inline uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

inline uint64_t Fnv1a64(const std::string& s, uint64_t h = kFnvOffset) { return Fnv1a64(s.data(), s.size(), h); }

// `h` as 16 hex digits.
inline std::string FnvHex(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace pplab
