// The plan search (tools/plan_search.h) over parallel layouts: data-parallel
// replicas, pipelines on nodes, tensor and sequence parallelism, by hand.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "models/tensor_parallel.h"
#include "tests/tools/plan_test_support.h"
#include "tools/plan_search.h"

namespace pplab::cli::plan_search_parallel_test {

TEST_CASE("plan: a sharded optimizer counts 8 + 8 / D bytes of model state per parameter", "[plan]") {
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.dp = 2;
  o.global_batch = 16;  // 8 sequences a replica, as in the other tests
  const PlanCandidate plain = OneFOneB8(SearchPlans(o));
  o.shard_optimizer = true;
  const PlanCandidate sharded = OneFOneB8(SearchPlans(o));
  CHECK(sharded.step_time == plain.step_time);
  const Partition& p = plain.partition;
  const Bytes act0 = std::llround(StageActivationBytes(c, p, 0, 1, kSeqLen, Precision::kFp32));
  const Bytes act1 = std::llround(StageActivationBytes(c, p, 1, 1, kSeqLen, Precision::kFp32));
  const Bytes p0 = StageParams(c, p, 0), p1 = StageParams(c, p, 1);
  const Bytes w0 = Work(c, p, 0), w1 = Work(c, p, 1);
  CHECK(plain.peak_memory == std::max(16 * p0 + 2 * act0 + w0, 16 * p1 + act1 + w1));
  CHECK(sharded.peak_memory == std::max(12 * p0 + 2 * act0 + w0, 12 * p1 + act1 + w1));  // 8 + 8 / 2
  // With the data-parallel traffic costed, the sharded step also sums the
  // updated parameters back after the optimizer: a ring all-reduce of the
  // largest rank's 4-byte parameters, here at 1 byte a ns, D = 2.
  o.cost_data_parallel = true;
  o.dp_link = Link{0, 1.0};
  o.shard_optimizer = false;
  const PlanCandidate plain_dp = OneFOneB8(SearchPlans(o));
  o.shard_optimizer = true;
  const PlanCandidate sharded_dp = OneFOneB8(SearchPlans(o));
  CHECK(sharded_dp.step_time == plain_dp.step_time + 4 * std::max(p0, p1));
}

TEST_CASE("plan: with replicas, each stage's REDUCE_GRAD is in the step at the ring all-reduce's time", "[plan]") {
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.ranks = 1;
  o.dp = 2;
  o.global_batch = 16;  // 8 sequences a replica
  o.schedules = {"1f1b"};
  auto best = [&] {
    const PlanSearchResult r = SearchPlans(o);
    for (const PlanCandidate& p : r.fitting) {
      if (p.microbatches == 8) return p;
    }
    FAIL("no M=8 candidate");
    return PlanCandidate{};
  };
  const PlanCandidate free = best();
  CHECK(free.ranks == 1);
  CHECK(free.dp == 2);
  o.cost_data_parallel = true;
  o.dp_link = Link{5000, 1.0};  // 5 us, 1 GB/s = 1 byte a ns
  const PlanCandidate costed = best();
  // One stage holds the whole model; its REDUCE_GRAD follows the last B:
  // 2 (D - 1) / D x 4 bytes a parameter / bandwidth + latency.
  const TimeNs ring = 4 * StageParams(c, free.partition, 0) + 5000;
  CHECK(costed.step_time == free.step_time + ring);
}

namespace {

// Each fitting candidate as (schedule, M, v, partition, recompute) -> step time.
std::map<std::string, TimeNs> StepTimes(const PlanSearchOptions& o) {
  std::map<std::string, TimeNs> out;
  for (const PlanCandidate& c : SearchPlans(o).fitting) {
    out[c.schedule + " M=" + std::to_string(c.microbatches) + " v=" + std::to_string(c.virtual_stages) + " " +
        c.partition.ToString() + (c.recompute ? " recomputed" : "")] = c.step_time;
  }
  return out;
}

PlanSearchOptions TwoLinks(int ranks, int dp) {
  PlanSearchOptions o = Options(BalancedModel(), Bytes{1} << 30);
  o.ranks = ranks;
  o.dp = dp;
  o.schedules = {"gpipe", "1f1b", "interleaved-1f1b", "zb-v"};
  o.cost_data_parallel = true;
  o.link = Link{1000, 2.0};      // in a node: 1 us, 2 bytes a ns
  o.dp_link = Link{20000, 0.1};  // between nodes: 20 us, 0.1 byte a ns
  return o;
}

TEST_CASE("plan on nodes: messages and rings inside a node take the link, across nodes the network", "[plan]") {
  // One node for all: the data-parallel ring runs on the link too.
  PlanSearchOptions o = TwoLinks(2, 2);
  PlanSearchOptions flat = o;
  flat.dp_link = o.link;
  o.gpus_per_node = 4;
  const auto one_node = StepTimes(o);
  CHECK(one_node == StepTimes(flat));
  CHECK(one_node != StepTimes(TwoLinks(2, 2)));  // the nodes changed something
  // A node per GPU: every message and ring crosses nodes.
  o.gpus_per_node = 1;
  flat = o;
  flat.gpus_per_node = 0;
  flat.link = o.dp_link;
  const auto own_nodes = StepTimes(o);
  CHECK(own_nodes == StepTimes(flat));
  CHECK(own_nodes != StepTimes(TwoLinks(2, 2)));
  // Two GPUs a node, K = 2, D = 2: each pipeline in a node, the replicas on
  // two: as without nodes (messages on the link, the ring on the network).
  o.gpus_per_node = 2;
  flat = o;
  flat.gpus_per_node = 0;
  CHECK(StepTimes(o) == StepTimes(flat));
}

TEST_CASE("plan on nodes: a pipeline that spans nodes sits between all-link and all-network", "[plan]") {
  // K = 3 on nodes of 2: ranks 0 and 1 share a node, 1 -> 2 and the
  // wrap-around 2 -> 0 cross. Delays only add in the simulator (each rank's
  // order is fixed), so each candidate's step lies between the two.
  PlanSearchOptions o = TwoLinks(3, 1);
  o.gpus_per_node = 2;
  PlanSearchOptions fast = o, slow = o;
  fast.gpus_per_node = slow.gpus_per_node = 0;
  slow.link = o.dp_link;
  const auto mixed = StepTimes(o), lower = StepTimes(fast), upper = StepTimes(slow);
  REQUIRE(mixed.size() == lower.size());
  int strictly = 0;
  for (const auto& [name, t] : mixed) {
    INFO(name);
    REQUIRE(lower.count(name) == 1);
    CHECK(lower.at(name) <= t);
    CHECK(t <= upper.at(name));
    strictly += lower.at(name) < t && t < upper.at(name);
  }
  CHECK(strictly > 0);
}

}  // namespace

TEST_CASE("plan: tensor parallelism costs each rank's share and the layers' all-reduces, by hand", "[plan][tp]") {
  const LlamaConfig c = BalancedModel();  // 4 heads, 2 key/value heads, intermediate 64, 3 layers
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.ranks = 1;
  o.global_batch = 1;  // one microbatch of one sequence on one stage
  o.schedules = {"gpipe"};
  const Partition whole = PartitionUniform(c, 1);
  const TimeNs f1 = std::llround(StageForwardFlops(c, whole, 0, 1, kSeqLen));
  const PlanSearchResult one = SearchPlans(o);
  REQUIRE(one.fitting.size() == 1);
  CHECK(one.fitting[0].step_time == 3 * f1);  // F + B, B = 2F
  o.tp = 2;
  o.tp_link = Link{1000, 1.0};  // 1 us, one byte a ns
  const PlanSearchResult two = SearchPlans(o);
  REQUIRE(two.fitting.size() == 1);
  const PlanCandidate& best = two.fitting[0];
  CHECK(best.tp == 2);
  // A rank computes its share: half the heads, MLP columns and head rows
  // (the vocabulary), the norms whole.
  const LlamaConfig share = TensorParallelShare(c, 2);
  const TimeNs f2 = std::llround(StageForwardFlops(share, whole, 0, 1, kSeqLen));
  CHECK(f2 < f1);
  // Each all-reduce: a ring over 2 ranks moves 2 (2 - 1) / 2 = 1 x the
  // (1, 16, 32) fp32 activation, 2048 bytes, after 1 us. Two per layer in
  // F and two in B, over 3 layers; in F one more for the split embedding's
  // rows, in B one more for the split head. B's run while the region's
  // weights' products do, which take W's time (F here) shared by
  // parameters: 1024 of the share's 18976 for q/k/v (h x (16 + 2 x 8)),
  // 2048 for gate/up, 5152 for the head (161 x 32). Each product outlasts
  // its sum: B is its compute.
  const int64_t linear = StageLinearParams(share, whole, 0);
  REQUIRE(linear == 3 * (32 * 16 * 2 + 2 * 32 * 8 + 3 * 32 * 32) + 161 * 32);
  const TimeNs qkv = std::llround(static_cast<double>(f2) * 1024 / linear);
  const TimeNs ring = 1000 + 2048;
  REQUIRE(qkv > ring);
  CHECK(best.step_time == (f2 + 7 * ring) + 2 * f2);
  // Over a link 25 times slower, q/k/v's products hide only part of their
  // sum, gate/up's (twice as long) and the head's all of it.
  o.tp_link = Link{1000, 0.04};
  const TimeNs slow = 1000 + 51200;
  const TimeNs gate_up = std::llround(static_cast<double>(f2) * 2048 / linear);
  REQUIRE(qkv < slow);
  REQUIRE(gate_up > slow);
  CHECK(SearchPlans(o).fitting.at(0).step_time == (f2 + 7 * slow) + (2 * f2 + 3 * (slow - qkv)));
  // A split backward's I sums the input's gradient before W's products
  // exist: blocking, all seven.
  o.schedules = {"zb-h1"};
  CHECK(SearchPlans(o).fitting.at(0).step_time == (f2 + 7 * slow) + (f2 + 7 * slow) + f2);
  o.schedules = {"gpipe"};
  o.tp_link = Link{1000, 1.0};
  // Its model state is its share's parameters, the embedding's included.
  const Bytes act = std::llround(StageActivationBytes(share, whole, 0, 1, kSeqLen, Precision::kFp32));
  CHECK(best.peak_memory == 16 * TensorParallelStageParams(c, whole, 0, 2) + act + Work(share, whole, 0));
  CHECK(best.peak_memory < one.fitting[0].peak_memory);
  // On nodes of one GPU the group's two ranks are on two nodes: its ring
  // takes the network between them.
  o.gpus_per_node = 1;
  o.dp_link = Link{5000, 0.5};
  const TimeNs network = 5000 + 4096;
  REQUIRE(qkv > network);
  CHECK(SearchPlans(o).fitting[0].step_time == (f2 + 7 * network) + 2 * f2);
  // A group is T consecutive world ranks ((d K + k) T + t, as train numbers
  // them): at K = 2, T = 2 on nodes of 2 GPUs each group is inside a node,
  // so it costs what it does on one node of 4 (messages between stages cost
  // the same either way here: link == dp_link); on nodes of 1 its rings
  // cross the network.
  PlanSearchOptions n = Options(c, Bytes{1} << 40);
  n.ranks = 2;
  n.tp = 2;
  n.global_batch = 4;
  n.link = Link{2000, 0.25};
  n.dp_link = n.link;
  n.tp_link = Link{100, 10.0};
  n.gpus_per_node = 4;
  const TimeNs one_node = SearchPlans(n).fitting[0].step_time;
  n.gpus_per_node = 2;
  CHECK(SearchPlans(n).fitting[0].step_time == one_node);
  n.gpus_per_node = 1;
  CHECK(SearchPlans(n).fitting[0].step_time > one_node);
  // A T the model does not split is refused.
  o.tp = 3;
  CHECK_THROWS_WITH(SearchPlans(o), "--tp 3: the model's num_attention_heads 4 is not a multiple of 3");
}

TEST_CASE("plan: sequence parallelism costs gathers and reduce-scatters, and 1/T of the norms' activations, by hand",
          "[plan][tp]") {
  const LlamaConfig c = BalancedModel();  // 3 layers, untied head
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.ranks = 1;
  o.global_batch = 1;
  o.tp = 2;
  o.tp_link = Link{1000, 1.0};  // 1 us, one byte a ns
  o.schedules = {"gpipe"};
  const PlanCandidate plain = SearchPlans(o).fitting.at(0);
  o.sequence_parallel = true;
  const PlanCandidate sp = SearchPlans(o).fitting.at(0);
  CHECK(sp.sequence_parallel);
  CHECK_FALSE(plain.sequence_parallel);
  const Partition whole = PartitionUniform(c, 1);
  const LlamaConfig share = TensorParallelShare(c, 2);
  const TimeNs f2 = std::llround(StageForwardFlops(share, whole, 0, 1, kSeqLen));
  // An all-gather or reduce-scatter over 2 ranks moves (2 - 1) / 2 of the
  // (1, 16, 32) fp32 activation, 1024 bytes, after 1 us. Six split regions
  // (two a layer): F gathers and reduce-scatters each, reduce-scatters the
  // split embedding's rows and gathers the split head's input: 14. B
  // gathers each exit's gradient (6) and the embedding's gradient (1),
  // blocking; at each of the 7 entries (the head's included) it gathers
  // the input again while the input's gradient is computed and
  // reduce-scatters that gradient while the weights' products run, both
  // hidden here (the products outlast them, as in the test above).
  const TimeNs g = 1000 + 1024;
  const int64_t linear = StageLinearParams(share, whole, 0);
  const TimeNs qkv = std::llround(static_cast<double>(f2) * 1024 / linear);
  const TimeNs gate_up = std::llround(static_cast<double>(f2) * 2048 / linear);
  const TimeNs head = std::llround(static_cast<double>(f2) * 161 * 32 / linear);
  REQUIRE(qkv > g);
  CHECK(sp.step_time == (f2 + 14 * g) + (2 * f2 + 7 * g));
  // The norms keep half the positions: each its fp32 input and 1 / rms,
  // and the output the projections keep, 8h + 4 bytes a token in fp32, of
  // which half are saved, twice a layer and once in the head.
  const double tokens = kSeqLen, h = c.hidden_size;
  const double saved = tokens * (3 * (8 * h + 4) + (8 * h + 4) / 2);
  CHECK(StageActivationBytes(share, whole, 0, 1, kSeqLen, Precision::kFp32, {2}) ==
        Approx(StageActivationBytes(share, whole, 0, 1, kSeqLen, Precision::kFp32) - saved));
  const Bytes act = std::llround(StageActivationBytes(share, whole, 0, 1, kSeqLen, Precision::kFp32, {2}));
  CHECK(sp.peak_memory ==
        16 * TensorParallelStageParams(c, whole, 0, 2) + act + Work(share, whole, 0, Precision::kFp32, {2}));
  CHECK(sp.peak_memory < plain.peak_memory);
  // Split backward: I reduce-scatters the input's gradient and gathers the
  // exit's (12), plus the head's reduce-scatter and the embedding's gather
  // (2), blocking. W gathers each region's input and the head's for the
  // weights' products (7), each started one region ahead: only the first
  // (the head's) waits.
  o.schedules = {"zb-h1"};
  CHECK(SearchPlans(o).fitting.at(0).step_time == (f2 + 14 * g) + (f2 + 14 * g) + (f2 + g));
  // Over a link 50 times slower (G = 52.2 us a gather or reduce-scatter),
  // between q/k/v's products and gate/up's.
  const TimeNs G = 1000 + 51200;
  REQUIRE(qkv < G);
  REQUIRE(gate_up > G);
  REQUIRE(head > 2 * G);
  o.tp_link = Link{1000, 0.02};
  // B: at q/k/v's entries the input's gradient waits for the gather and
  // the sum outlasts the products, 2 (G - qkv) each.
  o.schedules = {"gpipe"};
  CHECK(SearchPlans(o).fitting.at(0).step_time == (f2 + 14 * G) + (2 * f2 + 7 * G + 3 * 2 * (G - qkv)));
  // W, regions in the backward's order: head (H), then gate/up (M) and
  // q/k/v (A) of layers 2, 1, 0. Gather i + 1 is queued when region
  // i - 1's products are, behind gather i; region i's products wait for
  // gather i. By hand, g gathered, c products done (M > G > A, H > 2G):
  //   head  g = G                          c = G + H
  //   M2    g = 2G                         c = G + H + M        (c2)
  //   A2    g = max(2G, G + H) + G         c = c2 + A
  //   M1    g = c2 + G, after A2's c:      c = c2 + G + M       (waits G - A)
  //   A1    g = c2 + 2G                    c = c2 + G + M + A
  //   M0    g = c2 + 2G + M, after A1's c: c = c2 + 2G + 2M     (waits G - A)
  //   A0    g = c2 + 3G + M                c = c2 + 2G + 2M + A
  // W's products take H + 3M + 3A: it waits G + 2 (G - A).
  o.schedules = {"zb-h1"};
  CHECK(SearchPlans(o).fitting.at(0).step_time == (f2 + 14 * G) + (f2 + 14 * G) + (f2 + G + 2 * (G - qkv)));
  o.tp_link = Link{1000, 1.0};
  // A sequence the group cannot split is refused.
  o.seq_len = 15;
  CHECK_THROWS_WITH(SearchPlans(o), "--sequence-parallel: the sequence length 15 is not a multiple of 2 (--tp)");
}

TEST_CASE("plan: searching both layouts ranks the candidates without and with sequence parallelism together",
          "[plan][tp]") {
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.tp = 2;
  o.tp_link = Link{1000, 1.0};
  const auto key = [](const PlanCandidate& p) {
    return std::to_string(p.sequence_parallel) + " " + p.schedule + " " + std::to_string(p.microbatches) + " " +
           p.partition.ToString() + " " + std::to_string(p.step_time) + " " + std::to_string(p.peak_memory);
  };
  const auto keys = [&key](const PlanSearchResult& r) {
    std::multiset<std::string> k;
    for (const PlanCandidate& p : r.fitting) k.insert(key(p));
    return k;
  };
  const PlanSearchResult off = SearchPlans(o);
  o.sequence_parallel = true;
  const PlanSearchResult on = SearchPlans(o);
  o.sequence_parallel = false;
  o.search_sequence_parallel = true;
  const PlanSearchResult both = SearchPlans(o);
  // The union of the two searches, costed alike, best first.
  std::multiset<std::string> expected = keys(off);
  for (const std::string& k : keys(on)) expected.insert(k);
  CHECK(keys(both) == expected);
  CHECK(both.simulated == off.simulated + on.simulated);
  for (size_t i = 1; i < both.fitting.size(); ++i) CHECK(both.fitting[i - 1].step_time <= both.fitting[i].step_time);
  // With free messages the gathers make it slower, so without a limit the
  // best keeps the positions whole; where only its smaller activations fit,
  // the best is the sequence-parallel one's.
  REQUIRE(off.fitting.front().step_time < on.fitting.front().step_time);
  CHECK_FALSE(both.fitting.front().sequence_parallel);
  // (One pipeline rank: no layers to move, so no refitted partition fits.)
  o.ranks = 1;
  o.search_sequence_parallel = false;
  Bytes least_off = Bytes{1} << 40;
  for (const PlanCandidate& p : SearchPlans(o).fitting) least_off = std::min(least_off, p.peak_memory);
  o.search_sequence_parallel = true;
  o.memory_per_rank = least_off - 1;
  const PlanSearchResult tight = SearchPlans(o);
  REQUIRE_FALSE(tight.fitting.empty());
  for (const PlanCandidate& p : tight.fitting) CHECK(p.sequence_parallel);
  // A sequence the group cannot split: only the whole positions, no refusal.
  o.memory_per_rank = Bytes{1} << 40;
  o.seq_len = 15;
  const PlanSearchResult odd = SearchPlans(o);
  REQUIRE_FALSE(odd.fitting.empty());
  for (const PlanCandidate& p : odd.fitting) CHECK_FALSE(p.sequence_parallel);
}

}  // namespace pplab::cli::plan_search_parallel_test
