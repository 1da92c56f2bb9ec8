#include "runtime/data/bpe_tokenizer.h"

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <queue>
#include <utility>

#include "schedules/error.h"
#include "schedules/json_reader.h"

namespace pplab {
namespace {

using nlohmann::json;

// GPT-2's map from bytes to printable characters: the printable bytes of
// Latin-1 stand for themselves, the other 68 for U+0100 onwards in order.
void ByteMap(uint32_t (&char_of_byte)[256]) {
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char_of_byte[b] = printable ? b : next++;
  }
}

// A field that is absent or null reads as `fallback`.
bool Flag(const json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) throw Error(where + "." + key + " is not true or false");
  return j[key].get<bool>();
}

std::string TypeOf(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
}

// The "type" field of `j` as a message shows it: "BPE" quoted, a number as
// written; a value that is no object as written (cut short), or that there
// is none.
std::string TypeText(const json& j) {
  if (j.is_null()) return "(none)";
  if (!j.is_object()) return j.dump().substr(0, 40);
  return j.contains("type") ? j["type"].dump().substr(0, 40) : "without a \"type\"";
}

// Whether the character at s[at] (at < s.size()) is white space.
bool SpaceAt(std::string_view s, size_t at) {
  size_t length = 0;
  return IsSpace(DecodeUtf8At(s, at, length));
}

}  // namespace

ByteLevelBpe ByteLevelBpe::FromJson(const std::string& text, const std::string& path) {
  json j;
  try {
    // Strict: a key given twice (a vocab entry, say) is refused, not
    // resolved to its last value.
    j = ParseJsonStrict(text, path);
  } catch (const Error& e) {
    // Not JSON at all: the file may be meant as either kind.
    const std::string what = e.what(), syntax = path + ": not valid JSON ";
    if (what.rfind(syntax, 0) != 0) throw;
    throw Error(path + ": not a SentencePiece model, nor a tokenizer.json " + what.substr(syntax.size()));
  }
  try {
    return FromParsed(j, path);
  } catch (const json::exception& e) {
    // A field of a type FromParsed does not check for.
    throw Error(path + ": " + JsonErrorText(e));
  }
}

ByteLevelBpe ByteLevelBpe::FromParsed(const nlohmann::json& j, const std::string& path) {
  const std::string where = path + ": ";
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw Error(where + "no \"model\" object: not a Hugging Face tokenizer.json");
  }
  const json& model = j["model"];
  const std::string type = TypeOf(model);
  if (type != "BPE") {
    throw Error(where + "model.type is " + (model.contains("type") ? model["type"].dump() : std::string("missing")) +
                "; pplab reads byte-level BPE tokenizers (Llama 3, Qwen, GPT-2)");
  }
  if (Flag(model, "byte_fallback", false, where + "model")) {
    throw Error(where + "model.byte_fallback: a SentencePiece-style BPE; give the model's tokenizer.model instead");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      throw Error(where + "model." + key + " is set; pplab reads byte-level BPE without word markers");
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0.0) {
    throw Error(where + "model.dropout is set; pplab encodes deterministically (BPE without dropout)");
  }
  ByteLevelBpe t;
  t.ignore_merges_ = Flag(model, "ignore_merges", false, where + "model");

  // Normalizer: none, or NFC (alone or as a one-step sequence).
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const json* n = &j["normalizer"];
    if (TypeOf(*n) == "Sequence" && n->contains("normalizers") && (*n)["normalizers"].is_array() &&
        (*n)["normalizers"].size() == 1) {
      n = &(*n)["normalizers"][0];
    }
    if (TypeOf(*n) != "NFC") {
      throw Error(where + "normalizer.type \"" + TypeOf(*n) + "\": pplab applies no normalizer, or NFC");
    }
    t.nfc_ = true;
  }

  // Pre-tokenizer: ByteLevel with its own (GPT-2) regex, or a Split by a
  // known regex followed by ByteLevel without one.
  const json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  const auto byte_level = [&](const json& b, bool regex_expected) {
    if (TypeOf(b) != "ByteLevel") return false;
    if (Flag(b, "use_regex", true, where + "pre_tokenizer") != regex_expected) {
      throw Error(where + "pre_tokenizer: ByteLevel.use_regex should be " + (regex_expected ? "true" : "false") +
                  " here; pplab reads the layouts of GPT-2, Llama 3 and Qwen");
    }
    t.add_prefix_space_ = Flag(b, "add_prefix_space", false, where + "pre_tokenizer");
    return true;
  };
  if (byte_level(pre, true)) {
    t.pattern_ = SplitPattern::kGpt2;
  } else if (TypeOf(pre) == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
             pre["pretokenizers"].size() == 2 && TypeOf(pre["pretokenizers"][0]) == "Split" &&
             byte_level(pre["pretokenizers"][1], false)) {
    const json& split = pre["pretokenizers"][0];
    const std::string regex = split.contains("pattern") && split["pattern"].is_object() &&
                                      split["pattern"].contains("Regex") && split["pattern"]["Regex"].is_string()
                                  ? split["pattern"]["Regex"].get<std::string>()
                                  : "";
    const std::optional<SplitPattern> p = SplitPatternOf(regex);
    if (!p) {
      throw Error(where + "pre_tokenizer: the Split regex \"" + regex +
                  "\" is not GPT-2's, Llama 3's or Qwen's, the ones pplab knows");
    }
    if (split.value("behavior", std::string()) != "Isolated" || Flag(split, "invert", false, where + "Split")) {
      throw Error(where + "pre_tokenizer: Split.behavior should be \"Isolated\", not inverted");
    }
    if (t.add_prefix_space_) throw Error(where + "pre_tokenizer: ByteLevel.add_prefix_space after a Split");
    t.pattern_ = *p;
  } else {
    throw Error(where + "pre_tokenizer " + TypeText(pre) +
                " is not byte-level (ByteLevel, or Split then ByteLevel); a SentencePiece-style tokenizer.json "
                "needs its tokenizer.model");
  }

  // Vocabulary.
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw Error(where + "model.vocab is not an object");
  // Ids are about dense in published files (the largest vocabularies hold
  // some 260 000); a bound on them keeps a damaged file from asking for
  // gigabytes of id table.
  const int64_t entries = static_cast<int64_t>(model["vocab"].size()) +
                          (j.contains("added_tokens") && j["added_tokens"].is_array() ? j["added_tokens"].size() : 0);
  const int64_t max_id = std::max<int64_t>(2 * entries, int64_t{1} << 20);
  const auto set_text = [&t, &where, max_id](const json& value, const std::string& s, const std::string& what) {
    // (An unsigned id past int64, 2^64 - 1, is named as written, not as -1.)
    const bool huge = value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max_id);
    const int64_t id = huge ? max_id : value.get<int64_t>();
    if (id < 0 || id >= max_id) {
      throw Error(where + what + " has the id " + value.dump() + ": ids run from 0 to " + std::to_string(max_id - 1) +
                  " (2^20, or twice the number of tokens)");
    }
    if (static_cast<size_t>(id) >= t.text_of_id_.size()) {
      t.text_of_id_.resize(id + 1);
      t.is_added_.resize(id + 1);
    }
    t.text_of_id_[id] = s;
    t.vocab_size_ = std::max<int>(t.vocab_size_, static_cast<int>(id) + 1);
  };
  std::vector<bool> in_vocab;  // ids model.vocab has given a token: one token an id, or decoding is a guess
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) throw Error(where + "model.vocab[\"" + token + "\"] is not an integer id");
    set_text(id, token, "model.vocab[\"" + token + "\"]");
    const size_t n = static_cast<size_t>(id.get<int64_t>());
    if (n >= in_vocab.size()) in_vocab.resize(n + 1);
    if (in_vocab[n]) {
      throw Error(where + "model.vocab[\"" + token + "\"] has the id " + std::to_string(n) +
                  ", which another token of model.vocab has");
    }
    in_vocab[n] = true;
    t.vocab_.emplace(token, id.get<int32_t>());
  }
  ByteMap(t.char_of_byte_);
  for (int b = 0; b < 256; ++b) {
    std::string c;
    AppendUtf8(t.char_of_byte_[b], c);
    t.byte_of_char_[t.char_of_byte_[b]] = static_cast<uint8_t>(b);
    const auto it = t.vocab_.find(c);
    if (it == t.vocab_.end()) {
      throw Error(where + "model.vocab lacks the token of byte " + std::to_string(b) +
                  ": not a byte-level vocabulary (some text could not be encoded)");
    }
    t.byte_id_[b] = it->second;
  }

  // Merges: "left right" strings, or [left, right] pairs; rank = position.
  if (!model.contains("merges") || !model["merges"].is_array()) throw Error(where + "model.merges is not a list");
  const json& merges = model["merges"];
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        throw Error(where + "model.merges[" + std::to_string(rank) + "] \"" + s + "\" is not two tokens");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw Error(where + "model.merges[" + std::to_string(rank) + "] is not a pair of tokens");
    }
    const auto l = t.vocab_.find(left), r = t.vocab_.find(right), out = t.vocab_.find(left + right);
    if (l == t.vocab_.end() || r == t.vocab_.end() || out == t.vocab_.end()) {
      throw Error(where + "model.merges[" + std::to_string(rank) + "] (\"" + left + "\", \"" + right +
                  "\") names a token model.vocab lacks");
    }
    const uint64_t key = (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
    // A pair listed twice keeps its last rank, as a map built in file order does.
    t.merges_.insert_or_assign(key, Merge{static_cast<int32_t>(rank), out->second});
  }

  // Added tokens: matched in the text before anything else.
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) throw Error(where + "added_tokens is not a list");
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string() || a["content"].get<std::string>().empty()) {
        throw Error(where + "added_tokens: an entry lacks its id or content");
      }
      const std::string content = a["content"].get<std::string>();
      const std::string at = "added_tokens[\"" + content + "\"]";
      if (Flag(a, "single_word", false, where + at)) {
        throw Error(where + at + ".single_word is set; pplab does not match added tokens as single words");
      }
      // An added token may repeat a token of model.vocab (GPT-2's
      // <|endoftext|> is in both), not take another's id: the other token
      // would encode to it (a PAD that took "e"'s id hid every e).
      if (a["id"].is_number_unsigned() || a["id"].get<int64_t>() >= 0) {
        const size_t n = a["id"].get<uint64_t>();
        if (n < t.text_of_id_.size() && ((n < in_vocab.size() && in_vocab[n]) || t.is_added_[n]) &&
            t.text_of_id_[n] != content) {
          throw Error(where + at + " has the id " + std::to_string(n) + ", which " +
                      (n < in_vocab.size() && in_vocab[n] ? "model.vocab" : "another added token") + " gives \"" +
                      t.text_of_id_[n] + "\"");
        }
      }
      set_text(a["id"], content, at);
      const int32_t id = a["id"].get<int32_t>();
      t.is_added_[id] = true;
      t.added_.push_back(
          Added{content, id, Flag(a, "lstrip", false, where + at), Flag(a, "rstrip", false, where + at)});
      if (Flag(a, "special", false, where + at)) t.specials_.push_back(id);
      t.first_bytes_[static_cast<unsigned char>(content[0])] = true;
    }
  }
  std::stable_sort(t.added_.begin(), t.added_.end(),
                   [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });
  return t;
}

std::optional<int32_t> ByteLevelBpe::AddedToken(const std::string& content) const {
  for (const Added& a : added_) {
    if (a.content == content) return a.id;
  }
  return std::nullopt;
}

const std::string& ByteLevelBpe::TokenText(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && static_cast<size_t>(id) < text_of_id_.size() ? text_of_id_[id] : kNone;
}

void ByteLevelBpe::EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    // Llama 3's tokenizer takes a word that is itself a token as it is,
    // whatever the merges would make of it.
    std::string spelled;
    for (unsigned char b : word) AppendUtf8(char_of_byte_[b], spelled);
    if (const auto it = vocab_.find(spelled); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Merge the pair of lowest rank, the leftmost of equals, until none is
  // left: the order Hugging Face's priority queue takes. The symbols are a
  // list linked through `next` and `prev` (a merged-away symbol gets id -1),
  // and each possible merge waits in a heap keyed by (rank, position); one
  // whose pair has since changed is dropped when it comes up. O(n log n) in
  // the word's bytes, where rescanning after each merge was O(n^2).
  const size_t n = word.size();
  std::vector<int32_t> symbols(n);
  std::vector<size_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    symbols[i] = byte_id_[static_cast<unsigned char>(word[i])];
    next[i] = i + 1;  // n: none
    prev[i] = i - 1;  // SIZE_MAX for the first: none
  }
  const auto merge_at = [&](size_t i) -> const Merge* {
    if (next[i] >= n) return nullptr;
    const uint64_t key = (static_cast<uint64_t>(symbols[i]) << 32) | static_cast<uint32_t>(symbols[next[i]]);
    const auto it = merges_.find(key);
    return it == merges_.end() ? nullptr : &it->second;
  };
  using Candidate = std::pair<int32_t, size_t>;  // (rank, position of the left symbol)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto offer = [&](size_t i) {
    if (const Merge* m = merge_at(i)) heap.push({m->rank, i});
  };
  for (size_t i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    if (symbols[i] < 0) continue;  // merged into its left neighbour since
    const Merge* m = merge_at(i);
    if (m == nullptr || m->rank != rank) continue;  // its right neighbour changed since
    const size_t right = next[i];
    symbols[i] = m->result;
    symbols[right] = -1;
    next[i] = next[right];
    if (next[i] < n) prev[next[i]] = i;
    if (prev[i] < n) offer(prev[i]);
    offer(i);
  }
  for (size_t i = 0; i < n; i = next[i]) out.push_back(symbols[i]);
}

void ByteLevelBpe::EncodeSegment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<CodePoint> cps = DecodeUtf8(text);
  if (nfc_) cps = NormalizeNfc(cps);
  if (add_prefix_space_ && cps.front() != ' ') cps.insert(cps.begin(), ' ');
  std::string word;
  for (const auto& [begin, end] : SplitWords(cps, pattern_)) {
    word.clear();
    for (size_t i = begin; i < end; ++i) AppendUtf8(cps[i], word);
    EncodeWord(word, out);
  }
}

const ByteLevelBpe::Added* ByteLevelBpe::FindAdded(std::string_view text, size_t& at) const {
  for (; at < text.size(); ++at) {
    if (!first_bytes_[static_cast<unsigned char>(text[at])]) continue;
    for (const Added& a : added_) {  // longest first
      if (text.compare(at, a.content.size(), a.content) == 0) return &a;
    }
  }
  return nullptr;
}

std::vector<int32_t> ByteLevelBpe::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  size_t done = 0;  // text before `done` is encoded
  while (done < text.size()) {
    size_t at = done;
    const Added* found = FindAdded(text, at);
    if (found == nullptr) break;
    size_t begin = at, end = at + found->content.size();
    if (found->lstrip) {
      while (begin > done) {
        size_t prev = begin - 1;
        while (prev > done && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80) --prev;
        if (!SpaceAt(text, prev)) break;
        begin = prev;
      }
    }
    if (found->rstrip) {
      for (size_t length = 0; end < text.size() && IsSpace(DecodeUtf8At(text, end, length));) end += length;
    }
    EncodeSegment(text.substr(done, begin - done), out);
    out.push_back(found->id);
    done = end;
  }
  EncodeSegment(text.substr(done), out);
  return out;
}

std::string ByteLevelBpe::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= text_of_id_.size() || text_of_id_[id].empty()) continue;
    if (is_added_[id]) {
      out += text_of_id_[id];
      continue;
    }
    for (CodePoint c : DecodeUtf8(text_of_id_[id])) {
      const auto it = byte_of_char_.find(c);
      if (it != byte_of_char_.end()) {
        out += static_cast<char>(it->second);
      } else {
        AppendUtf8(c, out);  // not a byte's character: as Hugging Face's decoder keeps it
      }
    }
  }
  return out;
}

}  // namespace pplab
