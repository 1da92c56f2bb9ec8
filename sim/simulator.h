// Discrete-event simulator: costs a lowered schedule with a CostModel.
//
// Each rank runs its program in order on one compute resource and sends on
// one communication resource (a separate stream or thread). A SEND starts
// when its rank reaches it and the rank's previous message has left, holds
// the communication resource for CostModel::TransferTime and never blocks
// the compute resource; its message arrives at its end. A RECV only posts the receive (no time); the
// compute action that consumes the message starts no earlier than its
// arrival. An OVERLAP_F_B starts when the inputs of both its parts are there
// and holds the rank for its overlapped cost. REDUCE_GRAD, UNSHARD and
// RESHARD block their rank in program order for CostModel::CollectiveTime;
// they count in the makespan but not in a rank's busy (compute) time.
// Per-step work (CostModel::Step()) follows each rank's last action and
// counts in the makespan (Timeline::step_events). Time is integer nanoseconds; the same input gives the same output.
// Cost is linear in the number of actions.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "schedules/schedule.h"
#include "sim/cost_model.h"
#include "traces/timeline.h"

namespace pplab {

// What a rank holds, by kind: at its peak (RankMetrics::peak_parts), they
// add up to peak_activation_bytes.
struct MemoryParts {
  Bytes activations = 0;   // F's stashes, and what a recomputed stage's B or I rebuilds
  Bytes weight_grads = 0;  // what I keeps for W
  Bytes messages = 0;      // message buffers and gradients between stages (CostModel::Messages())
  Bytes casts = 0;         // weight copies kept for the step (cast_weight_bytes)
  Bytes params = 0;        // parameters an UNSHARD gathered
  Bytes workspace = 0;     // the running action's temporaries
  Bytes graphs = 0;        // CUDA graphs' slots (graph_slot_bytes), held from their first F to the end of the run
  Bytes Total() const { return activations + weight_grads + messages + casts + params + workspace + graphs; }
};

struct RankMetrics {
  RankId rank = 0;
  TimeNs busy = 0;        // sum of compute time
  TimeNs idle = 0;        // makespan - busy
  TimeNs start = 0;       // start of the first compute action
  TimeNs end = 0;         // end of the last compute action
  int peak_inflight = 0;  // max forwards whose B/I has not finished
  Bytes peak_activation_bytes = 0;
  MemoryParts peak_parts;  // what makes up peak_activation_bytes, at the first time it is reached
};

struct CriticalStep {
  RankId rank;
  Action action;
  TimeNs start, end;
};

struct SimResult {
  Timeline timeline;
  TimeNs makespan = 0;
  std::vector<RankMetrics> per_rank;
  // 1 - sum(busy) / (K * makespan): idle time against the global makespan
  // (GPipe / Megatron convention).
  double bubble_fraction = 0;
  // max over ranks of 1 - busy / (end - start): idle time inside each rank's
  // own span, worst rank (Zero Bubble paper convention).
  double span_bubble_fraction = 0;
  long p2p_messages = 0;
  Bytes p2p_bytes = 0;
  // The chain of compute actions and messages that ends at the makespan,
  // first to last: each entry started when its predecessor finished (or its
  // message arrived).
  std::vector<CriticalStep> critical_path;
  TimeNs critical_compute = 0;  // compute time on the critical path
  TimeNs critical_comm = 0;     // transfer and collective time on the critical path
  // Per-step work (CostModel::Step()) after the path's last action:
  // critical_compute + critical_comm + critical_step = makespan.
  TimeNs critical_step = 0;
};

// Simulates `schedule`. A schedule without communication actions is lowered
// first. Throws pplab::Error when the cost model does not cover the
// schedule's stages, or when the schedule cannot finish (a deadlock or an
// action that needs one which never runs), naming the stuck actions.
//
// With `rng`, each F, B, I and W takes a time drawn by
// CostModel::SampleComputeTime at a quantile from `rng` (one draw per
// action, in the engine's deterministic visit order; a kind without a
// spread keeps its time), and so does each REDUCE_GRAD with a measured
// spread (CostModel::SampleCollectiveTime) and each per-step cost with a
// spread (after the actions; see AddStepWork), so the same seed gives the
// same result. Without it, times are the model's.
SimResult Simulate(const Schedule& schedule, const CostModel& costs, std::mt19937_64* rng = nullptr);

}  // namespace pplab
