// Partitioning a Llama model's decoder layers over pipeline stages.
//
// Stage s owns layers [layer_begin[s], layer_begin[s+1]); stage 0 also owns
// the token embedding and the last stage the final norm and LM head. Every
// stage owns at least one layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "schedules/units.h"

namespace pplab {

struct Partition {
  std::vector<int> layer_begin;  // size S + 1, from 0 to num_hidden_layers
  int NumStages() const { return static_cast<int>(layer_begin.size()) - 1; }
  int Begin(int stage) const { return layer_begin[stage]; }
  int End(int stage) const { return layer_begin[stage + 1]; }
  std::string ToString() const;  // layers per stage, e.g. "2,2,1"
};

// As even as possible: the first (L mod S) stages get one layer more.
Partition PartitionUniform(const LlamaConfig& config, int stages);
// Contiguous layers that minimise the largest stage's parameter count,
// embedding and head included (DeepSpeed's "parameters" method).
Partition PartitionByParameters(const LlamaConfig& config, int stages);
// Layers per stage that even out the ranks' training FLOPs (models/flops.h:
// a layer's matmuls and causal attention at `seq_len`, the LM head on the
// last stage's rank; the embedding is a lookup and counts nothing) for
// stages placed on ranks as `placement` says (Schedule::placement, one copy
// of the model): each rank gets its stages' one layer each, then every
// further layer goes to the rank with the least FLOPs so far (lowest rank on
// a tie), which makes the largest rank's FLOPs as small as whole layers
// allow; a rank's layers are then dealt to its stages the same way, so that
// the LM head's stage holds fewer. With one stage a rank it balances stages;
// with V or looped placements it balances what each rank runs per
// microbatch, where "parameters" balances stages only. With `max_layers`
// (one per rank; empty: none), a rank at its limit takes no further layer:
// the least loaded of the others does (plan's "fitted" partitions, which
// limit the ranks over memory). Throws when the limits hold fewer layers
// than the model has, or fewer than a rank's stages.
Partition PartitionByCompute(const LlamaConfig& config, const std::vector<RankId>& placement, int64_t seq_len,
                             const std::vector<int>& max_layers = {});
// Layers per stage as given, e.g. {3, 2, 2, 1}; must sum to the model's
// layers and have one entry per stage.
Partition PartitionExplicit(const LlamaConfig& config, int stages, const std::vector<int>& layers_per_stage);
// What "compute" needs besides the model: where the plan puts each stage
// and the sequence length. Empty: not known (the method is then refused).
struct PartitionContext {
  std::vector<RankId> placement;  // by stage, one copy of the model
  int64_t seq_len = 0;
};

// "uniform", "parameters", "compute" (with `context`), or a comma-separated
// layer list such as "3,2,2,1".
Partition MakePartition(const LlamaConfig& config, int stages, const std::string& method,
                        const PartitionContext& context = {});

// Parameters a stage owns under `partition`.
int64_t StageParams(const LlamaConfig& config, const Partition& partition, int stage);
// Of those, the Linear layers' weights (attention, MLP, LM head): what bf16
// autocast casts; not the embedding (indexed) or the RMSNorm weights.
int64_t StageLinearParams(const LlamaConfig& config, const Partition& partition, int stage);

}  // namespace pplab
