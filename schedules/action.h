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
