// The plan search (tools/plan_search.h) on one pipeline: the candidates it costs, refits, keeps
// and ranks, against hand-computed step times and peaks (layouts: plan_search_parallel_test.cpp).
#include "tools/plan_search.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "models/flops.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/schedule_io.h"
#include "sim/simulator.h"
#include "tests/tools/plan_test_support.h"

namespace pplab::cli::plan_search_test {

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
    // The overlapped pairs one part after the other, as pplab's executor runs them.
    CostModel in_turn = CostModel::Uniform(4, cost, o.link);
    in_turn.SetPairsInTurn(true);
    CHECK(cand.step_time == Simulate(s, in_turn).makespan);
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
    stages += FormulaStage(c, p, s, 2, 3 * StageForwardFlops(c, p, s, 2, kSeqLen) / 1e6);
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
  CHECK_THROWS_WITH(ParseByteSize("-1GB", "--m"),
                    Catch::Contains("--m: '-1GB' must be a size from 1 byte to 1e15 bytes"));
  // Below one byte is no size (1e-3 planned for 0 bytes, 0.5 for 1).
  CHECK_THROWS_WITH(ParseByteSize("1e-3", "--m"), Catch::Contains("--m: '1e-3' must be a size from 1 byte"));
  CHECK(ParseByteSize("1", "--m") == 1);
  // Decimal only: stod reads hex, infinities and NaN too (0x10 was 16 bytes).
  for (const char* text : {"0x10", "0X1p4GB", "inf", "nan", "-inf", "x1", ""}) {
    INFO(text);
    CHECK_THROWS_WITH(ParseByteSize(text, "--m"), Catch::Contains("is not a size like 8GiB"));
  }
  CHECK(ParseByteSize(".5KiB", "--m") == 512);
}

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
  // More ranks than layers: no pipeline splits the model that far.
  const Bytes tiny = state / (c.num_hidden_layers + 1);
  CHECK_THAT(ModelStateHint(c, tiny, 1, false, 2, "pipeline ranks"),
             Catch::EndsWith(" pipeline ranks of this memory, more than its " + std::to_string(c.num_hidden_layers) +
                             " layers can be split into"));
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

TEST_CASE("plan: graphed profiles cost each stage's graph slots and search whole backwards only", "[plan][graphs]") {
  const LlamaConfig c = BalancedModel();
  const Partition p = PartitionUniform(c, 2);
  // A profile --cuda-graphs: each stage's slot 1.5 times its whole
  // activations' formula (its pool holds them with the temporaries).
  const auto slot = [&](const Partition& part, int s, int mb) {
    const ActivationParts a = StageActivationParts(c, part, s, mb, kSeqLen, Precision::kFp32);
    return 1.5 * (a.layers + a.head + a.exact);
  };
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    stages += FormulaStage(c, p, s, 2, 3 * StageForwardFlops(c, p, s, 2, kSeqLen) / 1e6,
                           ", \"graph_slot_bytes\": " + std::to_string(std::llround(slot(p, s, 2))));
  }
  const CostModel profile = CostModel::FromJson(ProfileJson(c, stages, "\"cuda_graphs\": true, "), "graphs.json");
  const CostFit fit = FitProfile(profile, c);
  REQUIRE(fit.graph_slot_scale.has_value());
  CHECK(*fit.graph_slot_scale == Approx(1.5).epsilon(1e-5));
  CHECK_FALSE(FitProfile(CostModel::FromJson(ProfileJson(c, FormulaStage(c, p, 0, 2, 1) + FormulaStage(c, p, 1, 2, 1)),
                                             "eager.json"),
                         c)
                  .graph_slot_scale.has_value());
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.fit = fit;
  o.cuda_graphs = true;
  o.schedules.clear();  // every family the graphs allow
  o.recompute = {false, true};
  const PlanSearchResult r = SearchPlans(o);
  REQUIRE_FALSE(r.fitting.empty());
  for (const PlanCandidate& cand : r.fitting) {
    INFO(cand.schedule << " M=" << cand.microbatches);
    CHECK_FALSE(FindGenerator(cand.schedule).split_backward);
    CHECK_FALSE(cand.recompute);
    // Every stage of the candidate holds slots of its fitted size, one per
    // microbatch its rank holds at once.
    const CandidateModel m = CandidateCostModel(o, cand);
    for (StageId s = 0; s < m.costs.NumStages(); ++s) {
      const Partition& part = cand.partition;
      REQUIRE(m.costs.Stage(s).graph_slot_bytes.has_value());
      CHECK(static_cast<double>(*m.costs.Stage(s).graph_slot_bytes) ==
            Approx(slot(part, s % part.NumStages(), cand.microbatch_size)).margin(1));
    }
    CHECK(cand.peak_parts.graphs > 0);
  }
  // What graphed stages cannot run is refused, in one line.
  PlanSearchOptions split = o;
  split.schedules = {"zb-h1"};
  CHECK_THROWS_WITH(SearchPlans(split), Catch::Contains("--schedules zb-h1: the profiles ran as CUDA graphs"));
  PlanSearchOptions recompute = o;
  recompute.recompute = {true};
  CHECK_THROWS_WITH(SearchPlans(recompute), Catch::StartsWith("--recompute all: the profiles ran as CUDA graphs"));
  PlanSearchOptions tp = o;
  tp.tp = 2;
  CHECK_THROWS_WITH(SearchPlans(tp), Catch::StartsWith("--tp 2: the profiles ran as CUDA graphs"));
}

TEST_CASE("plan ranks step times to the microsecond, then the leaner plan first", "[plan]") {
  // Fitted costs round to the nanosecond: 3 ns apart is a tie.
  std::vector<PlanCandidate> c(3);
  c[0].schedule = "a";
  c[0].step_time = 62663214;
  c[0].peak_memory = 65700000;
  c[1].schedule = "b";
  c[1].step_time = 62663217;
  c[1].peak_memory = 49100000;
  c[2].schedule = "c";
  c[2].step_time = 62662000;  // a microsecond less: first, whatever its memory
  c[2].peak_memory = 90000000;
  RankCandidates(c);
  CHECK(c[0].schedule == "c");
  CHECK(c[1].schedule == "b");
  CHECK(c[2].schedule == "a");
}

}  // namespace pplab::cli::plan_search_test
