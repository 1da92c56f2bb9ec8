// DualPipeV (DeepSeek's dualpipev.py; PyTorch's ScheduleDualPipeV): the
// "cut-in-half" DualPipe. 2K stages on a V placement (rank r holds stages r
// and 2K-1-r), every microbatch goes down the first K stages and back up the
// second K, and the steady phase runs the forward of one of a rank's stages
// overlapped with the backward of the other (OVERLAP_F_B).
//
// Rules: K >= 1, M >= 2K (the warm-up alone fills 2K - 1 forwards on rank 0).
//
// Phases on rank r, with s0 = r, s1 = 2K-1-r (each counter per stage; a B or
// an I takes the stage's next backward microbatch, a W the oldest I still
// owed its W):
//   1. 2(K-r-1) forwards of s0             (fill the way down)
//   2. r+1 pairs F(s0) F(s1)               (reach the turn of the V)
//   3. K-r-1 triples I(s1) W F(s1)         (zero-bubble start of the way up)
//   4. M-2K+r+1 pairs (F s0 & B s1) (F s1 & B s0), overlapped; the last rank
//      runs its first F(s0), B(s1) apart to start the way up sooner
//   5. K-r-1 pairs B(s1), (F s1 & B s0)
//   6. r+1 pairs of backwards of s1 then s0, full B for the first half and
//      I (W deferred) for the second
//   7. K-r-1 pairs W, backward of s0
//   8. the W still owed
#include <deque>

#include "schedules/error.h"
#include "schedules/generators.h"

namespace pplab {

Schedule GenerateDualPipeV(int ranks, int microbatches) {
  const std::string name = "dualpipev";
  if (ranks < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(ranks));
  if (microbatches < 2 * ranks) {
    throw Error(name + ": needs at least as many microbatches as stages (M >= 2K = " + std::to_string(2 * ranks) +
                "), got M=" + std::to_string(microbatches));
  }
  const int K = ranks, M = microbatches;
  Schedule s;
  s.name = name;
  s.ranks = K;
  s.stages = 2 * K;
  s.microbatches = M;
  s.placement = VPlacement(K);
  s.programs.assign(K, {});
  for (RankId r = 0; r < K; ++r) {
    Program& p = s.programs[r];
    const StageId s0 = r, s1 = 2 * K - 1 - r;
    std::vector<MicrobatchId> next_f(s.stages, 0), next_b(s.stages, 0);
    std::deque<std::pair<StageId, MicrobatchId>> owed_w;
    auto forward = [&](StageId st) { p.push_back({ActionKind::kForward, st, next_f[st]++}); };
    auto backward = [&](StageId st, bool split) {
      const MicrobatchId m = next_b[st]++;
      p.push_back({split ? ActionKind::kBackwardInput : ActionKind::kBackward, st, m});
      if (split) owed_w.emplace_back(st, m);
    };
    auto overlapped = [&](StageId f_stage, StageId b_stage) {
      const MicrobatchId fm = next_f[f_stage]++;
      p.push_back(OverlapFB(f_stage, fm, ActionKind::kBackward, b_stage, next_b[b_stage]++));
    };
    auto owed_weight = [&] {
      if (owed_w.empty()) return;
      p.push_back({ActionKind::kBackwardWeight, owed_w.front().first, owed_w.front().second});
      owed_w.pop_front();
    };
    for (int i = 0; i < 2 * (K - r - 1); ++i) forward(s0);  // 1
    for (int i = 0; i < r + 1; ++i) {                       // 2
      forward(s0);
      forward(s1);
    }
    for (int i = 0; i < K - r - 1; ++i) {  // 3
      backward(s1, true);
      owed_weight();
      forward(s1);
    }
    for (int i = 0; i < M - 2 * K + r + 1; ++i) {  // 4
      if (i == 0 && r == K - 1) {
        forward(s0);
        backward(s1, false);
      } else {
        overlapped(s0, s1);
      }
      overlapped(s1, s0);
    }
    for (int i = 0; i < K - r - 1; ++i) {  // 5
      backward(s1, false);
      overlapped(s1, s0);
    }
    bool split = false;  // 6
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) split = true;
      backward(s1, split);
      if (i == (r + 1) / 2 && r % 2 == 0) split = true;
      backward(s0, split);
    }
    for (int i = 0; i < K - r - 1; ++i) {  // 7
      owed_weight();
      backward(s0, split);
    }
    while (!owed_w.empty()) owed_weight();  // 8
  }
  return s;
}

}  // namespace pplab
