#include "models/llama_config.h"

#include <sys/stat.h>

#include <algorithm>
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
    throw Error(origin + ": field '" + key + "' must be an integer from 1 to 2^30, got " + v.dump());
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

bool Bool(const json& doc, const char* key, const std::string& origin) {
  if (!doc.contains(key) || doc[key].is_null()) return false;
  if (!doc[key].is_boolean())
    throw Error(origin + ": field '" + key + "' must be true or false, got " + doc[key].dump());
  return doc[key].get<bool>();
}

// A rope_scaling object (Hugging Face's, or pplab's own in ToJson's form)
// as a RopeScaling; null or rope_type "default" is none. `strict` refuses
// keys pplab does not read (its own files); Hugging Face's types carry keys
// of their own.
RopeScaling ReadRopeScaling(const json& r, const std::string& origin, bool strict) {
  const std::string where = origin + ": rope_scaling";
  RopeScaling s;
  if (r.is_null()) return s;
  if (!r.is_object()) throw Error(where + " must be an object or null, got " + r.dump());
  // Older files name the type "type", newer ones "rope_type".
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  if (!r.contains(type_key) || !r[type_key].is_string()) {
    throw Error(where + ": field 'rope_type' must name the scaling (linear, llama3, ...), got " + r.dump());
  }
  s.type = r[type_key].get<std::string>();
  if (s.type == "default" || s.type == "dynamic") return RopeScaling();  // none within max_position_embeddings
  if (strict) {
    if (const auto unknown = FirstUnknownField(
            r, {"rope_type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})) {
      throw Error(where + ": unknown field '" + *unknown + "'");
    }
  }
  if (s.type != "linear" && s.type != "llama3") return s;  // kept as read; RotaryFrequencies refuses it
  auto need = [&](const char* key) {
    if (!r.contains(key)) throw Error(where + ": field '" + std::string(key) + "' is missing for rope_type " + s.type);
  };
  need("factor");
  s.factor = PositiveNumber(r, "factor", 1, where);
  if (s.type == "llama3") {
    for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) need(key);
    s.low_freq_factor = PositiveNumber(r, "low_freq_factor", 1, where);
    s.high_freq_factor = PositiveNumber(r, "high_freq_factor", 4, where);
    s.original_max_position_embeddings = PositiveInt(r, "original_max_position_embeddings", 0, where);
    if (s.high_freq_factor <= s.low_freq_factor) {
      throw Error(where + ": high_freq_factor " + r["high_freq_factor"].dump() + " must exceed low_freq_factor " +
                  r["low_freq_factor"].dump());
    }
  }
  return s;
}

// The rope_scaling object ReadRopeScaling reads back (a type's own fields).
json RopeScalingJson(const RopeScaling& s) {
  json r = {{"rope_type", s.type}, {"factor", s.factor}};
  if (s.type == "llama3") {
    r["low_freq_factor"] = s.low_freq_factor;
    r["high_freq_factor"] = s.high_freq_factor;
    r["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  return r;
}

// `head_dim` into `c`, as 0 where it is hidden / heads, so that the config
// reads (and is written) as one without the field.
void SetHeadDim(int head_dim, LlamaConfig& c) {
  const bool usual = c.hidden_size % c.num_attention_heads == 0 && head_dim == c.hidden_size / c.num_attention_heads;
  c.head_dim = usual ? 0 : head_dim;
}

}  // namespace

void LlamaConfig::Check(const std::string& origin) const {
  auto fail = [&](const std::string& why) { throw Error(origin + ": " + why); };
  if (head_dim == 0 && hidden_size % num_attention_heads != 0) {
    fail("hidden_size " + std::to_string(hidden_size) + " is not a multiple of num_attention_heads " +
         std::to_string(num_attention_heads));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    fail("num_attention_heads " + std::to_string(num_attention_heads) + " is not a multiple of num_key_value_heads " +
         std::to_string(num_key_value_heads));
  }
  if (head_dim < 0) fail("head_dim " + std::to_string(head_dim) + " must be positive (or 0: hidden / heads)");
  if (HeadDim() % 2 != 0) fail("head dimension " + std::to_string(HeadDim()) + " must be even for rotary encoding");
  if (attention_bias && qkv_bias) fail("qkv_bias and attention_bias are both set; attention_bias already has q, k, v");
}

namespace {

// The fields pplab's config and Hugging Face's config.json write alike.
json CommonFields(const LlamaConfig& c) {
  return {{"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.num_key_value_heads},
          {"max_position_embeddings", c.max_position_embeddings},
          {"rope_theta", c.rope_theta},
          {"rms_norm_eps", c.rms_norm_eps}};
}

}  // namespace

std::string LlamaConfig::ToJson() const {
  json doc = CommonFields(*this);
  // Written only where they change the model, so that a config without them
  // reads as it did before they existed (checkpoints and cost files compare
  // this text).
  if (attention_bias) doc["attention_bias"] = true;
  if (qkv_bias) doc["qkv_bias"] = true;
  if (mlp_bias) doc["mlp_bias"] = true;
  if (head_dim != 0) doc["head_dim"] = head_dim;
  if (qk_norm) doc["qk_norm"] = true;
  if (tie_word_embeddings) doc["tie_word_embeddings"] = true;
  if (!rope_scaling.type.empty()) doc["rope_scaling"] = RopeScalingJson(rope_scaling);
  return doc.dump(2);
}

namespace {

// The five fields that make the shape, with `d`'s values where the document
// has none.
void ReadShape(const json& doc, const LlamaConfig& d, const std::string& origin, LlamaConfig& c) {
  c.vocab_size = PositiveInt(doc, "vocab_size", d.vocab_size, origin);
  c.hidden_size = PositiveInt(doc, "hidden_size", d.hidden_size, origin);
  c.intermediate_size = PositiveInt(doc, "intermediate_size", d.intermediate_size, origin);
  c.num_hidden_layers = PositiveInt(doc, "num_hidden_layers", d.num_hidden_layers, origin);
  c.num_attention_heads = PositiveInt(doc, "num_attention_heads", d.num_attention_heads, origin);
}

// A Hugging Face config.json (it names its model_type or architectures):
// the Llama shape under the same field names, the library's defaults for
// what it omits, and each field that would make another model than pplab's
// refused with its reason (docs/runtime.md, "Model").
LlamaConfig FromHuggingFace(const json& doc, const std::string& origin) {
  auto fail = [&](const std::string& why) { throw Error(origin + ": " + why); };
  auto given = [&](const char* key) { return doc.contains(key) && !doc[key].is_null(); };
  bool qwen2 = false, qwen3 = false;
  if (given("model_type")) {
    const json& t = doc["model_type"];
    if (t != "llama" && t != "mistral" && t != "qwen2" && t != "qwen3") {
      fail("model_type " + t.dump() +
           " is not a Llama: pplab builds Llama decoder layers (model_type llama, mistral, qwen2 or qwen3)");
    }
    qwen2 = t == "qwen2";
    qwen3 = t == "qwen3";
  } else {
    const json a = doc.value("architectures", json());
    bool llama = false;
    for (const json& name : a.is_array() ? a : json::array()) {
      llama = llama || name == "LlamaForCausalLM" || name == "MistralForCausalLM";
      qwen2 = qwen2 || name == "Qwen2ForCausalLM";
      qwen3 = qwen3 || name == "Qwen3ForCausalLM";
    }
    if (!llama && !qwen2 && !qwen3) {
      fail("architectures " + a.dump() +
           " name no LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM");
    }
  }
  const bool qwen = qwen2 || qwen3;
  const auto unknown = FirstUnknownField(
      doc,
      {// the shape, required:
       "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
       // read when given:
       "num_key_value_heads", "max_position_embeddings", "rope_theta", "rms_norm_eps", "rope_parameters",
       // held to pplab's model (checked below):
       "hidden_act", "attention_bias", "mlp_bias", "tie_word_embeddings", "head_dim", "sliding_window",
       "attention_dropout", "use_sliding_window", "layer_types",
       // ignored: bookkeeping
       "architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "_name_or_path", "bos_token_id",
       "eos_token_id", "pad_token_id", "use_cache", "initializer_range", "pretraining_tp", "max_window_layers",
       // read (RopeScaling):
       "rope_scaling"});
  if (unknown) {
    fail("unknown field '" + *unknown +
         "' for a Hugging Face Llama config (pplab reads the shape and refuses what would change the model; "
         "remove the field if it does not)");
  }
  for (const char* k : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    if (!given(k)) fail("field '" + std::string(k) + "' is missing; a Hugging Face Llama config gives it");
  }
  auto must = [&](const char* key, const json& want, const std::string& why) {
    if (given(key) && doc[key] != want) fail("'" + std::string(key) + "' is " + doc[key].dump() + ": " + why);
  };
  must("hidden_act", "silu", "pplab's MLP is SwiGLU with SiLU");
  // null is no activation to Hugging Face's loader, not its default.
  if (doc.contains("hidden_act") && doc["hidden_act"].is_null()) {
    fail("'hidden_act' is null: pplab's MLP is SwiGLU with SiLU (give \"silu\", or leave the field out)");
  }
  if (qwen2) {
    // Qwen2's biases are fixed by its layers (q, k, v), not by these fields.
    must("attention_bias", false, "a Qwen2 model's attention biases are on q, k and v only");
  }
  if (qwen) must("mlp_bias", false, "a Qwen model's MLP has no bias");
  must("use_sliding_window", false, "pplab's attention sees every earlier token");
  if (given("layer_types")) {
    const json& types = doc["layer_types"];
    // One type a layer, as Hugging Face reads it.
    if (!types.is_array()) fail("'layer_types' is " + types.dump() + ", not a list of one type a layer");
    for (const json& t : types) {
      if (t != "full_attention") {
        fail("'layer_types' holds " + t.dump() + ": pplab's layers all use full attention");
      }
    }
    if (doc.contains("num_hidden_layers") && doc["num_hidden_layers"].is_number_integer() &&
        static_cast<int64_t>(types.size()) != doc["num_hidden_layers"].get<int64_t>()) {
      fail("'layer_types' names " + std::to_string(types.size()) + " layers, the model has num_hidden_layers " +
           doc["num_hidden_layers"].dump());
    }
  }
  if (given("attention_dropout") && (!doc["attention_dropout"].is_number() || doc["attention_dropout"] != 0)) {
    fail("'attention_dropout' is " + doc["attention_dropout"].dump() + ": pplab has no dropout");
  }
  // Qwen gives a window but applies it only with use_sliding_window.
  if (given("sliding_window") && !qwen) {
    fail("'sliding_window' is " + doc["sliding_window"].dump() +
         ": pplab's attention sees every earlier token; set it to null to plan full attention");
  }

  LlamaConfig c;
  ReadShape(doc, LlamaConfig(), origin, c);
  c.attention_bias = !qwen2 && Bool(doc, "attention_bias", origin);
  c.qkv_bias = qwen2;
  c.mlp_bias = !qwen && Bool(doc, "mlp_bias", origin);
  c.qk_norm = qwen3;
  c.tie_word_embeddings = Bool(doc, "tie_word_embeddings", origin);
  if (qwen && !given("num_key_value_heads")) {
    // Qwen's library default (32, or 8) is not the heads' count, unlike Llama's.
    fail("field 'num_key_value_heads' is missing; a Qwen config gives it");
  }
  // The library's defaults: as many KV heads as heads, 2048 positions, eps 1e-6.
  c.num_key_value_heads =
      given("num_key_value_heads") ? PositiveInt(doc, "num_key_value_heads", 0, origin) : c.num_attention_heads;
  c.max_position_embeddings =
      given("max_position_embeddings") ? PositiveInt(doc, "max_position_embeddings", 0, origin) : 2048;
  c.rms_norm_eps = given("rms_norm_eps") ? PositiveNumber(doc, "rms_norm_eps", 0, origin) : 1e-6;
  c.rope_theta = given("rope_theta") ? PositiveNumber(doc, "rope_theta", 0, origin) : LlamaConfig().rope_theta;
  // Newer files keep the rotary base in rope_parameters.
  if (given("rope_parameters")) {
    const json& r = doc["rope_parameters"];
    if (!r.is_object()) fail("'rope_parameters' must be an object, got " + r.dump());
    if (r.contains("rope_theta")) {
      const double theta = PositiveNumber(r, "rope_theta", 0, origin + ": rope_parameters");
      if (given("rope_theta") && theta != c.rope_theta) {
        fail("rope_theta " + doc["rope_theta"].dump() + " and rope_parameters.rope_theta " + r["rope_theta"].dump() +
             " differ");
      }
      c.rope_theta = theta;
    }
    // Newer files keep the scaling there too, beside rope_theta.
    if (r.contains("rope_type")) c.rope_scaling = ReadRopeScaling(r, origin, /*strict=*/false);
  }
  if (given("rope_scaling")) c.rope_scaling = ReadRopeScaling(doc["rope_scaling"], origin, /*strict=*/false);
  if (given("head_dim")) {
    SetHeadDim(PositiveInt(doc, "head_dim", 0, origin), c);
  } else if (qwen3) {
    fail("field 'head_dim' is missing; a Qwen3 config gives it");  // the library's default is 128, not hidden / heads
  }
  c.Check(origin);
  return c;
}

}  // namespace

LlamaConfig LlamaConfigFromJson(const std::string& text, const std::string& origin) {
  json doc = ParseJsonStrict(text, origin);  // refuses a key given twice
  if (!doc.is_object()) throw Error(origin + ": expected a JSON object");
  if (doc.contains("model_type") || doc.contains("architectures")) return FromHuggingFace(doc, origin);
  const auto unknown = FirstUnknownField(
      doc, {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "max_position_embeddings", "rope_theta", "rms_norm_eps", "attention_bias",
            "qkv_bias", "mlp_bias", "head_dim", "qk_norm", "tie_word_embeddings", "rope_scaling"});
  if (unknown) {
    // A Hugging Face config.json is told by its model_type or architectures;
    // without them its first field of Hugging Face's alone read as unknown.
    const std::vector<std::string> hugging_face_only = {
        "hidden_act",   "attention_dropout", "torch_dtype",       "transformers_version", "bos_token_id",
        "eos_token_id", "use_cache",         "initializer_range", "pretraining_tp"};
    const bool looks_hf = std::any_of(hugging_face_only.begin(), hugging_face_only.end(),
                                      [&doc](const std::string& k) { return doc.contains(k); });
    throw Error(origin + ": unknown field '" + *unknown + "'" +
                (looks_hf ? " (a Hugging Face config.json is read as one when it names its model_type or "
                            "architectures, which this one has neither of)"
                          : ""));
  }
  // Each field left out takes the `default` preset's value; an object with
  // none ran the default model unsaid (a profile of 125 M parameters for a
  // file meant to be filled in).
  if (doc.empty()) {
    throw Error(origin +
                ": no field: a model config gives its shape (hidden_size, num_hidden_layers, ...); a field "
                "left out takes the `default` preset's value, --model default runs that preset");
  }
  const LlamaConfig d;
  LlamaConfig c;
  ReadShape(doc, d, origin, c);
  c.num_key_value_heads = PositiveInt(doc, "num_key_value_heads", d.num_key_value_heads, origin);
  c.max_position_embeddings = PositiveInt(doc, "max_position_embeddings", d.max_position_embeddings, origin);
  c.rope_theta = PositiveNumber(doc, "rope_theta", d.rope_theta, origin);
  c.rms_norm_eps = PositiveNumber(doc, "rms_norm_eps", d.rms_norm_eps, origin);
  c.attention_bias = Bool(doc, "attention_bias", origin);
  c.qkv_bias = Bool(doc, "qkv_bias", origin);
  c.mlp_bias = Bool(doc, "mlp_bias", origin);
  if (doc.contains("head_dim")) SetHeadDim(PositiveInt(doc, "head_dim", 0, origin), c);
  c.qk_norm = Bool(doc, "qk_norm", origin);
  c.tie_word_embeddings = Bool(doc, "tie_word_embeddings", origin);
  if (doc.contains("rope_scaling")) c.rope_scaling = ReadRopeScaling(doc["rope_scaling"], origin, /*strict=*/true);
  c.Check(origin);
  return c;
}

std::string HuggingFaceConfigJson(const LlamaConfig& c, const std::string& dtype) {
  // Qwen2's layers are Llama's with biases on q, k and v; Qwen3's with norms
  // on q and k (its attention_bias puts biases on all four projections).
  const bool qwen3 = c.qk_norm, qwen2 = c.qkv_bias && !c.qk_norm;
  if ((c.qk_norm && (c.qkv_bias || c.mlp_bias)) || (c.qkv_bias && c.mlp_bias)) {
    throw Error(
        "no Hugging Face model_type (llama, qwen2, qwen3) has this model's combination of q/k norms and biases; "
        "write a .safetensors file instead");
  }
  const char* type = qwen3 ? "qwen3" : qwen2 ? "qwen2" : "llama";
  json doc = CommonFields(c);
  doc.update({{"architectures",
               {qwen3   ? "Qwen3ForCausalLM"
                : qwen2 ? "Qwen2ForCausalLM"
                        : "LlamaForCausalLM"}},
              {"model_type", type},
              {"head_dim", c.HeadDim()},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", c.tie_word_embeddings},
              {"attention_dropout", 0.0},
              {"torch_dtype", dtype}});
  if (!qwen2) doc["attention_bias"] = c.attention_bias;
  if (!qwen2 && !qwen3) doc["mlp_bias"] = c.mlp_bias;
  if (qwen2 || qwen3) doc["use_sliding_window"] = false;
  doc["rope_scaling"] = c.rope_scaling.type.empty() ? json() : RopeScalingJson(c.rope_scaling);
  return doc.dump(2);
}

std::vector<double> RotaryFrequencies(const LlamaConfig& c) {
  const int hd = c.HeadDim();
  std::vector<double> inv(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv[i] = 1.0 / std::pow(c.rope_theta, 2.0 * i / hd);
  const RopeScaling& s = c.rope_scaling;
  if (s.type.empty()) return inv;
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
    return inv;
  }
  if (s.type != "llama3") {
    throw Error("rope_scaling type '" + s.type +
                "' is not implemented: pplab computes linear and llama3 (and none); this model's rotary encoding "
                "would differ from the one its config describes");
  }
  // Llama 3.1's: a wavelength (2 pi / frequency) longer than original /
  // low_freq_factor is scaled by 1 / factor, one shorter than original /
  // high_freq_factor kept, and those between blended linearly in
  // original / wavelength.
  const double original = s.original_max_position_embeddings;
  const double long_wave = original / s.low_freq_factor, short_wave = original / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelength = 2 * M_PI / f;
    if (wavelength > long_wave) {
      f /= s.factor;
    } else if (wavelength >= short_wave) {
      const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
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

std::string LlamaConfigPath(const std::string& preset_or_file) {
  for (const std::string& n : LlamaPresetNames()) {
    if (n == preset_or_file) return "";
  }
  // A model's folder, as Hugging Face keeps one: its config.json.
  struct stat info;
  if (!preset_or_file.empty() && stat(preset_or_file.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return preset_or_file + (preset_or_file.back() == '/' ? "" : "/") + "config.json";
  }
  return preset_or_file;
}

LlamaConfig LoadLlamaConfig(const std::string& preset_or_file) {
  const std::string file = LlamaConfigPath(preset_or_file);
  if (file.empty()) return LlamaPreset(preset_or_file);
  // A bare name that names nothing here is a preset pplab lacks; one that
  // names a folder or a file (`--model hf`) is read.
  struct stat info;
  const bool exists = stat(file.c_str(), &info) == 0;
  if (file != preset_or_file && !exists) {
    throw Error(preset_or_file + " is a folder without a config.json: give a model config file or a preset");
  }
  if (!exists && file.find('/') == std::string::npos && file.find(".json") == std::string::npos) {
    return LlamaPreset(file);  // throws, listing the presets
  }
  return LlamaConfigFromJson(ReadTextFile(file), file);
}

int64_t DecoderLayerParams(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, q = c.QDim(), kv = c.KvDim();
  const int64_t attention = h * q /*q*/ + 2 * h * kv /*k, v*/ + q * h /*o*/ + (c.QkvBias() ? q + 2 * kv : 0) +
                            (c.attention_bias ? h : 0) + (c.qk_norm ? 2 * c.HeadDim() : 0 /*q_norm, k_norm*/);
  const int64_t mlp = 3 * h * c.intermediate_size + (c.mlp_bias ? 2 * c.intermediate_size + h : 0);  // gate, up, down
  return attention + mlp + 2 * h;  // + two RMSNorm weights
}

int64_t EmbeddingParams(const LlamaConfig& c) { return static_cast<int64_t>(c.vocab_size) * c.hidden_size; }

int64_t HeadParams(const LlamaConfig& c) { return static_cast<int64_t>(c.vocab_size) * c.hidden_size + c.hidden_size; }

bool SameShapeButDepth(const LlamaConfig& a, const LlamaConfig& b) {
  // The rotary scaling changes no shape and no cost.
  LlamaConfig deeper = a, other = b;
  deeper.num_hidden_layers = b.num_hidden_layers;
  deeper.rope_scaling = other.rope_scaling = {};
  return deeper.ToJson() == other.ToJson();
}

int64_t ModelParams(const LlamaConfig& c) {
  const int64_t tied = c.tie_word_embeddings ? EmbeddingParams(c) : 0;  // the head's copy of the embedding
  return EmbeddingParams(c) + c.num_hidden_layers * DecoderLayerParams(c) + HeadParams(c) - tied;
}

}  // namespace pplab
