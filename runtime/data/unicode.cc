#include "runtime/data/unicode.h"

#include <algorithm>
#include <iterator>

namespace pplab {
namespace {

struct CodeRange {
  CodePoint first, last;
};
struct Decomposition {
  CodePoint cp, first, second;  // second 0: a singleton
};
struct CombiningClass {
  CodePoint cp;
  int ccc;
};
struct Composition {
  CodePoint first, second, composite;
};

#include "runtime/data/unicode_tables.inc"

template <size_t N>
bool InRanges(const CodeRange (&table)[N], CodePoint cp) {
  const auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                                   [](CodePoint c, const CodeRange& r) { return c < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

// Hangul syllables compose and decompose by arithmetic (Unicode 14.0,
// section 3.12), not by table.
constexpr CodePoint kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr CodePoint kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

int Ccc(CodePoint cp) {
  const auto it = std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                                   [](const CombiningClass& c, CodePoint x) { return c.cp < x; });
  return it != std::end(kCombiningClasses) && it->cp == cp ? it->ccc : 0;
}

// Full canonical decomposition of `cp`, appended to `out`.
void Decompose(CodePoint cp, std::vector<CodePoint>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const CodePoint s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                                   [](const Decomposition& d, CodePoint x) { return d.cp < x; });
  if (it == std::end(kDecompositions) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  Decompose(it->first, out);
  if (it->second != 0) Decompose(it->second, out);
}

// The primary composite of `first` and `second`, or 0.
CodePoint Compose(CodePoint first, CodePoint second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::make_pair(first, second),
                                   [](const Composition& c, const std::pair<CodePoint, CodePoint>& x) {
                                     return std::make_pair(c.first, c.second) < x;
                                   });
  return it != std::end(kCompositions) && it->first == first && it->second == second ? it->composite : 0;
}

// Length of the well-formed UTF-8 sequence at s[0..n), or 0 (RFC 3629's
// table: no overlong forms, no surrogates, nothing above U+10FFFF).
int SequenceLength(const unsigned char* s, size_t n) {
  const auto cont = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) { return i < n && s[i] >= lo && s[i] <= hi; };
  const unsigned b = s[0];
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const unsigned lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const unsigned lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

CodePoint DecodeUtf8At(std::string_view text, size_t at, size_t& length) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + at;
  const int len = SequenceLength(s, text.size() - at);
  if (len == 0) {
    length = 1;
    return kRawByteBase + s[0];
  }
  CodePoint cp = len == 1 ? s[0] : len == 2 ? s[0] & 0x1F : len == 3 ? s[0] & 0x0F : s[0] & 0x07;
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (s[k] & 0x3F);
  length = static_cast<size_t>(len);
  return cp;
}

std::vector<CodePoint> DecodeUtf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  for (size_t i = 0, length = 0; i < text.size(); i += length) out.push_back(DecodeUtf8At(text, i, length));
  return out;
}

size_t InvalidUtf8At(std::string_view text) {
  for (size_t i = 0, length = 0; i < text.size(); i += length) {
    if (DecodeUtf8At(text, i, length) >= kRawByteBase) return i;
  }
  return std::string_view::npos;
}

void AppendUtf8(CodePoint cp, std::string& out) {
  if (cp >= kRawByteBase) {
    out += static_cast<char>(cp - kRawByteBase);
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string EncodeUtf8(const std::vector<CodePoint>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (CodePoint cp : cps) AppendUtf8(cp, out);
  return out;
}

bool IsLetter(CodePoint cp) { return cp < kRawByteBase && InRanges(kLetters, cp); }
bool IsNumber(CodePoint cp) { return cp < kRawByteBase && InRanges(kNumbers, cp); }

bool IsSpace(CodePoint cp) {
  // The White_Space property (PropList.txt), a fixed list of 25.
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::vector<CodePoint> NormalizeNfc(const std::vector<CodePoint>& cps) {
  // Below U+0300 nothing decomposes into, or composes with, anything else
  // below U+0300, so text made only of such characters is already NFC.
  if (std::all_of(cps.begin(), cps.end(), [](CodePoint c) { return c < 0x300; })) return cps;
  // Unicode 14.0 section 3.11: full canonical decomposition, canonical
  // ordering of each run of non-starters, then canonical composition.
  std::vector<CodePoint> d;
  d.reserve(cps.size());
  for (CodePoint cp : cps) {
    if (cp >= kRawByteBase) {
      d.push_back(cp);
    } else {
      Decompose(cp, d);
    }
  }
  for (size_t i = 0; i < d.size();) {
    if (Ccc(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && Ccc(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [](CodePoint a, CodePoint b) { return Ccc(a) < Ccc(b); });
    i = j;
  }
  std::vector<CodePoint> out;
  out.reserve(d.size());
  // `starter`: index in `out` of the last starter (-1: none yet); `last`:
  // combining class of the last character kept after it.
  ptrdiff_t starter = -1;
  int last = 0;
  for (CodePoint cp : d) {
    const int ccc = Ccc(cp);
    if (starter >= 0) {
      const bool adjacent = static_cast<ptrdiff_t>(out.size()) - 1 == starter;
      const bool blocked = !adjacent && (last == 0 || last >= ccc);
      if (!blocked) {
        if (const CodePoint c = Compose(out[starter], cp); c != 0) {
          out[starter] = c;
          continue;
        }
      }
    }
    out.push_back(cp);
    last = ccc;
    if (ccc == 0) starter = static_cast<ptrdiff_t>(out.size()) - 1;
  }
  return out;
}

std::string NormalizeNfc(std::string_view text) {
  // As above, without decoding: lead bytes below 0xCC are characters below U+0300.
  bool simple = true;
  for (unsigned char c : text) {
    if (c >= 0xCC) {  // lead bytes of U+0300 and above
      simple = false;
      break;
    }
  }
  if (simple) return std::string(text);
  return EncodeUtf8(NormalizeNfc(DecodeUtf8(text)));
}

const char* UnicodeVersion() { return kUnicodeTablesVersion; }

}  // namespace pplab
