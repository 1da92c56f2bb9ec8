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
// Layers per stage as given, e.g. {3, 2, 2, 1}; must sum to the model's
// layers and have one entry per stage.
Partition PartitionExplicit(const LlamaConfig& config, int stages, const std::vector<int>& layers_per_stage);
// "uniform", "parameters", or a comma-separated layer list such as "3,2,2,1".
Partition MakePartition(const LlamaConfig& config, int stages, const std::string& method);

// Parameters a stage owns under `partition`.
int64_t StageParams(const LlamaConfig& config, const Partition& partition, int stage);
// Of those, the Linear layers' weights (attention, MLP, LM head): what bf16
// autocast casts; not the embedding (indexed) or the RMSNorm weights.
int64_t StageLinearParams(const LlamaConfig& config, const Partition& partition, int stage);

}  // namespace pplab
