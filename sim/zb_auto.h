// zb-auto: the Zero Bubble paper's automatic scheduling (Qi et al., arXiv
// 2401.10241, section 3), searched with the real cost model.
//
// The paper's heuristic list-schedules F, I and W per rank from the stage
// costs and communication time under a memory limit. We run a family of such
// list schedules, each a policy:
//   - an in-flight limit per rank (microbatches with F done and I not yet):
//     from 1 through 1F1B's K - r (zb-h1's) and zb-h2's 2(K - r) - 1 to a
//     little beyond, capped by M;
//   - how many W passes a rank may defer before one is forced;
//   - when a deferred W may fill an idle gap: always, only when it ends
//     before the next input whose arrival is known, or only when it ends
//     before the next input at all (waiting while that is unknown);
// cost each with Simulate() (simulator.h) and keep the fastest whose peak
// memory fits. zb-h1 and zb-h2 are candidates themselves whenever they fit,
// so zb-auto's simulated makespan is never above theirs under a limit they
// meet. Candidates are costed in order of the makespan their list schedule
// predicts, and the search stops once no remaining prediction can win; a
// list schedule that cannot win is dropped part-way (AutoOptions::prune).
#pragma once

#include <string>
#include <vector>

#include "schedules/generators.h"
#include "sim/cost_model.h"

namespace pplab {

// The largest search zb-auto takes on: K ranks, and 3 K M actions.
inline constexpr int kZbAutoMaxRanks = 128;
inline constexpr long long kZbAutoMaxActions = 1LL << 22;

struct AutoOptions {
  // Activation bytes a rank may hold at its peak (the simulator's
  // RankMetrics::peak_activation_bytes: F's activations, I's stash for W and
  // the running action's workspace): one value for every rank, or one per
  // rank. Empty: no byte limit.
  std::vector<Bytes> activation_limit;
  // Microbatches a rank may hold in flight (RankMetrics::peak_inflight);
  // 0: no count limit.
  int inflight_limit = 0;
  // With neither limit given, zb-auto takes zb-h1's memory: the most bytes
  // and the most microbatches in flight zb-h1 holds on any rank under the
  // same costs (1F1B's memory, the paper's ZB-1p setting).

  // Stop list-scheduling a policy once it can no longer win: its makespan
  // is sure to reach the best costed so far (each rank's free time plus its
  // work left), or a rank holds more than the byte limit (activations,
  // stashes and workspace, which the simulator counts at the same point of
  // the order, with messages and casts on top). Such orders were never
  // costed, so the result is the same; false runs every list schedule to
  // its end (tests compare the two).
  bool prune = true;
};

// The best zb-auto order for K = options.ranks, M = options.microbatches on
// `costs` (K stages, one per rank; options.virtual_stages must be 0 or 1).
// Throws pplab::Error for K or M < 1, K or 3 K M past the bounds above, a
// cost model without K stages, or a limit no candidate meets (naming the
// smallest peak seen).
Schedule GenerateAuto(const GeneratorOptions& options, const CostModel& costs, const AutoOptions& limits = {});

// Every distinct order zb-auto's policies make for K ranks and M
// microbatches under `costs`, each list-scheduled to its end (no bound, no
// byte limit), in the order first made. With skip_repeats, a policy whose W
// backlog and gap rule an earlier policy's decisions admit is skipped, as
// GenerateAuto skips it: it would make that order again, so the list is the
// same either way (tests compare the two).
std::vector<Schedule> ZbAutoOrders(int K, int M, const CostModel& costs, bool skip_repeats);

// Generate(), except for a generator that needs costs (GeneratorInfo::
// needs_costs, i.e. zb-auto), which is given `costs` and `limits`.
Schedule GenerateWithCosts(const std::string& name, const GeneratorOptions& options, const CostModel& costs,
                           const AutoOptions& limits = {});

}  // namespace pplab
