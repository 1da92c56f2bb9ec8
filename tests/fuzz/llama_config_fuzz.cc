// Fuzzes the model config reader (`--model FILE.json`).
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/llama_config.h"
#include "schedules/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pplab::LlamaConfig c = pplab::LlamaConfigFromJson(text, "fuzz.json");
    (void)c.ToJson();
  } catch (const pplab::Error&) {
  }
  return 0;
}
