// ByteLevelBpe: a Hugging Face tokenizer.json of the byte-level BPE kind,
// the tokenizer of Llama 3.x, Qwen 2/2.5/3 and GPT-2-style models. No
// LibTorch.
//
// Encoding follows the file: added tokens are cut out of the text first
// (leftmost, longest), the rest is normalized (none, or NFC), cut into
// words (pretokenize.h), each word's bytes are spelled with GPT-2's
// byte-to-character map, and merges are applied to each word by rank,
// lowest first. Every byte is a token of the vocabulary (checked when
// loading), so no text is lost: Decode(Encode(t)) == t for any byte string
// t that is already in the normalizer's form.
//
// What a file may hold is checked when it is loaded; anything pplab would
// encode differently from Hugging Face's library is refused with one line
// naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/data/pretokenize.h"

namespace pplab {

class ByteLevelBpe {
 public:
  // Parses tokenizer.json's text; `path` names the file in errors.
  static ByteLevelBpe FromJson(const std::string& text, const std::string& path);

  std::vector<int32_t> Encode(std::string_view text) const;  // nothing added
  // Every id's text, added tokens included; ids that are no token are
  // skipped.
  std::string Decode(const std::vector<int32_t>& ids) const;

  // One more than the largest id.
  int VocabSize() const { return vocab_size_; }
  // The id of an added token, by its text.
  std::optional<int32_t> AddedToken(const std::string& content) const;
  // Added tokens flagged `special`, in the file's order.
  const std::vector<int32_t>& SpecialTokens() const { return specials_; }
  const std::string& TokenText(int32_t id) const;  // "" when no token
  SplitPattern Pattern() const { return pattern_; }

 private:
  static ByteLevelBpe FromParsed(const nlohmann::json& j, const std::string& path);
  struct Added {
    std::string content;
    int32_t id;
    bool lstrip, rstrip;
  };
  struct Merge {
    int32_t rank, result;
  };
  // The leftmost added token at or after `at` (moved to it), the longest
  // of those starting there; nullptr when none is left.
  const Added* FindAdded(std::string_view text, size_t& at) const;
  // Appends the ids of one word (its UTF-8 bytes).
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const;
  // Appends the ids of text between added tokens.
  void EncodeSegment(std::string_view text, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> text_of_id_;         // by id; "" for no token
  std::vector<bool> is_added_;                  // by id
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id)
  int32_t byte_id_[256] = {};
  uint32_t char_of_byte_[256] = {};                     // GPT-2's byte-to-character map
  std::unordered_map<uint32_t, uint8_t> byte_of_char_;  // and back
  std::vector<Added> added_;                            // longest first
  bool first_bytes_[256] = {};                          // the first bytes of added tokens
  std::vector<int32_t> specials_;
  SplitPattern pattern_ = SplitPattern::kGpt2;
  bool nfc_ = false;
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;
  int vocab_size_ = 0;
};

}  // namespace pplab
