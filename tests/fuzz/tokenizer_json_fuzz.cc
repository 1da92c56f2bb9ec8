// Fuzzes the tokenizer.json reader (`train --tokenizer tokenizer.json`): the
// bytes as a file's text; when they are accepted, a few texts encoded and
// decoded with it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/data/bpe_tokenizer.h"
#include "schedules/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const pplab::ByteLevelBpe t =
        pplab::ByteLevelBpe::FromJson(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    for (const char* text : {"Hello world's 12345!\n\n  x", "e\xCC\x81 \xE6\x97\xA5\xFF<|x|>", ""}) {
      (void)t.Decode(t.Encode(text));
    }
  } catch (const pplab::Error&) {
  }
  return 0;
}
