// What a stage holds, per microbatch, from the model's shapes
// (docs/planning.md, "Analytic costs" and "Memory per rank"): the
// activations F keeps for its backward, the temporaries of its backward,
// W's stash, a message, a recomputed stage's inputs. Bytes count
// ActivationElementBytes(precision) per value in the compute dtype (4 in
// fp32, 2 in bf16) and 4 per value that stays fp32. Used by the planner's
// cost fit (tools/plan_costs.h); no LibTorch.
#pragma once

#include <algorithm>

#include "models/llama_config.h"
#include "models/partition.h"
#include "sim/precision.h"

namespace pplab::cli {

// How a stage's activations are laid out, beyond the model's shapes.
struct ActivationLayout {
  // The ranks the positions are split over outside the tensor-parallel
  // regions (sequence parallelism), 1 for none: the norms' activations then
  // count 1 / sequence_share of the positions.
  int sequence_share = 1;
  // Fused attention (train --attention sdpa: the flash or memory-efficient
  // kernel) keeps each head's fp32 log-sum-exp a token instead of the
  // (heads x seq_len) softmax probabilities of the explicit path.
  bool fused_attention = false;
};
// What a stage's F keeps for its backward, per microbatch, in three parts:
// its decoder layers' (less the explicit attention's probabilities), its
// head's (the last stage: the final norm and the loss's log-softmax), and
// what the runtime holds by construction, the same under any LibTorch: the
// explicit attention's fp32 probabilities, F's output on a stage before the
// last, the received mask after the first. A profile's fit (FitProfiles)
// scales the first two, each by its own factor (a LibTorch's kernels keep
// more than the formula, in proportion to the tokens), and takes the third
// as it is.
struct ActivationParts {
  double layers = 0, head = 0, exact = 0;
  double Total() const { return layers + head + exact; }
};
ActivationParts StageActivationParts(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                                     Precision precision, const ActivationLayout& layout = {});
double StageActivationBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                            Precision precision, const ActivationLayout& layout = {});
// The temporaries of the stage's backward above what is held (the cost
// model's workspace_bytes, docs/cost-model.md), for a microbatch of mb
// sequences of seq_len tokens, T = mb seq_len: on a stage of decoder layers,
// one layer's, max(4 T (n seq_len + h), 3 e T f) (the attention half: the
// fp32 gradients of every head's scores, none with fused attention, and the
// residual stream's; the MLP half: SwiGLU's two gradients and a product);
// on the last stage at least the head's, 2 x 4 T V (the fp32 logits'
// gradient and the log-softmax's). Measured on the CPU in fp32 with
// explicit attention: exact for B on the tiny and small presets
// (docs/planning.md, "Memory per rank"); a split backward's I holds more.
double StageWorkspaceBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                           Precision precision, const ActivationLayout& layout = {});

// Temporaries of a stage's actions in two parts: the layers' and the
// head's, the larger of which is the action's peak above what it held.
// The head's are exact: the fp32 logits in F, 4 T V; the logits' gradient
// and the log-softmax's in B and I, 8 T V. The layers' are one layer's
// backward temporaries (StageWorkspaceBytes' layer term), which a profile
// scales for each kind: F's peak is the last layer's temporaries less what
// that layer keeps after them (0.53 of the formula on the small preset in
// fp32 at 2 x 128 tokens, explicit attention), I's also builds W's stash
// while it frees the activations (1.55). On the last stage F's are the
// head's alone: the head's activations, made after the layers', offset
// the layers' temporaries (measured on the CPU, 2026-11-28).
struct WorkspaceParts {
  double layers = 0, head = 0;
  // The peak with the layers' part scaled by `scale` (and the head's by
  // `head_scale`).
  double Scaled(double scale, double head_scale = 1) const { return std::max(scale * layers, head_scale * head); }
};
WorkspaceParts StageForwardWorkspaceParts(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                                          Precision precision, const ActivationLayout& layout = {});
// B's and I's (StageWorkspaceBytes is their Scaled(1)).
WorkspaceParts StageBackwardWorkspaceParts(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                                           Precision precision, const ActivationLayout& layout = {});

// Temporaries of a stage's W (zero-bubble's weight pass), bytes: each
// deferred product's output before it is added to its fp32 gradient. In
// fp32 none: the product is summed into the gradient in place (addmm_). In
// bf16 the product is made in bf16, e bytes a weight, then added: the
// largest of a layer's gate and up projections, 2 f h, and on the last
// stage the head's V h. A W needs none of B's larger temporaries (the
// logits' gradient); the simulator charged it those before 2026-11-28.
double StageWeightWorkspaceBytes(const LlamaConfig& c, const Partition& p, int stage, Precision precision);
double StageWeightGradBytes(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len,
                            Precision precision);
double MessageBytes(const LlamaConfig& c, int mb, int seq_len, Precision precision);
// What a stage after the first holds of its inputs when it is recomputed:
// the fp32 hidden state (a bf16 message is cast back on receipt) and the
// int64 attention mask beside it. 0 for the first stage (the batch's tokens).
// Under sequence parallelism the hidden state is 1 / sequence_share of it.
double StageInputBytes(const LlamaConfig& c, int stage, int mb, int seq_len, int sequence_share = 1);

}  // namespace pplab::cli
