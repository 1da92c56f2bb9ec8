// The engine's memory bookkeeping: what each rank holds, by kind, sample by sample.
#include <algorithm>

#include "sim/simulator_engine.h"

namespace pplab::sim_engine {

Bytes Engine::ActivationOf(RankId r, StageId st, MicrobatchId m, const StageCost& c) const {
  if (!c.activation_includes_input || st <= s_.FirstStage(m)) return c.activation_bytes;
  const Bytes input = c.input_bytes.value_or(c.message_bytes);
  const bool shared = s_.placement[st - 1] == r && costs_.Stage(st - 1).recomputed_bytes == 0;
  if (*c.activation_includes_input && shared) return std::max<Bytes>(0, c.activation_bytes - input);
  if (!*c.activation_includes_input && !shared) return c.activation_bytes + input;
  return c.activation_bytes;
}

Bytes Engine::GradBytes(StageId st) const {
  const StageCost& c = costs_.Stage(st);
  return c.input_grad_bytes.value_or(c.message_bytes);
}

void Engine::HoldPosted(RankId r, TimeNs t, const Action& recv) {
  const size_t key = MsgKey(recv.kind == ActionKind::kRecvF, recv.stage, recv.microbatch);
  recv_held_[key] = costs_.Stage(PeerStage(recv)).message_bytes;
  Sample(r, t, recv_held_[key], &MemoryParts::messages);
}

void Engine::MessagesAtStart(RankId r, const ComputeParts& parts, TimeNs start) {
  computed_[r] = true;
  if (PostedAhead()) {
    const Program& program = s_.programs[r];
    for (size_t i = pc_[r] + 1; i < program.size() && !IsCompute(program[i].kind); ++i) {
      if (IsRecv(program[i].kind)) HoldPosted(r, start, program[i]);
    }
  }
  for (const Action& part : parts) {
    const bool forward = ReceivesForward(r, part);
    if (!forward && !ReceivesGrads(r, part)) continue;
    Bytes& posted = recv_held_[MsgKey(forward, part.stage, part.microbatch)];
    Sample(r, start, (forward ? 0 : GradBytes(part.stage + 1)) - posted, &MemoryParts::messages);
    posted = 0;
  }
}

void Engine::MessagesAtEnd(RankId r, const Action& part, TimeNs end) {
  const StageId st = part.stage;
  const MicrobatchId m = part.microbatch;
  const bool frees_used = part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardWeight;
  if (frees_used && st < s_.LastStage(m)) Sample(r, end, -GradBytes(st + 1), &MemoryParts::messages);
  if (IsInputGrad(part.kind) && st > s_.FirstStage(m)) Sample(r, end, GradBytes(st), &MemoryParts::messages);
}

void Engine::HoldSent(RankId r, Bytes bytes, const Action& send, TimeNs delivered) {
  if (!costs_.Messages()) return;
  std::vector<HeldSend>& held = held_sends_[r];
  if (costs_.Messages()->sent_freed == MessageMemory::SentFreed::kNextSendAfterDelivery) {
    Bytes freed = 0;
    held.erase(std::remove_if(held.begin(), held.end(),
                              [&](const HeldSend& h) {
                                if (h.delivered > clock_[r]) return false;
                                freed += h.bytes;
                                return true;
                              }),
               held.end());
    Sample(r, clock_[r], -freed, &MemoryParts::messages);
  }
  HeldSend h{delivered, bytes, -1, 0};
  if (send.kind == ActionKind::kSendF && costs_.Messages()->sent_view) {
    h.outputs = static_cast<long>(Key(send.stage, send.microbatch));
    h.view = std::max<Bytes>(0, costs_.Stage(send.stage).message_bytes - bytes);
  }
  Sample(r, clock_[r], bytes - (send.kind == ActionKind::kSendB ? GradBytes(send.stage) : 0), &MemoryParts::messages);
  held.push_back(h);
}

void Engine::KeepSentOutputs(RankId r, StageId st, MicrobatchId m, TimeNs end) {
  if (!costs_.Messages()) return;
  for (HeldSend& h : held_sends_[r]) {
    if (h.outputs != static_cast<long>(Key(st, m)) || h.view == 0) continue;
    h.bytes += h.view;
    Sample(r, end, h.view, &MemoryParts::messages);
    h.view = 0;
  }
}

void Engine::Sample(RankId r, TimeNs t, std::initializer_list<std::pair<Part, Bytes>> deltas) {
  Bytes delta = 0;
  for (const auto& [part, d] : deltas) {
    held_parts_[r].*part += d;
    delta += d;
  }
  Record(r, t, delta);
}

void Engine::Sample(RankId r, TimeNs t, Bytes delta, Part part) {
  if (delta == 0) return;
  held_parts_[r].*part += delta;
  Record(r, t, delta);
}

void Engine::Record(RankId r, TimeNs t, Bytes delta) {
  if (delta == 0) return;
  bytes_[r] += delta;
  if (bytes_[r] > metrics_[r].peak_activation_bytes) {
    metrics_[r].peak_activation_bytes = bytes_[r];
    metrics_[r].peak_parts = held_parts_[r];
  }
  memory_.push_back({r, t, bytes_[r]});
}

}  // namespace pplab::sim_engine
