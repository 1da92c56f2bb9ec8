// SharedDeviceUse (traces/timeline.h): how ranks that share a device used
// it, by hand and on a simulated trace whose device runs one action at a time.
#include <catch2/catch.hpp>
#include <string>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"
#include "traces/chrome_trace.h"
#include "traces/timeline.h"

namespace pplab::shared_device_use_test {
namespace {

constexpr TimeNs kMs = kNsPerMs;

TimelineEvent Ev(RankId r, const std::string& action, TimeNs start, TimeNs end) {
  return {r, ParseAction(action), start * kMs, end * kMs};
}

// Ranks 0 and 1 on device 0, rank 2 alone on device 1.
Timeline ThreeRanks() {
  Timeline t;
  t.ranks = 3;
  t.devices = {0, 0, 1};
  t.events = {Ev(0, "0F0", 0, 10), Ev(0, "0SEND_F0", 10, 40), Ev(0, "0B0", 20, 30),
              Ev(1, "1F0", 5, 25), Ev(1, "1F1", 30, 32),      Ev(2, "2F0", 0, 4)};
  return t;
}

}  // namespace

TEST_CASE("shared device use: busy, more at once than the slots, and compute, by hand", "[timeline]") {
  // Device 0: rank 0 computes [0,10] and [20,30], rank 1 [5,25] and [30,32]
  // (starting as rank 0's B ends: no overlap). Some rank computes [0,32];
  // both at once [5,10] and [20,25]; 42 ms of compute. The SEND is not
  // compute, and device 1 has one rank.
  const std::vector<DeviceUse> use = SharedDeviceUse(ThreeRanks());
  REQUIRE(use.size() == 1);
  CHECK(use[0].device == 0);
  CHECK(use[0].ranks == std::vector<RankId>{0, 1});
  CHECK(use[0].slots == 1);
  CHECK(use[0].busy == 32 * kMs);
  CHECK(use[0].over_slots == 10 * kMs);
  CHECK(use[0].compute == 42 * kMs);

  // Two slots: two at once fit.
  Timeline two = ThreeRanks();
  two.device_slots = {2, 1};
  const std::vector<DeviceUse> use2 = SharedDeviceUse(two);
  REQUIRE(use2.size() == 1);
  CHECK(use2[0].slots == 2);
  CHECK(use2[0].busy == 32 * kMs);
  CHECK(use2[0].over_slots == 0);

  // No devices named: every rank has its own.
  Timeline own = ThreeRanks();
  own.devices.clear();
  CHECK(SharedDeviceUse(own).empty());
}

TEST_CASE("shared device use: a simulated shared device runs one action at a time", "[timeline]") {
  StageCost stage;
  stage.forward = 1 * kMs;
  stage.backward = 2 * kMs;
  CostModel costs = CostModel::Uniform(2, stage, Link{kMs / 4, 0});
  costs.SetDevices({0, 0});
  const SimResult sim = Simulate(Lower(Generate1F1B(2, 4)), costs);
  const Timeline t = TimelineFromChromeTrace(TimelineToChromeTrace(sim.timeline), "test");
  const std::vector<DeviceUse> use = SharedDeviceUse(t);
  REQUIRE(use.size() == 1);
  CHECK(use[0].ranks == std::vector<RankId>{0, 1});
  // 2 ranks x 4 microbatches x (1 + 2) ms, never two at once.
  CHECK(use[0].compute == 24 * kMs);
  CHECK(use[0].busy == 24 * kMs);
  CHECK(use[0].over_slots == 0);
}

}  // namespace pplab::shared_device_use_test
