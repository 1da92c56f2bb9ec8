#include "sim/zb_auto.h"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>

#include "schedules/error.h"
#include "schedules/lowering.h"
#include "schedules/validate.h"
#include "sim/recompute.h"
#include "sim/simulator.h"

namespace pplab::zb_auto_test {
namespace {

// Uniform stage costs in ns: F, full B, W (so I = B - W), message latency;
// an F holds 100 bytes until its I, an I `stash` bytes until its W.
CostModel Costs(int stages, TimeNs f, TimeNs b, TimeNs w, TimeNs latency, Bytes stash = 10) {
  StageCost c;
  c.forward = f;
  c.backward = b;
  c.backward_weight = w;
  c.activation_bytes = 100;
  c.weight_grad_bytes = stash;
  return CostModel::Uniform(stages, c, Link{latency, 0});
}

struct Peak {
  Bytes bytes = 0;
  int inflight = 0;
};

Peak PeakOf(const SimResult& r) {
  Peak p;
  for (const RankMetrics& m : r.per_rank) {
    p.bytes = std::max(p.bytes, m.peak_activation_bytes);
    p.inflight = std::max(p.inflight, m.peak_inflight);
  }
  return p;
}

// The memory `r` used, as zb-auto's limits: its largest peak of bytes and of
// microbatches in flight over the ranks.
AutoOptions MemoryOf(const SimResult& r) {
  const Peak p = PeakOf(r);
  AutoOptions o;
  o.activation_limit = {p.bytes};
  o.inflight_limit = p.inflight;
  return o;
}

struct Versus {
  TimeNs h1, auto1, h2, auto2;
};

// zb-h1 and zb-h2 against zb-auto under each one's memory.
Versus Compare(int K, int M, const CostModel& costs) {
  const SimResult h1 = Simulate(GenerateZeroBubbleH1(K, M), costs);
  const SimResult h2 = Simulate(GenerateZeroBubbleH2(K, M), costs);
  const SimResult a1 = Simulate(GenerateAuto({K, M, 0}, costs, MemoryOf(h1)), costs);
  const SimResult a2 = Simulate(GenerateAuto({K, M, 0}, costs, MemoryOf(h2)), costs);
  CHECK(PeakOf(a1).bytes <= PeakOf(h1).bytes);
  CHECK(PeakOf(a1).inflight <= PeakOf(h1).inflight);
  CHECK(PeakOf(a2).bytes <= PeakOf(h2).bytes);
  CHECK(PeakOf(a2).inflight <= PeakOf(h2).inflight);
  return {h1.makespan, a1.makespan, h2.makespan, a2.makespan};
}

}  // namespace

TEST_CASE("zb-auto is never slower than zb-h1 under zb-h1's memory nor than zb-h2 under zb-h2's", "[zb-auto]") {
  // (F, B, W, latency) in ns: equal F = I = W, unequal, and with messages.
  const std::vector<std::array<TimeNs, 4>> cost_sets = {
      {1000, 2000, 1000, 0}, {1000, 2000, 500, 0}, {1500, 2000, 600, 200}, {1000, 2000, 1000, 500}};
  int compared = 0, faster = 0;
  for (int K = 1; K <= 6; ++K) {
    for (int M = 1; M <= 12; ++M) {
      for (const auto& [f, b, w, latency] : cost_sets) {
        INFO("K=" << K << " M=" << M << " F=" << f << " B=" << b << " W=" << w << " latency=" << latency);
        const Versus v = Compare(K, M, Costs(K, f, b, w, latency));
        CHECK(v.auto1 <= v.h1);
        CHECK(v.auto2 <= v.h2);
        faster += (v.auto1 < v.h1) + (v.auto2 < v.h2);
        ++compared;
      }
    }
  }
  CHECK(compared == 6 * 12 * 4);
  CHECK(faster > 100);
}

// Two lower bounds on a makespan, v = 1, uniform costs, latency per message:
//   - any order: the last rank gets its first input after (K-1)(F + latency)
//     and then has M(F+I+W) of work;
//   - at most K microbatches in flight on rank 0 (zb-h1's memory): before its
//     first I, which needs K forwards and K-1 input gradients down and back
//     up the pipeline, rank 0 can only run its K forwards, so it idles at
//     least (K-1)(I + 2 latency) besides its M(F+I+W) of work.
TimeNs AnyOrderBound(int K, int M, TimeNs f, TimeNs i, TimeNs w, TimeNs latency) {
  return (K - 1) * (f + latency) + M * (f + i + w);
}
TimeNs OneF1BMemoryBound(int K, int M, TimeNs f, TimeNs i, TimeNs w, TimeNs latency) {
  return M * (f + i + w) + (K - 1) * (i + 2 * latency);
}

TEST_CASE("zb-auto beats zb-h1 and zb-h2 when F, I and W differ (K=4, M=8)", "[zb-auto]") {
  // F = 1000, I = 1500, W = 500 ns, free messages; memory is the
  // activations (no bytes held for W), so deferring a W costs none.
  const Versus v = Compare(4, 8, Costs(4, 1000, 2000, 500, 0, 0));
  CHECK(v.h1 == 30000);
  CHECK(v.auto1 == 28500);
  CHECK(v.auto1 == OneF1BMemoryBound(4, 8, 1000, 1500, 500, 0));  // nothing does better at this memory
  CHECK(v.h2 == 28500);
  CHECK(v.auto2 == 28000);
}

TEST_CASE("zb-auto beats zb-h1 when messages take time, zb-h2 already meets the lower bound there", "[zb-auto]") {
  // F = I = W = 1000 ns, 500 ns per message, no bytes held for W.
  const int K = 4, M = 8;
  const Versus v = Compare(K, M, Costs(K, 1000, 2000, 1000, 500, 0));
  CHECK(v.h1 == 32000);
  CHECK(v.auto1 == 30000);
  CHECK(v.auto1 == OneF1BMemoryBound(K, M, 1000, 1000, 1000, 500));
  // The last rank cannot start before (K-1)(F + latency) and then has
  // M(F+I+W) of work: 3 x 1500 + 8 x 3000 = 28500, which zb-h2 reaches, so
  // no order does better.
  CHECK(v.h2 == (K - 1) * 1500 + M * 3000);
  CHECK(v.h2 == AnyOrderBound(K, M, 1000, 1000, 1000, 500));
  CHECK(v.auto2 == v.h2);
}

TEST_CASE("where zb-h1 and zb-h2 already meet the lower bounds, zb-auto equals them", "[zb-auto]") {
  // F = 1000, I = 2000, W = 1000 ns: unequal costs, yet both hand orders are
  // optimal for their memory, so no order can be strictly faster.
  for (int K : {4, 6}) {
    const int M = 2 * K;
    const Versus v = Compare(K, M, Costs(K, 1000, 3000, 1000, 0, 0));
    INFO("K=" << K);
    CHECK(v.h1 == OneF1BMemoryBound(K, M, 1000, 2000, 1000, 0));
    CHECK(v.auto1 == v.h1);
    CHECK(v.h2 == AnyOrderBound(K, M, 1000, 2000, 1000, 0));
    CHECK(v.auto2 == v.h2);
  }
}

TEST_CASE("zb-auto is valid, complete and keeps to a byte limit", "[zb-auto]") {
  const CostModel costs = Costs(4, 1000, 2000, 500, 100);
  for (Bytes limit : {Bytes{110}, Bytes{250}, Bytes{450}, Bytes{1000}}) {
    AutoOptions o;
    o.activation_limit = {limit};
    const Schedule s = Lower(GenerateAuto({4, 12, 0}, costs, o));
    INFO("limit " << limit);
    CHECK(s.name == "zb-auto");
    CHECK(Validate(s).ok());
    const SimResult r = Simulate(s, costs);
    CHECK(PeakOf(r).bytes <= limit);
  }
  // Less than one microbatch's activations fits no order.
  AutoOptions tiny;
  tiny.activation_limit = {99};
  CHECK_THROWS_WITH(GenerateAuto({4, 12, 0}, costs, tiny), Catch::Contains("no order fits the memory limit"));
  // One limit per rank.
  AutoOptions per_rank;
  per_rank.activation_limit = {410, 310, 210, 110};
  const SimResult r = Simulate(GenerateAuto({4, 12, 0}, costs, per_rank), costs);
  for (RankId k = 0; k < 4; ++k) CHECK(r.per_rank[k].peak_activation_bytes <= per_rank.activation_limit[k]);
}

namespace {

// zb-auto's order, or its error where no order fits.
struct Searched {
  Schedule schedule;
  std::string error;
};

Searched Search(int K, int M, const CostModel& costs, const AutoOptions& options) {
  Searched out;
  try {
    out.schedule = GenerateAuto({K, M, 0}, costs, options);
  } catch (const Error& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace

TEST_CASE("dropping list schedules that cannot win (prune) finds the same order as running each to its end",
          "[zb-auto]") {
  // Costs whose memory has every part the pruning's bound leaves out or
  // counts: workspaces, stashes, recomputed stages, message buffers as
  // NCCL and Gloo hold them, weight casts; byte limits from tight to loose,
  // one per rank or one for all.
  for (const bool recompute : {false, true}) {
    for (const bool nccl : {false, true}) {
      const int K = 4, M = 12;
      StageCost c;
      c.forward = 1000;
      c.backward = 2300;
      c.backward_weight = 700;
      c.activation_bytes = 100;
      c.weight_grad_bytes = 30;
      c.workspace_bytes = 40;
      c.backward_workspace_bytes = 60;
      c.message_bytes = 20;
      c.input_bytes = 20;
      c.cast_weight_bytes = 15;
      CostModel costs = CostModel::Uniform(K, c, Link{200, 0});
      MessageMemory messages;
      if (nccl) {
        messages.sent_freed = MessageMemory::SentFreed::kNextSendAfterDelivery;
        messages.receive_posted = MessageMemory::ReceivePosted::kOneActionAhead;
      }
      costs.SetMessages(messages);
      if (recompute) costs = WithRecompute(costs, {0, 1, 2, 3});
      const std::vector<std::vector<Bytes>> limits = {{300}, {450}, {700}, {1200}, {900, 700, 500, 300}};
      for (const std::vector<Bytes>& limit : limits) {
        AutoOptions pruned, full;
        pruned.activation_limit = full.activation_limit = limit;
        full.prune = false;
        INFO("recompute " << recompute << " nccl " << nccl << " limit " << limit.front() << " (" << limit.size()
                          << " values)");
        const Searched a = Search(K, M, costs, pruned), b = Search(K, M, costs, full);
        CHECK(a.error == b.error);
        CHECK(a.schedule.programs == b.schedule.programs);
      }
    }
  }
}

TEST_CASE("the search's tightening bound and its order of in-flight limits find the same order as no pruning",
          "[zb-auto]") {
  // Unequal stages (a heavy first and last, W from none to most of B), a
  // link latency, memory limits from tight to loose: the bound tightens as
  // orders are costed during the search, limits are searched by their
  // round-trip bound, and whole limits are passed over; none of that may
  // change the order chosen, nor the error where none fits.
  size_t chosen = 0;
  for (const int K : {3, 6, 8}) {
    for (const int M : {5, 16, 24}) {
      for (const TimeNs latency : {0, 350}) {
        CostModel costs = Costs(K, 1000, 2000, 600, latency);
        for (RankId s = 0; s < K; ++s) {
          StageCost c = costs.Stage(s);
          c.forward = 800 + 130 * s + (s == K - 1 ? 1500 : 0);
          c.backward = 1700 + 400 * (s % 3) + (s == 0 ? 900 : 0);
          c.backward_weight = std::min<TimeNs>(200 * (s % 4), *c.backward);
          c.activation_bytes = 100 + 10 * s;
          c.weight_grad_bytes = 40;
          costs.SetStage(s, c);
        }
        for (const Bytes limit : {Bytes{0}, Bytes{350}, Bytes{700}, Bytes{2000}}) {
          AutoOptions pruned, full;
          if (limit > 0) pruned.activation_limit = full.activation_limit = {limit};
          full.prune = false;
          INFO("K " << K << " M " << M << " latency " << latency << " limit " << limit);
          const Searched a = Search(K, M, costs, pruned), b = Search(K, M, costs, full);
          CHECK(a.error == b.error);
          CHECK(a.schedule.programs == b.schedule.programs);
          chosen += a.error.empty();
        }
      }
    }
  }
  CHECK(chosen > 3 * 3 * 2 * 2);  // most settings fit an order
}

TEST_CASE("zb-auto's policies make the same orders when those that repeat an earlier path are skipped", "[zb-auto]") {
  // Stages of unequal F, B and W (W from none to most of B), with and
  // without latency, so that W backlogs and gap rules both choose.
  size_t orders = 0;
  for (const int K : {2, 3, 5}) {
    for (const int M : {3, 8, 13}) {
      for (const TimeNs w : {0, 300, 1500}) {
        for (const TimeNs latency : {0, 400}) {
          CostModel costs = Costs(K, 1000, 2000, w, latency);
          for (RankId s = 0; s < K; ++s) {
            StageCost c = costs.Stage(s);
            c.forward = 900 + 170 * s;
            c.backward = 2000 + 450 * (s % 2);
            c.backward_weight = std::min<TimeNs>(w + 100 * s, *c.backward);
            costs.SetStage(s, c);
          }
          INFO("K " << K << " M " << M << " W " << w << " latency " << latency);
          const std::vector<Schedule> all = ZbAutoOrders(K, M, costs, false);
          const std::vector<Schedule> skipping = ZbAutoOrders(K, M, costs, true);
          REQUIRE(all.size() == skipping.size());
          for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].programs == skipping[i].programs);
          orders += all.size();
          AutoOptions full;
          full.prune = false;
          CHECK(GenerateAuto({K, M, 0}, costs).programs == GenerateAuto({K, M, 0}, costs, full).programs);
        }
      }
    }
  }
  CHECK(orders > 3 * 3 * 3 * 2);  // most settings make more than one order
}

TEST_CASE("zb-auto needs a cost model: Generate refuses it, GenerateWithCosts runs it", "[zb-auto]") {
  CHECK_THROWS_WITH(Generate("zb-auto", {4, 8, 0}), Catch::Contains("GenerateWithCosts"));
  CHECK(FindGenerator("zb-auto").needs_costs);
  const CostModel costs = Costs(4, 1000, 2000, 500, 0);
  CHECK(GenerateWithCosts("zb-auto", {4, 8, 0}, costs).programs == GenerateAuto({4, 8, 0}, costs).programs);
  CHECK(GenerateWithCosts("zb-h1", {4, 8, 0}, costs).programs == GenerateZeroBubbleH1(4, 8).programs);
  CHECK_THROWS_WITH(GenerateAuto({4, 8, 2}, costs), Catch::Contains("--virtual must be 1"));
  CHECK_THROWS_WITH(GenerateAuto({4, 8, 0}, Costs(3, 1000, 2000, 500, 0)), Catch::Contains("3"));
  // Searches past its bounds are refused, not left to run for minutes.
  CHECK_THROWS_WITH(GenerateAuto({kZbAutoMaxRanks + 1, 8, 0}, Costs(kZbAutoMaxRanks + 1, 1000, 2000, 500, 0)),
                    Catch::Contains("searches at most 128 ranks"));
  CHECK_THROWS_WITH(GenerateAuto({128, 10923, 0}, Costs(128, 1000, 2000, 500, 0)),
                    Catch::Contains("4194304 F, I and W (3 K M)"));
}

TEST_CASE("zb-auto is never slower than 1F1B with each B split into I then W, under that order's memory", "[zb-auto]") {
  // Stages of 1, 3, 3 and 1 layers (F = I = W a layer): the paper's
  // I-first list schedule lets the forwards after a slow stage bunch up
  // (a profile of the small preset so split: 198 ms, 1F1B 181.5); an
  // F-first policy makes 1F1B's order, so zb-auto is never above it.
  for (const std::array<TimeNs, 4>& layers : {std::array<TimeNs, 4>{1, 3, 3, 1}, {1, 1, 1, 1}, {2, 1, 1, 3}}) {
    std::vector<StageCost> stages;
    for (const TimeNs n : layers) {
      StageCost c;
      c.forward = 1000 * n;
      c.backward = 2000 * n;
      c.backward_weight = 1000 * n;
      c.activation_bytes = 100 * n;
      c.weight_grad_bytes = 10 * n;
      stages.push_back(c);
    }
    const CostModel costs = CostModel::FromStages(stages, Link{100, 0});
    for (const int M : {4, 8, 16}) {
      INFO("layers " << layers[0] << "," << layers[1] << "," << layers[2] << "," << layers[3] << " M=" << M);
      Schedule split = Generate1F1B(4, M);
      for (Program& p : split.programs) {
        Program out;
        for (const Action& a : p) {
          if (a.kind != ActionKind::kBackward) {
            out.push_back(a);
            continue;
          }
          out.push_back({ActionKind::kBackwardInput, a.stage, a.microbatch});
          out.push_back({ActionKind::kBackwardWeight, a.stage, a.microbatch});
        }
        p = out;
      }
      const SimResult one_f_one_b = Simulate(split, costs);
      AutoOptions limit;
      for (const RankMetrics& m : one_f_one_b.per_rank) limit.activation_limit.push_back(m.peak_activation_bytes);
      const SimResult found = Simulate(GenerateAuto({4, M, 0}, costs, limit), costs);
      CHECK(found.makespan <= one_f_one_b.makespan);
      for (size_t r = 0; r < 4; ++r) {
        CHECK(found.per_rank[r].peak_activation_bytes <= limit.activation_limit[r]);
      }
    }
  }
}

}  // namespace pplab::zb_auto_test
