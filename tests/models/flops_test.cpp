// Model FLOPs (models/flops.h) against the convention worked out by hand.
#include "models/flops.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"

namespace pplab::flops_test {
namespace {

TEST_CASE("model FLOPs of the default preset on 2 stages equal the formula by hand", "[flops][model]") {
  // default: hidden 768, 12 heads of 64, 3 KV heads (k and v are 768 x 192),
  // intermediate 3072, 12 layers, vocab 32000; uniform: 6 layers per stage.
  const LlamaConfig c = LlamaPreset("default");
  const Partition p = PartitionUniform(c, 2);
  // One layer's Linear weights: q and o 768 x 768, k and v 768 x 192, gate,
  // up and down 768 x 3072.
  const int64_t layer = 589824 + 589824 + 147456 + 147456 + 3 * 2359296;
  CHECK(layer == 8552448);
  CHECK(StageMatmulWeights(c, p, 0) == 6 * layer);                // the embedding is a lookup: not counted
  CHECK(StageMatmulWeights(c, p, 1) == 6 * layer + 32000 * 768);  // + the LM head
  // Per sequence of T = 128 tokens: 6 W T + layers x 6 x hidden x T (T+1).
  const double attention = 6.0 * 6 * 768 * 128 * 129;                           // 456,523,776
  CHECK(StageTrainingFlops(c, p, 0, 128) == 6.0 * 51314688 * 128 + attention);  // 39,866,204,160
  CHECK(StageTrainingFlops(c, p, 1, 128) == 6.0 * 75890688 * 128 + attention);  // 58,740,572,160
  CHECK(StageTrainingFlops(c, p, 0, 128) == 39866204160.0);
  CHECK(StageTrainingFlops(c, p, 1, 128) == 58740572160.0);
  // A step of 16 sequences over 2 replicas: 8 per replica; 1f1b places stage s on rank s.
  const std::vector<double> ranks = RankTrainingFlops(c, p, {0, 1}, 2, 8, 128);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0] == 8 * 39866204160.0);
  CHECK(ranks[1] == 8 * 58740572160.0);
}

TEST_CASE("model FLOPs with head_dim set apart: q, o and attention follow heads x head_dim", "[flops][model]") {
  // The default preset with 12 heads of 96: q is 1152 wide on a hidden size of 768.
  LlamaConfig c = LlamaPreset("default");
  c.head_dim = 96;
  c.Check("test");
  const Partition p = PartitionUniform(c, 2);
  // q and o 768 x 1152, k and v 768 x 288 (3 KV heads of 96), gate, up and down 768 x 3072.
  const int64_t layer = 2 * 884736 + 2 * 221184 + 3 * 2359296;
  CHECK(StageMatmulWeights(c, p, 0) == 6 * layer);
  const double attention = 6.0 * 6 * 1152 * 128 * 129;
  CHECK(StageTrainingFlops(c, p, 0, 128) == 6.0 * 6 * layer * 128 + attention);
}

TEST_CASE("model FLOPs follow the placement: looped stages add up on their rank", "[flops][model]") {
  const LlamaConfig c = LlamaPreset("small");  // 8 layers, hidden 128, 8 heads, 2 KV heads, intermediate 384
  const Partition p = PartitionUniform(c, 4);  // 2 layers per stage
  const std::vector<double> ranks = RankTrainingFlops(c, p, {0, 1, 0, 1}, 2, 1, 64);
  CHECK(ranks[0] == StageTrainingFlops(c, p, 0, 64) + StageTrainingFlops(c, p, 2, 64));
  CHECK(ranks[1] == StageTrainingFlops(c, p, 1, 64) + StageTrainingFlops(c, p, 3, 64));
  // Layer weights 2 x 128^2 + 2 x 128 x 32 + 3 x 128 x 384 = 188,416; attention 6 x 128 x 64 x 65 per layer.
  CHECK(StageTrainingFlops(c, p, 1, 64) == 6.0 * 2 * 188416 * 64 + 2 * 6.0 * 128 * 64 * 65);
  CHECK_THROWS_AS(RankTrainingFlops(c, p, {0, 1, 0}, 2, 1, 64), Error);
  CHECK_THROWS_AS(RankTrainingFlops(c, p, {0, 1, 0, 2}, 2, 1, 64), Error);
}

}  // namespace
}  // namespace pplab::flops_test
