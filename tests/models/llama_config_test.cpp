#include "models/llama_config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "models/partition.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab::llama_config_test {
namespace {

// Meta-Llama-3-8B's config.json as published (field for field).
const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

// Llama-2-7B's, from before num_key_value_heads was written.
const char* kLlama2_7B = R"({
  "_name_or_path": "meta-llama/Llama-2-7b-hf", "architectures": ["LlamaForCausalLM"], "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "pad_token_id": 0, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false, "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0", "use_cache": true, "vocab_size": 32000})";

// A Hugging Face config with one field replaced (or added): `field` is
// `"key": value`.
std::string Llama3With(const std::string& key, const std::string& value) {
  std::string text = kLlama3_8B;
  const std::string quoted = "\"" + key + "\": ";
  const size_t at = text.find(quoted);
  if (at == std::string::npos) return "{" + quoted + value + "," + text.substr(text.find('{') + 1);
  const size_t end = text.find_first_of(",}", at);
  return text.substr(0, at) + quoted + value + text.substr(end);
}

TEST_CASE("a Hugging Face config.json reads as its Llama shape, with the published parameter counts",
          "[llama_config]") {
  const LlamaConfig c = LlamaConfigFromJson(kLlama3_8B, "config.json");
  CHECK(c.vocab_size == 128256);
  CHECK(c.hidden_size == 4096);
  CHECK(c.intermediate_size == 14336);
  CHECK(c.num_hidden_layers == 32);
  CHECK(c.num_attention_heads == 32);
  CHECK(c.num_key_value_heads == 8);
  CHECK(c.max_position_embeddings == 8192);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rms_norm_eps == 1e-5);
  // 32 x 218 112 000 per layer + 2 x 525 336 576 (embedding, head) + 4096 (final norm).
  CHECK(ModelParams(c) == 8030261248);

  const LlamaConfig old = LlamaConfigFromJson(kLlama2_7B, "config.json");
  CHECK(old.num_key_value_heads == 32);  // the library's default: one KV head per head
  CHECK(old.rope_theta == 10000.0);
  CHECK(ModelParams(old) == 6738415616);
  // What it reads round-trips through pplab's own format.
  CHECK(LlamaConfigFromJson(old.ToJson(), "again").num_key_value_heads == 32);
}

TEST_CASE("a pplab model config's fields left out take the default preset's, and one with none is refused",
          "[llama_config]") {
  const LlamaConfig deeper = LlamaConfigFromJson(R"({"num_hidden_layers": 24})", "deep.json");
  CHECK(deeper.num_hidden_layers == 24);
  CHECK(deeper.hidden_size == LoadLlamaConfig("default").hidden_size);
  CHECK_THROWS_WITH(LlamaConfigFromJson("{}", "empty.json"),
                    Catch::Equals("empty.json: no field: a model config gives its shape (hidden_size, "
                                  "num_hidden_layers, ...); a field left out takes the `default` preset's value, "
                                  "--model default runs that preset"));
}

TEST_CASE("a Hugging Face config: the library's defaults and rope_parameters", "[llama_config]") {
  const LlamaConfig c = LlamaConfigFromJson(
      R"({"model_type": "mistral", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "sliding_window": null, "head_dim": 16,
          "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0}})",
      "config.json");
  CHECK(c.num_key_value_heads == 4);
  CHECK(c.max_position_embeddings == 2048);
  CHECK(c.rms_norm_eps == 1e-6);
  CHECK(c.rope_theta == 250000.0);
  CHECK_THROWS_WITH(LlamaConfigFromJson(Llama3With("rope_parameters", R"({"rope_theta": 10000.0})"), "c.json"),
                    Catch::Contains("rope_theta 500000.0 and rope_parameters.rope_theta 10000.0 differ"));
}

TEST_CASE("rope_scaling: Llama 3.1's and linear scaling give the frequencies of their formulas", "[llama_config]") {
  // Llama-3.1-8B's rope_scaling as published, on the 8B shape.
  const LlamaConfig c =
      LlamaConfigFromJson(Llama3With("rope_scaling", R"({"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"})"),
                          "config.json");
  CHECK(c.rope_scaling.type == "llama3");
  CHECK(c.rope_scaling.factor == 8.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  CHECK(ModelParams(c) == 8030261248);  // the shape is unchanged
  // It round-trips through pplab's own format (checkpoints keep that text).
  CHECK(LlamaConfigFromJson(c.ToJson(), "again").ToJson() == c.ToJson());

  // By hand, on head_dim 8 and theta 10 000: frequencies 1, 0.1, 0.01 and
  // 0.001, wavelengths 2 pi / f = 6.28, 62.8, 628 and 6283. With original
  // 1024, low 1 and high 4, wavelengths over 1024 are scaled, those under 256
  // kept, and 628 blended with s = (1024 / 628.3 - 1) / (4 - 1).
  LlamaConfig small = LlamaPreset("tiny");
  small.hidden_size = 32;
  small.num_attention_heads = 4;  // head_dim 8
  small.rope_theta = 10000;
  small.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 1024};
  const std::vector<double> f = RotaryFrequencies(small);
  REQUIRE(f.size() == 4);
  CHECK(f[0] == Approx(1.0).epsilon(1e-12));
  CHECK(f[1] == Approx(0.1).epsilon(1e-12));
  const double s = (1024 * 0.01 / (2 * M_PI) - 1) / 3;
  CHECK(s == Approx(0.2099).epsilon(1e-3));
  CHECK(f[2] == Approx((1 - s) * 0.01 / 8 + s * 0.01).epsilon(1e-12));
  CHECK(f[3] == Approx(0.001 / 8).epsilon(1e-12));

  small.rope_scaling = {"linear", 4.0, 1, 4, 0};
  const std::vector<double> linear = RotaryFrequencies(small);
  CHECK(linear[1] == Approx(0.1 / 4).epsilon(1e-12));
  CHECK(linear[3] == Approx(0.001 / 4).epsilon(1e-12));
  small.rope_scaling = {};
  CHECK(RotaryFrequencies(small)[3] == Approx(0.001).epsilon(1e-12));
}

TEST_CASE("a config written as Hugging Face's config.json reads back as the same model", "[llama_config]") {
  std::vector<LlamaConfig> configs = {LlamaPreset("tiny"), LlamaConfigFromJson(kLlama3_8B, "c.json")};
  for (const char* file : {"qwen2.5-7b-config.json", "qwen3-32b-config.json"}) {
    configs.push_back(LoadLlamaConfig(std::string(PPLAB_TEST_DATA_DIR) + "/models/" + file));
  }
  LlamaConfig biased = LlamaPreset("small");
  biased.attention_bias = biased.mlp_bias = biased.tie_word_embeddings = true;
  biased.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  configs.push_back(biased);
  for (const LlamaConfig& c : configs) {
    INFO(c.ToJson());
    const std::string hf = HuggingFaceConfigJson(c, "bfloat16");
    CHECK(LlamaConfigFromJson(hf, "config.json").ToJson() == c.ToJson());
  }
  CHECK_THAT(HuggingFaceConfigJson(configs[2], "float32"), Catch::Contains("\"model_type\": \"qwen2\""));
  CHECK_THAT(HuggingFaceConfigJson(configs[3], "float32"), Catch::Contains("\"Qwen3ForCausalLM\""));
  LlamaConfig odd = configs[3];
  odd.qkv_bias = true;
  CHECK_THROWS_WITH(HuggingFaceConfigJson(odd, "float32"), Catch::Contains("no Hugging Face model_type"));
}

TEST_CASE("rope_scaling: the older key, the types that change nothing, and the ones pplab lacks", "[llama_config]") {
  // "type" is the older files' key; "dynamic" changes nothing within
  // max_position_embeddings; newer files keep the type in rope_parameters.
  CHECK(LlamaConfigFromJson(Llama3With("rope_scaling", R"({"type": "linear", "factor": 2.0})"), "c.json")
            .rope_scaling.factor == 2.0);
  CHECK(LlamaConfigFromJson(Llama3With("rope_scaling", R"({"type": "dynamic", "factor": 2.0})"), "c.json")
            .rope_scaling.type.empty());
  CHECK(LlamaConfigFromJson(Llama3With("rope_parameters", R"({"rope_type": "linear", "factor": 3.0})"), "c.json")
            .rope_scaling.factor == 3.0);
  // A type pplab does not compute is read (the shape plans as before), and
  // building the rotary encoding refuses it, naming it.
  const LlamaConfig yarn = LlamaConfigFromJson(
      Llama3With("rope_scaling", R"({"rope_type": "yarn", "factor": 4.0, "beta_fast": 32})"), "c.json");
  CHECK(yarn.rope_scaling.type == "yarn");
  CHECK_THROWS_WITH(RotaryFrequencies(yarn), Catch::Contains("rope_scaling type 'yarn' is not implemented"));
  // The scaling changes no shape: a cost file of the unscaled model fits it.
  const LlamaConfig plain = LlamaConfigFromJson(kLlama3_8B, "c.json");
  CHECK(SameShapeButDepth(plain, yarn));
  CHECK(SameShapeButDepth(yarn, plain));
  LlamaConfig wider = plain;
  wider.intermediate_size += 2;
  CHECK_FALSE(SameShapeButDepth(wider, yarn));
  CHECK_THROWS_WITH(
      LlamaConfigFromJson(Llama3With("rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})"), "c.json"),
      Catch::Contains("c.json: rope_scaling: field 'low_freq_factor' is missing for rope_type llama3"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(Llama3With("rope_scaling", R"({"factor": 8.0})"), "c.json"),
                    Catch::Contains("field 'rope_type' must name the scaling"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(Llama3With("rope_scaling", R"("linear")"), "c.json"),
                    Catch::Contains("rope_scaling must be an object or null"));
  // pplab's own files take only the fields it writes.
  CHECK_THROWS_WITH(
      LlamaConfigFromJson(R"({"rope_scaling": {"rope_type": "linear", "factor": 2, "beta": 1}})", "m.json"),
      Catch::Contains("m.json: rope_scaling: unknown field 'beta'"));
}

TEST_CASE("a Hugging Face config that is not pplab's model is refused, naming the field", "[llama_config]") {
  const auto refused = [](const std::string& key, const std::string& value, const std::string& why) {
    INFO(key << " = " << value);
    CHECK_THROWS_WITH(LlamaConfigFromJson(Llama3With(key, value), "c.json"),
                      Catch::StartsWith("c.json: ") && Catch::Contains(why));
  };
  refused("model_type", R"("gemma")", "model_type \"gemma\" is not a Llama");
  refused("hidden_act", R"("gelu")", "'hidden_act' is \"gelu\": pplab's MLP is SwiGLU with SiLU");
  refused("attention_bias", "1", "field 'attention_bias' must be true or false, got 1");
  refused("use_sliding_window", "true", "'use_sliding_window' is true");
  refused("layer_types", R"(["full_attention", "sliding_attention"])",
          "'layer_types' holds \"sliding_attention\": pplab's layers all use full attention");
  // One type a layer (Llama-3-8B has 32), and null is no activation: both were read unsaid.
  refused("layer_types", R"(["full_attention"])", "'layer_types' names 1 layers, the model has num_hidden_layers 32");
  refused("layer_types", R"("full_attention")", "'layer_types' is \"full_attention\", not a list of one type a layer");
  refused("hidden_act", "null", "'hidden_act' is null: pplab's MLP is SwiGLU with SiLU");
  refused("tie_word_embeddings", "\"yes\"", "field 'tie_word_embeddings' must be true or false");
  refused("head_dim", "63", "head dimension 63 must be even for rotary encoding");
  refused("sliding_window", "4096", "'sliding_window' is 4096");
  refused("attention_dropout", "0.1", "'attention_dropout' is 0.1: pplab has no dropout");
  refused("quantization_config", "{}", "unknown field 'quantization_config' for a Hugging Face Llama config");
  refused("num_hidden_layers", "null", "field 'num_hidden_layers' is missing");
  refused("num_key_value_heads", "5", "not a multiple of num_key_value_heads");
  CHECK_THROWS_WITH(
      LlamaConfigFromJson(R"({"architectures": ["GPT2LMHeadModel"], "hidden_size": 64})", "c.json"),
      Catch::Contains("name no LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM"));
  // pplab's own format stays strict: HF's fields are unknown there.
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_size": 64, "pretraining_tp": 1})", "m.json"),
                    Catch::Contains("unknown field 'pretraining_tp'"));
  // A config.json that lost its model_type and architectures is read as
  // pplab's: the message says why its Hugging Face fields are unknown.
  nlohmann::json bare = nlohmann::json::parse(kLlama3_8B);
  bare.erase("model_type");
  bare.erase("architectures");
  CHECK_THROWS_WITH(LlamaConfigFromJson(bare.dump(), "c.json"),
                    Catch::StartsWith("c.json: unknown field '") &&
                        Catch::EndsWith("' (a Hugging Face config.json is read as one when it names its model_type "
                                        "or architectures, which this one has neither of)"));
}

TEST_CASE("Llama's bias options and Qwen2's q, k, v biases: read, counted, written back", "[llama_config]") {
  // Llama's attention_bias: q, k, v and o; mlp_bias: gate, up and down.
  const LlamaConfig plain = LlamaConfigFromJson(kLlama3_8B, "config.json");
  const LlamaConfig biased = LlamaConfigFromJson(Llama3With("attention_bias", "true"), "config.json");
  CHECK(biased.attention_bias);
  CHECK(biased.QkvBias());
  const int64_t h = 4096, kv = 8 * 128, inter = 14336;
  CHECK(DecoderLayerParams(biased) - DecoderLayerParams(plain) == h + 2 * kv + h);
  const LlamaConfig mlp = LlamaConfigFromJson(Llama3With("mlp_bias", "true"), "config.json");
  CHECK(DecoderLayerParams(mlp) - DecoderLayerParams(plain) == 2 * inter + h);

  // Qwen2.5-7B's config.json as published: Qwen2's layers carry biases on q,
  // k and v (not o), and its window is off (use_sliding_window false). Qwen
  // gives 7.61 B parameters, 6.53 B of them outside the embedding and head.
  const LlamaConfig qwen =
      LlamaConfigFromJson(ReadTextFile(PPLAB_TEST_DATA_DIR "/models/qwen2.5-7b-config.json"), "config.json");
  CHECK(qwen.qkv_bias);
  CHECK(!qwen.attention_bias);
  CHECK(!qwen.mlp_bias);
  CHECK(qwen.num_key_value_heads == 4);
  CHECK(qwen.rope_theta == 1e6);
  // Per layer: q 3584^2 + 3584, k and v 2 x (3584 x 512 + 512), o 3584^2,
  // MLP 3 x 3584 x 18944, two norms 2 x 3584.
  CHECK(DecoderLayerParams(qwen) == 233057792);
  CHECK(28 * DecoderLayerParams(qwen) == 6525618176);
  CHECK(ModelParams(qwen) == 7615616512);
  // A Qwen2 config names its KV heads (the library's default, 32, is no
  // function of the heads), and its biases are not Llama's options.
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"model_type": "qwen2", "vocab_size": 100, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4})",
                                        "q.json"),
                    Catch::Contains("field 'num_key_value_heads' is missing; a Qwen config gives it"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"model_type": "qwen2", "vocab_size": 100, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "attention_bias": true})",
                                        "q.json"),
                    Catch::Contains("a Qwen2 model's attention biases are on q, k and v only"));

  // pplab's own format holds them, and writes them only when set (a config
  // without biases reads as before they existed).
  for (const LlamaConfig& c : {biased, mlp, qwen}) {
    const LlamaConfig again = LlamaConfigFromJson(c.ToJson(), "again");
    CHECK(again.ToJson() == c.ToJson());
    CHECK(DecoderLayerParams(again) == DecoderLayerParams(c));
  }
  CHECK(plain.ToJson().find("bias") == std::string::npos);
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_size": 96, "attention_bias": true, "qkv_bias": true})", "m.json"),
                    Catch::Contains("m.json: qkv_bias and attention_bias are both set"));
}

TEST_CASE("a head_dim set apart from hidden / heads, and Qwen3's norms on q and k: read, counted, written back",
          "[llama_config]") {
  // Qwen3-32B's config.json as published: 64 heads of 128 (q is 8192 wide on
  // a hidden size of 5120), an RMSNorm over each head of q and of k. Qwen
  // gives 32.8 B parameters, 31.2 B of them outside the embedding and head.
  const LlamaConfig q32 =
      LlamaConfigFromJson(ReadTextFile(PPLAB_TEST_DATA_DIR "/models/qwen3-32b-config.json"), "config.json");
  CHECK(q32.head_dim == 128);
  CHECK(q32.HeadDim() == 128);
  CHECK(q32.QDim() == 8192);
  CHECK(q32.KvDim() == 1024);
  CHECK(q32.qk_norm);
  CHECK(!q32.QkvBias());
  // Per layer: q and o 2 x 5120 x 8192, k and v 2 x 5120 x 1024, MLP
  // 3 x 5120 x 25600, norms 2 x 5120 + q's and k's 2 x 128.
  CHECK(DecoderLayerParams(q32) == 487598336);
  CHECK(64 * DecoderLayerParams(q32) == 31206293504);
  CHECK(ModelParams(q32) == 32762123264);

  // Qwen3-8B's shape (head_dim 128 = 4096 / 32, kept as 0): 8.2 B, 6.95 B
  // in the layers, as published.
  const LlamaConfig q8 = LlamaConfigFromJson(R"({"model_type": "qwen3", "head_dim": 128, "hidden_size": 4096,
      "intermediate_size": 12288, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
      "vocab_size": 151936, "tie_word_embeddings": false, "use_sliding_window": false, "sliding_window": null})",
                                             "config.json");
  CHECK(q8.head_dim == 0);
  CHECK(36 * DecoderLayerParams(q8) == 6946071552);
  CHECK(ModelParams(q8) == 8190735360);
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 100})",
                                        "q.json"),
                    Catch::Contains("field 'head_dim' is missing; a Qwen3 config gives it"));

  // Mistral-NeMo-Base-2407's shape: 32 heads of 128 on a hidden size of
  // 5120; 12.2 B parameters, as published.
  const LlamaConfig nemo = LlamaConfigFromJson(R"({"model_type": "mistral", "head_dim": 128, "hidden_size": 5120,
      "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
      "vocab_size": 131072, "sliding_window": null, "rope_theta": 1000000.0})",
                                               "config.json");
  CHECK(nemo.QDim() == 4096);
  CHECK(!nemo.qk_norm);
  CHECK(ModelParams(nemo) == 12247782400);

  // pplab's own format holds both, and names head_dim only when set apart.
  for (const LlamaConfig& c : {q32, q8, nemo}) {
    const LlamaConfig again = LlamaConfigFromJson(c.ToJson(), "again");
    CHECK(again.ToJson() == c.ToJson());
    CHECK(ModelParams(again) == ModelParams(c));
  }
  CHECK(q8.ToJson().find("head_dim") == std::string::npos);
  CHECK(LlamaConfigFromJson(R"({"hidden_size": 96, "num_attention_heads": 12, "head_dim": 8})", "m.json").head_dim ==
        0);
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_size": 96, "num_attention_heads": 12, "head_dim": 0})", "m.json"),
                    Catch::Contains("m.json: field 'head_dim' must be an integer from 1 to 2^30, got 0"));
}

TEST_CASE("tied word embeddings: read, the weight counted once, written back", "[llama_config]") {
  // Llama-3.2-1B's shape: its LM head is its embedding. Meta gives
  // 1.24 B parameters: 16 layers of 60 821 504, one 128256 x 2048
  // embedding, the final norm.
  const LlamaConfig c = LlamaConfigFromJson(Llama3With("tie_word_embeddings", "true"), "config.json");
  CHECK(c.tie_word_embeddings);
  LlamaConfig small = c;
  small.hidden_size = 2048;
  small.intermediate_size = 8192;
  small.num_hidden_layers = 16;
  CHECK(DecoderLayerParams(small) == 60821504);
  CHECK(ModelParams(small) == 1235814400);
  // The last stage still holds its copy (memory), so the stages add up to
  // more than the model by one embedding.
  const Partition p = PartitionUniform(small, 2);
  CHECK(StageParams(small, p, 0) + StageParams(small, p, 1) == ModelParams(small) + EmbeddingParams(small));
  const LlamaConfig again = LlamaConfigFromJson(c.ToJson(), "again");
  CHECK(again.tie_word_embeddings);
  CHECK(LlamaConfigFromJson(kLlama3_8B, "c.json").ToJson().find("tie_word_embeddings") == std::string::npos);
}

TEST_CASE("a model's folder as --model: its config.json is read", "[llama_config]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/qwen-folder";
  RemoveTree(dir);
  CHECK_THROWS_WITH(LoadLlamaConfig(dir), Catch::Contains("cannot read " + dir));  // no such path
  std::filesystem::create_directories(dir);
  WriteTextFile(dir + "/tokenizer.json", "{}");  // a folder without a config
  CHECK_THROWS_WITH(LoadLlamaConfig(dir),
                    Catch::Equals(dir + " is a folder without a config.json: give a model config file or a preset"));
  WriteTextFile(dir + "/config.json", ReadTextFile(PPLAB_TEST_DATA_DIR "/models/qwen2.5-7b-config.json"));
  CHECK(ModelParams(LoadLlamaConfig(dir)) == 7615616512);
  CHECK(ModelParams(LoadLlamaConfig(dir + "/")) == 7615616512);
  // A bare folder name in the working folder (--model qwen-folder) is read too.
  char* was = ::getcwd(nullptr, 0);
  REQUIRE(::chdir(PPLAB_TEST_TMP_DIR) == 0);
  int64_t params = 0;
  try {
    params = ModelParams(LoadLlamaConfig("qwen-folder"));
  } catch (const Error&) {
  }
  REQUIRE(::chdir(was) == 0);
  std::free(was);
  CHECK(params == 7615616512);
  // Errors name the file inside it.
  WriteTextFile(dir + "/config.json", R"({"model_type": "gemma"})");
  CHECK_THROWS_WITH(LoadLlamaConfig(dir), Catch::StartsWith(dir + "/config.json: model_type"));
  RemoveTree(dir);
}

}  // namespace
}  // namespace pplab::llama_config_test
