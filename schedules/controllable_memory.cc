// V-Min and V-Half (Qi et al., "Pipeline Parallelism with Controllable
// Memory", arXiv 2405.15362): V-shaped schedules (stage r and 2K-1-r on rank
// r, as zb-v) that hold about a third (V-Min) or a half (V-Half) of 1F1B's
// activations, at the price of some bubble.
//
// The paper builds a schedule by repeating one "building block": the slots,
// in unit time (T_F = T_I = T_W, no communication), at which rank r runs the
// four passes of microbatch 0 that hold or free activations; microbatch m
// runs them 6m slots later (each rank runs 6 passes a microbatch: F, I and W
// of two stages). A stage's activations live from its F to its I, so the
// block's lifespans fix the memory: their sum over a rank's two stages,
// divided by the period 6, is the microbatches a rank holds at once in the
// steady state. The blocks (section 4 of the paper; d makes the 4 passes
// fall on distinct slots modulo 6):
//
//   V-Min   d = 2 if K % 3 == 0, else 0
//     F(r) at r, F(2K-1-r) at 2K-1-r, I(2K-1-r) at 2K+d+r, I(r) at 4K+d-1-r
//     lifespans sum to 4K + 2d: about 2K/3 stage microbatches, K/3 of 1F1B's
//     K whole ones
//   V-Half  d = 3 if K % 2 == 0, else 0
//     F(r) at 2r, F(2K-1-r) at 3K-2-r, I(2K-1-r) at 3K+d+2r-1, I(r) at 6K+d-2-r
//     lifespans sum to 6K + 2d - 1: about K stage microbatches, K/2 whole ones
//
// Repeating the block leaves the warm-up and the cool-down sparse. As the
// paper does, they are squeezed: in slot order, each F and I outside the
// steady phase moves to the earliest free slot of its rank after its inputs
// (unit time) such that the rank never holds more stage microbatches than
// the block's steady-state peak. The steady phase runs from rank 0's first
// I of stage 0 to its last F of stage 0. Then every W takes the first free
// slot after its I, in the order of the I passes, and a rank's program is its
// passes in slot order. The order is valid for any costs; its bubble and
// memory are tuned to equal ones.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <numeric>

#include "schedules/error.h"
#include "schedules/generators.h"

namespace pplab {
namespace {

// A pass placed on a slot of its rank.
struct Slotted {
  ActionKind kind;
  StageId stage;
  MicrobatchId microbatch;
  int slot;
};

// The building block: rank r's slots for F of its first stage (r), F of its
// second (2K-1-r), I of the second, I of the first.
struct Block {
  int f_first, f_second, i_second, i_first;
};

Block VMinBlock(int K, int r) {
  const int d = K % 3 == 0 ? 2 : 0;
  return {r, 2 * K - 1 - r, 2 * K + d + r, 4 * K + d - 1 - r};
}

Block VHalfBlock(int K, int r) {
  const int d = K % 2 == 0 ? 3 : 0;
  return {2 * r, 3 * K - 2 - r, 3 * K + d + 2 * r - 1, 6 * K + d - 2 - r};
}

constexpr int kPeriod = 6;

// The slot grids FromBlock keeps: a cell for each slot of each rank, 5 bytes
// a cell (about 0.7 GB at this bound). A rank's slots span about 6(K + M),
// so the grids grow as K(K + M): past the bound a plan is refused in one
// line rather than exhaust the machine's memory (K = 10 000 at M = 1 took
// 3 GB).
constexpr int64_t kMaxSlotCells = int64_t{1} << 27;

Schedule FromBlock(const std::string& name, int K, int M, Block (*block)(int, int)) {
  if (K < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(K));
  if (M < 1) throw Error(name + ": --microbatches must be >= 1, got " + std::to_string(M));
  // The slots: microbatch m's block starts at 6m, and rank r's last pass
  // of it is its I of its first stage, so every F and I lies below the
  // horizon.
  int64_t horizon64 = 0;
  for (RankId r = 0; r < K; ++r) horizon64 = std::max<int64_t>(horizon64, block(K, r).i_first + 1);
  horizon64 += static_cast<int64_t>(kPeriod) * (M - 1);
  if (static_cast<int64_t>(K) * (horizon64 + 1) > kMaxSlotCells) {
    throw Error(name + ": --ranks " + std::to_string(K) + " x --microbatches " + std::to_string(M) + " needs " +
                std::to_string(K) + " x " + std::to_string(horizon64) + " slots, more than pplab plans (" +
                std::to_string(kMaxSlotCells) + ")");
  }
  const int horizon = static_cast<int>(horizon64);
  const std::vector<RankId> placement = VPlacement(K);
  const int S = 2 * K;
  // The block's slots for every F and I, all below the horizon (the W
  // passes are placed after, without it).
  std::vector<Slotted> passes;
  passes.reserve(static_cast<size_t>(4) * K * M);
  for (RankId r = 0; r < K; ++r) {
    const Block b = block(K, r);
    for (MicrobatchId m = 0; m < M; ++m) {
      const int base = kPeriod * m;
      passes.push_back({ActionKind::kForward, r, m, base + b.f_first});
      passes.push_back({ActionKind::kForward, S - 1 - r, m, base + b.f_second});
      passes.push_back({ActionKind::kBackwardInput, S - 1 - r, m, base + b.i_second});
      passes.push_back({ActionKind::kBackwardInput, r, m, base + b.i_first});
    }
  }
  // occupant[r][t]: whether rank r runs something at slot t; held[r][t]: the
  // stage microbatches rank r holds during slot t (an F's from its slot on,
  // an I's up to and including its slot).
  std::vector<std::vector<char>> occupant(K, std::vector<char>(horizon, 0));
  std::vector<std::vector<int>> held(K, std::vector<int>(horizon + 1, 0));
  for (const Slotted& p : passes) {
    const RankId r = placement[p.stage];
    if (occupant[r][p.slot])
      throw Error(name + ": internal error: two passes on one slot of rank " + std::to_string(r));
    occupant[r][p.slot] = 1;
    held[r][p.kind == ActionKind::kForward ? p.slot : p.slot + 1] += p.kind == ActionKind::kForward ? 1 : -1;
  }
  int cap = 0;
  for (RankId r = 0; r < K; ++r) {
    std::partial_sum(held[r].begin(), held[r].end(), held[r].begin());
    cap = std::max(cap, *std::max_element(held[r].begin(), held[r].end()));
  }

  // Squeeze the warm-up and the cool-down, in slot order (rank order within
  // a slot). Every input of a pass sits on an earlier slot of the block, so
  // it has been placed by the time the pass is.
  std::sort(passes.begin(), passes.end(), [&placement](const Slotted& a, const Slotted& b) {
    return a.slot != b.slot ? a.slot < b.slot : placement[a.stage] < placement[b.stage];
  });
  std::vector<int> f_slot(static_cast<size_t>(S) * M, -1), i_slot(static_cast<size_t>(S) * M, -1);
  const auto at = [M](StageId st, MicrobatchId m) { return static_cast<size_t>(st) * M + m; };
  // The steady phase starts at rank 0's first I of stage 0 and ends after
  // its last F of stage 0 (at once, when that F came first: small M).
  bool steady = false, last_f_seen = false;
  for (Slotted& p : passes) {
    const RankId r = placement[p.stage];
    const bool forward = p.kind == ActionKind::kForward;
    if (p.stage == 0 && !forward && p.microbatch == 0) steady = true;
    if (!steady) {
      // The earliest slot after the pass's inputs: the previous stage's F
      // (an F) or the next stage's I and its own F (an I), and the same
      // pass of the previous microbatch, which keeps each stage's order.
      int ready = 0;
      const auto after = [&ready](int slot) { ready = std::max(ready, slot + 1); };
      if (forward) {
        if (p.stage > 0) after(f_slot[at(p.stage - 1, p.microbatch)]);
        if (p.microbatch > 0) after(f_slot[at(p.stage, p.microbatch - 1)]);
      } else {
        after(f_slot[at(p.stage, p.microbatch)]);
        if (p.stage < S - 1) after(i_slot[at(p.stage + 1, p.microbatch)]);
        if (p.microbatch > 0) after(i_slot[at(p.stage, p.microbatch - 1)]);
      }
      // An F moved from slot a to b holds one more microbatch over [b, a):
      // scan down from a while that stays within the cap. An I moved
      // earlier only frees memory.
      int best = p.slot, peak = 0;
      for (int t = p.slot - 1; t >= ready; --t) {
        peak = std::max(peak, held[r][t]);
        if (forward && peak + 1 > cap) break;
        if (!occupant[r][t]) best = t;
      }
      if (best != p.slot) {
        occupant[r][p.slot] = 0;
        occupant[r][best] = 1;
        if (forward) {
          for (int t = best; t < p.slot; ++t) ++held[r][t];
        } else {
          for (int t = best + 1; t <= p.slot; ++t) --held[r][t];
        }
        p.slot = best;
      }
    }
    (forward ? f_slot : i_slot)[at(p.stage, p.microbatch)] = p.slot;
    if (p.stage == 0 && forward && p.microbatch == M - 1) last_f_seen = true;
    if (steady && last_f_seen) steady = false;  // the cool-down, squeezed like the warm-up
  }

  // Each W on the first free slot of its rank after its I, in I order.
  std::vector<std::vector<Slotted>> by_rank(K);
  for (const Slotted& p : passes) by_rank[placement[p.stage]].push_back(p);
  Schedule s;
  s.name = name;
  s.ranks = K;
  s.stages = S;
  s.microbatches = M;
  s.placement = placement;
  s.programs.assign(K, {});
  for (RankId r = 0; r < K; ++r) {
    std::vector<Slotted>& mine = by_rank[r];
    std::sort(mine.begin(), mine.end(), [](const Slotted& a, const Slotted& b) { return a.slot < b.slot; });
    std::deque<Slotted> owed;
    Program& program = s.programs[r];
    size_t next = 0;
    for (int t = 0; next < mine.size() || !owed.empty(); ++t) {
      if (next < mine.size() && mine[next].slot == t) {
        const Slotted& p = mine[next++];
        program.push_back({p.kind, p.stage, p.microbatch});
        if (p.kind == ActionKind::kBackwardInput) owed.push_back(p);
      } else if (!owed.empty()) {
        program.push_back({ActionKind::kBackwardWeight, owed.front().stage, owed.front().microbatch});
        owed.pop_front();
      }
    }
  }
  return s;
}

}  // namespace

Schedule GenerateVMin(int ranks, int microbatches) { return FromBlock("v-min", ranks, microbatches, VMinBlock); }

Schedule GenerateVHalf(int ranks, int microbatches) { return FromBlock("v-half", ranks, microbatches, VHalfBlock); }

}  // namespace pplab
