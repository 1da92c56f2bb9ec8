// Fuzzes byte-level BPE encoding with arbitrary text (any bytes): for a
// Llama 3 style and a GPT-2 style tokenizer, with and without NFC, decoding
// what was encoded must give the text back, or for NFC files its NFC form.
// Added tokens are cut out before normalizing (as Hugging Face's library
// does), so a mark after one does not compose with it: around added tokens
// an NFC file's round trip equals the text's NFC once normalized again. A
// difference is a finding (abort).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/unicode.h"
#include "tests/byte_level_json.h"

namespace {

std::vector<pplab::ByteLevelBpe> Tokenizers() {
  std::vector<pplab::ByteLevelBpe> out;
  for (bool llama3 : {true, false}) {
    for (bool nfc : {false, true}) {
      pplab::test::Spec s;
      s.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"e", "\xCC"}, {"\xC3", "\xA9"}, {" ", " "}, {"1", "2"}};
      s.added = {"<|x|>", "<|x|>y", "<|end_of_text|>"};
      s.llama3 = llama3;
      s.nfc = nfc;
      s.ignore_merges = llama3;
      out.push_back(pplab::ByteLevelBpe::FromJson(pplab::test::Build(s).dump(), "fuzz.json"));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<pplab::ByteLevelBpe> tokenizers = Tokenizers();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t i = 0; i < tokenizers.size(); ++i) {
    const bool nfc = i % 2 == 1;
    const bool added = text.find("<|") != std::string::npos;
    std::string back = tokenizers[i].Decode(tokenizers[i].Encode(text));
    if (nfc && added) back = pplab::NormalizeNfc(back);
    if (back != (nfc ? pplab::NormalizeNfc(text) : text)) {
      std::fprintf(stderr, "tokenizer %zu: decode(encode(text)) differs from the text\n", i);
      std::abort();
    }
  }
  return 0;
}
