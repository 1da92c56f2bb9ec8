#include "models/pretrained.h"

#include <set>

#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : " x ") + std::to_string(d);
  return out.empty() ? "a scalar" : out;
}

}  // namespace

std::string HuggingFaceName(const std::string& name) { return name == "lm_head.weight" ? name : "model." + name; }

std::vector<ParameterShape> LlamaParameterShapes(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, q = c.QDim(), kv = c.KvDim(), hd = c.HeadDim(), ff = c.intermediate_size;
  std::vector<ParameterShape> out;
  out.push_back({"embed_tokens.weight", {c.vocab_size, h}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    auto linear = [&](const std::string& name, int64_t in, int64_t width, bool bias) {
      out.push_back({p + name + ".weight", {width, in}});
      if (bias) out.push_back({p + name + ".bias", {width}});
    };
    out.push_back({p + "input_layernorm.weight", {h}});
    linear("self_attn.q_proj", h, q, c.QkvBias());
    linear("self_attn.k_proj", h, kv, c.QkvBias());
    linear("self_attn.v_proj", h, kv, c.QkvBias());
    linear("self_attn.o_proj", q, h, c.attention_bias);
    if (c.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {hd}});
      out.push_back({p + "self_attn.k_norm.weight", {hd}});
    }
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    linear("mlp.gate_proj", h, ff, c.mlp_bias);
    linear("mlp.up_proj", h, ff, c.mlp_bias);
    linear("mlp.down_proj", ff, h, c.mlp_bias);
  }
  out.push_back({"norm.weight", {h}});
  out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

const SafetensorsTensor& PretrainedTensor(const WeightFiles& files, const LlamaConfig& c, const std::string& name) {
  const std::string hf = HuggingFaceName(name);
  if (const SafetensorsTensor* t = files.Find(hf)) return *t;
  // A tied model's files usually keep the embedding only.
  if (name == "lm_head.weight" && c.tie_word_embeddings) {
    if (const SafetensorsTensor* t = files.Find(HuggingFaceName("embed_tokens.weight"))) return *t;
  }
  throw Error(files.Origin() + ": no tensor '" + hf + "'" +
              (name == "lm_head.weight" ? " (a model without tie_word_embeddings keeps its LM head apart)" : "") +
              ": the files are not of this model");
}

int64_t CheckPretrained(const WeightFiles& files, const LlamaConfig& c) {
  RotaryFrequencies(c);  // a scaling pplab does not compute: refused here, naming it
  std::set<std::string> used;
  int64_t values = 0;
  for (const ParameterShape& p : LlamaParameterShapes(c)) {
    const SafetensorsTensor& t = PretrainedTensor(files, c, p.name);
    const std::string hf = HuggingFaceName(p.name);
    if (t.shape != p.shape) {
      const bool vocab = (p.name == "embed_tokens.weight" || p.name == "lm_head.weight") && t.shape.size() == 2 &&
                         t.shape[1] == p.shape[1];
      throw Error(t.file + ": tensor '" + hf + "' is " + ShapeText(t.shape) + ", the model's is " + ShapeText(p.shape) +
                  (vocab ? " (vocabularies of " + std::to_string(t.shape[0]) + " and " + std::to_string(p.shape[0]) +
                               " pieces: give the model's own tokenizer, --tokenizer tokenizer.model or tokenizer.json)"
                         : ": the files are not of this model's config"));
    }
    if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16") {
      throw Error(t.file + ": tensor '" + hf + "' is " + t.dtype + "; pplab reads weights stored as F32, BF16 or F16");
    }
    used.insert(hf);
    values += t.Elements();
  }
  // A tied head kept in the file too must be the embedding: the two copies
  // the stages hold would otherwise start apart and stay apart.
  if (const SafetensorsTensor* head = files.Find("lm_head.weight"); head && c.tie_word_embeddings) {
    const std::string embedding = HuggingFaceName("embed_tokens.weight");
    if (!SameValues("lm_head.weight", *head, embedding, *files.Find(embedding))) {
      throw Error(head->file + ": tensor 'lm_head.weight' is not '" + embedding +
                  "', but the config ties them (tie_word_embeddings): the model keeps its LM head apart; set "
                  "tie_word_embeddings to false");
    }
    used.insert("lm_head.weight");
  }
  for (const auto& [name, t] : files.Tensors()) {
    if (used.count(name) != 0 || EndsWith(name, ".rotary_emb.inv_freq")) continue;
    throw Error(t.file + ": tensor '" + name + "' is not a parameter of this model (" +
                std::to_string(c.num_hidden_layers) + " layers, hidden size " + std::to_string(c.hidden_size) +
                "): the files are not of this model's config");
  }
  return values;
}

}  // namespace pplab
