#include "runtime/data/pretokenize.h"

namespace pplab {
namespace {

constexpr char kGpt2Regex[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool IsNewline(CodePoint c) { return c == '\r' || c == '\n'; }
// [^\s\p{L}\p{N}]
bool IsOther(CodePoint c) { return !IsSpace(c) && !IsLetter(c) && !IsNumber(c); }

// Matches the contraction alternatives at `i` ('s 't 're 've 'm 'll 'd),
// case-insensitively (Unicode simple case folding: s also matches U+017F)
// when `fold`. Returns the match's length, or 0.
size_t Contraction(const std::vector<CodePoint>& t, size_t i, bool fold) {
  if (t[i] != '\'' || i + 1 >= t.size()) return 0;
  const auto is = [&](size_t k, char lower) {
    if (k >= t.size()) return false;
    const CodePoint c = t[k];
    if (c == static_cast<CodePoint>(lower)) return true;
    if (!fold) return false;
    return c == static_cast<CodePoint>(lower - 'a' + 'A') || (lower == 's' && c == 0x17F);
  };
  if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) return 2;
  if ((is(i + 1, 'r') || is(i + 1, 'v')) && is(i + 2, 'e')) return 3;
  if (is(i + 1, 'l') && is(i + 2, 'l')) return 3;
  return 0;
}

// The end of the run of characters from `i` for which `pred` holds.
template <typename Pred>
size_t RunEnd(const std::vector<CodePoint>& t, size_t i, Pred pred) {
  while (i < t.size() && pred(t[i])) ++i;
  return i;
}

// \s+(?!\S) then \s+, at a white-space character `i`: the whole run when
// it ends the text or is one character long, else all of it but its last
// character (which then starts the next word, e.g. " word").
size_t SpaceRun(const std::vector<CodePoint>& t, size_t i) {
  const size_t end = RunEnd(t, i, IsSpace);
  if (end == t.size() || end - i == 1) return end - i;
  return end - i - 1;
}

size_t MatchGpt2(const std::vector<CodePoint>& t, size_t i) {
  if (size_t n = Contraction(t, i, /*fold=*/false)) return n;
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a
  // run of one class.
  const size_t j = t[i] == ' ' && i + 1 < t.size() ? i + 1 : i;
  for (bool (*cls)(CodePoint) : {IsLetter, IsNumber, IsOther}) {
    if (cls(t[j])) return RunEnd(t, j, cls) - i;
  }
  return SpaceRun(t, i);
}

size_t MatchLlama3(const std::vector<CodePoint>& t, size_t i, size_t max_digits) {
  if (size_t n = Contraction(t, i, /*fold=*/true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (IsLetter(t[i])) return RunEnd(t, i, IsLetter) - i;
  if (!IsNewline(t[i]) && !IsNumber(t[i]) && i + 1 < t.size() && IsLetter(t[i + 1])) {
    return RunEnd(t, i + 1, IsLetter) - i;
  }
  // \p{N}{1,max_digits}
  if (IsNumber(t[i])) {
    size_t n = 1;
    while (n < max_digits && i + n < t.size() && IsNumber(t[i + n])) ++n;
    return n;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t j = t[i] == ' ' && i + 1 < t.size() && IsOther(t[i + 1]) ? i + 1 : i;
  if (IsOther(t[j])) return RunEnd(t, RunEnd(t, j, IsOther), IsNewline) - i;
  // \s*[\r\n]+: the white space up to and including its last newline.
  const size_t end = RunEnd(t, i, IsSpace);
  for (size_t k = end; k > i; --k) {
    if (IsNewline(t[k - 1])) return k - i;
  }
  return SpaceRun(t, i);
}

}  // namespace

std::optional<SplitPattern> SplitPatternOf(const std::string& regex) {
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  return std::nullopt;
}

const char* SplitPatternName(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2:
      return "gpt2";
    case SplitPattern::kLlama3:
      return "llama3";
    case SplitPattern::kQwen2:
      return "qwen2";
  }
  return "?";
}

std::vector<std::pair<size_t, size_t>> SplitWords(const std::vector<CodePoint>& text, SplitPattern p) {
  std::vector<std::pair<size_t, size_t>> words;
  for (size_t i = 0; i < text.size();) {
    // Every character starts a match of one alternative or another (the
    // last, \s+, takes any white space; the others letters, numbers and the
    // rest), so the words cover the text.
    const size_t n = p == SplitPattern::kGpt2     ? MatchGpt2(text, i)
                     : p == SplitPattern::kLlama3 ? MatchLlama3(text, i, 3)
                                                  : MatchLlama3(text, i, 1);
    words.emplace_back(i, i + n);
    i += n;
  }
  return words;
}

}  // namespace pplab
