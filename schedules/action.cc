#include "schedules/action.h"

#include <array>
#include <cctype>
#include <ostream>

#include "schedules/error.h"

namespace pplab {
namespace {

constexpr std::array<const char*, kNumActionKinds> kNames = {"F",      "B",      "I",      "W",
                                                             "SEND_F", "RECV_F", "SEND_B", "RECV_B"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Parses a non-negative decimal integer that fits in an int.
std::optional<int> ParseIndex(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// The text as typed for an error message: at most 40 bytes, control and
// non-ASCII bytes escaped as \xNN.
std::string Printable(std::string_view text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text.substr(0, 40)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  if (text.size() > 40) out += "...";
  return out;
}

}  // namespace

const char* KindName(ActionKind kind) { return kNames[static_cast<int>(kind)]; }

std::optional<ActionKind> KindFromName(std::string_view name) {
  for (int i = 0; i < kNumActionKinds; ++i) {
    if (name == kNames[i]) return static_cast<ActionKind>(i);
  }
  return std::nullopt;
}

bool IsCompute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput ||
         kind == ActionKind::kBackwardWeight;
}

bool IsComm(ActionKind kind) { return !IsCompute(kind); }

bool IsSend(ActionKind kind) { return kind == ActionKind::kSendF || kind == ActionKind::kSendB; }

bool IsRecv(ActionKind kind) { return kind == ActionKind::kRecvF || kind == ActionKind::kRecvB; }

StageId PeerStage(const Action& comm) {
  return comm.kind == ActionKind::kSendF || comm.kind == ActionKind::kRecvB ? comm.stage + 1 : comm.stage - 1;
}

MessageKey MessageOf(const Action& comm) {
  const bool forward = comm.kind == ActionKind::kSendF || comm.kind == ActionKind::kRecvF;
  return {forward, IsSend(comm.kind) ? PeerStage(comm) : comm.stage, comm.microbatch};
}

Action MatchingRecv(const Action& send) {
  return {send.kind == ActionKind::kSendF ? ActionKind::kRecvF : ActionKind::kRecvB, PeerStage(send), send.microbatch};
}

std::string FormatAction(const Action& action) {
  return std::to_string(action.stage) + KindName(action.kind) + std::to_string(action.microbatch);
}

Action ParseAction(std::string_view text) {
  const std::string_view s = Trim(text);
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  size_t j = i;
  while (j < s.size() && !std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  const auto stage = ParseIndex(s.substr(0, i));
  const auto kind = KindFromName(s.substr(i, j - i));
  const auto microbatch = ParseIndex(s.substr(j));
  if (!stage || !kind || !microbatch) {
    const std::string shown = Printable(s);
    std::string why = "expected <stage><KIND><microbatch> such as 2F0 or 1SEND_F3";
    if (stage && !kind && j > i) {
      why = "unknown action kind '" + Printable(s.substr(i, j - i)) + "' (known: F B I W SEND_F RECV_F SEND_B RECV_B)";
    }
    throw Error("bad action '" + shown + "': " + why);
  }
  return Action{*kind, *stage, *microbatch};
}

std::ostream& operator<<(std::ostream& out, const Action& action) { return out << FormatAction(action); }

std::string EventName(const Action& action) {
  return std::string(KindName(action.kind)) + " s" + std::to_string(action.stage) + " mb" +
         std::to_string(action.microbatch);
}

}  // namespace pplab
