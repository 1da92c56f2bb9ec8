#include "models/partition.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "models/flops.h"
#include "schedules/error.h"

namespace pplab::partition_test {

TEST_CASE("uniform partition gives the first L mod S stages one layer more", "[partition]") {
  LlamaConfig c = LlamaPreset("tiny");
  c.num_hidden_layers = 5;
  CHECK(PartitionUniform(c, 3).ToString() == "2,2,1");
  CHECK(PartitionUniform(c, 5).ToString() == "1,1,1,1,1");
  CHECK(PartitionUniform(c, 1).ToString() == "5");
  CHECK_THROWS_WITH(PartitionUniform(c, 6), Catch::Contains("5 layers, fewer than the 6 stages"));
}

TEST_CASE("parameter-balanced partition minimises the largest stage", "[partition]") {
  // Embedding and head each weigh as much as 2 layers: with 8 layers on 4
  // stages the best split gives the end stages fewer layers.
  LlamaConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.num_hidden_layers = 8;
  const int64_t layer = DecoderLayerParams(c);
  // 64*64*4 attention + 3*64*128 mlp + 128 norms = 16384 + 24576 + 128 = 41088
  REQUIRE(layer == 41088);
  REQUIRE(EmbeddingParams(c) == 64000);
  const Partition p = PartitionByParameters(c, 4);
  int64_t largest = 0;
  for (int s = 0; s < 4; ++s) largest = std::max(largest, StageParams(c, p, s));
  // Brute force over every split of 8 layers into 4 non-empty runs.
  int64_t best = INT64_MAX;
  for (int a = 1; a <= 5; ++a) {
    for (int b = 1; a + b <= 6; ++b) {
      for (int d = 1; a + b + d <= 7; ++d) {
        const Partition q = PartitionExplicit(c, 4, {a, b, d, 8 - a - b - d});
        int64_t worst = 0;
        for (int s = 0; s < 4; ++s) worst = std::max(worst, StageParams(c, q, s));
        best = std::min(best, worst);
      }
    }
  }
  CHECK(largest == best);
  CHECK(p.Begin(0) == 0);
  CHECK(p.End(3) == 8);
}

namespace {

// The parameter partition by scanning every cut: the first cut of least
// largest stage, stage by stage, as PartitionByParameters promises.
std::vector<int> ScannedCuts(const LlamaConfig& c, int S) {
  const int L = c.num_hidden_layers;
  auto cost = [&](int s, int begin, int end) {
    return (end - begin) * DecoderLayerParams(c) + (s == 0 ? EmbeddingParams(c) : 0) + (s == S - 1 ? HeadParams(c) : 0);
  };
  std::vector<std::vector<int64_t>> best(S + 1, std::vector<int64_t>(L + 1, INT64_MAX));
  std::vector<std::vector<int>> cut(S + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0;
  for (int s = 1; s <= S; ++s) {
    for (int l = s; l <= L - (S - s); ++l) {
      for (int b = s - 1; b < l; ++b) {
        if (best[s - 1][b] == INT64_MAX) continue;
        const int64_t worst = std::max(best[s - 1][b], cost(s - 1, b, l));
        if (worst < best[s][l]) {
          best[s][l] = worst;
          cut[s][l] = b;
        }
      }
    }
  }
  std::vector<int> begins(S + 1, L);
  for (int s = S, l = L; s > 0; --s) begins[s - 1] = l = cut[s][l];
  return begins;
}

}  // namespace

TEST_CASE("the parameter partition's search finds the cuts a scan of every cut finds, and takes 100 000 layers",
          "[partition]") {
  LlamaConfig c = LlamaPreset("tiny");
  // Vocabularies from a fraction of a layer's parameters to many layers'.
  for (const int vocab : {8, 256, 4096, 65536}) {
    c.vocab_size = vocab;
    for (int L = 1; L <= 24; ++L) {
      c.num_hidden_layers = L;
      for (int S = 1; S <= std::min(L, 6); ++S) {
        INFO("vocab " << vocab << ", " << L << " layers, " << S << " stages");
        CHECK(PartitionByParameters(c, S).layer_begin == ScannedCuts(c, S));
      }
    }
  }
  // A scan is quadratic in the layers (minutes here); the search is not.
  c.vocab_size = 256;
  c.num_hidden_layers = 100000;
  const Partition p = PartitionByParameters(c, 4);
  int64_t largest = 0, total = 0;
  for (int s = 0; s < 4; ++s) {
    largest = std::max(largest, StageParams(c, p, s));
    total += StageParams(c, p, s);
  }
  // The least largest stage is at most one layer above an even share.
  CHECK(largest <= total / 4 + DecoderLayerParams(c));
}

TEST_CASE("explicit partitions are checked against the model", "[partition]") {
  const LlamaConfig c = LlamaPreset("tiny");  // 4 layers
  CHECK(MakePartition(c, 3, "1,2,1").ToString() == "1,2,1");
  CHECK_THROWS_WITH(MakePartition(c, 3, "1,2"), Catch::Contains("2 entries for 3 stages"));
  CHECK_THROWS_WITH(MakePartition(c, 2, "3,3"), Catch::Contains("sum to 6 layers but the model has 4"));
  CHECK_THROWS_WITH(MakePartition(c, 2, "4,0"), Catch::Contains("at least one layer"));
  CHECK_THROWS_WITH(MakePartition(c, 2, "two"), Catch::Contains("not uniform, parameters, compute, or a list"));
  // Every item is digits: an empty one (a stray comma) or a sign is no count.
  for (const char* bad : {"2,2,", "2,,2", ",2,2", "+2,2", " 2,2", "2,2 ", ""}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(MakePartition(c, 2, bad), Catch::Contains("not uniform, parameters, compute, or a list"));
  }
}

TEST_CASE("compute evens out the ranks' FLOPs for the placement, the LM head on its rank", "[partition]") {
  // A config whose LM head costs exactly 2.5 layers at T = 1, in the
  // forward FLOPs plan's times use (attention 4 q T^2 = 4 q per layer):
  // layer = 2 P + 4 q, head = 2 V h.
  LlamaConfig c = LlamaPreset("tiny");  // hidden 32, q = 32, kv = 16, intermediate 64
  c.num_hidden_layers = 12;
  const double layer = LayerForwardFlops(c, 1);
  CHECK(layer == 2.0 * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64 + 2 * 32) + 4.0 * 32);  // 2 P + 4 q
  c.vocab_size = static_cast<int>(2.5 * layer / (2.0 * 32));
  REQUIRE(HeadForwardFlops(c, 1) == 2.5 * layer);
  // One stage a rank, 4 ranks: the head's rank takes 1 layer (3.5) and the
  // other 11 go 4, 4, 3 to the least loaded (lowest rank on a tie).
  CHECK(PartitionByCompute(c, {0, 1, 2, 3}, 1).ToString() == "4,4,3,1");
  // The V on 3 ranks (stages r and 5-r on rank r): rank 0 holds the head.
  // Ranks start at 2 layers (rank 0 at 4.5 with the head); the 6 more go to
  // ranks 1, 2, 1, 2, 1, 2: 2, 5, 5 layers, loads 4.5, 5, 5. Within ranks 1
  // and 2 the earlier stage gets the odd layer: 3 and 2.
  CHECK(PartitionByCompute(c, {0, 1, 2, 2, 1, 0}, 1).ToString() == "1,3,3,2,2,1");
  // Where parameters balances stages, the V's middle rank gets two heavy
  // ones; compute's largest rank is lighter.
  const std::vector<RankId> v = {0, 1, 2, 2, 1, 0};
  const auto largest_rank = [&](const Partition& p) {
    const std::vector<double> f = RankTrainingFlops(c, p, v, 3, 1, 1);
    return *std::max_element(f.begin(), f.end());
  };
  CHECK(largest_rank(PartitionByCompute(c, v, 1)) == 5 * LayerTrainingFlops(c, 1));  // rank 0: 2 + 2.52
  CHECK(largest_rank(PartitionByCompute(c, v, 1)) < largest_rank(PartitionByParameters(c, 6)));
  // Looped (interleaved) stages add up on their rank the same way: rank 0
  // (stages 0, 2) takes 7 layers, rank 1 5 and the head (7 against 7.5),
  // of which the head's stage keeps 1 (4 + 1 against 1 + 3.5).
  CHECK(PartitionByCompute(c, {0, 1, 0, 1}, 1).ToString() == "4,4,3,1");
  // With a limit of 3 layers on rank 0, the 8 layers dealt go 0, 1, 2, 0
  // (rank 0 full), 1, 2, 1, 2: 3, 4, 4 and the head's 1.
  CHECK(PartitionByCompute(c, {0, 1, 2, 3}, 1, {3, 12, 12, 12}).ToString() == "3,4,4,1");
  CHECK(PartitionByCompute(c, {0, 1, 2, 3}, 1, {12, 12, 12, 12}).ToString() == "4,4,3,1");
  CHECK_THROWS_WITH(PartitionByCompute(c, {0, 1, 2, 3}, 1, {3, 3, 3, 2}), Catch::Contains("fewer layers than"));
  CHECK_THROWS_WITH(PartitionByCompute(c, {0, 1, 0, 1}, 1, {1, 12}), Catch::Contains("rank 0 holds 2 stages"));
  CHECK_THROWS_WITH(PartitionByCompute(c, {0, 1}, 1, {12}), Catch::Contains("1 layer limits for 2 ranks"));
  // At a length where attention outweighs the rest, the weights are the
  // full square plan's times count, not MFU's causal half: the small preset
  // at 512 tokens on 4 ranks, whose head is 0.82 of a layer in forward
  // FLOPs (1.03 in MFU's), balances at 2,2,2,2 (3,2,2,1 was 7 % slower in
  // plan's own times).
  const LlamaConfig small = LlamaPreset("small");
  CHECK(HeadForwardFlops(small, 512) / LayerForwardFlops(small, 512) == Approx(0.82).margin(0.01));
  CHECK(HeadTrainingFlops(small, 512) / LayerTrainingFlops(small, 512) > 1);
  CHECK(PartitionByCompute(small, {0, 1, 2, 3}, 512).ToString() == "2,2,2,2");
  // MakePartition takes it only with a placement of its stages and a length.
  CHECK(MakePartition(c, 4, "compute", {{0, 1, 2, 3}, 1}).ToString() == "4,4,3,1");
  CHECK_THROWS_WITH(MakePartition(c, 4, "compute"), Catch::Contains("needs the plan's placement"));
  CHECK_THROWS_WITH(MakePartition(c, 4, "compute", {{0, 1, 0, 1, 0, 1}, 1}), Catch::Contains("needs the plan's"));
}

TEST_CASE("model config JSON: defaults, unknown fields and inconsistent shapes", "[partition]") {
  const LlamaConfig c =
      LlamaConfigFromJson(R"({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2})", "m.json");
  CHECK(c.num_hidden_layers == 12);
  CHECK(c.vocab_size == 32000);
  CHECK(LlamaConfigFromJson(c.ToJson(), "again").hidden_size == 64);
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_sise": 64})", "m.json"),
                    Catch::Contains("unknown field 'hidden_sise'"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_size": 60, "num_attention_heads": 8})", "m.json"),
                    Catch::Contains("not a multiple of num_attention_heads"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"num_key_value_heads": 5})", "m.json"),
                    Catch::Contains("not a multiple of num_key_value_heads"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"rope_theta": -1})", "m.json"),
                    Catch::Contains("'rope_theta' must be a positive"));
  const LlamaConfig d = LlamaPreset("default");
  CHECK(d.num_hidden_layers == 12);
  CHECK(d.hidden_size == 768);
  CHECK(d.num_attention_heads == 12);
  CHECK(d.num_key_value_heads == 3);
  CHECK(d.intermediate_size == 3072);
  CHECK(d.max_position_embeddings == 2048);
}

}  // namespace pplab::partition_test
