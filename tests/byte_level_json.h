// A byte-level BPE tokenizer.json written for tests, in the layout of
// Llama 3's (Split by its regex, then ByteLevel) or GPT-2's (ByteLevel with
// its regex), with a byte-to-character map of its own (not pplab's).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/data/unicode.h"

namespace pplab::test {

// GPT-2's spelling of byte b: itself when printable Latin-1, else U+0100
// onwards in byte order.
inline std::string Spell(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    uint32_t c = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))) {
      c = 0x100;
      for (unsigned k = 0; k < b; ++k) {
        if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE))) ++c;
      }
    }
    AppendUtf8(c, out);
  }
  return out;
}

inline const char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A tokenizer.json: byte b has id b, then one token per merge (ids 256,
// 257, ... in merge order) and `extra` vocabulary words after those; added
// tokens follow.
struct Spec {
  std::vector<std::pair<std::string, std::string>> merges;  // in bytes
  std::vector<std::string> extra;                           // in bytes
  std::vector<std::string> added;                           // special tokens
  bool llama3 = true, nfc = false, ignore_merges = false, array_merges = false;
};

inline nlohmann::json Build(const Spec& s) {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[Spell(std::string(1, static_cast<char>(b)))] = b;
  json merges = json::array();
  int next = 256;
  for (const auto& [l, r] : s.merges) {
    if (!vocab.contains(Spell(l + r))) vocab[Spell(l + r)] = next++;
    if (s.array_merges) {
      merges.push_back({Spell(l), Spell(r)});
    } else {
      merges.push_back(Spell(l) + " " + Spell(r));
    }
  }
  for (const std::string& e : s.extra) vocab[Spell(e)] = next++;
  json added = json::array();
  for (const std::string& a : s.added) {
    added.push_back({{"id", next++},
                     {"content", a},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json pre;
  if (s.llama3) {
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Regex}}}, {"behavior", "Isolated"}, {"invert", false}},
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  } else {
    pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", s.nfc ? json{{"type", "NFC"}} : json()},
          {"pre_tokenizer", pre},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"byte_fallback", false},
            {"ignore_merges", s.ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace pplab::test
