// Pre-tokenization of byte-level BPE tokenizers: text is cut into words
// before BPE merges within each word. No LibTorch.
//
// Hugging Face's tokenizer.json spells the cut as a regular expression.
// pplab knows the three that published Llama-family tokenizers use and
// runs each as a hand-written matcher with the same leftmost-first,
// backtracking semantics (so no regex engine, and no Unicode library, is
// needed):
//   kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//            (ByteLevel with use_regex: GPT-2, SmolLM)
//   kLlama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama 3.x)
//   kQwen2   kLlama3 with \p{N} in place of \p{N}{1,3}   (Qwen 2, 2.5, 3)
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/unicode.h"

namespace pplab {

enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

// The pattern that `regex` (as written in tokenizer.json) is, or nothing.
std::optional<SplitPattern> SplitPatternOf(const std::string& regex);
const char* SplitPatternName(SplitPattern p);

// The words of `text`, as [begin, end) index ranges into it: consecutive,
// non-empty, and covering all of it.
std::vector<std::pair<size_t, size_t>> SplitWords(const std::vector<CodePoint>& text, SplitPattern p);

}  // namespace pplab
