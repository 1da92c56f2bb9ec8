// Words of the three pre-tokenizer patterns (runtime/data/pretokenize.cc),
// worked out by hand from the regular expressions' leftmost-first,
// backtracking semantics.
#include "runtime/data/pretokenize.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>

namespace pplab::pretokenize_test {
namespace {

std::vector<std::string> Words(const std::string& text, SplitPattern p) {
  const std::vector<CodePoint> cps = DecodeUtf8(text);
  std::vector<std::string> out;
  for (const auto& [b, e] : SplitWords(cps, p)) {
    out.push_back(EncodeUtf8(std::vector<CodePoint>(cps.begin() + b, cps.begin() + e)));
  }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("Llama 3's pattern: digits by threes, contractions in any case, newlines kept with what ends a line",
          "[data][bpe]") {
  const auto p = SplitPattern::kLlama3;
  CHECK(Words("Hello world's 12345 years!!\n\n  ok", p) ==
        V{"Hello", " world", "'s", " ", "123", "45", " years", "!!\n\n", " ", " ok"});
  CHECK(Words("I'M here", p) == V{"I", "'M", " here"});
  CHECK(Words("they'LL", p) == V{"they", "'LL"});
  CHECK(Words("\t\tfoo", p) == V{"\t", "\tfoo"});
  CHECK(Words("a\n\nb", p) == V{"a", "\n\n", "b"});
  CHECK(Words(" \n x", p) == V{" \n", " x"});
  CHECK(Words("a  ", p) == V{"a", "  "});
  CHECK(Words("$abc $123 ...", p) == V{"$abc", " $", "123", " ..."});
  CHECK(Words("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC", p) == V{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC"});
}

TEST_CASE("Qwen's pattern is Llama 3's with one digit a word", "[data][bpe]") {
  CHECK(Words("Hello world's 12345 years!!\n\n  ok", SplitPattern::kQwen2) ==
        V{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " years", "!!\n\n", " ", " ok"});
}

TEST_CASE("GPT-2's pattern: a space joins the next word, contractions in lower case only", "[data][bpe]") {
  const auto p = SplitPattern::kGpt2;
  CHECK(Words("Hello world's 12345 years!!\n\n  ok", p) ==
        V{"Hello", " world", "'s", " 12345", " years", "!!", "\n\n ", " ok"});
  CHECK(Words("I'M", p) == V{"I", "'", "M"});
  CHECK(Words("a  ", p) == V{"a", "  "});
  CHECK(Words("x \t!", p) == V{"x", " ", "\t", "!"});
}

TEST_CASE("words are those Python's regex engine cuts with the published expressions, on 2100 texts", "[data][bpe]") {
  // tests/data/unicode/pretokenize_cases.txt: tools/gen_unicode_tables.py ran
  // each pattern's regular expression in Python's `re` over random texts.
  std::ifstream in(std::string(PPLAB_TEST_DATA_DIR) + "/unicode/pretokenize_cases.txt");
  REQUIRE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, semi, field;
    fields >> name >> semi;
    std::vector<CodePoint> text;
    while (fields >> field && field != ";") text.push_back(static_cast<CodePoint>(std::stoul(field, nullptr, 16)));
    std::vector<size_t> want;
    while (fields >> field) want.push_back(std::stoul(field));
    const SplitPattern p = name == "gpt2"     ? SplitPattern::kGpt2
                           : name == "llama3" ? SplitPattern::kLlama3
                                              : SplitPattern::kQwen2;
    REQUIRE(std::string(SplitPatternName(p)) == name);
    std::vector<size_t> got;
    for (const auto& [b, e] : SplitWords(text, p)) got.push_back(e - b);
    if (got != want) FAIL("the words of " << line << " differ: pplab cuts " << ::Catch::Detail::stringify(got));
    ++cases;
  }
  CHECK(cases == 2100);
}

TEST_CASE("words cover any text, in order, none empty", "[data][bpe]") {
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"a",   "Z", "7", " ",        "\n",           "\r",       "\t",
                                             "'",   "s", "!", "\xC3\xA9", "\xE4\xB8\x80", "\xD9\xA1", "\xE2\x80\x83",
                                             "\xFF"};
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    for (int trial = 0; trial < 300; ++trial) {
      std::string text;
      for (int k = rng() % 30; k > 0; --k) text += alphabet[rng() % alphabet.size()];
      const std::vector<CodePoint> cps = DecodeUtf8(text);
      size_t at = 0;
      for (const auto& [b, e] : SplitWords(cps, p)) {
        REQUIRE(b == at);
        REQUIRE(e > b);
        at = e;
      }
      REQUIRE(at == cps.size());
    }
  }
}

TEST_CASE("only the exact regular expressions of the three patterns are recognised", "[data][bpe]") {
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  CHECK(SplitPatternOf(llama3) == SplitPattern::kLlama3);
  std::string qwen = llama3;
  qwen.replace(qwen.find("{1,3}"), 5, "");
  CHECK(SplitPatternOf(qwen) == SplitPattern::kQwen2);
  CHECK(SplitPatternOf(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)") ==
        SplitPattern::kGpt2);
  CHECK_FALSE(SplitPatternOf(llama3 + "|x").has_value());
  CHECK_FALSE(SplitPatternOf("").has_value());
}

}  // namespace pplab::pretokenize_test
