#include "models/llama_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/json_reader.h"

namespace pplab {
namespace {

using nlohmann::json;

int PositiveInt(const json& doc, const char* key, int fallback, const std::string& origin) {
  if (!doc.contains(key)) return fallback;
  const json& v = doc[key];
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1LL << 30)) {
    throw Error(origin + ": field '" + key + "' must be a positive integer, got " + v.dump());
  }
  return v.get<int>();
}

double PositiveNumber(const json& doc, const char* key, double fallback, const std::string& origin) {
  if (!doc.contains(key)) return fallback;
  const json& v = doc[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
    throw Error(origin + ": field '" + key + "' must be a positive number, got " + v.dump());
  }
  return v.get<double>();
}

}  // namespace

void LlamaConfig::Check(const std::string& origin) const {
  auto fail = [&](const std::string& why) { throw Error(origin + ": " + why); };
  if (hidden_size % num_attention_heads != 0) {
    fail("hidden_size " + std::to_string(hidden_size) + " is not a multiple of num_attention_heads " +
         std::to_string(num_attention_heads));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    fail("num_attention_heads " + std::to_string(num_attention_heads) + " is not a multiple of num_key_value_heads " +
         std::to_string(num_key_value_heads));
  }
  if (HeadDim() % 2 != 0) fail("head dimension " + std::to_string(HeadDim()) + " must be even for rotary encoding");
}

std::string LlamaConfig::ToJson() const {
  return json{{"vocab_size", vocab_size},
              {"hidden_size", hidden_size},
              {"intermediate_size", intermediate_size},
              {"num_hidden_layers", num_hidden_layers},
              {"num_attention_heads", num_attention_heads},
              {"num_key_value_heads", num_key_value_heads},
              {"max_position_embeddings", max_position_embeddings},
              {"rope_theta", rope_theta},
              {"rms_norm_eps", rms_norm_eps}}
      .dump(2);
}

LlamaConfig LlamaConfigFromJson(const std::string& text, const std::string& origin) {
  json doc = ParseJsonStrict(text, origin);  // refuses a key given twice
  if (!doc.is_object()) throw Error(origin + ": expected a JSON object");
  static const char* kKnown[] = {
      "vocab_size",          "hidden_size",         "intermediate_size",       "num_hidden_layers",
      "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rope_theta",
      "rms_norm_eps"};
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known) throw Error(origin + ": unknown field '" + it.key() + "'");
  }
  const LlamaConfig d;
  LlamaConfig c;
  c.vocab_size = PositiveInt(doc, "vocab_size", d.vocab_size, origin);
  c.hidden_size = PositiveInt(doc, "hidden_size", d.hidden_size, origin);
  c.intermediate_size = PositiveInt(doc, "intermediate_size", d.intermediate_size, origin);
  c.num_hidden_layers = PositiveInt(doc, "num_hidden_layers", d.num_hidden_layers, origin);
  c.num_attention_heads = PositiveInt(doc, "num_attention_heads", d.num_attention_heads, origin);
  c.num_key_value_heads = PositiveInt(doc, "num_key_value_heads", d.num_key_value_heads, origin);
  c.max_position_embeddings = PositiveInt(doc, "max_position_embeddings", d.max_position_embeddings, origin);
  c.rope_theta = PositiveNumber(doc, "rope_theta", d.rope_theta, origin);
  c.rms_norm_eps = PositiveNumber(doc, "rms_norm_eps", d.rms_norm_eps, origin);
  c.Check(origin);
  return c;
}

AttentionKind ParseAttentionKind(const std::string& text) {
  if (text == "auto") return AttentionKind::kAuto;
  if (text == "sdpa") return AttentionKind::kSdpa;
  if (text == "explicit") return AttentionKind::kExplicit;
  throw Error("--attention '" + text + "' is not one of auto, sdpa, explicit");
}

const char* AttentionKindName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kAuto:
      return "auto";
    case AttentionKind::kSdpa:
      return "sdpa";
    case AttentionKind::kExplicit:
      return "explicit";
  }
  return "?";
}

std::vector<std::string> LlamaPresetNames() { return {"tiny", "small", "default"}; }

LlamaConfig LlamaPreset(const std::string& name) {
  LlamaConfig c;
  if (name == "default") return c;
  if (name == "tiny") {
    c.vocab_size = 256;
    c.hidden_size = 32;
    c.intermediate_size = 64;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = 128;
    return c;
  }
  if (name == "small") {
    c.vocab_size = 2048;
    c.hidden_size = 128;
    c.intermediate_size = 384;
    c.num_hidden_layers = 8;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = 512;
    return c;
  }
  std::string known;
  for (const std::string& n : LlamaPresetNames()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown model preset '" + name + "' (presets: " + known + "; or give a JSON config file)");
}

LlamaConfig LoadLlamaConfig(const std::string& preset_or_file) {
  for (const std::string& n : LlamaPresetNames()) {
    if (n == preset_or_file) return LlamaPreset(n);
  }
  if (preset_or_file.find('/') == std::string::npos && preset_or_file.find(".json") == std::string::npos) {
    return LlamaPreset(preset_or_file);  // throws, listing the presets
  }
  return LlamaConfigFromJson(ReadTextFile(preset_or_file), preset_or_file);
}

int64_t DecoderLayerParams(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, kv = static_cast<int64_t>(c.num_key_value_heads) * c.HeadDim();
  const int64_t attention = h * h /*q*/ + 2 * h * kv /*k, v*/ + h * h /*o*/;
  const int64_t mlp = 3 * h * c.intermediate_size;  // gate, up, down
  return attention + mlp + 2 * h;                   // + two RMSNorm weights
}

int64_t EmbeddingParams(const LlamaConfig& c) { return static_cast<int64_t>(c.vocab_size) * c.hidden_size; }

int64_t HeadParams(const LlamaConfig& c) { return static_cast<int64_t>(c.vocab_size) * c.hidden_size + c.hidden_size; }

}  // namespace pplab
