// Interleaved zero bubble (PyTorch's ScheduleInterleavedZeroBubble, the
// ZB1P schedule of Qi et al., arXiv 2401.10241, with v stages per rank).
//
// The order is interleaved 1F1B's with the backward split: each rank runs
//   warm-up:  min((v-1) R + K-1-r, vM) forwards, R = M / max(1, M/K)
//             microbatches per round (PyTorch's "microbatches_per_round");
//   steady:   F, I pairs; from its (r+1)-th pair on, each pair is followed by
//             the W of the oldest I whose W is still owed;
//   cool-down: I (then W, under the same rule), then the W still owed.
// Chunk c of step k is (k / R) mod v for forwards, v-1-((k - warm-up) / R)
// mod v for backwards, so stage cK + r. Rank r defers r W passes: the later
// ranks, which wait longest for their first gradient, fill that wait.
#include <algorithm>
#include <deque>

#include "schedules/error.h"
#include "schedules/generators.h"

namespace pplab {

Schedule GenerateInterleavedZeroBubble(int ranks, int microbatches, int virtual_stages) {
  const std::string name = "interleaved-zb";
  if (ranks < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(ranks));
  if (microbatches < 1) throw Error(name + ": --microbatches must be >= 1, got " + std::to_string(microbatches));
  if (virtual_stages < 1) throw Error(name + ": --virtual must be >= 1, got " + std::to_string(virtual_stages));
  const int K = ranks, M = microbatches, v = virtual_stages;
  const int rounds = std::max(1, M / K);
  if (M % rounds != 0) {
    throw Error(name + ": PyTorch's rule: microbatches must be a multiple of the rounds max(1, M/K) = " +
                std::to_string(rounds) + ", got M=" + std::to_string(M) + " K=" + std::to_string(K));
  }
  const int per_round = M / rounds;
  Schedule s;
  s.name = name;
  s.ranks = K;
  s.stages = K * v;
  s.microbatches = M;
  s.placement = LoopPlacement(K, s.stages);
  s.programs.assign(K, {});
  const int total = v * M;  // forwards (and input-grad backwards) per rank
  for (RankId r = 0; r < K; ++r) {
    Program& p = s.programs[r];
    const int warmup = std::min((v - 1) * per_round + (K - 1 - r), total);
    std::vector<MicrobatchId> next_f(s.stages, 0), next_i(s.stages, 0);
    std::deque<std::pair<StageId, MicrobatchId>> owed_w;
    auto forward = [&](int k) {
      const StageId st = ((k / per_round) % v) * K + r;
      p.push_back({ActionKind::kForward, st, next_f[st]++});
    };
    auto input_grad = [&](int k) {
      const StageId st = (v - 1 - ((k - warmup) / per_round) % v) * K + r;
      const MicrobatchId m = next_i[st]++;
      p.push_back({ActionKind::kBackwardInput, st, m});
      owed_w.emplace_back(st, m);
    };
    auto weight = [&] {
      p.push_back({ActionKind::kBackwardWeight, owed_w.front().first, owed_w.front().second});
      owed_w.pop_front();
    };
    for (int k = 0; k < warmup; ++k) forward(k);  // warm-up
    for (int k = warmup; k < total + warmup; ++k) {
      if (k < total) forward(k);  // steady: F then I; cool-down: I alone
      input_grad(k);
      if (k - warmup >= r) weight();
    }
    while (!owed_w.empty()) weight();  // drain
  }
  return s;
}

}  // namespace pplab
