// zb-auto (see zb_auto.h). The list scheduler below follows the paper's
// heuristic (section 3.1): on a free rank, run an I whose gradient has
// arrived, else an F whose input has arrived while the in-flight limit
// allows, else fill the gap with a deferred W; a W is forced once too many
// are owed. Unlike the unit-time orders of zero_bubble.cc it keeps real time:
// each stage's F, I and W cost and each message's transfer time come from the
// cost model, so the order it emits is the one those costs favour.
#include "sim/zb_auto.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "schedules/error.h"
#include "sim/simulator.h"

namespace pplab {
namespace {

constexpr TimeNs kUnknown = std::numeric_limits<TimeNs>::max();

struct Policy {
  std::vector<int> inflight;  // per rank, >= 1
  int w_backlog = 0;          // a W is forced when more than this are owed
  // When a deferred W may fill an idle gap: kGreedy always; kKnownGap when
  // it ends before the next input whose arrival time is known (or none is);
  // kStrictGap only when it ends before the next input's known arrival,
  // waiting while an input is still to come at an unknown time.
  enum GapRule { kGreedy, kKnownGap, kStrictGap } gap = kGreedy;
  // Which runs first when both an I and an F are ready: the I (the paper's
  // heuristic), or the F (1F1B's alternation, which keeps the stages after
  // a slow one fed where the I-first order lets their forwards bunch up).
  bool f_first = false;
};

// Which other W backlogs and gap rules would have made every decision of a
// list schedule the same way, and so the same order (or the same point of
// abandoning it): the W backlogs b with most_unforced <= b < least_forced,
// where those are the largest number of owed W's seen when no W was forced
// and the least seen when one was; and the gap rules in `gaps` (a bit per
// Policy::GapRule), those that chose as the policy's own did at every gap.
struct Path {
  int most_unforced = 0;
  int least_forced = std::numeric_limits<int>::max();
  unsigned gaps = 0b111;
  unsigned firsts = 0b11;  // a bit per Policy::f_first: those that chose alike wherever an I and an F were ready

  bool Repeats(const Policy& p) const {
    return p.w_backlog >= most_unforced && p.w_backlog < least_forced && (gaps >> p.gap & 1u) &&
           (firsts >> static_cast<int>(p.f_first) & 1u);
  }
};

struct Planned {
  Schedule schedule;
  TimeNs predicted = 0;    // the list schedule's own makespan
  bool abandoned = false;  // stopped once it could no longer end before the bound or fit
  Path path;
};

// What lets ListSchedule give up on an order part-way (see there).
struct Cutoff {
  TimeNs bound = kUnknown;      // the best costed makespan so far
  std::vector<TimeNs> work;     // with a bound: each rank's F, I and W time in all
  std::vector<TimeNs> work_fi;  // with a bound: each rank's F and I time in all
  // With a bound: the least time from the end of rank r's last I to the
  // end of the step: the last microbatch's gradient still goes down ranks
  // r - 1 .. 0 (a message and an I each), and rank 0's last W follows.
  std::vector<TimeNs> tail;
  std::vector<Bytes> byte_limit;  // 1 or K values; empty: none
};

// One rank per stage (v = 1). Event-driven: a rank is reconsidered when it
// becomes free and when an input it may wait for gets a known arrival time.
//
// With a `bound`, the order is abandoned (its schedule left partial) as soon
// as its makespan is sure to reach the bound: a rank that is free at t with
// work w still to run ends at t + w at the earliest; and its last I, which
// follows all its F's and I's, ends at t + (their time left) at the
// earliest, after which the last gradient still crosses the ranks below
// (Cutoff::tail). Most policies are far slower than the best one, and are
// dropped early that way.
//
// With a `byte_limit` (1 or K values), it is abandoned as soon as a rank
// holds more: activations from F to I, the stash from I to W, a recomputed
// stage's activations during its I, and the running action's workspace.
// The simulator holds all of that at the same point of the rank's order,
// and more (messages, weight casts; with one stage a rank an F's activations
// are never less than activation_bytes), so an order abandoned here would
// not fit there either.
// What ListSchedule reads of a rank's stage, looked up once per order:
// compute times do not depend on the microbatch, nor transfers on it.
struct RankCosts {
  TimeNs f = 0, i = 0, w = 0;
  TimeNs to_next = 0, to_previous = 0;  // one message's transfer to rank r + 1 and to r - 1
  Bytes workspace_f = 0, workspace_i = 0, workspace_w = 0;
  Bytes activation = 0, recomputed = 0, weight_grad = 0;
};

std::vector<RankCosts> CostsByRank(int K, const CostModel& costs) {
  std::vector<RankCosts> out(K);
  for (RankId r = 0; r < K; ++r) {
    const StageCost& c = costs.Stage(r);
    RankCosts& rc = out[r];
    rc.f = costs.ComputeTime({ActionKind::kForward, r, 0});
    rc.i = costs.ComputeTime({ActionKind::kBackwardInput, r, 0});
    rc.w = costs.ComputeTime({ActionKind::kBackwardWeight, r, 0});
    if (r + 1 < K) rc.to_next = costs.TransferTime(r, r + 1, c.message_bytes);
    if (r > 0) rc.to_previous = costs.TransferTime(r, r - 1, c.message_bytes);
    rc.workspace_f = c.WorkspaceOf(ActionKind::kForward);
    rc.workspace_i = c.WorkspaceOf(ActionKind::kBackwardInput);
    rc.workspace_w = c.WorkspaceOf(ActionKind::kBackwardWeight);
    rc.activation = c.activation_bytes;
    rc.recomputed = c.recomputed_bytes;
    rc.weight_grad = c.weight_grad_bytes;
  }
  return out;
}

Planned ListSchedule(int K, int M, const std::vector<RankCosts>& costs, const Policy& policy,
                     const Cutoff& cutoff = {}) {
  const TimeNs bound = cutoff.bound;
  const std::vector<Bytes>& byte_limit = cutoff.byte_limit;
  Planned out;
  Schedule& s = out.schedule;
  s.name = "zb-auto";
  s.ranks = K;
  s.stages = K;
  s.microbatches = M;
  s.placement = LoopPlacement(K, K);
  s.programs.assign(K, {});
  for (Program& p : s.programs) p.reserve(3 * static_cast<size_t>(M));
  const auto at = [M](RankId r, MicrobatchId m) { return static_cast<size_t>(r) * M + m; };
  std::vector<TimeNs> f_done(static_cast<size_t>(K) * M, kUnknown);
  std::vector<TimeNs> f_arrive(f_done.size(), kUnknown);  // activation of m at rank r (from r - 1)
  std::vector<TimeNs> i_arrive(f_done.size(), kUnknown);  // gradient of m at rank r (from r + 1)
  std::vector<MicrobatchId> next_f(K, 0), next_i(K, 0);
  std::vector<int> inflight(K, 0);
  std::vector<std::deque<MicrobatchId>> owed(K);
  std::vector<TimeNs> free_at(K, 0);
  // Compute time still to run on each rank (with a bound), and the
  // activations and stashes held, as the simulator counts them (a lower bound).
  std::vector<TimeNs> left = bound != kUnknown ? cutoff.work : std::vector<TimeNs>(K, 0);
  std::vector<TimeNs> left_fi = bound != kUnknown ? cutoff.work_fi : std::vector<TimeNs>(K, 0);
  std::vector<Bytes> held(K, 0);
  using Wake = std::pair<TimeNs, RankId>;
  std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> wakes;
  for (RankId r = 0; r < K; ++r) wakes.push({0, r});
  // A rank still busy at `when` would pass the wake over when it came (a
  // rank's free_at only grows): it is not queued. The rank looks again when
  // it becomes free.
  const auto wake = [&wakes, &free_at](TimeNs when, RankId rank) {
    if (when >= free_at[rank]) wakes.push({when, rank});
  };
  const long total = 3L * K * M;
  for (long emitted = 0; emitted < total;) {
    if (wakes.empty()) throw Error("zb-auto: internal error: list scheduling made no progress");
    const auto [t, r] = wakes.top();
    wakes.pop();
    if (t < free_at[r]) continue;  // busy; woken again when free
    if (bound != kUnknown && (t + left[r] >= bound || (left_fi[r] > 0 && t + left_fi[r] + cutoff.tail[r] >= bound))) {
      out.abandoned = true;
      return out;
    }
    const MicrobatchId mi = next_i[r], mf = next_f[r];
    TimeNs i_ready = kUnknown, f_ready = kUnknown;
    if (mi < M && f_done[at(r, mi)] != kUnknown) i_ready = r == K - 1 ? f_done[at(r, mi)] : i_arrive[at(r, mi)];
    if (mf < M && inflight[r] < policy.inflight[r]) f_ready = r == 0 ? 0 : f_arrive[at(r, mf)];
    Action a;
    const int owed_now = static_cast<int>(owed[r].size());
    const bool forced = owed_now > policy.w_backlog;
    if (forced) {
      out.path.least_forced = std::min(out.path.least_forced, owed_now);
    } else {
      out.path.most_unforced = std::max(out.path.most_unforced, owed_now);
    }
    if (!forced && i_ready <= t && f_ready <= t) out.path.firsts &= 1u << static_cast<int>(policy.f_first);
    if (forced) {
      a = {ActionKind::kBackwardWeight, r, owed[r].front()};
    } else if (policy.f_first && f_ready <= t) {
      a = {ActionKind::kForward, r, mf};
    } else if (i_ready <= t) {
      a = {ActionKind::kBackwardInput, r, mi};
    } else if (f_ready <= t) {
      a = {ActionKind::kForward, r, mf};
    } else {
      const TimeNs next = std::min(i_ready, f_ready);
      const bool input_to_come = mi < M || (mf < M && inflight[r] < policy.inflight[r]);
      const bool none_owed = owed[r].empty();
      const TimeNs w_end = none_owed ? kUnknown : t + costs[r].w;
      // (Captures no structured binding: C++17 lambdas may not.)
      const auto fits = [none_owed, next, w_end, input_to_come](Policy::GapRule gap) {
        if (none_owed) return false;
        if (gap == Policy::kKnownGap) return next == kUnknown || w_end <= next;
        if (gap == Policy::kStrictGap) return next == kUnknown ? !input_to_come : w_end <= next;
        return true;
      };
      const bool w_fits = fits(policy.gap);
      for (Policy::GapRule gap : {Policy::kGreedy, Policy::kKnownGap, Policy::kStrictGap}) {
        if (fits(gap) != w_fits) out.path.gaps &= ~(1u << gap);
      }
      if (!w_fits) {
        if (next != kUnknown) wakes.push({next, r});
        continue;  // else a neighbour wakes it when an input gets a time
      }
      a = {ActionKind::kBackwardWeight, r, owed[r].front()};
    }
    const RankCosts& c = costs[r];
    if (!byte_limit.empty()) {
      const Bytes during = held[r] + (a.kind == ActionKind::kForward         ? c.workspace_f + c.activation
                                      : a.kind == ActionKind::kBackwardInput ? c.workspace_i + c.recomputed
                                                                             : c.workspace_w);
      if (during > byte_limit[byte_limit.size() == 1 ? 0 : r]) {
        out.abandoned = true;
        return out;
      }
      held[r] += a.kind == ActionKind::kForward         ? c.activation
                 : a.kind == ActionKind::kBackwardInput ? c.weight_grad - c.activation
                                                        : -c.weight_grad;
    }
    const TimeNs end = t + (a.kind == ActionKind::kForward ? c.f : a.kind == ActionKind::kBackwardInput ? c.i : c.w);
    left[r] -= end - t;
    if (a.kind != ActionKind::kBackwardWeight) left_fi[r] -= end - t;
    free_at[r] = end;
    wakes.push({end, r});
    s.programs[r].push_back(a);
    ++emitted;
    if (a.kind == ActionKind::kForward) {
      ++next_f[r];
      ++inflight[r];
      f_done[at(r, a.microbatch)] = end;
      if (r + 1 < K) {
        f_arrive[at(r + 1, a.microbatch)] = end + c.to_next;
        wake(f_arrive[at(r + 1, a.microbatch)], r + 1);
      }
    } else if (a.kind == ActionKind::kBackwardInput) {
      ++next_i[r];
      --inflight[r];
      owed[r].push_back(a.microbatch);
      if (r > 0) {
        i_arrive[at(r - 1, a.microbatch)] = end + c.to_previous;
        wake(i_arrive[at(r - 1, a.microbatch)], r - 1);
      }
    } else {
      owed[r].pop_front();
    }
  }
  out.predicted = *std::max_element(free_at.begin(), free_at.end());
  return out;
}

// The policies searched: in-flight limits from 1 up to zb-h1's, between
// zb-h1's and zb-h2's and a little beyond, times W backlogs, times the gap
// rules, times I-first or F-first.
std::vector<Policy> Policies(int K, int M) {
  std::vector<std::vector<int>> limits;  // distinct, in the order first made
  std::set<std::vector<int>> made;
  const auto add = [&](const std::function<int(RankId)>& limit_of) {
    std::vector<int> l(K);
    for (RankId r = 0; r < K; ++r) l[r] = std::clamp(limit_of(r), 1, M);
    if (made.insert(l).second) limits.push_back(std::move(l));
  };
  // Each family's limits are clamped to M, so past a parameter of M each
  // gives the vector it gave at M, already made: its loop stops there
  // (O(min(K, M) K) work, not O(K^2); the same limits, in the same order).
  for (int c = 1; c < K && c <= M; ++c) add([&](RankId r) { return std::min(K - r, c); });  // below 1F1B's memory
  for (int e = 0; e < K && e <= M; ++e) {
    add([&](RankId r) { return K - r + std::min(e, K - 1 - r); });  // zb-h1 .. zb-h2 shape
  }
  for (int e = 1; e <= K && e <= M; ++e) add([&](RankId r) { return K - r + e; });  // 1F1B's slope, e more in flight
  for (int c = K; c < 2 * K && c <= std::max(K, M); ++c) {
    add([&](RankId) { return c; });  // the same limit on every rank
  }
  std::vector<Policy> out;
  for (const std::vector<int>& l : limits) {
    for (int backlog : {0, K - 1, 2 * K - 2, std::numeric_limits<int>::max()}) {
      for (Policy::GapRule gap : {Policy::kGreedy, Policy::kKnownGap, Policy::kStrictGap}) {
        for (const bool f_first : {false, true}) out.push_back({l, backlog, gap, f_first});
      }
    }
  }
  return out;
}

// FNV-1a over every program's kinds and microbatches (v = 1: the stage is
// the rank).
uint64_t Fingerprint(const Schedule& s) {
  uint64_t h = 1469598103934665603ULL;
  const auto mix = [&h](uint64_t x) {
    h ^= x;
    h *= 1099511628211ULL;
  };
  for (const Program& p : s.programs) {
    mix(p.size());
    for (const Action& a : p) mix(static_cast<uint64_t>(a.kind) << 32 | static_cast<uint32_t>(a.microbatch));
  }
  return h;
}

// The paths of the policies list-scheduled so far with the in-flight limits
// of the one asked about: Policies() makes each limit's policies in a run,
// and a policy whose W backlog and gap rule one of those paths admits would
// repeat that order, decision for decision, so it need not be scheduled.
class SameLimitPaths {
 public:
  // Whether policies[i] repeats a path added since its limits began.
  bool Repeats(const std::vector<Policy>& policies, size_t i) {
    if (i == 0 || policies[i - 1].inflight != policies[i].inflight) paths_.clear();
    const Policy& p = policies[i];
    return std::any_of(paths_.begin(), paths_.end(), [&p](const Path& path) { return path.Repeats(p); });
  }
  void Add(const Path& path) { paths_.push_back(path); }

 private:
  std::vector<Path> paths_;
};

// A lower bound on the makespan of any list schedule under in-flight limits
// `limits`: rank r's F of microbatch m + c_r waits for its I of m, which
// waits for m's round trip from rank r to the last rank and back
// (RT_r: the F's, the I's and the messages between), so its last I ends at
// least (floor((M - 1) / c_r) + 1) RT_r after its first F can start; the
// first F waits for the ranks above it, and after the last I the gradient
// still crosses the ranks below (tail). kUnknown where it passes int64.
TimeNs RoundTripBound(int M, const std::vector<int>& limits, const std::vector<RankCosts>& costs,
                      const std::vector<TimeNs>& tail) {
  const int K = static_cast<int>(costs.size());
  constexpr TimeNs kMax = std::numeric_limits<TimeNs>::max();
  std::vector<TimeNs> trip(K);  // RT_r, summed from the last rank up
  for (RankId r = K - 1; r >= 0; --r) {
    trip[r] = costs[r].f + costs[r].i + (r + 1 < K ? trip[r + 1] + costs[r].to_next + costs[r + 1].to_previous : 0);
  }
  TimeNs bound = 0, head = 0;
  for (RankId r = 0; r < K; ++r) {
    const TimeNs trips = (M - 1) / limits[r] + 1;
    if (trip[r] > 0 && trips > (kMax - head - tail[r]) / trip[r]) return kUnknown;
    bound = std::max(bound, head + trips * trip[r] + tail[r]);
    head += costs[r].f + costs[r].to_next;
  }
  return bound;
}

struct Costed {
  TimeNs makespan = 0;
  std::vector<Bytes> bytes;  // peak per rank
  std::vector<int> inflight;
};

Costed Cost(const Schedule& s, const CostModel& costs) {
  const SimResult r = Simulate(s, costs);
  Costed c;
  c.makespan = r.makespan;
  for (const RankMetrics& m : r.per_rank) {
    c.bytes.push_back(m.peak_activation_bytes);
    c.inflight.push_back(m.peak_inflight);
  }
  return c;
}

}  // namespace

Schedule GenerateAuto(const GeneratorOptions& options, const CostModel& costs, const AutoOptions& limits_in) {
  const std::string name = "zb-auto";
  const int K = options.ranks, M = options.microbatches;
  if (K < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(K));
  if (M < 1) throw Error(name + ": --microbatches must be >= 1, got " + std::to_string(M));
  if (options.virtual_stages > 1) {
    throw Error(name + ": --virtual must be 1 (one stage per rank), got " + std::to_string(options.virtual_stages));
  }
  if (3LL * K * M > kMaxComputeActions) {
    throw Error(name + ": --ranks " + std::to_string(K) + " x --microbatches " + std::to_string(M) +
                " is more than pplab plans");
  }
  // The search list-schedules some 24 policies for each of about 3 min(K, M)
  // in-flight limits, each O(K M log K): past these sizes it took minutes
  // (K=320, M=256: 68 s; K=128, M=8192: 15 s and 0.8 GB on the 2-core VM).
  if (K > kZbAutoMaxRanks || 3LL * K * M > kZbAutoMaxActions) {
    throw Error(name + ": searches at most " + std::to_string(kZbAutoMaxRanks) + " ranks and " +
                std::to_string(kZbAutoMaxActions) + " F, I and W (3 K M); --ranks " + std::to_string(K) +
                " x --microbatches " + std::to_string(M) + " is more");
  }
  costs.CheckStages(K, name);
  AutoOptions limits = limits_in;
  if (!limits.activation_limit.empty() && static_cast<int>(limits.activation_limit.size()) != 1 &&
      static_cast<int>(limits.activation_limit.size()) != K) {
    throw Error(name + ": the activation limit needs 1 or K = " + std::to_string(K) + " values, got " +
                std::to_string(limits.activation_limit.size()));
  }
  const Schedule h1 = GenerateZeroBubbleH1(K, M), h2 = GenerateZeroBubbleH2(K, M);
  const Costed h1_cost = Cost(h1, costs), h2_cost = Cost(h2, costs);
  if (limits.activation_limit.empty() && limits.inflight_limit <= 0) {
    limits.activation_limit = {*std::max_element(h1_cost.bytes.begin(), h1_cost.bytes.end())};
    limits.inflight_limit = *std::max_element(h1_cost.inflight.begin(), h1_cost.inflight.end());
  }
  Bytes smallest = -1;  // the least, over the orders costed, of the largest peak over ranks
  const auto within_limits = [&](const Costed& c) {
    for (RankId r = 0; r < K; ++r) {
      if (!limits.activation_limit.empty() &&
          c.bytes[r] > limits.activation_limit[limits.activation_limit.size() == 1 ? 0 : r]) {
        return false;
      }
      if (limits.inflight_limit > 0 && c.inflight[r] > limits.inflight_limit) return false;
    }
    return true;
  };
  const auto fits = [&](const Costed& c) {
    const Bytes over = *std::max_element(c.bytes.begin(), c.bytes.end());
    smallest = smallest < 0 ? over : std::min(smallest, over);
    return within_limits(c);
  };
  std::optional<Schedule> best;
  TimeNs best_time = 0;
  const auto consider = [&](const Schedule& s, const Costed& c) {
    if (fits(c) && (!best || c.makespan < best_time)) {
      best = s;
      best_time = c.makespan;
    }
  };
  consider(h1, h1_cost);
  consider(h2, h2_cost);

  // The leanest policy (one microbatch in flight, each W right after its I)
  // holds one microbatch's activations or stash at a time, the least of any
  // order; when even it is over the limit, the search stops here.
  const std::vector<Policy> policies = Policies(K, M);
  const std::vector<RankCosts> by_rank = CostsByRank(K, costs);
  if (!best) {
    const Schedule lean = ListSchedule(K, M, by_rank, {std::vector<int>(K, 1), 0, Policy::kGreedy}).schedule;
    consider(lean, Cost(lean, costs));
    if (!best) {
      throw Error(name + ": no order fits the memory limit: the leanest (one microbatch in flight) peaks at " +
                  std::to_string(smallest) + " activation bytes on a rank");
    }
  }
  // Distinct orders (told apart by a hash of their programs), cheapest
  // predicted first. Only the policy is kept, not the order: the few that
  // get costed are list-scheduled again, which keeps memory at one order.
  struct Ranked {
    TimeNs predicted;
    size_t policy;
  };
  std::vector<Ranked> ranked;
  // An order predicted to take at least the best costed time so far is
  // never costed (below), nor one sure to exceed the byte limit, so its
  // list schedule may stop there.
  Cutoff cutoff;
  if (limits.prune) {
    cutoff.bound = best_time;
    cutoff.byte_limit = limits.activation_limit;
    cutoff.work.assign(K, 0);
    cutoff.work_fi.assign(K, 0);
    cutoff.tail.assign(K, 0);
    for (RankId r = 0; r < K; ++r) {
      cutoff.work[r] = M * (by_rank[r].f + by_rank[r].i + by_rank[r].w);
      cutoff.work_fi[r] = M * (by_rank[r].f + by_rank[r].i);
      cutoff.tail[r] = r == 0 ? by_rank[0].w : cutoff.tail[r - 1] + by_rank[r].to_previous + by_rank[r - 1].i;
    }
  }
  // The bound tightens as the search goes. Each order predicted faster than
  // any before it is costed at once; when it fits, no order predicted above
  // both its prediction and its costed time can be costed in the walk below
  // (the walk reaches it first and then stops at the costed time), so such
  // orders are abandoned. Where h1 and h2 do not fit, the first bound is the
  // leanest order's, tens of times the best: with that bound alone, 14 of
  // 28 905 list schedules were dropped by time in a 405B plan at K = 64.
  TimeNs fastest_predicted = kUnknown;
  std::map<size_t, Costed> costed;  // by policy, the orders costed during the search
  //
  // So that the bound tightens early, the in-flight limits are searched in
  // the order of their round-trip bound (RoundTripBound), the lowest first,
  // and a limit whose bound reaches the search's is not searched at all (its
  // orders would all be abandoned). Each limit's policies keep their order,
  // which SameLimitPaths needs; ties in the walk go to the policy made
  // first, as if searched in order.
  std::vector<std::pair<TimeNs, size_t>> groups;  // (bound, first policy) of each limit's run of policies
  for (size_t i = 0; i < policies.size(); ++i) {
    if (i > 0 && policies[i - 1].inflight == policies[i].inflight) continue;
    groups.push_back({limits.prune ? RoundTripBound(M, policies[i].inflight, by_rank, cutoff.tail) : 0, i});
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<uint64_t, size_t> order_at;  // an order's fingerprint: its place in `ranked`
  // A policy that repeats an earlier one's order (or its point of
  // abandoning it, which a bound no looser reaches too) is not scheduled again.
  SameLimitPaths paths;
  for (const auto& [group_bound, first] : groups) {
    if (limits.prune && group_bound >= cutoff.bound) continue;
    for (size_t i = first; i < policies.size() && policies[i].inflight == policies[first].inflight; ++i) {
      const Policy& p = policies[i];
      if (limits.inflight_limit > 0 &&
          *std::max_element(p.inflight.begin(), p.inflight.end()) > limits.inflight_limit) {
        continue;  // would be refused after costing
      }
      if (paths.Repeats(policies, i) && limits.prune) continue;
      const Planned c = ListSchedule(K, M, by_rank, p, cutoff);
      paths.Add(c.path);
      if (c.abandoned) continue;
      const auto [at, fresh] = order_at.emplace(Fingerprint(c.schedule), ranked.size());
      if (!fresh) {
        ranked[at->second].policy = std::min(ranked[at->second].policy, i);  // the first made, as in order
        continue;
      }
      ranked.push_back({c.predicted, i});
      if (limits.prune && c.predicted < fastest_predicted) {
        fastest_predicted = c.predicted;
        const Costed& k = costed.emplace(i, Cost(c.schedule, costs)).first->second;
        if (within_limits(k)) cutoff.bound = std::min(cutoff.bound, std::max(c.predicted + 1, k.makespan));
      }
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.predicted != b.predicted ? a.predicted < b.predicted : a.policy < b.policy;
  });
  for (const Ranked& c : ranked) {
    if (best && c.predicted >= best_time) break;
    const Schedule s = ListSchedule(K, M, by_rank, policies[c.policy]).schedule;
    const auto known = costed.find(c.policy);
    consider(s, known != costed.end() ? known->second : Cost(s, costs));
  }
  best->name = name;
  return *best;
}

std::vector<Schedule> ZbAutoOrders(int K, int M, const CostModel& costs, bool skip_repeats) {
  costs.CheckStages(K, "zb-auto");
  const std::vector<Policy> policies = Policies(K, M);
  const std::vector<RankCosts> by_rank = CostsByRank(K, costs);
  SameLimitPaths paths;
  std::set<uint64_t> seen;
  std::vector<Schedule> out;
  for (size_t i = 0; i < policies.size(); ++i) {
    if (paths.Repeats(policies, i) && skip_repeats) continue;
    Planned c = ListSchedule(K, M, by_rank, policies[i]);
    paths.Add(c.path);
    if (seen.insert(Fingerprint(c.schedule)).second) out.push_back(std::move(c.schedule));
  }
  return out;
}

Schedule GenerateWithCosts(const std::string& name, const GeneratorOptions& options, const CostModel& costs,
                           const AutoOptions& limits) {
  if (FindGenerator(name).needs_costs) return GenerateAuto(options, costs, limits);
  return Generate(name, options);
}

}  // namespace pplab
