// Action: one step of a rank's program, the unit of the schedule IR.
//
// Text form follows PyTorch pipelining: "<stage><KIND><microbatch>", e.g.
// "2F0" (stage 2 forward of microbatch 0), "1SEND_F3", "0I2", "0W2"; a
// per-stage action has no microbatch ("3REDUCE_GRAD", "0UNSHARD"); an
// overlapped forward and backward is written "(0F7;7B3)OVERLAP_F_B".
//
// Communication actions name the stage that owns them on their own rank:
//   SEND_F(s, m): stage s sends its output activations of m to stage s+1.
//   RECV_F(s, m): stage s receives its input activations of m from s-1.
//   SEND_B(s, m): stage s sends the gradient of its input of m to stage s-1.
//   RECV_B(s, m): stage s receives the gradient of its output of m from s+1.
//
// What each kind depends on, which resource it uses, what memory it holds and
// releases, how it is costed and drawn is in one table: action_kinds.h.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/units.h"

namespace pplab {

enum class ActionKind {
  kForward,         // F: forward of one stage on one microbatch
  kBackward,        // B: full backward (input and weight gradients)
  kBackwardInput,   // I: input-gradient half of a split backward
  kBackwardWeight,  // W: weight-gradient half of a split backward
  kSendF,
  kRecvF,
  kSendB,
  kRecvB,
  // OVERLAP_F_B: the forward F(stage, microbatch) run together with the
  // backward (overlap_kind, overlap_stage, overlap_microbatch) on the same
  // rank, DualPipe's overlapped F&B. overlap_kind is B or I.
  kOverlapFB,
  // Per-stage actions (no microbatch; Action::microbatch is 0):
  kReduceGrad,  // REDUCE_GRAD: data-parallel reduction of the stage's gradients
  kUnshard,     // UNSHARD: all-gather of the stage's FSDP-sharded parameters
  kReshard,     // RESHARD: frees the stage's gathered parameters
};

constexpr int kNumActionKinds = 12;

struct Action {
  ActionKind kind = ActionKind::kForward;
  StageId stage = 0;
  MicrobatchId microbatch = 0;
  // OVERLAP_F_B only: its backward part. Ignored (and left at these values)
  // for every other kind.
  ActionKind overlap_kind = ActionKind::kBackward;
  StageId overlap_stage = 0;
  MicrobatchId overlap_microbatch = 0;

  friend bool operator==(const Action& a, const Action& b) {
    if (a.kind != b.kind || a.stage != b.stage || a.microbatch != b.microbatch) return false;
    return a.kind != ActionKind::kOverlapFB ||
           (a.overlap_kind == b.overlap_kind && a.overlap_stage == b.overlap_stage &&
            a.overlap_microbatch == b.overlap_microbatch);
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

// An OVERLAP_F_B of forward (f_stage, f_mb) with backward (b_kind, b_stage, b_mb).
Action OverlapFB(StageId f_stage, MicrobatchId f_mb, ActionKind b_kind, StageId b_stage, MicrobatchId b_mb);

// "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OVERLAP_F_B",
// "REDUCE_GRAD", "UNSHARD", "RESHARD".
const char* KindName(ActionKind kind);
// Inverse of KindName; std::nullopt for an unknown name.
std::optional<ActionKind> KindFromName(std::string_view name);

// F, B, I, W and OVERLAP_F_B: work on the rank's compute resource.
bool IsCompute(ActionKind kind);
// SEND_* and RECV_*: point-to-point messages between stages.
bool IsComm(ActionKind kind);
bool IsSend(ActionKind kind);
bool IsRecv(ActionKind kind);
// REDUCE_GRAD, UNSHARD, RESHARD: once per stage and step, no microbatch.
bool IsPerStage(ActionKind kind);
// Whether the action keeps its rank busy in program order (compute or a
// per-stage collective): what a step's makespan is measured over.
bool OccupiesRank(ActionKind kind);
// A "backward that produces the input gradient": B or I.
inline bool IsInputGrad(ActionKind kind) { return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput; }

// The simple compute actions an action performs: itself for F, B, I and W;
// its forward part then its backward part for OVERLAP_F_B; none otherwise.
// Every pass that asks "which F/B/I/W run here" goes through this.
struct ComputeParts {
  Action part[2];
  int count = 0;
  const Action* begin() const { return part; }
  const Action* end() const { return part + count; }
};
ComputeParts PartsOf(const Action& action);

// The stage at the other end of a communication action: s+1 for SEND_F,
// s-1 for RECV_F and SEND_B, s+1 for RECV_B.
StageId PeerStage(const Action& comm);

// What a message is, the same on both of its ends: activations (forward) or
// gradients, the stage that receives it, and the microbatch.
struct MessageKey {
  bool forward = true;
  StageId to_stage = 0;
  MicrobatchId microbatch = 0;
  friend bool operator==(const MessageKey& a, const MessageKey& b) {
    return a.forward == b.forward && a.to_stage == b.to_stage && a.microbatch == b.microbatch;
  }
  friend bool operator<(const MessageKey& a, const MessageKey& b) {
    if (a.forward != b.forward) return a.forward < b.forward;
    if (a.to_stage != b.to_stage) return a.to_stage < b.to_stage;
    return a.microbatch < b.microbatch;
  }
};
// The message a SEND or RECV carries.
MessageKey MessageOf(const Action& comm);
// The RECV that takes the message of `send`: SEND_F(s,m) -> RECV_F(s+1,m),
// SEND_B(s,m) -> RECV_B(s-1,m).
Action MatchingRecv(const Action& send);

// Canonical text form, e.g. "1SEND_F3", "2REDUCE_GRAD", "(0F7;7B3)OVERLAP_F_B".
std::string FormatAction(const Action& action);
// Parses the canonical text form (surrounding spaces allowed). Throws
// pplab::Error naming the text and what is wrong with it: an unknown kind, a
// microbatch missing or where none belongs, or a malformed composite.
Action ParseAction(std::string_view text);

// Writes the text form (for test messages and logs).
std::ostream& operator<<(std::ostream& out, const Action& action);

// Display name used in traces and pictures: "F s2 mb3", "SEND_F s1 mb3",
// "REDUCE_GRAD s2", "OVERLAP_F_B F s0 mb7 + B s7 mb3".
std::string EventName(const Action& action);

}  // namespace pplab
