// What train's summary reads off a run's clocks (tools/train_report.h): when
// the GPU waited for the host's launches, and what it then suggests.
#include "tools/train_report.h"

#include <catch2/catch.hpp>

#include "schedules/generators.h"
#include "schedules/lowering.h"

namespace pplab::cli::train_report_test {
namespace {

// Rank 0 of a K=2 run: F's of 2 ms and B's of 4 ms (median 3 ms over
// F F B B), and rank 1's of 10 ms, which must not count.
Timeline Measured() {
  Timeline t;
  t.ranks = 2;
  TimeNs at = 0;
  for (const auto& [kind, ms] : {std::pair{ActionKind::kForward, 2}, std::pair{ActionKind::kForward, 2},
                                 std::pair{ActionKind::kBackward, 4}, std::pair{ActionKind::kBackward, 4}}) {
    t.events.push_back({0, Action{kind, 0, 0}, at, at + ms * 1'000'000});
    at += ms * 1'000'000;
  }
  t.events.push_back({0, Action{ActionKind::kSendF, 0, 0}, 0, 50'000'000});  // not compute
  t.events.push_back({1, Action{ActionKind::kForward, 1, 0}, 0, 10'000'000});
  return t;
}

}  // namespace

TEST_CASE("train calls a run launch-bound when rank 0's device lag is under a tenth of its compute action", "[train]") {
  const Timeline measured = Measured();
  // Five steps: the median of the last three lags (the first two are the
  // warm-up, as for the step time) against the 3 ms median action.
  const auto bound = LaunchBoundOf("cuda-events", {9, 9, 0.1, 0.2, 0.25}, measured);
  REQUIRE(bound.has_value());
  CHECK(bound->bound);
  CHECK(bound->lag_ms == Approx(0.2));
  CHECK(bound->action_ms == Approx(3.0));
  // 0.35 ms is more than a tenth of 3 ms.
  const auto ahead = LaunchBoundOf("cuda-events", {0, 0, 0.35, 0.35, 0.35}, measured);
  REQUIRE(ahead.has_value());
  CHECK_FALSE(ahead->bound);
  // With three steps or fewer every step counts.
  CHECK(LaunchBoundOf("cuda-events", {0.0, 0.1, 5}, measured)->lag_ms == Approx(0.1));
  // The host clock has no lag to read, and a timeline without rank 0's
  // compute gives no action to compare with.
  CHECK_FALSE(LaunchBoundOf("host", {0, 0, 0}, measured).has_value());
  CHECK_FALSE(LaunchBoundOf("cuda-events", {}, measured).has_value());
  Timeline none = measured;
  none.events.erase(none.events.begin(), none.events.begin() + 4);
  CHECK_FALSE(LaunchBoundOf("cuda-events", {0.1}, none).has_value());
}

TEST_CASE("a launch-bound run is told to try --cuda-graphs, or what its plan must change for them", "[train]") {
  const LaunchBound bound{true, 0.05, 2.5};
  TrainOptions o;
  const Schedule one_f_one_b = Lower(Generate1F1B(2, 4));
  const std::string hint = LaunchBoundHint(o, one_f_one_b, bound);
  CHECK(hint ==
        "the GPU waited for the host to launch its kernels (rank 0's device lag 0.050 ms, against 2.500 ms a compute "
        "action): --cuda-graphs, which launches each stage's forward and backward as one graph, may raise tokens/s");
  CHECK_THAT(LaunchBoundHint(o, Lower(GenerateZeroBubbleH1(2, 4)), bound),
             Catch::EndsWith("may raise tokens/s with a schedule whose B is whole (zb-h1 splits it into I and W)"));
  TrainOptions tp = o;
  tp.tp = 2;
  CHECK_THAT(LaunchBoundHint(tp, one_f_one_b, bound), Catch::EndsWith("may raise tokens/s without --tp"));
  TrainOptions recompute = o;
  recompute.recompute = "all";
  CHECK_THAT(LaunchBoundHint(recompute, one_f_one_b, bound), Catch::EndsWith("may raise tokens/s without --recompute"));
  // Nothing to say: graphs already on, the GPU the bound, or no lag read.
  TrainOptions graphed = o;
  graphed.cuda_graphs = true;
  CHECK(LaunchBoundHint(graphed, one_f_one_b, bound).empty());
  CHECK(LaunchBoundHint(o, one_f_one_b, LaunchBound{false, 5, 2.5}).empty());
  CHECK(LaunchBoundHint(o, one_f_one_b, std::nullopt).empty());
}

}  // namespace pplab::cli::train_report_test
