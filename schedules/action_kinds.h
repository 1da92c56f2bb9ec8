// The table of action kinds: one row per ActionKind, read by every layer.
//
// A row says what a kind depends on, which resource it uses, what memory it
// holds and releases, how it is costed, drawn and named. Validation, lowering,
// the simulator, traces and pictures look kinds up here instead of keeping
// their own switch over ActionKind, so a new kind is a row plus one handler
// per rule below (docs/schedule-format.md lists the rows).
#pragma once

#include <vector>

#include "schedules/action.h"

namespace pplab {

// What an action is to the passes.
enum class KindRole {
  kCompute,    // F, B, I, W: one (stage, microbatch) of work
  kComposite,  // OVERLAP_F_B: two compute parts run as one action
  kSend,       // SEND_F, SEND_B
  kRecv,       // RECV_F, RECV_B
  kPerStage,   // REDUCE_GRAD, UNSHARD, RESHARD: once per stage, no microbatch
};

// The resource an action occupies in the simulator.
enum class KindResource {
  kCompute,     // the rank's compute, in program order
  kLink,        // a point-to-point transfer; does not block the rank
  kCollective,  // a collective over the D data-parallel replicas; blocks the rank
  // A collective over the replicas that runs beside the rank's later actions
  // (REDUCE_GRAD: the runtime starts its all-reduce and computes on); the
  // step's work waits for it.
  kOverlappedCollective,
};

// How the simulator costs an action (CostModel::ComputeTime / CollectiveTime).
enum class KindCost {
  kForward,         // forward_ms of the stage
  kBackward,        // backward_ms (or I + W)
  kBackwardInput,   // backward_input_ms (or B - W, or B / 2)
  kBackwardWeight,  // backward_weight_ms (or B - I, or B / 2)
  kOverlap,         // forward_backward_ms, else max(F, B) + overlap_penalty_ms
  kTransfer,        // link latency + message_bytes / bandwidth (SEND); RECV waits
  kAllReduce,       // ring all-reduce of param_bytes over D: 2(D-1)/D bytes / bw + latency
  kAllGather,       // all-gather of param_bytes over D: (D-1)/D bytes / bw + latency
  kFree,            // no time
};

// Memory an action holds or releases on its rank.
enum class KindMemory {
  kNone,
  kHoldActivations,          // F: activation_bytes from its start until its B or I
  kReleaseActivations,       // B: frees the stage's activations at its end
  kSwapActivationsForStash,  // I: frees the activations, holds weight_grad_bytes until W
  kReleaseStash,             // W: frees weight_grad_bytes
  kParts,                    // OVERLAP_F_B: what its parts hold and release
  kHoldParams,               // UNSHARD: (D-1)/D param_bytes of gathered shards
  kReleaseParams,            // RESHARD: frees them
};

struct KindInfo {
  ActionKind kind;
  const char* name;  // text form, as in PyTorch's _ComputationType
  KindRole role;
  bool has_microbatch;  // false: the text form has no microbatch
  KindResource resource;
  KindCost cost;
  KindMemory memory;
  const char* depends;  // what it waits for, one phrase (docs, `pplab schedules --kinds`)
  // Drawing: fill colour (Okabe-Ito, distinct under colour-vision
  // deficiencies), label colour on that fill, legend text, and the letter of
  // the kind in terminal pictures.
  const char* fill;
  const char* label;
  const char* legend;
  char letter;
};

// The row of `kind`.
const KindInfo& InfoOf(ActionKind kind);
// All rows, in ActionKind order.
const std::vector<KindInfo>& KindTable();

}  // namespace pplab
