// What the plan tests share (plan_costs_test.cpp, plan_search_test.cpp,
// plan_search_parallel_test.cpp): a model whose two stages cost the same,
// search options whose times are FLOP counts, a cost file as `pplab profile`
// writes it and a stage of one from the formulas, a stage's workspace, and the lookup of a search's candidate, so
// that these files check the formulas and the search on the same model.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "models/llama_config.h"
#include "models/partition.h"
#include "tools/plan_costs.h"
#include "tools/plan_search.h"

namespace pplab::cli {

// A model whose LM head costs exactly one decoder layer (2 V h = 2 P + 4 L h
// FLOPs per token, i.e. V = P / h + 2 L), so with 3 layers on 2 stages (2 + 1,
// the head on the last) both stages cost the same: uniform stage costs.
inline constexpr int kSeqLen = 16;
inline LlamaConfig BalancedModel() {
  LlamaConfig c;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.num_hidden_layers = 3;
  c.max_position_embeddings = 64;
  c.vocab_size = static_cast<int>(DecoderLayerParams(c) / c.hidden_size + 2 * kSeqLen);
  REQUIRE(DecoderLayerParams(c) % c.hidden_size == 0);
  return c;
}

inline PlanSearchOptions Options(const LlamaConfig& config, Bytes memory) {
  PlanSearchOptions o;
  o.config = config;
  o.ranks = 2;
  o.global_batch = 8;
  o.seq_len = kSeqLen;
  o.memory_per_rank = memory;
  o.schedules = {"gpipe", "1f1b"};
  o.fit = AnalyticFit(1e9, Precision::kFp32);  // one FLOP per ns: times are FLOP counts
  return o;
}

// A cost file as `pplab profile` writes it for `c` on 2 ranks (partition
// 2,1, microbatches of `microbatch_size` sequences of 16 tokens) with these stages;
// `extra_meta` goes into its meta and `extra_top` beside it, as they are.
inline std::string ProfileJson(const LlamaConfig& c, const std::string& stages, const std::string& extra_meta = "",
                               const std::string& extra_top = "", int microbatch_size = 2) {
  return "{\"format\": \"pplab.cost\", \"version\": 1, \"stages\": [" + stages + "], " + extra_top +
         "\"meta\": {\"source\": \"pplab profile\", \"model\": \"balanced.json\", \"config\": " + c.ToJson() +
         ", \"partition\": \"2,1\", \"microbatch_size\": " + std::to_string(microbatch_size) + ", \"seq_len\": 16, " +
         extra_meta + "\"device\": \"cpu\", \"threads_per_rank\": 1, \"ranks\": 2}}";
}

// Stage s of a profile whose figures are the planner's own: F takes
// `forward_ms`, B twice that, and the activations are the formula's for
// `shape` at microbatches of `mb` (fp32); `extra` (", \"field\": value")
// goes into the stage as it is.
inline std::string FormulaStage(const LlamaConfig& shape, const Partition& p, int s, int mb, double forward_ms,
                                const std::string& extra = "") {
  return std::string(s ? "," : "") + "{\"forward_ms\": " + std::to_string(forward_ms) +
         ", \"backward_ms\": " + std::to_string(2 * forward_ms) + ", \"activation_bytes\": " +
         std::to_string(std::llround(StageActivationBytes(shape, p, s, mb, kSeqLen, Precision::kFp32))) + extra + "}";
}

// Stage s's workspace for microbatches of one sequence (StageWorkspaceBytes).
inline Bytes Work(const LlamaConfig& c, const Partition& p, int s, Precision precision = Precision::kFp32,
                  const ActivationLayout& layout = {}) {
  return std::llround(StageWorkspaceBytes(c, p, s, 1, kSeqLen, precision, layout));
}

// The 1f1b candidate of M = 8 among those that fit.
inline PlanCandidate OneFOneB8(const PlanSearchResult& r) {
  for (const PlanCandidate& p : r.fitting) {
    if (p.schedule == "1f1b" && p.microbatches == 8) return p;
  }
  FAIL("no 1f1b M=8 candidate");
  return PlanCandidate{};
}

inline const PlanCandidate& Find(const PlanSearchResult& r, const char* schedule, int M) {
  for (const PlanCandidate& c : r.fitting) {
    if (c.schedule == schedule && c.microbatches == M) return c;
  }
  FAIL("no candidate " << schedule << " M=" << M);
  return r.fitting.front();
}

}  // namespace pplab::cli
