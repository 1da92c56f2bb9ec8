// DualPipe (DeepSeek-V3, deepseek-ai/DualPipe dualpipe.py) and DualPipeV
// (its "cut-in-half" V form, dualpipev.py; PyTorch's ScheduleDualPipeV).
//
// Both run, on every rank, two stages ("phases") with DeepSeek's eight phases
// below; they differ in what the two stages are.
//   DualPipeV: 2K stages on a V placement (rank r holds stages r and 2K-1-r),
//     one pipeline; every microbatch goes down the first K stages and back up
//     the second K. Rank r sits at position h = r of the way down.
//   DualPipe: two copies of the model's K stages, i.e. two pipelines over the
//     same ranks (Schedule::pipeline_starts = {K}): copy 0 is stages 0..K-1,
//     stage s on rank s, run by microbatches 0..M/2-1 fed at rank 0; copy 1 is
//     stages K..2K-1, stage K+j on rank K-1-j, run by microbatches M/2..M-1
//     fed at rank K-1. The placement is the V placement again; only the
//     dependencies differ (no edge from stage K-1 to stage K). Rank r sits at
//     position h = min(r, K-1-r) of the copy it is nearer the start of.
//
// For a rank at position h of n = K (DualPipeV) or K/2 (DualPipe), "phase 0"
// is its stage nearer its pipeline's start and "phase 1" the other; c is the
// number of microbatches per phase (M, or M/2). A B or I takes the phase's
// next backward microbatch, a W the oldest I still owed its W:
//   1. 2(n-h-1) forwards of phase 0                 (fill)
//   2. h+1 pairs F(phase 0) F(phase 1)
//   3. n-h-1 triples I(1) W F(1)                    (zero-bubble start)
//   4. c-2n+h+1 pairs (F 0 & B 1) (F 1 & B 0), overlapped; the middle rank
//      (h = n-1) runs its first F(0), B(1) apart to start the way back sooner
//   5. n-h-1 pairs B(1), (F 1 & B 0)
//   6. h+1 pairs of backwards of phase 1 then phase 0, full B for the first
//      half and I (W deferred) for the second
//   7. n-h-1 pairs W, I(0)
//   8. the W still owed
#include <deque>

#include "schedules/error.h"
#include "schedules/generators.h"

namespace pplab {
namespace {

struct DualPipeRank {
  int n = 1;                                  // ranks in the half the phases are counted over
  int h = 0;                                  // this rank's position, 0..n-1
  int chunks = 1;                             // microbatches per phase
  StageId stage[2] = {0, 0};                  // the stage of phase 0 and of phase 1
  MicrobatchId first_microbatch[2] = {0, 0};  // each phase's microbatches start here
};

Program DualPipePhases(const DualPipeRank& d, int stages) {
  Program p;
  const int n = d.n, h = d.h;
  std::vector<MicrobatchId> next_f(stages, 0), next_b(stages, 0);
  std::deque<std::pair<StageId, MicrobatchId>> owed_w;
  const auto mb = [&](int phase, int k) { return d.first_microbatch[phase] + k; };
  auto forward = [&](int phase) {
    const StageId st = d.stage[phase];
    p.push_back({ActionKind::kForward, st, mb(phase, next_f[st]++)});
  };
  auto backward = [&](int phase, bool split) {
    const StageId st = d.stage[phase];
    const MicrobatchId m = mb(phase, next_b[st]++);
    p.push_back({split ? ActionKind::kBackwardInput : ActionKind::kBackward, st, m});
    if (split) owed_w.emplace_back(st, m);
  };
  auto overlapped = [&](int f_phase, int b_phase) {
    const StageId fs = d.stage[f_phase], bs = d.stage[b_phase];
    const MicrobatchId fm = mb(f_phase, next_f[fs]++);
    p.push_back(OverlapFB(fs, fm, ActionKind::kBackward, bs, mb(b_phase, next_b[bs]++)));
  };
  auto owed_weight = [&] {
    if (owed_w.empty()) return;
    p.push_back({ActionKind::kBackwardWeight, owed_w.front().first, owed_w.front().second});
    owed_w.pop_front();
  };
  for (int i = 0; i < 2 * (n - h - 1); ++i) forward(0);  // 1
  for (int i = 0; i < h + 1; ++i) {                      // 2
    forward(0);
    forward(1);
  }
  for (int i = 0; i < n - h - 1; ++i) {  // 3
    backward(1, true);
    owed_weight();
    forward(1);
  }
  for (int i = 0; i < d.chunks - 2 * n + h + 1; ++i) {  // 4
    if (i == 0 && h == n - 1) {
      forward(0);
      backward(1, false);
    } else {
      overlapped(0, 1);
    }
    overlapped(1, 0);
  }
  for (int i = 0; i < n - h - 1; ++i) {  // 5
    backward(1, false);
    overlapped(1, 0);
  }
  bool split = false;  // 6
  for (int i = 0; i < h + 1; ++i) {
    if (i == (h + 1) / 2 && h % 2 == 1) split = true;
    backward(1, split);
    if (i == (h + 1) / 2 && h % 2 == 0) split = true;
    backward(0, split);
  }
  for (int i = 0; i < n - h - 1; ++i) {  // 7
    owed_weight();
    backward(0, split);
  }
  while (!owed_w.empty()) owed_weight();  // 8
  return p;
}

Schedule Header(const std::string& name, int ranks, int microbatches) {
  Schedule s;
  s.name = name;
  s.ranks = ranks;
  s.stages = 2 * ranks;
  s.microbatches = microbatches;
  s.placement = VPlacement(ranks);
  s.programs.assign(ranks, {});
  return s;
}

}  // namespace

Schedule GenerateDualPipeV(int ranks, int microbatches) {
  const std::string name = "dualpipev";
  if (ranks < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(ranks));
  if (microbatches < 2 * ranks) {
    throw Error(name + ": needs at least as many microbatches as stages (M >= 2K = " + std::to_string(2 * ranks) +
                "), got M=" + std::to_string(microbatches));
  }
  const int K = ranks;
  Schedule s = Header(name, K, microbatches);
  for (RankId r = 0; r < K; ++r) {
    DualPipeRank d;
    d.n = K;
    d.h = r;
    d.chunks = microbatches;
    d.stage[0] = r;
    d.stage[1] = 2 * K - 1 - r;
    s.programs[r] = DualPipePhases(d, s.stages);
  }
  return s;
}

Schedule GenerateDualPipe(int ranks, int microbatches) {
  const std::string name = "dualpipe";
  if (ranks < 2 || ranks % 2 != 0) {
    throw Error(name + ": needs an even number of ranks K >= 2 (each half of the ranks leads one direction), got K=" +
                std::to_string(ranks));
  }
  if (microbatches % 2 != 0 || microbatches < 2 * ranks) {
    throw Error(
        name + ": needs an even M >= 2K = " + std::to_string(2 * ranks) +
        " (half the microbatches enter at each end, at least K from each), got M=" + std::to_string(microbatches));
  }
  const int K = ranks, half = microbatches / 2;
  Schedule s = Header(name, K, microbatches);
  s.pipeline_starts = {K};
  s.microbatch_pipeline.assign(microbatches, 0);
  for (MicrobatchId m = half; m < microbatches; ++m) s.microbatch_pipeline[m] = 1;
  for (RankId r = 0; r < K; ++r) {
    // Copy 0's stage on rank r is r (position r from rank 0); copy 1's is
    // 2K-1-r (position K-1-r from rank K-1). Phase 0 is the nearer one.
    const bool first_half = r < K / 2;
    const StageId down = r, up = 2 * K - 1 - r;
    DualPipeRank d;
    d.n = K / 2;
    d.h = first_half ? r : K - 1 - r;
    d.chunks = half;
    d.stage[0] = first_half ? down : up;
    d.stage[1] = first_half ? up : down;
    d.first_microbatch[0] = first_half ? 0 : half;
    d.first_microbatch[1] = first_half ? half : 0;
    s.programs[r] = DualPipePhases(d, s.stages);
  }
  return s;
}

}  // namespace pplab
