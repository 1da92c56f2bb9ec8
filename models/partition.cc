#include "models/partition.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "models/flops.h"
#include "schedules/error.h"
#include "schedules/int_list.h"

namespace pplab {
namespace {

void CheckEnoughLayers(const LlamaConfig& config, int stages) {
  if (stages < 1) throw Error("partition: stages must be >= 1, got " + std::to_string(stages));
  if (config.num_hidden_layers < stages) {
    throw Error("partition: the model has " + std::to_string(config.num_hidden_layers) + " layers, fewer than the " +
                std::to_string(stages) + " stages (each stage needs at least one layer)");
  }
}

}  // namespace

std::string Partition::ToString() const {
  std::ostringstream out;
  for (int s = 0; s < NumStages(); ++s) out << (s ? "," : "") << End(s) - Begin(s);
  return out.str();
}

Partition PartitionUniform(const LlamaConfig& config, int stages) {
  CheckEnoughLayers(config, stages);
  const int L = config.num_hidden_layers;
  Partition p;
  p.layer_begin.push_back(0);
  for (int s = 0; s < stages; ++s) p.layer_begin.push_back(p.layer_begin.back() + L / stages + (s < L % stages));
  return p;
}

Partition PartitionByParameters(const LlamaConfig& config, int stages) {
  CheckEnoughLayers(config, stages);
  const int L = config.num_hidden_layers, S = stages;
  const int64_t layer = DecoderLayerParams(config);
  auto cost = [&](int s, int begin, int end) {
    return (end - begin) * layer + (s == 0 ? EmbeddingParams(config) : 0) + (s == S - 1 ? HeadParams(config) : 0);
  };
  // best[s][l]: smallest possible largest stage when stages 0..s-1 own layers [0, l).
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(S + 1, std::vector<int64_t>(L + 1, kInf));
  std::vector<std::vector<int>> cut(S + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0;
  for (int s = 1; s <= S; ++s) {
    for (int l = s; l <= L - (S - s); ++l) {
      // Over the cut b, best[s - 1][b] never falls (a longer prefix has no
      // smaller largest stage) and the last stage's cost(s - 1, b, l) falls
      // with every layer it gives up, so the larger of the two is least at
      // the first b where the first reaches the second, or just before it:
      // a binary search instead of a scan of every b (O(S L log L), not
      // O(S L^2): 100 000 layers took minutes).
      int lo = s - 1, hi = l;  // the first b in [s - 1, l) with best >= cost, or l
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (best[s - 1][mid] >= cost(s - 1, mid, l)) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      for (int b = std::max(s - 1, lo - 1); b <= std::min(lo, l - 1); ++b) {
        if (best[s - 1][b] == kInf) continue;
        const int64_t worst = std::max(best[s - 1][b], cost(s - 1, b, l));
        if (worst < best[s][l]) {  // strict: ties keep the earliest cut, deterministic
          best[s][l] = worst;
          cut[s][l] = b;
        }
      }
    }
  }
  Partition p;
  p.layer_begin.assign(S + 1, 0);
  p.layer_begin[S] = L;
  for (int s = S, l = L; s > 0; --s) {
    l = cut[s][l];
    p.layer_begin[s - 1] = l;
  }
  return p;
}

Partition PartitionByCompute(const LlamaConfig& config, const std::vector<RankId>& placement, int64_t seq_len,
                             const std::vector<int>& max_layers) {
  const int S = static_cast<int>(placement.size());
  CheckEnoughLayers(config, S);
  if (seq_len < 1) throw Error("partition compute: needs the sequence length");
  int K = 0;
  for (const RankId r : placement) {
    if (r < 0) throw Error("partition compute: a stage placed on rank " + std::to_string(r));
    K = std::max(K, r + 1);
  }
  if (!max_layers.empty() && static_cast<int>(max_layers.size()) != K) {
    throw Error("partition compute: " + std::to_string(max_layers.size()) + " layer limits for " + std::to_string(K) +
                " ranks");
  }
  // As plan's analytic times weigh them (backward a fixed multiple of forward).
  const double layer = LayerForwardFlops(config, seq_len), head = HeadForwardFlops(config, seq_len);
  // Whole layers to the least loaded that may take one (below its limit,
  // when there are limits): ranks first, then each rank's stages.
  const auto deal = [layer](std::vector<double>& load, std::vector<int>& count, int layers,
                            const std::vector<int>& limit) {
    for (int i = 0; i < layers; ++i) {
      size_t least = load.size();
      for (size_t j = 0; j < load.size(); ++j) {
        if ((limit.empty() || count[j] < limit[j]) && (least == load.size() || load[j] < load[least])) least = j;
      }
      if (least == load.size()) throw Error("partition compute: the layer limits hold fewer layers than the model's");
      load[least] += layer;
      ++count[least];
    }
  };
  std::vector<double> rank_load(K, 0.0);
  std::vector<int> rank_layers(K, 0);
  for (int s = 0; s < S; ++s) {
    rank_load[placement[s]] += layer + (s == S - 1 ? head : 0.0);
    ++rank_layers[placement[s]];
  }
  for (RankId r = 0; r < K && !max_layers.empty(); ++r) {
    if (rank_layers[r] > max_layers[r]) {
      throw Error("partition compute: rank " + std::to_string(r) + " holds " + std::to_string(rank_layers[r]) +
                  " stages but a limit of " + std::to_string(max_layers[r]) + " layers");
    }
  }
  deal(rank_load, rank_layers, config.num_hidden_layers - S, max_layers);
  std::vector<int> layers(S, 0);
  for (RankId r = 0; r < K; ++r) {
    std::vector<int> mine;
    for (int s = 0; s < S; ++s) {
      if (placement[s] == r) mine.push_back(s);
    }
    std::vector<double> load;
    std::vector<int> count(mine.size(), 1);
    for (const int s : mine) load.push_back(layer + (s == S - 1 ? head : 0.0));
    deal(load, count, rank_layers[r] - static_cast<int>(mine.size()), {});
    for (size_t i = 0; i < mine.size(); ++i) layers[mine[i]] = count[i];
  }
  Partition p;
  p.layer_begin.push_back(0);
  for (int s = 0; s < S; ++s) p.layer_begin.push_back(p.layer_begin.back() + layers[s]);
  return p;
}

Partition PartitionExplicit(const LlamaConfig& config, int stages, const std::vector<int>& layers_per_stage) {
  if (static_cast<int>(layers_per_stage.size()) != stages) {
    throw Error("--partition: " + std::to_string(layers_per_stage.size()) + " entries for " + std::to_string(stages) +
                " stages");
  }
  Partition p;
  p.layer_begin.push_back(0);
  for (int n : layers_per_stage) {
    if (n < 1) throw Error("--partition: every stage needs at least one layer, got " + std::to_string(n));
    p.layer_begin.push_back(p.layer_begin.back() + n);
  }
  if (p.layer_begin.back() != config.num_hidden_layers) {
    throw Error("--partition: the entries sum to " + std::to_string(p.layer_begin.back()) +
                " layers but the model has " + std::to_string(config.num_hidden_layers));
  }
  return p;
}

Partition MakePartition(const LlamaConfig& config, int stages, const std::string& method,
                        const PartitionContext& context) {
  if (method == "uniform") return PartitionUniform(config, stages);
  if (method == "parameters") return PartitionByParameters(config, stages);
  if (method == "compute") {
    if (static_cast<int>(context.placement.size()) != stages || context.seq_len < 1) {
      throw Error(
          "--partition compute: needs the plan's placement of one copy of the model and the sequence length "
          "(train and plan give them; not for dualpipe's two copies)");
    }
    return PartitionByCompute(config, context.placement, context.seq_len);
  }
  // Digits between commas, each item present: "2,2," and "2, 2" name no
  // list of counts.
  const std::optional<std::vector<int>> counts = ParseIntList(method);
  if (!counts) {
    throw Error("--partition: '" + method +
                "' is not uniform, parameters, compute, or a list of layer counts like 3,2,2,1");
  }
  return PartitionExplicit(config, stages, *counts);
}

int64_t StageParams(const LlamaConfig& config, const Partition& partition, int stage) {
  const int S = partition.NumStages();
  return (partition.End(stage) - partition.Begin(stage)) * DecoderLayerParams(config) +
         (stage == 0 ? EmbeddingParams(config) : 0) + (stage == S - 1 ? HeadParams(config) : 0);
}

int64_t StageLinearParams(const LlamaConfig& config, const Partition& partition, int stage) {
  // Per layer: the two RMSNorms, and those of q and k.
  const int64_t norms = 2 * static_cast<int64_t>(config.hidden_size) + (config.qk_norm ? 2 * config.HeadDim() : 0);
  const int64_t head = static_cast<int64_t>(config.vocab_size) * config.hidden_size;
  return (partition.End(stage) - partition.Begin(stage)) * (DecoderLayerParams(config) - norms) +
         (stage == partition.NumStages() - 1 ? head : 0);
}

}  // namespace pplab
