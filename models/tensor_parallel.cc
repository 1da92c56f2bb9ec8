#include "models/tensor_parallel.h"

namespace pplab {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// Every Llama config splits alike since tied heads split too; the config
// stays in the signature, where a layout that depends on it would look.
TensorSplit TensorParallelSplit(const std::string& name, const LlamaConfig& /*config*/, bool sequence_parallel) {
  if (name == "lm_head.weight" || name == "embed_tokens.weight") return TensorSplit::kRows;  // by vocabulary
  // Under sequence parallelism the norms and the biases added after a
  // reduce-scatter see a share of the positions.
  if (sequence_parallel && (name == "norm.weight" || EndsWith(name, "layernorm.weight") ||
                            EndsWith(name, ".self_attn.o_proj.bias") || EndsWith(name, ".mlp.down_proj.bias"))) {
    return TensorSplit::kPartialGradient;
  }
  if (name.rfind("layers.", 0) != 0) return TensorSplit::kWhole;  // embedding, final norm
  for (const char* column :
       {".self_attn.q_proj.", ".self_attn.k_proj.", ".self_attn.v_proj.", ".mlp.gate_proj.", ".mlp.up_proj."}) {
    if (name.find(column) != std::string::npos) return TensorSplit::kRows;  // weight and bias
  }
  for (const char* row : {".self_attn.o_proj.weight", ".mlp.down_proj.weight"}) {
    if (EndsWith(name, row)) return TensorSplit::kColumns;  // their biases are whole, added after the sum
  }
  if (EndsWith(name, ".self_attn.q_norm.weight") || EndsWith(name, ".self_attn.k_norm.weight")) {
    return TensorSplit::kPartialGradient;
  }
  return TensorSplit::kWhole;
}

int TensorParallelDim(TensorSplit split) {
  switch (split) {
    case TensorSplit::kRows:
      return 0;
    case TensorSplit::kColumns:
      return 1;
    default:
      return -1;
  }
}

LlamaConfig TensorParallelShare(const LlamaConfig& c, int size) {
  LlamaConfig share = c;
  if (size <= 1) return share;
  share.head_dim = c.HeadDim();
  share.num_attention_heads = c.num_attention_heads / size;
  share.num_key_value_heads = c.num_key_value_heads / size;
  share.intermediate_size = c.intermediate_size / size;
  share.vocab_size = c.vocab_size / size;
  return share;
}

int64_t TensorParallelStageParams(const LlamaConfig& c, const Partition& p, int stage, int size) {
  return StageParams(TensorParallelShare(c, size), p, stage);
}

std::string WhyNoTensorParallel(const LlamaConfig& c, int size) {
  if (size < 1) return "the tensor-parallel size must be at least 1";
  auto need = [size](const char* field, int64_t value) -> std::string {
    if (value % size == 0) return "";
    return std::string(field) + " " + std::to_string(value) + " is not a multiple of " + std::to_string(size);
  };
  for (const std::string& why :
       {need("num_attention_heads", c.num_attention_heads), need("num_key_value_heads", c.num_key_value_heads),
        need("intermediate_size", c.intermediate_size)}) {
    if (!why.empty()) return why;
  }
  if (c.vocab_size % size != 0) {
    return need("vocab_size", c.vocab_size) + " (the embedding and the LM head are split by vocabulary)";
  }
  return "";
}

std::string WhyNoSequenceParallel(int64_t seq_len, int size) {
  if (size <= 1 || seq_len % size == 0) return "";
  return "the sequence length " + std::to_string(seq_len) + " is not a multiple of " + std::to_string(size);
}

}  // namespace pplab
