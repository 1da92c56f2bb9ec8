// The plan search (tools/plan_search.h): the candidates it costs, refits,
// keeps and ranks, against hand-computed step times and peaks.
#include "tools/plan_search.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "models/flops.h"
#include "models/tensor_parallel.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/schedule_io.h"
#include "sim/simulator.h"
#include "tests/tools/plan_test_support.h"

namespace pplab::cli {

TEST_CASE("plan: picks the fastest plan, whose step time is the hand formula", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const PlanSearchResult r = SearchPlans(Options(c, Bytes{1} << 40));
  // gpipe and 1f1b x M in {1, 2, 4, 8}; "parameters" equals "uniform" here (2,1), so it is not repeated.
  CHECK(r.simulated == 8);
  CHECK(r.over_memory == 0);
  const PlanCandidate& best = r.fitting.front();
  // Uniform stages and free links: makespan (M + K - 1)(F + B), B = 2F, F = mb * f1 where f1 is one
  // sequence's stage FLOPs (= ns). With G = 8: M = 8 gives 9 * 3 * f1, the least over M.
  const double f1 = StageForwardFlops(c, best.partition, 0, 1, kSeqLen);
  const TimeNs F = std::llround(f1);
  CHECK(best.microbatches == 8);
  CHECK(best.microbatch_size == 1);
  CHECK(best.step_time == (8 + 2 - 1) * (F + 2 * F));
  CHECK(best.bubble_fraction == Approx(1.0 / 9.0));  // (K-1)/(M+K-1)
  // gpipe ties on time but keeps all 8 microbatches' activations: 1f1b (2 in flight) wins on memory.
  CHECK(best.schedule == "1f1b");
  REQUIRE(r.fitting.size() == 8);
  CHECK(r.fitting[1].schedule == "gpipe");
  CHECK(r.fitting[1].step_time == best.step_time);
  CHECK(r.fitting[1].peak_memory > best.peak_memory);
  for (size_t i = 1; i < r.fitting.size(); ++i) CHECK(r.fitting[i - 1].step_time <= r.fitting[i].step_time);
  // Peak memory of rank 0: 16 bytes per parameter of stage 0, plus K = 2 microbatches of activations.
  const Bytes weights = 16 * StageParams(c, best.partition, 0);
  const Bytes act = std::llround(StageActivationBytes(c, best.partition, 0, 1, kSeqLen, Precision::kFp32));
  const Bytes weights1 = 16 * StageParams(c, best.partition, 1);
  const Bytes act1 = std::llround(StageActivationBytes(c, best.partition, 1, 1, kSeqLen, Precision::kFp32));
  // And during an action, its stage's workspace.
  const Bytes work = Work(c, best.partition, 0), work1 = Work(c, best.partition, 1);
  CHECK(best.peak_memory == std::max(weights + 2 * act + work, weights1 + act1 + work1));
  CHECK(best.tokens_per_second == Approx(8.0 * kSeqLen / (best.step_time * 1e-9)));
}

TEST_CASE("plan: a model with tied embeddings pays the swap of that weight's gradient between rank 0 and K-1",
          "[plan]") {
  LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.link = Link{1000, 10.0};  // 1 us, 10 GB/s
  const PlanCandidate untied = OneFOneB8(SearchPlans(o));
  c.tie_word_embeddings = true;
  o.config = c;
  const PlanCandidate tied = OneFOneB8(SearchPlans(o));
  // Same stages (the last still holds its copy), one exchange of the
  // vocab x hidden fp32 gradient after the pipeline's last action.
  const Bytes bytes = 4 * EmbeddingParams(c);
  CHECK(tied.peak_memory == untied.peak_memory);
  CHECK(tied.step_time == untied.step_time + 1000 + std::llround(bytes / 10.0));
}

TEST_CASE("plan: every candidate kept fits the memory limit, too small a limit is refused", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const PlanSearchResult all = SearchPlans(Options(c, Bytes{1} << 40));
  // A limit just under gpipe's M = 8 peak rules out that plan and every bigger one.
  Bytes gpipe8 = 0;
  for (const PlanCandidate& p : all.fitting) {
    if (p.schedule == "gpipe" && p.microbatches == 8) gpipe8 = p.peak_memory;
  }
  REQUIRE(gpipe8 > 0);
  const PlanSearchResult r = SearchPlans(Options(c, gpipe8 - 1));
  CHECK(r.over_memory >= 1);
  CHECK(r.fitting.size() + r.over_memory == 8);
  for (const PlanCandidate& p : r.fitting) CHECK(p.peak_memory <= gpipe8 - 1);
  CHECK_THROWS_WITH(SearchPlans(Options(c, 1000)), Catch::Contains("no plan fits in --memory-per-rank 1000 bytes"));
}

TEST_CASE("plan: recomputed candidates cost one F more per microbatch and fit where no other does", "[plan]") {
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.recompute = {false, true};
  const PlanSearchResult both = SearchPlans(o);
  CHECK(both.simulated == 16);  // the 8 candidates, each both ways
  // Recomputing never makes a step faster, so the fastest does not recompute.
  CHECK_FALSE(both.fitting.front().recompute);
  Bytes smallest_plain = Bytes{1} << 40;
  for (const PlanCandidate& p : both.fitting) {
    if (!p.recompute) smallest_plain = std::min(smallest_plain, p.peak_memory);
  }
  // Just under that, and under what refitting then finds (a layer moved
  // to rank 1, partition 1,2), no partition fits without recomputation.
  o.recompute = {false};
  Bytes limit = smallest_plain - 1;
  for (int tries = 0; tries < 4; ++tries) {
    o.memory_per_rank = limit;
    try {
      const PlanSearchResult refitted = SearchPlans(o);
      for (const PlanCandidate& p : refitted.fitting) limit = std::min(limit, p.peak_memory - 1);
    } catch (const Error&) {
      break;
    }
  }
  o.memory_per_rank = limit;
  CHECK_THROWS_WITH(SearchPlans(o), Catch::Contains("no plan fits"));
  o.recompute = {false, true};
  const PlanSearchResult r = SearchPlans(o);
  REQUIRE_FALSE(r.fitting.empty());
  for (const PlanCandidate& p : r.fitting) CHECK(p.recompute);
  // GPipe and 1F1B at M = 8 tie on time: (M + K - 1)(F + B + F), B = 2F.
  const TimeNs F = std::llround(StageForwardFlops(c, r.fitting.front().partition, 0, 1, kSeqLen));
  CHECK(r.fitting.front().step_time == (8 + 2 - 1) * (F + 2 * F + F));
  const auto it = std::find_if(r.fitting.begin(), r.fitting.end(),
                               [](const PlanCandidate& p) { return p.schedule == "1f1b" && p.microbatches == 8; });
  REQUIRE(it != r.fitting.end());
  const PlanCandidate& best = *it;
  CHECK(best.step_time == r.fitting.front().step_time);
  // Rank 0 holds its microbatches' tokens only (0 bytes) and rebuilds one
  // microbatch's activations in each B; rank 1 also holds the input of its
  // one microbatch in flight.
  const Bytes act = std::llround(StageActivationBytes(c, best.partition, 0, 1, kSeqLen, Precision::kFp32));
  const Bytes act1 = std::llround(StageActivationBytes(c, best.partition, 1, 1, kSeqLen, Precision::kFp32));
  const Bytes input1 = std::llround(StageInputBytes(c, 1, 1, kSeqLen));
  CHECK(input1 == 16 * (4 * 32 + 8));
  CHECK(best.peak_memory ==
        std::max(16 * StageParams(c, best.partition, 0) + act + Work(c, best.partition, 0),
                 16 * StageParams(c, best.partition, 1) + input1 + act1 + Work(c, best.partition, 1)));
  // Without recomputation the same limit fits nothing, and says what would.
  o.recompute = {false};
  CHECK_THROWS_WITH(SearchPlans(o), Catch::Contains("--recompute auto also costs every candidate"));
}

TEST_CASE("plan: a plan over memory is refitted with fewer layers on the rank over the limit", "[plan]") {
  // Five layers: 3 + 2 with the head is balanced. (With three, 1 + 2 would put
  // the head's workspace beside two layers: heavier than 2 + 1.)
  LlamaConfig c = BalancedModel();
  c.num_hidden_layers = 5;
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.schedules = {"1f1b"};
  const PlanCandidate named = OneFOneB8(SearchPlans(o));
  REQUIRE(named.partition.ToString() == "3,2");  // the fastest named partition
  // 1F1B on 2 ranks: rank 0 holds 2 microbatches in flight, rank 1 one.
  const auto peak = [&c](const Partition& p) {
    const auto act = [&](int s) { return std::llround(StageActivationBytes(c, p, s, 1, kSeqLen, Precision::kFp32)); };
    return std::max(16 * StageParams(c, p, 0) + 2 * act(0) + Work(c, p, 0),
                    16 * StageParams(c, p, 1) + act(1) + Work(c, p, 1));
  };
  CHECK(named.peak_memory == peak(named.partition));
  o.memory_per_rank = named.peak_memory - 1;
  const PlanSearchResult r = SearchPlans(o);
  CHECK(r.refit_starts >= 1);
  CHECK(r.refitted >= 1);
  const PlanCandidate fitted = OneFOneB8(r);
  // Rank 0 keeps two layers, rank 1 takes the other three with the LM head.
  CHECK(fitted.partition_method == "fitted");
  CHECK(fitted.partition.ToString() == "2,3");
  CHECK(TrainPartition(fitted) == "2,3");
  CHECK(TrainPartition(named) == named.partition_method);
  CHECK(fitted.peak_memory == peak(fitted.partition));
  CHECK(fitted.peak_memory <= o.memory_per_rank);
  // Rank 1 (3 layers and the head, 4 layer-units F1) is now the bottleneck:
  // busy from stage 0's first F until its 8 F + B, then stage 0's last B.
  const TimeNs F0 = std::llround(StageForwardFlops(c, fitted.partition, 0, 1, kSeqLen));
  const TimeNs F1 = std::llround(StageForwardFlops(c, fitted.partition, 1, 1, kSeqLen));
  CHECK(F1 == 2 * F0);
  CHECK(fitted.step_time == F0 + 8 * (F1 + 2 * F1) + 2 * F0);
  CHECK(fitted.step_time > named.step_time);  // the price of the memory
}

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

TEST_CASE("plan: in bf16 analytic costs hold each stage's Linear weights cast, 2 bytes a parameter, to the step's end",
          "[plan]") {
  CHECK(AnalyticFit(1e9, Precision::kFp32).cast_bytes_per_param == 0);
  CHECK(AnalyticFit(1e9, Precision::kBf16).cast_bytes_per_param == 2);  // costed below as a fit's 2 is
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  const PlanCandidate fp32 = OneFOneB8(SearchPlans(o));
  CHECK(fp32.peak_parts.casts == 0);
  o.precision = Precision::kBf16;
  o.fit = AnalyticFit(1e9, Precision::kBf16);
  const PlanCandidate bf16 = OneFOneB8(SearchPlans(o));
  const Partition& p = bf16.partition;
  CHECK(bf16.peak_parts.casts == 2 * StageLinearParams(c, p, bf16.peak_rank));  // stage r on rank r
  CHECK(bf16.step_time == fp32.step_time);                                      // the casts cost memory, not time
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

TEST_CASE("plan: dualpipe is a candidate with two copies' weights on every rank and its simulated step time",
          "[plan]") {
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.schedules = {"dualpipe"};
  const PlanSearchResult r = SearchPlans(o);
  // Of M in {1, 2, 4, 8}, DualPipe's rule (M even, M >= 2K) keeps 4 and 8.
  CHECK(r.skipped == 2);
  REQUIRE(r.fitting.size() == 2);
  for (const PlanCandidate& cand : r.fitting) {
    INFO("M=" << cand.microbatches);
    CHECK(cand.stages == 4);                    // 2K stages ...
    CHECK(cand.partition.ToString() == "2,1");  // ... running the K parts twice
    const Schedule s = CandidateSchedule(cand);
    REQUIRE(s.NumPipelines() == 2);
    // Every stage costs what its part costs; the two parts cost the same here.
    const TimeNs F = std::llround(StageForwardFlops(c, cand.partition, 0, cand.microbatch_size, kSeqLen));
    StageCost cost;
    cost.forward = F;
    cost.backward = 2 * F;
    cost.backward_input = F;
    cost.backward_weight = F;
    CHECK(cand.step_time == Simulate(s, CostModel::Uniform(4, cost, o.link)).makespan);
    // Each rank holds part 0 of one copy and part 1 of the other: the whole model's weights.
    const Bytes weights = 16 * (StageParams(c, cand.partition, 0) + StageParams(c, cand.partition, 1));
    CHECK(cand.peak_memory > weights);
  }
}

TEST_CASE("plan: the best candidate's schedule round-trips through the schedule JSON", "[plan]") {
  const PlanSearchResult r = SearchPlans(Options(BalancedModel(), Bytes{1} << 40));
  const Schedule s = CandidateSchedule(r.fitting.front());
  const Schedule back = ScheduleFromJson(ScheduleToJson(s), "plan.json");
  CHECK(back.name == "1f1b");
  CHECK(back.ranks == 2);
  CHECK(back.microbatches == 8);
  CHECK(back.programs == s.programs);
}

TEST_CASE("plan: a profile's own configuration uses its measured costs, others are fitted", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const Partition p = PartitionUniform(c, 2);
  // Measured at 2 sequences per microbatch: F = 3 ns per FLOP (B = 2F, I = W = F), bytes = the formulas.
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    const double f = 3 * StageForwardFlops(c, p, s, 2, kSeqLen) / 1e6;  // ms
    stages += std::string(s ? "," : "") + "{\"forward_ms\": " + std::to_string(f) +
              ", \"backward_ms\": " + std::to_string(2 * f) + ", \"activation_bytes\": " +
              std::to_string(std::llround(StageActivationBytes(c, p, s, 2, kSeqLen, Precision::kFp32))) + "}";
  }
  const CostModel profile = CostModel::FromJson(ProfileJson(c, stages), "cost.json");
  const CostFit fit = FitProfile(profile, c);
  CHECK(fit.ns_per_flop[0] == Approx(3.0).epsilon(1e-6));
  CHECK(fit.ns_per_flop[1] == Approx(6.0).epsilon(1e-6));
  CHECK(fit.ns_per_flop[2] == Approx(3.0).epsilon(1e-6));
  CHECK(fit.activation_scale == Approx(1.0).epsilon(1e-6));
  // One microbatch size: no fixed time can be told from the time per FLOP.
  CHECK(fit.ranges.empty());
  CHECK_FALSE(fit.At(1).HasFixed());
  CHECK(fit.At(1).ns_per_flop[0] == fit.ns_per_flop[0]);
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.fit = fit;
  o.profiles = {&profile};
  const PlanSearchResult r = SearchPlans(o);
  int measured = 0;
  for (const PlanCandidate& cand : r.fitting) {
    measured += cand.measured_costs;
    if (cand.measured_costs) CHECK(cand.microbatch_size == 2);
  }
  CHECK(measured == 2);  // gpipe and 1f1b at M = 4 (2 sequences each)
  // Fitted and measured costs agree here, so M = 8 is still the best: 9 * 3 * (3 f1).
  const TimeNs F = std::llround(3 * StageForwardFlops(c, p, 0, 1, kSeqLen));
  CHECK(r.fitting.front().step_time == Approx(static_cast<double>(9 * 3 * F)).margin(9 * 3));
}

TEST_CASE("plan: byte sizes take decimal and binary suffixes", "[plan]") {
  CHECK(ParseByteSize("8GiB", "--m") == 8LL * 1024 * 1024 * 1024);
  CHECK(ParseByteSize("500MB", "--m") == 500000000);
  CHECK(ParseByteSize("1e9", "--m") == 1000000000);
  CHECK(ParseByteSize("2k", "--m") == 2000);
  CHECK_THROWS_WITH(ParseByteSize("8 parsecs", "--m"), Catch::Contains("--m: unknown unit"));
  CHECK_THROWS_WITH(ParseByteSize("lots", "--m"), Catch::Contains("--m: 'lots' is not a size"));
  CHECK_THROWS_WITH(ParseByteSize("-1GB", "--m"), Catch::Contains("must be a positive size"));
}

}  // namespace pplab::cli

namespace pplab::cli {

TEST_CASE("plan: zb-auto is never slower than a zb-h1 or zb-h2 candidate that fits, and keeps to the limit",
          "[plan][zb-auto]") {
  PlanSearchOptions o = Options(BalancedModel(), Bytes{1} << 40);
  o.schedules = {"zb-h1", "zb-h2", "zb-auto"};
  o.link = Link{20000, 0};  // 20 us per message, so the orders differ
  const PlanSearchResult all = SearchPlans(o);
  // A limit between zb-h1's and zb-h2's peak at M = 8 rules zb-h2 out there.
  Bytes h1 = 0, h2 = 0;
  for (const PlanCandidate& c : all.fitting) {
    if (c.microbatches == 8 && c.schedule == "zb-h1") h1 = c.peak_memory;
    if (c.microbatches == 8 && c.schedule == "zb-h2") h2 = c.peak_memory;
  }
  REQUIRE(h1 < h2);
  for (Bytes limit : {Bytes{1} << 40, h1}) {
    o.memory_per_rank = limit;
    const PlanSearchResult r = SearchPlans(o);
    for (const PlanCandidate& a : r.fitting) {
      if (a.schedule != "zb-auto") continue;
      CHECK(a.peak_memory <= limit);
      for (const PlanCandidate& h : r.fitting) {
        if (h.schedule != "zb-auto" && h.microbatches == a.microbatches && h.partition_method == a.partition_method) {
          INFO("M=" << a.microbatches << " " << h.schedule);
          CHECK(a.step_time <= h.step_time);
        }
      }
      // The plan written is the order searched, and it validates.
      const Schedule s = CandidateSchedule(a);
      CHECK(s.name == "zb-auto");
      CHECK(s.microbatches == a.microbatches);
    }
    // Wherever zb-h1 fits, so does zb-auto (zb-h1 is one of its candidates).
    const auto count = [&](const std::string& name) {
      return std::count_if(r.fitting.begin(), r.fitting.end(),
                           [&](const PlanCandidate& c) { return c.schedule == name; });
    };
    CHECK(count("zb-auto") >= count("zb-h1"));
    CHECK(count("zb-h1") >= 1);
    if (limit == h1) CHECK(count("zb-h2") < count("zb-h1"));
  }
}

}  // namespace pplab::cli

namespace pplab::cli {
namespace {

// Options whose fitted costs carry a spread: p10 = 0.95 t, p90 = 1.1 t for every kind.
PlanSearchOptions SpreadOptions() {
  PlanSearchOptions o = Options(BalancedModel(), Bytes{1} << 40);
  for (int k = 0; k < 4; ++k) {
    o.fit.has_spread[k] = true;
    o.fit.spread_low[k] = 0.05;
    o.fit.spread_high[k] = 0.1;
  }
  return o;
}

}  // namespace

TEST_CASE("plan ties: two plans of identical costs are a tie, plans far apart are not", "[plan][samples]") {
  const PlanSearchOptions o = SpreadOptions();
  const PlanSearchResult r = SearchPlans(o);
  // gpipe and 1f1b x M in {1, 2, 4, 8}: all 8 sampled (sample_top 10).
  REQUIRE(r.fitting.size() == 8);
  for (const PlanCandidate& c : r.fitting) {
    REQUIRE(c.samples);
    CHECK(c.samples->samples == kTieSamples);
    CHECK(c.samples->seed == kTieSeed);
    CHECK(c.samples->p10 <= c.samples->p50);
    CHECK(c.samples->p50 <= c.samples->p90);
  }
  // Best: M = 8 (9 x 3 f1), gpipe and 1f1b alike; M = 1 takes 2 x 3 x 8 f1, 16/9 as long.
  const PlanCandidate& best = r.fitting.front();
  CHECK(best.microbatches == 8);
  CHECK(best.tie);
  CHECK(Find(r, "gpipe", 8).step_time == Find(r, "1f1b", 8).step_time);
  CHECK(Find(r, best.schedule == "gpipe" ? "1f1b" : "gpipe", 8).tie);
  CHECK_FALSE(Find(r, "gpipe", 1).tie);
  CHECK_FALSE(Find(r, "1f1b", 1).tie);
  // One candidate twice: the same costs draw the same samples, a tie by construction.
  std::vector<PlanCandidate> twice = {Find(r, "gpipe", 2), Find(r, "gpipe", 2)};
  twice[0].tie = twice[1].tie = false;
  MarkTies(o, twice);
  CHECK(twice[0].samples->p50 == twice[1].samples->p50);
  CHECK(twice[1].tie);
  CHECK(twice[0].tie);
}

TEST_CASE("plan ties: deterministic for the fixed seed, and none without spreads", "[plan][samples]") {
  const PlanSearchResult a = SearchPlans(SpreadOptions()), b = SearchPlans(SpreadOptions());
  REQUIRE(a.fitting.size() == b.fitting.size());
  for (size_t i = 0; i < a.fitting.size(); ++i) {
    CHECK(a.fitting[i].samples->p10 == b.fitting[i].samples->p10);
    CHECK(a.fitting[i].samples->p50 == b.fitting[i].samples->p50);
    CHECK(a.fitting[i].samples->p90 == b.fitting[i].samples->p90);
    CHECK(a.fitting[i].tie == b.fitting[i].tie);
  }
  PlanSearchOptions few = SpreadOptions();
  few.sample_top = 3;
  const PlanSearchResult c = SearchPlans(few);
  CHECK(c.fitting[2].samples);
  CHECK_FALSE(c.fitting[3].samples);
  CHECK_FALSE(c.fitting[3].tie);
  // Analytic costs have no spread: nothing sampled, no tie.
  const PlanSearchResult plain = SearchPlans(Options(BalancedModel(), Bytes{1} << 40));
  for (const PlanCandidate& p : plain.fitting) {
    CHECK_FALSE(p.samples);
    CHECK_FALSE(p.tie);
  }
}

TEST_CASE("plan costs each candidate's optimizer by the parameters of its largest rank, both parts under dualpipe",
          "[plan]") {
  const LlamaConfig c = BalancedModel();
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.schedules = {"1f1b", "dualpipe"};
  const PlanSearchResult without = SearchPlans(o);
  o.fit.optimizer_ns_per_param = 1;  // 1 ns per parameter: the step grows by the largest rank's parameter count
  o.fit.loss_allreduce = 7;
  const PlanSearchResult with = SearchPlans(o);
  REQUIRE(with.fitting.size() == without.fitting.size());
  int checked = 0;
  for (const PlanCandidate& a : with.fitting) {
    for (const PlanCandidate& b : without.fitting) {
      if (a.schedule != b.schedule || a.microbatches != b.microbatches || a.partition_method != b.partition_method ||
          a.virtual_stages != b.virtual_stages) {
        continue;
      }
      // dualpipe: each of the 2 ranks holds one part of each copy, the whole model's parameters.
      const Partition& p = a.partition;
      int64_t largest = 0;
      if (a.schedule == "dualpipe") {
        largest = StageParams(c, p, 0) + StageParams(c, p, 1);
      } else {
        largest = std::max(StageParams(c, p, 0), StageParams(c, p, 1));
      }
      INFO(a.schedule << " M=" << a.microbatches << " " << a.partition_method);
      CHECK(a.step_time - b.step_time == 7 + largest);
      ++checked;
    }
  }
  CHECK(checked == static_cast<int>(with.fitting.size()));
}

TEST_CASE("plan: fitted weight casts count 2 bytes a Linear weight from each stage's first compute", "[plan]") {
  const LlamaConfig c = BalancedModel();  // h 32, f 64, kv 2 x 8 = 16
  // Linear weights a layer: q and o 32 x 32 each, k and v 32 x 16 each, gate, up and down 32 x 64 each.
  const Partition two = PartitionUniform(c, 2);  // 2 + 1 layers
  CHECK(StageLinearParams(c, two, 0) == 2 * 9216);
  CHECK(StageLinearParams(c, two, 1) == 9216 + int64_t{c.vocab_size} * 32);  // and the head
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  const PlanCandidate plain = OneFOneB8(SearchPlans(o));
  o.fit.cast_bytes_per_param = 2;
  const PlanCandidate cast = OneFOneB8(SearchPlans(o));
  const Partition& p = plain.partition;
  const Bytes act0 = std::llround(StageActivationBytes(c, p, 0, 1, kSeqLen, Precision::kFp32));
  const Bytes act1 = std::llround(StageActivationBytes(c, p, 1, 1, kSeqLen, Precision::kFp32));
  const Bytes p0 = StageParams(c, p, 0), p1 = StageParams(c, p, 1);
  const Bytes c0 = 2 * StageLinearParams(c, p, 0), c1 = 2 * StageLinearParams(c, p, 1);
  const Bytes w0 = Work(c, p, 0), w1 = Work(c, p, 1);
  CHECK(cast.peak_memory == std::max(16 * p0 + 2 * act0 + c0 + w0, 16 * p1 + act1 + c1 + w1));
  CHECK(cast.peak_memory > plain.peak_memory);
  // The peak rank's model state and the parts of the rest add up to the peak.
  CHECK(cast.model_state + cast.peak_parts.Total() == cast.peak_memory);
  CHECK(cast.model_state == 16 * (cast.peak_rank == 0 ? p0 : p1));
  CHECK(cast.peak_parts.casts == (cast.peak_rank == 0 ? c0 : c1));
  // A profile whose stages held 2 bytes a Linear weight fits 2.
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    stages += std::string(s ? "," : "") + R"({"forward_ms": 1, "backward_ms": 2, "cast_weight_bytes": )" +
              std::to_string(2 * StageLinearParams(c, MakePartition(c, 2, "2,1"), s)) + "}";
  }
  CHECK(FitProfile(CostModel::FromJson(ProfileJson(c, stages), "cost.json"), c).cast_bytes_per_param == Approx(2.0));
}

}  // namespace pplab::cli

namespace pplab::cli {
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
}  // namespace pplab::cli

namespace pplab::cli {
namespace {

TEST_CASE("no plan fits: the hint gives the fewest ranks that hold the model state alone", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const double params = static_cast<double>(ModelParams(c));
  const Bytes state = static_cast<Bytes>(16 * params);
  CHECK(MinRanksForModelState(c, state, 1, false) == 1);
  CHECK(MinRanksForModelState(c, state - 1, 1, false) == 2);
  CHECK(MinRanksForModelState(c, state / 3, 1, false) == 3);
  // Sharded over 2 replicas: 8 + 4 bytes a parameter.
  CHECK(MinRanksForModelState(c, static_cast<Bytes>(12 * params), 2, true) == 1);
  CHECK(ModelStateHint(c, state - 1, 1, false, 2, "GPUs") == "");
  CHECK(ModelStateHint(c, state / 3, 1, false, 2, "GPUs") ==
        "; the model's weights, gradients and AdamW moments alone (16 bytes a parameter) need at least 3 GPUs of "
        "this memory");
  PlanSearchOptions o = Options(c, state / 3);
  CHECK_THROWS_WITH(SearchPlans(o), Catch::EndsWith("need at least 3 pipeline ranks of this memory"));
}

}  // namespace
TEST_CASE("plan costs the compute partition, which evens out the V's ranks where parameters evens out stages",
          "[plan]") {
  // 12 layers and an LM head of about 2.5 layers (its embedding as many
  // parameters, but a lookup): parameters gives stage 0 and the head's
  // stage few layers, which in a V are both on rank 0.
  LlamaConfig c = BalancedModel();
  c.num_hidden_layers = 12;
  c.vocab_size = static_cast<int>(2.5 * LayerTrainingFlops(c, kSeqLen) / (6.0 * c.hidden_size * kSeqLen));
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.ranks = 3;
  o.global_batch = 12;
  o.schedules = {"v-half"};
  const PlanSearchResult r = SearchPlans(o);
  std::map<std::string, TimeNs> best;  // by partition method, over M
  for (const PlanCandidate& p : r.fitting) {
    if (!best.count(p.partition_method) || p.step_time < best[p.partition_method]) {
      best[p.partition_method] = p.step_time;
    }
    if (p.partition_method == "compute") {
      CHECK(p.partition.ToString() == PartitionByCompute(c, VPlacement(3), kSeqLen).ToString());
    }
  }
  REQUIRE(best.count("compute"));
  REQUIRE(best.count("parameters"));
  CHECK(best["compute"] < best["parameters"]);
  CHECK(r.fitting.front().partition_method == "compute");
}

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

}  // namespace pplab::cli
