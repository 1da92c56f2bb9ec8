// Zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., "Zero Bubble Pipeline
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
// once M >= 2K - 1. The emitted order is valid for any costs; only its bubble
// is tuned to equal ones.
#include <algorithm>
#include <deque>
#include <limits>

#include "schedules/error.h"
#include "schedules/generators.h"

namespace pplab {
namespace {

constexpr int kNever = std::numeric_limits<int>::max();

struct RankState {
  MicrobatchId next_f = 0;  // next forward to run
  MicrobatchId next_i = 0;  // next input-gradient backward to run
  std::deque<MicrobatchId> deferred_w;
  int busy_until = 0;
};

Schedule UnitTimeListSchedule(const std::string& name, int K, int M, const std::vector<int>& inflight_limit,
                              int w_backlog) {
  Schedule s;
  s.name = name;
  s.ranks = K;
  s.stages = K;
  s.microbatches = M;
  s.placement = LoopPlacement(K, K);
  s.programs.assign(K, {});
  // Finish times, in unit steps, of F(r, m) and I(r, m).
  std::vector<std::vector<int>> f_done(K, std::vector<int>(M, kNever));
  std::vector<std::vector<int>> i_done(K, std::vector<int>(M, kNever));
  std::vector<RankState> state(K);
  const long total = 3L * K * M;
  long emitted = 0;
  // Every rank makes progress at least once every few steps, so the loop ends
  // long before this bound; reaching it would be a bug in the rules above.
  const long step_bound = 4 * total + 4L * K + 16;
  for (int t = 0; emitted < total; ++t) {
    if (t > step_bound) throw Error(name + ": internal error: list scheduling made no progress");
    for (RankId r = 0; r < K; ++r) {
      RankState& st = state[r];
      if (st.busy_until > t) continue;
      Program& p = s.programs[r];
      const MicrobatchId mi = st.next_i;
      const bool i_ready = mi < M && f_done[r][mi] <= t && (r == K - 1 || i_done[r + 1][mi] <= t);
      const MicrobatchId mf = st.next_f;
      const bool f_ready =
          mf < M && st.next_f - st.next_i < inflight_limit[r] && (r == 0 || f_done[r - 1][mf] <= t);
      if (static_cast<int>(st.deferred_w.size()) > w_backlog || (!i_ready && !f_ready && !st.deferred_w.empty())) {
        p.push_back({ActionKind::kBackwardWeight, r, st.deferred_w.front()});
        st.deferred_w.pop_front();
      } else if (i_ready) {
        p.push_back({ActionKind::kBackwardInput, r, mi});
        i_done[r][mi] = t + 1;
        st.deferred_w.push_back(mi);
        ++st.next_i;
      } else if (f_ready) {
        p.push_back({ActionKind::kForward, r, mf});
        f_done[r][mf] = t + 1;
        ++st.next_f;
      } else {
        continue;  // idle this step
      }
      st.busy_until = t + 1;
      ++emitted;
    }
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
  return UnitTimeListSchedule("zb-h1", ranks, microbatches, limit, ranks - 1);
}

Schedule GenerateZeroBubbleH2(int ranks, int microbatches) {
  CheckZeroBubble("zb-h2", ranks, microbatches);
  std::vector<int> limit(ranks);
  for (RankId r = 0; r < ranks; ++r) limit[r] = 2 * (ranks - r) - 1;
  return UnitTimeListSchedule("zb-h2", ranks, microbatches, limit, 2 * ranks - 2);
}

}  // namespace pplab
