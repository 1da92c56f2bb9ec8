// Byte-level BPE from a tokenizer.json (runtime/data/bpe_tokenizer.cc) and
// the Tokenizer that loads one: merges by rank, added tokens, NFC, the
// special tokens, and the file checks. The files are written by
// tests/byte_level_json.h, with a byte-to-character map of its own.
#include "runtime/data/bpe_tokenizer.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "runtime/data/tokenizer.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "tests/byte_level_json.h"

namespace pplab::bpe_tokenizer_test {
namespace {

using nlohmann::json;
using test::Build;
using test::Spec;
using test::Spell;

ByteLevelBpe Make(const Spec& s) { return ByteLevelBpe::FromJson(Build(s).dump(), "tok.json"); }

int32_t Id(const ByteLevelBpe& t, const std::string& bytes) {
  for (int32_t id = 0; id < t.VocabSize(); ++id) {
    if (t.TokenText(id) == Spell(bytes)) return id;
  }
  FAIL("no token " << bytes);
  return -1;
}

std::string ErrorOf(const json& j) {
  try {
    ByteLevelBpe::FromJson(j.dump(), "tok.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

using Ids = std::vector<int32_t>;

}  // namespace

TEST_CASE("merges apply lowest rank first, leftmost of equals, within words only", "[data][bpe]") {
  Spec s;
  s.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  const ByteLevelBpe t = Make(s);
  CHECK(t.Encode("hello") == Ids{Id(t, "hello")});
  CHECK(t.Encode("hello world") == Ids{Id(t, "hello"), Id(t, " w"), 'o', 'r', 'l', 'd'});
  // "lll": the leftmost pair merges first.
  CHECK(t.Encode("lll") == Ids{Id(t, "ll"), 'l'});
  // Ranks decide, not position: "a b" before "b c" gives ab|c, the other
  // order a|bc.
  Spec abc;
  abc.merges = {{"a", "b"}, {"b", "c"}};
  CHECK(Make(abc).Encode("abc") == Ids{256, 'c'});
  abc.merges = {{"b", "c"}, {"a", "b"}};
  CHECK(Make(abc).Encode("abc") == Ids{'a', 256});
  // A merge never crosses a word: "o w" is no pair in "hello world".
  Spec across;
  across.merges = {{"o", " "}};
  CHECK(Make(across).Encode("o w") == Ids{'o', ' ', 'w'});
  // Merges written as pairs read the same.
  s.array_merges = true;
  CHECK(Make(s).Encode("hello world") == t.Encode("hello world"));
}

TEST_CASE("merges of random ranks give what merging the lowest-ranked pair, leftmost first, one at a time gives",
          "[data][bpe]") {
  // Merges built up from a, b and c in random order (some make one token
  // two ways), and words of those letters: the reference merges as the
  // rule reads, rescanning the word after each merge.
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    Spec s;
    std::vector<std::string> tokens = {"a", "b", "c"};
    for (int k = 0; k < 40; ++k) {
      const std::string l = tokens[rng() % tokens.size()], r = tokens[rng() % tokens.size()];
      if (std::find(s.merges.begin(), s.merges.end(), std::make_pair(l, r)) != s.merges.end()) continue;
      s.merges.push_back({l, r});
      if (std::find(tokens.begin(), tokens.end(), l + r) == tokens.end()) tokens.push_back(l + r);
    }
    const ByteLevelBpe t = Make(s);
    for (int w = 0; w < 20; ++w) {
      std::string word;
      for (size_t n = 1 + rng() % 80; word.size() < n;) word += static_cast<char>('a' + rng() % 3);
      std::vector<std::string> pieces;
      for (char ch : word) pieces.push_back(std::string(1, ch));
      for (;;) {
        size_t best = s.merges.size(), at = 0;
        for (size_t i = 0; i + 1 < pieces.size(); ++i) {
          const auto m = std::find(s.merges.begin(), s.merges.end(), std::make_pair(pieces[i], pieces[i + 1]));
          if (static_cast<size_t>(m - s.merges.begin()) < best) {
            best = m - s.merges.begin();
            at = i;
          }
        }
        if (best == s.merges.size()) break;
        pieces[at] += pieces[at + 1];
        pieces.erase(pieces.begin() + at + 1);
      }
      Ids expected;
      for (const std::string& p : pieces) expected.push_back(Id(t, p));
      INFO("round " << round << " word " << word);
      CHECK(t.Encode(word) == expected);
    }
  }
}

TEST_CASE("ignore_merges takes a word that is a token whole, as Llama 3's tokenizer does", "[data][bpe]") {
  Spec s;
  s.extra = {"abc"};
  CHECK(Make(s).Encode("abc") == Ids{'a', 'b', 'c'});
  s.ignore_merges = true;
  CHECK(Make(s).Encode("abc") == Ids{256});
  CHECK(Make(s).Encode("abcd") == Ids{'a', 'b', 'c', 'd'});
}

TEST_CASE("added tokens are cut out first, leftmost and longest", "[data][bpe]") {
  Spec s;
  s.added = {"<|x|>", "<|x|>y"};
  const ByteLevelBpe t = Make(s);
  const int32_t x = *t.AddedToken("<|x|>"), xy = *t.AddedToken("<|x|>y");
  CHECK(t.Encode("hi<|x|>there") == Ids{'h', 'i', x, 't', 'h', 'e', 'r', 'e'});
  CHECK(t.Encode("<|x|>yz<|x|>") == Ids{xy, 'z', x});
  CHECK(t.Encode("<|x|") == Ids{'<', '|', 'x', '|'});
  CHECK(t.Decode(t.Encode("a<|x|>yb")) == "a<|x|>yb");
  CHECK(t.SpecialTokens() == Ids{x, xy});
  CHECK(t.VocabSize() == xy + 1);
}

TEST_CASE("lstrip and rstrip added tokens take the white space beside them", "[data][bpe]") {
  json j = Build(Spec{});
  j["added_tokens"] = {{{"id", 300}, {"content", "<m>"}, {"lstrip", true}, {"rstrip", false}, {"special", true}},
                       {{"id", 301}, {"content", "<n>"}, {"lstrip", false}, {"rstrip", true}, {"special", true}}};
  const ByteLevelBpe t = ByteLevelBpe::FromJson(j.dump(), "tok.json");
  CHECK(t.Encode("a  <m> b") == Ids{'a', 300, ' ', 'b'});
  CHECK(t.Encode("a <n>\xE3\x80\x80 b") == Ids{'a', ' ', 301, 'b'});  // U+3000 is white space
}

TEST_CASE("decode inverts encode for any bytes, and NFC tokenizers compose first", "[data][bpe]") {
  Spec s;
  s.merges = {{"e", "\xCC"}, {"\xC3", "\xA9"}, {" ", "t"}, {" t", "he"}, {"h", "e"}};
  std::mt19937 rng(5);
  const std::vector<std::string> pieces = {"the", " ",    "\n",           "e", "\xCC\x81", "\xC3\xA9", "12345",
                                           "'s",  "\xFF", "\xE6\x97\xA5", "!", "\t"};
  for (bool nfc : {false, true}) {
    s.nfc = nfc;
    for (bool llama3 : {false, true}) {
      s.llama3 = llama3;
      const ByteLevelBpe t = Make(s);
      for (int trial = 0; trial < 200; ++trial) {
        std::string text;
        for (int k = rng() % 20; k > 0; --k) text += pieces[rng() % pieces.size()];
        const std::string want = nfc ? NormalizeNfc(text) : text;
        REQUIRE(t.Decode(t.Encode(text)) == want);
      }
    }
  }
  // e + combining acute is é when the file asks for NFC.
  s.nfc = true;
  CHECK(Make(s).Encode("e\xCC\x81") == Make(s).Encode("\xC3\xA9"));
  CHECK(Make(s).Encode("\xC3\xA9") == Ids{Id(Make(s), "\xC3\xA9")});
  // Without NFC the mark is a word of its own (not a letter): the merge
  // "e" + 0xCC would cross words.
  s.nfc = false;
  CHECK(Make(s).Encode("e\xCC\x81") == Ids{'e', 0xCC, 0x81});
}

TEST_CASE("a tokenizer.json pplab would read differently is refused, naming the field", "[data][bpe]") {
  const json good = Build(Spec{});
  CHECK(ErrorOf(good).empty());
  json j = good;
  j["model"]["type"] = "Unigram";
  CHECK_THAT(ErrorOf(j), Catch::Contains("tok.json: model.type is \"Unigram\""));
  j["model"]["type"] = 5;  // was named as ""
  CHECK_THAT(ErrorOf(j), Catch::Contains("tok.json: model.type is 5;"));
  j = good;
  j["model"]["byte_fallback"] = true;
  CHECK_THAT(ErrorOf(j), Catch::Contains("model.byte_fallback"));
  j = good;
  j["model"]["vocab"].erase(Spell("\n"));
  CHECK_THAT(ErrorOf(j), Catch::Contains("lacks the token of byte 10"));
  j = good;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  CHECK_THAT(ErrorOf(j), Catch::Contains("the Split regex \"\\s+\""));
  j = good;
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  CHECK_THAT(ErrorOf(j), Catch::Contains("pre_tokenizer \"Metaspace\""));
  j["pre_tokenizer"] = 5;
  CHECK_THAT(ErrorOf(j), Catch::Contains("pre_tokenizer 5 is not byte-level"));
  j = good;
  j["normalizer"] = {{"type", "NFKC"}};
  CHECK_THAT(ErrorOf(j), Catch::Contains("normalizer.type \"NFKC\""));
  j = good;
  j["model"]["merges"] = {"a"};
  CHECK_THAT(ErrorOf(j), Catch::Contains("model.merges[0] \"a\" is not two tokens"));
  j = good;
  j["model"]["merges"] = {"a b"};
  CHECK_THAT(ErrorOf(j), Catch::Contains("model.merges[0] (\"a\", \"b\") names a token model.vocab lacks"));
  j = good;
  j["added_tokens"] = {{{"id", 300}, {"content", "<w>"}, {"single_word", true}}};
  CHECK_THAT(ErrorOf(j), Catch::Contains("added_tokens[\"<w>\"].single_word"));
  j = good;
  j["added_tokens"] = {{{"id", 1 << 20}, {"content", "<x>"}}};  // a damaged id: no 2^20-entry table
  CHECK_THAT(ErrorOf(j), Catch::Contains("added_tokens[\"<x>\"] has the id 1048576: ids run from 0 to 1048575"));
  j["added_tokens"] = {{{"id", UINT64_MAX}, {"content", "<x>"}}};  // named as written, not as -1
  CHECK_THAT(ErrorOf(j), Catch::Contains("added_tokens[\"<x>\"] has the id 18446744073709551615: ids run from 0"));
  j["added_tokens"] = {{{"id", -3}, {"content", "<x>"}}};
  CHECK_THAT(ErrorOf(j), Catch::Contains("added_tokens[\"<x>\"] has the id -3: ids run from 0"));
  CHECK_THAT(ErrorOf(json::array()), Catch::Contains("tok.json: no \"model\" object"));
  j = good;
  j["model"]["vocab"]["zz"] = j["model"]["vocab"][Spell("a")];  // two tokens, one id: decoding would guess
  CHECK_THAT(ErrorOf(j), Catch::Contains("tok.json: model.vocab[\"zz\"] has the id " +
                                         j["model"]["vocab"][Spell("a")].dump() + ", which another token of"));
  // An added token that takes an ordinary token's id hid that token (every
  // "e" became the PAD); one that repeats its own entry of model.vocab, as
  // GPT-2's <|endoftext|> does, is fine.
  const int e = j["model"]["vocab"][Spell("e")].get<int>();
  j = good;
  j["added_tokens"] = {{{"id", e}, {"content", "<pad>"}}};
  CHECK(ErrorOf(j) == "tok.json: added_tokens[\"<pad>\"] has the id " + std::to_string(e) +
                          ", which model.vocab gives \"" + Spell("e") + "\"");
  j = good;
  j["model"]["vocab"]["<eot>"] = 900;
  j["added_tokens"] = {{{"id", 900}, {"content", "<eot>"}}};
  CHECK(ErrorOf(j).empty());
  j["added_tokens"].push_back({{"id", 900}, {"content", "<eos>"}});
  CHECK_THAT(ErrorOf(j), Catch::Contains("added_tokens[\"<eos>\"] has the id 900, which model.vocab gives"));
  j = good;
  j["added_tokens"] = {{{"id", 901}, {"content", "<a>"}}, {{"id", 901}, {"content", "<b>"}}};
  CHECK_THAT(ErrorOf(j), Catch::Contains("added_tokens[\"<b>\"] has the id 901, which another added token gives "
                                         "\"<a>\""));
}

TEST_CASE("a Tokenizer loads a tokenizer.json by its content and finds BOS, EOS and PAD by name", "[data][bpe]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/bpe_tokenizer_test";
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  Spec s;
  s.merges = {{"h", "i"}};
  s.added = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|finetune_right_pad_id|>",
             "<|reserved_special_token_1|>"};
  const std::string path = dir + "/any-name.model";  // the content decides
  WriteTextFile(path, Build(s).dump(2));
  const Tokenizer llama = Tokenizer::Load(path);
  CHECK(std::string(llama.FileName()) == "tokenizer.json");
  CHECK(llama.Bos() == 257);
  CHECK(llama.Eos() == 258);
  CHECK(llama.Pad() == 260);
  CHECK(llama.VocabSize() == 262);
  CHECK(llama.Encode("hi<|end_of_text|>") == Ids{256, 258});
  CHECK(llama.Decode({257, 256, '!', 258, 260}) == "hi!");  // BOS, EOS, PAD dropped
  // Qwen's kind: no BOS (documents start with EOS), padding by the last
  // other special token that marks no chat turn (<|vision_pad|>, not the
  // <|im_end|> after it, which chat training learns).
  s.added = {"<|endoftext|>", "<|im_start|>", "<|vision_pad|>", "<|im_end|>"};
  WriteTextFile(path, Build(s).dump());
  const Tokenizer qwen = Tokenizer::Load(path);
  CHECK(qwen.Eos() == 257);
  CHECK(qwen.Bos() == 257);
  CHECK(qwen.Pad() == 259);
  CHECK(qwen.Fingerprint() != llama.Fingerprint());
  for (const std::vector<std::string>& only :
       {std::vector<std::string>{"<|endoftext|>"},
        {"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
        {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}}) {
    s.added = only;
    WriteTextFile(path, Build(s).dump());
    CHECK_THROWS_WITH(Tokenizer::Load(path),
                      Catch::Contains("no special token to pad with besides BOS, EOS and the chat markers"));
  }
  s.added = {"<|im_start|>"};
  WriteTextFile(path, Build(s).dump());
  CHECK_THROWS_WITH(Tokenizer::Load(path), Catch::Contains(path + ": no end-of-text token"));
  WriteTextFile(path, "IQ== 0\nIg== 1\n");
  CHECK_THROWS_WITH(Tokenizer::Load(path), Catch::Contains(path + ": a tiktoken file"));
  WriteTextFile(path, "{ not json");
  CHECK_THROWS_WITH(Tokenizer::Load(path), Catch::Contains(path + ": not a SentencePiece model, nor a tokenizer.json"));
  // A vocab entry given twice was resolved to its last id.
  std::string twice = Build(s).dump();
  const size_t vocab = twice.find("\"vocab\":{");
  REQUIRE(vocab != std::string::npos);
  twice.insert(vocab + 9, "\"dup\":5,\"dup\":6,");
  WriteTextFile(path, twice);
  CHECK_THROWS_WITH(Tokenizer::Load(path), Catch::Contains(path + ": key 'dup' is given twice in one object"));
  RemoveTree(dir);
}

}  // namespace pplab::bpe_tokenizer_test

namespace pplab::bpe_tokenizer_test {

TEST_CASE("the kept fuzz inputs of the tokenizer harnesses load or are refused, and round-trip", "[data][bpe][fuzz]") {
  // tests/data/fuzz/tokenizer_json: files in the three layouts (written by
  // Python, not by this test's builder) load; any other kept input is
  // refused with pplab::Error.
  const std::string fuzz = std::string(PPLAB_TEST_DATA_DIR) + "/fuzz/";
  int loaded = 0;
  for (const std::string& name : ListDirectory(fuzz + "tokenizer_json")) {
    INFO(name);
    try {
      const ByteLevelBpe t = ByteLevelBpe::FromJson(ReadTextFile(fuzz + "tokenizer_json/" + name), name);
      // (GPT-2's layout here adds a prefix space, which decoding keeps.)
      const std::string back = t.Decode(t.Encode("Hello world's 12345!"));
      CHECK((back == "Hello world's 12345!" || back == " Hello world's 12345!"));
      ++loaded;
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(name + ": "));
    }
  }
  CHECK(loaded >= 3);
  Spec s;
  s.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}};
  s.added = {"<|x|>", "<|x|>y"};
  const ByteLevelBpe t = Make(s);
  for (const std::string& name : ListDirectory(fuzz + "tokenizer_text")) {
    const std::string text = ReadTextFile(fuzz + "tokenizer_text/" + name);
    INFO(name);
    CHECK(t.Decode(t.Encode(text)) == text);
  }
}

}  // namespace pplab::bpe_tokenizer_test
