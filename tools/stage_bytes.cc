#include "tools/stage_bytes.h"

#include <algorithm>

namespace pplab::cli {
namespace {

// What the byte formulas multiply: tokens T of the microbatch, the widths
// (hidden h, intermediate f, q, kv) and e bytes a value.
struct LayerWidths {
  double T, h, f, q, kv, e;
};
LayerWidths Widths(const LlamaConfig& c, int mb, int seq_len, Precision precision) {
  return {static_cast<double>(mb) * seq_len,        static_cast<double>(c.hidden_size),
          static_cast<double>(c.intermediate_size), static_cast<double>(c.QDim()),
          static_cast<double>(c.KvDim()),           static_cast<double>(ActivationElementBytes(precision))};
}

}  // namespace

ActivationParts StageActivationParts(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                                     Precision precision, const ActivationLayout& layout) {
  const auto [T, h, f, q, kv, e] = Widths(c, mb, seq_len, precision);
  // Bytes kept per token for the backward of one layer (docs/planning.md,
  // "Analytic costs", where each term's measurement is). e is the compute dtype's bytes (4 in fp32, 2 in
  // bf16); the residual stream, the norms, the rotary encoding and the
  // softmax stay fp32 (4 bytes) in either precision. Weights, gradients and
  // AdamW state are not here (16 B per parameter, counted by the caller).
  // Under sequence parallelism over n ranks what lies outside the split
  // regions holds 1 / n of the positions.
  const double n = layout.sequence_share;
  const bool half = e < 4;
  const double heads = c.num_attention_heads, kv_heads = c.num_key_value_heads;
  // Each RMSNorm (fused) keeps its fp32 input and its fp32 1 / rms a
  // position, and the projections after it keep its output in the compute
  // dtype.
  const double norm = ((4 + e) * h + 4) / n;
  // Attention. Explicit: the product q k^T keeps a copy of q, K and V
  // repeated to the query heads (q each), the softmax its fp32
  // probabilities, and in bf16 the product with V their bf16 copy too.
  // Fused (sdpa): q, K, V and the output, and an fp32 log-sum-exp a head;
  // in bf16 the kernel takes the KV heads unrepeated (flash, grouped-query),
  // in fp32 they are repeated (q each, as the kernels that take fp32 need).
  // Either way o_proj keeps its input (q).
  const double attention = layout.fused_attention ? (half ? e * (2 * q + 2 * kv) : 4 * e * q) + 4 * heads : 4 * e * q;
  const double probabilities = layout.fused_attention ? 0 : (4 + (half ? e : 0)) * heads * seq_len;
  // Norms on q and k (Qwen3) run in fp32 on each head: in bf16 they keep
  // their fp32 inputs (casts of the projections' output); in fp32 their
  // inputs are views of the projections' one stacked output (q + 2 kv), all
  // of which they keep alive. And a 1 / rms a head.
  const double qk_norms = c.qk_norm ? (half ? 4 * (q + kv) : e * (q + 2 * kv)) + 4 * (heads + kv_heads) : 0;
  // The MLP: gate, up and their product (SwiGLU's node computes the
  // activation again in the backward, models/llama_ops.h).
  const double mlp = 3 * e * f;
  const double layers = p.End(stage) - p.Begin(stage);
  ActivationParts parts;
  parts.layers = layers * T * (2 * norm + attention + qk_norms + mlp);
  parts.exact = layers * T * probabilities;
  const bool last = stage == p.NumStages() - 1;
  // The head: the final norm, and the loss's fp32 log-softmax of the logits.
  if (last) parts.head = T * (norm + 4.0 * c.vocab_size);
  // F's output, the fp32 residual stream, held until B sends its gradient
  // back through it; and a later stage's received int64 mask.
  if (!last) parts.exact += T * 4 * h / n;
  if (stage > 0) parts.exact += T * 8;
  return parts;
}

double StageActivationBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                            Precision precision, const ActivationLayout& layout) {
  return StageActivationParts(c, p, stage, mb, seq_len, precision, layout).Total();
}

namespace {

// A layer's backward peaks in one of its halves: the attention's, with the
// fp32 gradients of every head's scores (the softmax runs in fp32 whatever
// the precision; none with fused attention) beside the residual stream's
// fp32 gradient, or the MLP's, with SwiGLU's two gradients and one product
// of the same size. 0 on a stage without layers.
double LayerWorkspaceBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                           Precision precision, const ActivationLayout& layout) {
  const auto [T, h, f, q, kv, e] = Widths(c, mb, seq_len, precision);
  const double scores = layout.fused_attention ? 0 : T * c.num_attention_heads * seq_len;
  return p.End(stage) > p.Begin(stage) ? std::max(4 * (scores + T * h), 3 * e * T * f) : 0;
}

}  // namespace

double StageWorkspaceBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                           Precision precision, const ActivationLayout& layout) {
  return StageBackwardWorkspaceParts(c, p, stage, mb, seq_len, precision, layout).Scaled(1);
}

WorkspaceParts StageBackwardWorkspaceParts(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                                           Precision precision, const ActivationLayout& layout) {
  // The head's: the logits' gradient and the log-softmax's, fp32 as the loss.
  const double head = stage == p.NumStages() - 1 ? 2 * 4.0 * mb * seq_len * c.vocab_size : 0;
  return {LayerWorkspaceBytes(c, p, stage, mb, seq_len, precision, layout), head};
}

WorkspaceParts StageForwardWorkspaceParts(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                                          Precision precision, const ActivationLayout& layout) {
  if (stage == p.NumStages() - 1) return {0, 4.0 * mb * seq_len * c.vocab_size};
  return {LayerWorkspaceBytes(c, p, stage, mb, seq_len, precision, layout), 0};
}

double StageWeightWorkspaceBytes(const LlamaConfig& c, const Partition& p, int stage, Precision precision) {
  if (precision == Precision::kFp32) return 0;
  const double e = ActivationElementBytes(precision);
  const double layer = p.End(stage) > p.Begin(stage) ? 2.0 * c.intermediate_size * c.hidden_size : 0;
  const double head = stage == p.NumStages() - 1 ? static_cast<double>(c.vocab_size) * c.hidden_size : 0;
  return e * std::max(layer, head);
}

double StageWeightGradBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                            Precision precision) {
  const auto [T, h, f, q, kv, e] = Widths(c, mb, seq_len, precision);
  // W needs every matmul's input (q/k/v: h, o: q, gate/up: h, down: f) and
  // output gradient (q + 2kv, h, 2f, h), e bytes each.
  const double layer = e * T * (4 * h + 2 * q + 2 * kv + 3 * f);
  double bytes = (p.End(stage) - p.Begin(stage)) * layer;
  if (stage == p.NumStages() - 1) bytes += e * T * (h + c.vocab_size);
  return bytes;
}

double StageInputBytes(const LlamaConfig& c, int stage, int mb, int seq_len, int sequence_share) {
  if (stage == 0) return 0;
  return static_cast<double>(mb) * seq_len * (4.0 * c.hidden_size / sequence_share + 8.0);
}

double MessageBytes(const LlamaConfig& c, int mb, int seq_len, Precision precision) {
  // One (mb, seq_len, hidden) activation or gradient as it travels: fp32, or
  // bf16 in a bf16 run (cast on send, back to fp32 on receipt).
  return ActivationElementBytes(precision) * static_cast<double>(mb) * seq_len * c.hidden_size;
}

}  // namespace pplab::cli
