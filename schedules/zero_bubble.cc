// Zero-bubble schedules ZB-H1, ZB-H2 and ZB-V (Qi et al., "Zero Bubble Pipeline
// Parallelism", arXiv 2401.10241, section 2).
//
// The backward of each stage is split into I (gradient of the input, on the
// critical path) and W (gradient of the weights, free to move later). The
// paper hand-draws both schedules assuming T_F = T_I = T_W. We derive the
// order the same way the paper's heuristic does: list-schedule every rank in
// unit time with zero communication, always preferring
//   1. a W when the rank owes more deferred W passes than its backlog bound,
//   2. an I whose output gradient has arrived,
//   3. the next F, if its input has arrived and the rank's in-flight
//      microbatches (F done, I not done) are below the limit,
//   4. a deferred W to fill what would otherwise be a bubble.
// H1 keeps 1F1B's in-flight limit K - r, so its activation memory equals
// 1F1B's, and defers at most K - 1 W passes: with T_F = T_I = T_W every rank's
// own span holds (K - 1) T of bubble, i.e. (K-1)(T_F + T_I - T_W), once M >= K.
// H2 allows 2(K - r) - 1 microbatches in flight (2K - 1 on rank 0, as in the
// paper) and defers up to 2K - 2 W passes, which fills the bubble completely
// once M >= 2K - 1. ZB-V (the paper's section 6) gives each rank two stages in
// a V (stage r and stage 2K-1-r), allows 2K stage-microbatches in flight (the
// activation memory of 1F1B's rank 0) and defers up to 4K - 2 W passes; with
// equal costs this has no bubble once M >= 2K (checked for K <= 10, M <= 32 when
// the bound was chosen). The emitted order is valid for any costs; only its
// bubble is tuned to equal ones.
#include <algorithm>
#include <deque>
#include <limits>

#include "schedules/error.h"
#include "schedules/generators.h"

namespace pplab {
namespace {

constexpr int kNever = std::numeric_limits<int>::max();

struct StageState {
  MicrobatchId next_f = 0;  // next forward to run
  MicrobatchId next_i = 0;  // next input-gradient backward to run
};

struct RankState {
  std::deque<std::pair<StageId, MicrobatchId>> deferred_w;
  int inflight = 0;  // (stage, microbatch) with F done and I not done
};

// Unit-time list scheduling of F, I, W for any placement. Where a rank holds
// several stages it prefers the later stage, for I and for F alike: that
// drains microbatches towards the loss and starts backwards early.
//
// Event-driven, so the cost is O(actions + makespan) rather than
// O(K * makespan). At step t a rank's choice depends only on its own state and
// on finish times <= t (what it starts at t finishes at t + 1), so the order in
// which ranks are visited within a step does not matter. A rank that finds
// nothing to do keeps finding nothing until one of its inputs arrives, so a
// rank is visited at step t only when
//   - t == 0,
//   - it ran an action at t - 1 (it is free again), or
//   - an action it may wait on finished at t: F(st, m) on stage st's rank
//     wakes stage st+1's rank (the input of F(st+1, m)), I(st, m) wakes stage
//     st-1's rank (the output gradient of I(st-1, m)).
// Visiting a rank spuriously is harmless: it re-derives the same idle choice.
Schedule UnitTimeListSchedule(const std::string& name, int K, int M, const std::vector<RankId>& placement,
                              const std::vector<int>& inflight_limit, int w_backlog) {
  Schedule s;
  s.name = name;
  s.ranks = K;
  s.stages = static_cast<int>(placement.size());
  s.microbatches = M;
  s.placement = placement;
  s.programs.assign(K, {});
  const int S = s.stages;
  std::vector<std::vector<StageId>> later_first(K);  // each rank's stages, last stage first
  for (StageId st = S - 1; st >= 0; --st) later_first[placement[st]].push_back(st);
  // Finish times, in unit steps, of F(st, m) and I(st, m), at st * M + m.
  std::vector<int> f_done(static_cast<size_t>(S) * M, kNever);
  std::vector<int> i_done(static_cast<size_t>(S) * M, kNever);
  const auto at = [M](StageId st, MicrobatchId m) { return static_cast<size_t>(st) * M + m; };
  std::vector<StageState> stage(S);
  std::vector<RankState> rank(K);
  const long total = 3L * S * M;
  long emitted = 0;
  // Ranks to visit at step t (`now`) and at t + 1 (`next`); queued_for[r] is
  // the last step r was put in `next` for, so it is queued at most once.
  std::vector<RankId> now(K), next;
  for (RankId r = 0; r < K; ++r) now[r] = r;
  std::vector<int> queued_for(K, 0);
  const auto wake = [&](RankId r, int step) {
    if (queued_for[r] == step) return;
    queued_for[r] = step;
    next.push_back(r);
  };
  for (int t = 0; emitted < total; ++t) {
    // Nothing ran at t - 1, so no rank's inputs changed and none ever will.
    if (now.empty()) throw Error(name + ": internal error: list scheduling made no progress");
    for (RankId r : now) {
      RankState& rs = rank[r];
      StageId i_stage = -1, f_stage = -1;
      for (StageId st : later_first[r]) {
        const MicrobatchId mi = stage[st].next_i;
        if (i_stage < 0 && mi < M && f_done[at(st, mi)] <= t && (st == S - 1 || i_done[at(st + 1, mi)] <= t)) {
          i_stage = st;
        }
        const MicrobatchId mf = stage[st].next_f;
        if (f_stage < 0 && mf < M && rs.inflight < inflight_limit[r] && (st == 0 || f_done[at(st - 1, mf)] <= t)) {
          f_stage = st;
        }
      }
      Program& p = s.programs[r];
      if (static_cast<int>(rs.deferred_w.size()) > w_backlog ||
          (i_stage < 0 && f_stage < 0 && !rs.deferred_w.empty())) {
        const auto [st, m] = rs.deferred_w.front();
        rs.deferred_w.pop_front();
        p.push_back({ActionKind::kBackwardWeight, st, m});
      } else if (i_stage >= 0) {
        const MicrobatchId m = stage[i_stage].next_i++;
        p.push_back({ActionKind::kBackwardInput, i_stage, m});
        i_done[at(i_stage, m)] = t + 1;
        rs.deferred_w.emplace_back(i_stage, m);
        --rs.inflight;
        if (i_stage > 0) wake(placement[i_stage - 1], t + 1);
      } else if (f_stage >= 0) {
        const MicrobatchId m = stage[f_stage].next_f++;
        p.push_back({ActionKind::kForward, f_stage, m});
        f_done[at(f_stage, m)] = t + 1;
        ++rs.inflight;
        if (f_stage < S - 1) wake(placement[f_stage + 1], t + 1);
      } else {
        continue;  // idle until woken
      }
      ++emitted;
      wake(r, t + 1);
    }
    now.swap(next);
    next.clear();
  }
  return s;
}

void CheckZeroBubble(const std::string& name, int ranks, int microbatches) {
  if (ranks < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(ranks));
  if (microbatches < 1) {
    throw Error(name + ": --microbatches must be >= 1, got " + std::to_string(microbatches));
  }
}

}  // namespace

Schedule GenerateZeroBubbleH1(int ranks, int microbatches) {
  CheckZeroBubble("zb-h1", ranks, microbatches);
  std::vector<int> limit(ranks);
  for (RankId r = 0; r < ranks; ++r) limit[r] = ranks - r;
  return UnitTimeListSchedule("zb-h1", ranks, microbatches, LoopPlacement(ranks, ranks), limit, ranks - 1);
}

Schedule GenerateZeroBubbleH2(int ranks, int microbatches) {
  CheckZeroBubble("zb-h2", ranks, microbatches);
  std::vector<int> limit(ranks);
  for (RankId r = 0; r < ranks; ++r) limit[r] = 2 * (ranks - r) - 1;
  return UnitTimeListSchedule("zb-h2", ranks, microbatches, LoopPlacement(ranks, ranks), limit, 2 * ranks - 2);
}

std::vector<RankId> VPlacement(int ranks) {
  std::vector<RankId> placement(2 * ranks);
  for (StageId s = 0; s < 2 * ranks; ++s) placement[s] = s < ranks ? s : 2 * ranks - 1 - s;
  return placement;
}

Schedule GenerateZeroBubbleV(int ranks, int microbatches) {
  CheckZeroBubble("zb-v", ranks, microbatches);
  // Each stage holds half of a rank's share of activations, so 2K stage
  // microbatches in flight is K whole ones: 1F1B's peak on rank 0.
  const std::vector<int> limit(ranks, 2 * ranks);
  return UnitTimeListSchedule("zb-v", ranks, microbatches, VPlacement(ranks), limit, 4 * ranks - 2);
}

}  // namespace pplab
