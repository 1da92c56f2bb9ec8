#include "schedules/action.h"

#include <cctype>
#include <ostream>

#include "schedules/action_kinds.h"
#include "schedules/error.h"

namespace pplab {
namespace {

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

std::string KnownKinds() {
  std::string known;
  for (const KindInfo& k : KindTable()) known += (known.empty() ? "" : " ") + std::string(k.name);
  return known;
}

// A simple (non-composite) action: <stage><KIND>[<microbatch>].
Action ParseSimple(std::string_view s, std::string_view whole) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  size_t j = i;
  while (j < s.size() && !std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  const auto stage = ParseIndex(s.substr(0, i));
  const auto kind = KindFromName(s.substr(i, j - i));
  const std::string_view mb_text = s.substr(j);
  const std::string shown = Printable(whole);
  if (stage && !kind && j > i) {
    throw Error("bad action '" + shown + "': unknown action kind '" + Printable(s.substr(i, j - i)) +
                "' (known: " + KnownKinds() + ")");
  }
  if (stage && kind && *kind == ActionKind::kOverlapFB) {
    throw Error("bad action '" + shown + "': OVERLAP_F_B names its two parts, as in (0F7;7B3)OVERLAP_F_B");
  }
  if (stage && kind && !InfoOf(*kind).has_microbatch) {
    if (!mb_text.empty()) {
      throw Error("bad action '" + shown + "': " + KindName(*kind) + " is per stage and takes no microbatch (write " +
                  std::to_string(*stage) + KindName(*kind) + ")");
    }
    return Action{*kind, *stage, 0};
  }
  // Named apart: a missing microbatch, and an id of more than 9 digits.
  const auto too_large = [](std::string_view digits) {
    return digits.size() > 9 && digits.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (kind && (too_large(s.substr(0, i)) || too_large(mb_text))) {
    throw Error("bad action '" + shown + "': a stage or microbatch id of more than 9 digits (ids are below 10^9)");
  }
  if (stage && kind && mb_text.empty()) {
    throw Error("bad action '" + shown + "': " + KindName(*kind) + " takes a microbatch (write " +
                std::to_string(*stage) + KindName(*kind) + "0 for microbatch 0)");
  }
  const auto microbatch = ParseIndex(mb_text);
  if (!stage || !kind || !microbatch) {
    throw Error("bad action '" + shown + "': expected <stage><KIND><microbatch> such as 2F0 or 1SEND_F3");
  }
  return Action{*kind, *stage, *microbatch};
}

}  // namespace

Action OverlapFB(StageId f_stage, MicrobatchId f_mb, ActionKind b_kind, StageId b_stage, MicrobatchId b_mb) {
  Action a{ActionKind::kOverlapFB, f_stage, f_mb};
  a.overlap_kind = b_kind;
  a.overlap_stage = b_stage;
  a.overlap_microbatch = b_mb;
  return a;
}

const char* KindName(ActionKind kind) { return InfoOf(kind).name; }

std::optional<ActionKind> KindFromName(std::string_view name) {
  for (const KindInfo& k : KindTable()) {
    if (name == k.name) return k.kind;
  }
  return std::nullopt;
}

bool IsCompute(ActionKind kind) {
  const KindRole role = InfoOf(kind).role;
  return role == KindRole::kCompute || role == KindRole::kComposite;
}

bool IsComm(ActionKind kind) { return IsSend(kind) || IsRecv(kind); }

bool IsSend(ActionKind kind) { return InfoOf(kind).role == KindRole::kSend; }

bool IsRecv(ActionKind kind) { return InfoOf(kind).role == KindRole::kRecv; }

bool IsPerStage(ActionKind kind) { return InfoOf(kind).role == KindRole::kPerStage; }

bool OccupiesRank(ActionKind kind) { return InfoOf(kind).resource != KindResource::kLink; }

ComputeParts PartsOf(const Action& a) {
  ComputeParts out;
  const KindRole role = InfoOf(a.kind).role;
  if (role == KindRole::kCompute) {
    out.part[out.count++] = a;
  } else if (role == KindRole::kComposite) {
    out.part[out.count++] = Action{ActionKind::kForward, a.stage, a.microbatch};
    out.part[out.count++] = Action{a.overlap_kind, a.overlap_stage, a.overlap_microbatch};
  }
  return out;
}

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
  if (action.kind == ActionKind::kOverlapFB) {
    const ComputeParts parts = PartsOf(action);
    return "(" + FormatAction(parts.part[0]) + ";" + FormatAction(parts.part[1]) + ")" + KindName(action.kind);
  }
  std::string out = std::to_string(action.stage) + KindName(action.kind);
  if (InfoOf(action.kind).has_microbatch) out += std::to_string(action.microbatch);
  return out;
}

Action ParseAction(std::string_view text) {
  const std::string_view s = Trim(text);
  if (s.empty() || s.front() != '(') return ParseSimple(s, s);
  // Composite: (<F part>;<B or I part>)OVERLAP_F_B.
  const std::string shown = Printable(s);
  const size_t close = s.find(')');
  if (close == std::string_view::npos) throw Error("bad action '" + shown + "': composite without a closing ')'");
  const std::string_view kind_text = s.substr(close + 1);
  if (kind_text != KindName(ActionKind::kOverlapFB)) {
    throw Error("bad action '" + shown + "': unknown composite kind '" + Printable(kind_text) +
                "' (known: OVERLAP_F_B)");
  }
  const std::string_view inner = s.substr(1, close - 1);
  const size_t semi = inner.find(';');
  if (semi == std::string_view::npos || inner.find(';', semi + 1) != std::string_view::npos) {
    throw Error("bad action '" + shown + "': OVERLAP_F_B needs exactly two parts, (<F>;<B or I>)OVERLAP_F_B");
  }
  Action f, b;
  try {
    f = ParseSimple(Trim(inner.substr(0, semi)), s);
    b = ParseSimple(Trim(inner.substr(semi + 1)), s);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (in a part of a composite)");
  }
  if (f.kind != ActionKind::kForward || !IsInputGrad(b.kind)) {
    throw Error("bad action '" + shown + "': OVERLAP_F_B's parts must be a forward then a B or I, as in " +
                "(0F7;7B3)OVERLAP_F_B, got " + KindName(f.kind) + " and " + KindName(b.kind));
  }
  return OverlapFB(f.stage, f.microbatch, b.kind, b.stage, b.microbatch);
}

std::ostream& operator<<(std::ostream& out, const Action& action) { return out << FormatAction(action); }

std::string EventName(const Action& action) {
  if (action.kind == ActionKind::kOverlapFB) {
    const ComputeParts parts = PartsOf(action);
    return std::string(KindName(action.kind)) + " " + EventName(parts.part[0]) + " + " + EventName(parts.part[1]);
  }
  std::string out = std::string(KindName(action.kind)) + " s" + std::to_string(action.stage);
  if (InfoOf(action.kind).has_microbatch) out += " mb" + std::to_string(action.microbatch);
  return out;
}

}  // namespace pplab
