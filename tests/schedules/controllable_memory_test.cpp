// V-Min and V-Half (schedules/controllable_memory.cc): the memory their
// building blocks promise, no bubble in the steady phase, and where they sit
// between zb-v and 1F1B, with the equal pass costs the paper draws.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/validate.h"
#include "sim/simulator.h"

namespace pplab::controllable_memory_test {
namespace {

constexpr TimeNs kT = 1000;

// A microbatch through one rank's share of the model: F = T, I = T, W = T
// (B = 2T), 100 B of activations; a rank with v stages gives each 1/v of it.
SimResult UnitSimulate(const std::string& name, int K, int M) {
  const Schedule s = Lower(Generate(name, {K, M, 0}));
  const int v = s.stages / K;
  StageCost c;
  c.forward = kT / v;
  c.backward = 2 * kT / v;
  c.backward_weight = kT / v;
  c.activation_bytes = 100 / v;
  return Simulate(s, CostModel::Uniform(s.stages, c, Link{}));
}

Bytes PeakBytes(const SimResult& r) {
  Bytes peak = 0;
  for (const RankMetrics& m : r.per_rank) peak = std::max(peak, m.peak_activation_bytes);
  return peak;
}

int PeakInflight(const SimResult& r) {
  int peak = 0;
  for (const RankMetrics& m : r.per_rank) peak = std::max(peak, m.peak_inflight);
  return peak;
}

// The paper's building block for rank r: the slots of F of stage r, F of
// stage 2K-1-r, I of stage 2K-1-r and I of stage r for microbatch 0
// (microbatch m: 6m later).
std::array<int, 4> Block(const std::string& name, int K, int r) {
  if (name == "v-min") {
    const int d = K % 3 == 0 ? 2 : 0;
    return {r, 2 * K - 1 - r, 2 * K + d + r, 4 * K + d - 1 - r};
  }
  const int d = K % 2 == 0 ? 3 : 0;
  return {2 * r, 3 * K - 2 - r, 3 * K + d + 2 * r - 1, 6 * K + d - 2 - r};
}

// The stage microbatches the repeated block holds at its steady-state peak,
// on the worst rank: at slot t a stage holds the microbatches whose F slot
// <= t <= I slot, counted over one period far from both ends.
int BlockPeak(const std::string& name, int K) {
  int peak = 0;
  for (int r = 0; r < K; ++r) {
    const std::array<int, 4> b = Block(name, K, r);
    const int far = 6 * (10 * K + 10);
    for (int t = far; t < far + 6; ++t) {
      int held = 0;
      for (int m = 0; 6 * m <= t; ++m) {
        held += (b[0] + 6 * m <= t && t <= b[3] + 6 * m) + (b[1] + 6 * m <= t && t <= b[2] + 6 * m);
      }
      peak = std::max(peak, held);
    }
  }
  return peak;
}

}  // namespace

TEST_CASE("v-min and v-half hold at most their block's steady-state peak, exactly that once M >= 2K",
          "[generators][controllable]") {
  for (const std::string name : {"v-min", "v-half"}) {
    for (int K = 1; K <= 12; ++K) {
      const int block = BlockPeak(name, K);
      for (int M : {1, 2, K, 2 * K, 3 * K + 1}) {
        const SimResult r = UnitSimulate(name, K, M);
        INFO(name << " K=" << K << " M=" << M << " block peak " << block);
        CHECK(PeakInflight(r) <= block);
        if (M >= 2 * K) CHECK(PeakInflight(r) == block);
      }
    }
  }
}

TEST_CASE("v-min and v-half repeat their block without a bubble: one more microbatch adds 3T (6 passes of T/2)",
          "[generators][controllable]") {
  for (const std::string name : {"v-min", "v-half"}) {
    for (int K : {1, 2, 3, 4, 5, 8}) {
      for (int M : {2 * K, 3 * K + 1}) {
        INFO(name << " K=" << K << " M=" << M);
        CHECK(UnitSimulate(name, K, M + 1).makespan - UnitSimulate(name, K, M).makespan == 3 * kT);
      }
    }
  }
}

TEST_CASE("between zb-v and 1f1b: less memory than both, bubbles from zb-v's up to below 1f1b's",
          "[generators][controllable]") {
  for (int K : {4, 8, 16}) {
    for (int M : {2 * K, 4 * K}) {
      INFO("K=" << K << " M=" << M);
      const SimResult one = UnitSimulate("1f1b", K, M), zbv = UnitSimulate("zb-v", K, M),
                      half = UnitSimulate("v-half", K, M), min = UnitSimulate("v-min", K, M);
      CHECK(zbv.makespan <= half.makespan);
      CHECK(half.makespan <= min.makespan);
      CHECK(min.makespan < one.makespan);
      CHECK(PeakBytes(zbv) == PeakBytes(one));
      CHECK(PeakBytes(half) < PeakBytes(one));
      CHECK(PeakBytes(min) < PeakBytes(half));
      // 1F1B's rank 0 holds K microbatches (100 B each); a V stage is half
      // a rank's share (50 B), so the block's peak is worth 50 B a stage.
      CHECK(PeakBytes(one) == 100 * K);
      CHECK(PeakBytes(half) == 50 * BlockPeak("v-half", K));
      CHECK(PeakBytes(min) == 50 * BlockPeak("v-min", K));
    }
  }
}

TEST_CASE("v-min and v-half refuse in one line a plan whose slot grid would exhaust memory", "[schedules]") {
  // V-Half at K = 4800 (d = 3): rank 0's I of stage 0 is at slot 6K + 1 =
  // 28801, so the grid is 4800 ranks x 28803 slots, past 2^27 cells.
  CHECK_THROWS_WITH(Generate("v-half", {4800, 1, 0}),
                    "v-half: --ranks 4800 x --microbatches 1 needs 4800 x 28802 slots, more than pplab plans "
                    "(134217728)");
  // V-Min at K = 9000 (d = 2), M = 2: 4K + 1 = 36001, plus a period of 6.
  CHECK_THROWS_WITH(Generate("v-min", {9000, 2, 0}),
                    "v-min: --ranks 9000 x --microbatches 2 needs 9000 x 36008 slots, more than pplab plans "
                    "(134217728)");
  // Within the bound a large plan is still made, and valid.
  const Schedule s = Lower(Generate("v-half", {500, 4, 0}));
  CHECK(s.ranks == 500);
  CHECK(Validate(s).ok());
}

}  // namespace pplab::controllable_memory_test
