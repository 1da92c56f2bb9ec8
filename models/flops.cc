#include "models/flops.h"

#include "schedules/error.h"

namespace pplab {

int64_t StageMatmulWeights(const LlamaConfig& c, const Partition& partition, int stage) {
  const int64_t h = c.hidden_size, q = c.QDim(), kv = c.KvDim();
  const int64_t layer = 2 * h * q /*q, o*/ + 2 * h * kv /*k, v*/ + 3 * h * c.intermediate_size /*gate, up, down*/;
  const int64_t layers = partition.End(stage) - partition.Begin(stage);
  const bool last = stage == partition.NumStages() - 1;
  return layers * layer + (last ? static_cast<int64_t>(c.vocab_size) * h /*lm_head*/ : 0);
}

double LayerTrainingFlops(const LlamaConfig& c, int64_t seq_len) {
  const double T = static_cast<double>(seq_len);
  const double h = c.hidden_size, q = c.QDim(), kv = c.KvDim();
  const double weights = 2 * h * q /*q, o*/ + 2 * h * kv /*k, v*/ + 3 * h * c.intermediate_size /*gate, up, down*/;
  return 6.0 * weights * T + 6.0 * q * T * (T + 1);
}

double HeadTrainingFlops(const LlamaConfig& c, int64_t seq_len) {
  return 6.0 * static_cast<double>(c.vocab_size) * c.hidden_size * static_cast<double>(seq_len);
}

double LayerForwardFlops(const LlamaConfig& c, int64_t seq_len) {
  const double L = static_cast<double>(seq_len);
  return 2.0 * L * static_cast<double>(DecoderLayerParams(c)) + 4.0 * L * L * static_cast<double>(c.QDim());
}

double HeadForwardFlops(const LlamaConfig& c, int64_t seq_len) {
  return 2.0 * static_cast<double>(c.vocab_size) * c.hidden_size * static_cast<double>(seq_len);
}

double StageTrainingFlops(const LlamaConfig& c, const Partition& partition, int stage, int64_t seq_len) {
  const double layers = partition.End(stage) - partition.Begin(stage);
  const bool last = stage == partition.NumStages() - 1;
  return layers * LayerTrainingFlops(c, seq_len) + (last ? HeadTrainingFlops(c, seq_len) : 0.0);
}

std::vector<double> RankTrainingFlops(const LlamaConfig& config, const Partition& partition,
                                      const std::vector<RankId>& placement, int ranks, int64_t sequences,
                                      int64_t seq_len) {
  if (static_cast<int>(placement.size()) != partition.NumStages()) {
    throw Error("model FLOPs: the placement has " + std::to_string(placement.size()) + " stages, the partition " +
                std::to_string(partition.NumStages()));
  }
  std::vector<double> flops(ranks, 0.0);
  for (int s = 0; s < partition.NumStages(); ++s) {
    if (placement[s] < 0 || placement[s] >= ranks) {
      throw Error("model FLOPs: stage " + std::to_string(s) + " is placed on rank " + std::to_string(placement[s]) +
                  " of " + std::to_string(ranks));
    }
    flops[placement[s]] += static_cast<double>(sequences) * StageTrainingFlops(config, partition, s, seq_len);
  }
  return flops;
}

}  // namespace pplab
