// Action: one step of a rank's program, the unit of the schedule IR.
//
// Text form follows PyTorch pipelining: "<stage><KIND><microbatch>", e.g.
// "2F0" (stage 2 forward of microbatch 0), "1SEND_F3", "0I2", "0W2".
//
// Communication actions name the stage that owns them on their own rank:
//   SEND_F(s, m): stage s sends its output activations of m to stage s+1.
//   RECV_F(s, m): stage s receives its input activations of m from s-1.
//   SEND_B(s, m): stage s sends the gradient of its input of m to stage s-1.
//   RECV_B(s, m): stage s receives the gradient of its output of m from s+1.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

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
};

constexpr int kNumActionKinds = 8;

struct Action {
  ActionKind kind = ActionKind::kForward;
  StageId stage = 0;
  MicrobatchId microbatch = 0;

  friend bool operator==(const Action& a, const Action& b) {
    return a.kind == b.kind && a.stage == b.stage && a.microbatch == b.microbatch;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

// "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B".
const char* KindName(ActionKind kind);
// Inverse of KindName; std::nullopt for an unknown name.
std::optional<ActionKind> KindFromName(std::string_view name);

bool IsCompute(ActionKind kind);  // F, B, I, W
bool IsComm(ActionKind kind);     // SEND_*, RECV_*
bool IsSend(ActionKind kind);
bool IsRecv(ActionKind kind);
// A "backward that produces the input gradient": B or I.
inline bool IsInputGrad(ActionKind kind) { return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput; }

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

// Canonical text form, e.g. "1SEND_F3".
std::string FormatAction(const Action& action);
// Parses the canonical text form (surrounding spaces allowed). Throws
// pplab::Error naming the text when it is not an action.
Action ParseAction(std::string_view text);

// Writes the text form (for test messages and logs).
std::ostream& operator<<(std::ostream& out, const Action& action);

// Display name used in traces and pictures: "F s2 mb3", "SEND_F s1 mb3".
std::string EventName(const Action& action);

}  // namespace pplab
