// LlamaConfig: the shape of a Llama model (no LibTorch here, so the planner
// can count parameters and partition without it).
//
// Field names follow the Hugging Face / seed-tutorial config. pplab's own
// JSON files may omit fields (defaults below, which are the tutorials') but
// may not carry unknown ones. A Hugging Face config.json is read too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pplab {

// How the rotary encoding's frequencies are scaled for contexts longer
// than the model was first trained on (Hugging Face's rope_scaling). It
// changes the model's numerics at every position, so a pretrained model's
// weights need it; its shape does not depend on it.
struct RopeScaling {
  // "" (none), "linear" (every frequency / factor) or "llama3" (Llama 3.1's:
  // low frequencies / factor, high ones kept, a smooth blend between). Any
  // other name is kept as read, and RotaryFrequencies refuses it.
  std::string type;
  double factor = 1;
  // llama3 only: wavelengths longer than original / low_freq_factor are
  // scaled, those shorter than original / high_freq_factor kept.
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int original_max_position_embeddings = 0;
};

struct LlamaConfig {
  int vocab_size = 32000;
  int hidden_size = 768;
  int intermediate_size = 3072;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int num_key_value_heads = 3;
  int max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  // Biases (all off in Llama itself): attention_bias on the q, k, v and o
  // projections (Llama's option); qkv_bias on q, k and v only (Qwen2's
  // layers); mlp_bias on gate, up and down. At most one of the two attention
  // flags is set. They start at zero.
  bool attention_bias = false;
  bool qkv_bias = false;
  bool mlp_bias = false;
  // The width of an attention head; 0 (the usual case) means hidden_size /
  // num_attention_heads. Some models set it apart (Mistral-Nemo, Qwen3-32B):
  // q's and the attention output's width is then heads x head_dim, not
  // hidden_size.
  int head_dim = 0;
  // An RMSNorm over each head of q and of k, before the rotary encoding
  // (Qwen3's layers).
  bool qk_norm = false;
  // The LM head's weight is the token embedding's (Llama-3.2-1B, small Qwen
  // models). Each pipeline keeps it twice, as embed_tokens.weight on its
  // first stage and lm_head.weight on its last, equal at the start and given
  // the sum of both gradients each step (runtime/train/model_copies.h), so
  // that they stay one weight; ModelParams counts it once.
  bool tie_word_embeddings = false;
  RopeScaling rope_scaling;

  int HeadDim() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  // Widths of q (and of the attention output) and of k (and v).
  int64_t QDim() const { return static_cast<int64_t>(num_attention_heads) * HeadDim(); }
  int64_t KvDim() const { return static_cast<int64_t>(num_key_value_heads) * HeadDim(); }
  bool QkvBias() const { return attention_bias || qkv_bias; }
  // Throws pplab::Error naming the field when the shape is inconsistent
  // (e.g. heads not dividing hidden_size, KV heads not dividing heads).
  void Check(const std::string& origin) const;
  std::string ToJson() const;
};

// How a decoder layer computes attention (models/llama.cc). Not a field of
// the config: the shape, and so the checkpoint, is the same either way.
//   explicit: scores, mask and softmax by hand, as (B,H,T,T) tensors (any LibTorch);
//   sdpa:     at::scaled_dot_product_attention, which runs a fused kernel
//             (flash, memory-efficient, cuDNN) where it can (LibTorch 2.0 on);
//   auto:     sdpa where the LibTorch has it, else explicit.
enum class AttentionKind { kAuto, kSdpa, kExplicit };
// "auto", "sdpa" or "explicit"; throws pplab::Error listing them otherwise.
AttentionKind ParseAttentionKind(const std::string& text);
const char* AttentionKindName(AttentionKind kind);

// Parses a config JSON; `origin` (a file name) prefixes errors. A document
// that names its `model_type` or `architectures` is a Hugging Face
// config.json: model_type llama, mistral, qwen2 (Qwen2's q, k and v
// projections carry biases) or qwen3 (norms on q and k); the five shape
// fields required;
// num_key_value_heads defaults to num_attention_heads, rms_norm_eps to 1e-6
// (the library's defaults); rope_theta also from rope_parameters; fields
// that would make another model than pplab's (an activation other than
// SiLU, a sliding window, dropout) refused, naming the field; bookkeeping
// ignored. rope_scaling (or rope_parameters' rope_type) is read: "dynamic"
// as none (it changes nothing within max_position_embeddings, which pplab's
// sequences never pass), other types kept as read (RopeScaling).
LlamaConfig LlamaConfigFromJson(const std::string& text, const std::string& origin);

// `c` as a Hugging Face config.json (model_type llama, qwen2 or qwen3, as
// its switches say), which LlamaConfigFromJson reads back as `c` and
// Hugging Face's loaders read as the same model. `dtype` is the weights'
// torch_dtype ("float32" or "bfloat16"). Throws pplab::Error for a config
// no such model_type holds (q/k norms with biases, say).
std::string HuggingFaceConfigJson(const LlamaConfig& c, const std::string& dtype);

// The rotary encoding's inverse frequencies, HeadDim() / 2 of them:
// rope_theta^(-2i / HeadDim()), scaled as `c.rope_scaling` says. Throws
// pplab::Error for a rope_scaling type pplab does not implement.
std::vector<double> RotaryFrequencies(const LlamaConfig& c);

// Named presets: "tiny" and "small" train in seconds on a CPU; "default" is
// the tutorials' model (12 layers, hidden 768, 12 heads, 3 KV heads).
LlamaConfig LlamaPreset(const std::string& name);
std::vector<std::string> LlamaPresetNames();
// A preset name, a path to a JSON config file, or a model's folder holding
// a config.json (as Hugging Face keeps one).
LlamaConfig LoadLlamaConfig(const std::string& preset_or_file);
// The file LoadLlamaConfig reads for `preset_or_file`: "" for a preset's
// name, a folder's config.json, else the path itself.
std::string LlamaConfigPath(const std::string& preset_or_file);

// Whether `a` and `b` are one model's shape but for num_hidden_layers (a
// slice of the other, as `pplab profile --layers` measures). Their rotary
// scaling may differ: it changes no shape and no cost.
bool SameShapeButDepth(const LlamaConfig& a, const LlamaConfig& b);

// Parameter counts, for partitioning: one decoder layer; the embedding; the
// final norm plus LM head.
int64_t DecoderLayerParams(const LlamaConfig& c);
int64_t EmbeddingParams(const LlamaConfig& c);
int64_t HeadParams(const LlamaConfig& c);
// All of them: the embedding, every decoder layer, the final norm and head
// (a tied head's weight counted once, with the embedding).
int64_t ModelParams(const LlamaConfig& c);

}  // namespace pplab
