#include "runtime/train/profile_words.h"

#include <array>
#include <cstring>

namespace pplab {
namespace {

// Doubles travel through the int64 gather bit for bit.
int64_t Bits(double x) {
  int64_t i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
double FromBits(int64_t i) {
  double x;
  std::memcpy(&x, &i, sizeof x);
  return x;
}

void EncodeSpread(const SampleSpread& x, std::vector<int64_t>& out) {
  out.insert(out.end(), {Bits(x.p10), Bits(x.median), Bits(x.p90)});
}
SampleSpread DecodeSpread(const std::vector<int64_t>& w, size_t i) {
  return {FromBits(w.at(i)), FromBits(w.at(i + 1)), FromBits(w.at(i + 2))};
}
constexpr size_t kStageWords = 36;
void Encode(const StageProfile& p, std::vector<int64_t>& out) {
  out.insert(out.end(), {p.stage, p.rank});
  for (const SampleSpread* x : {&p.forward, &p.backward, &p.backward_input, &p.backward_weight, &p.reduce_grad}) {
    EncodeSpread(*x, out);
  }
  out.insert(out.end(),
             {p.activation_bytes, p.weight_grad_bytes, p.forward_message_bytes, p.backward_message_bytes,
              p.output_bytes, p.forward_transient_bytes, p.backward_transient_bytes, p.input_bytes,
              p.forward_send_bytes.value_or(-1), p.input_received ? 1 : 0, p.input_grad_bytes, p.cast_weight_bytes,
              p.backward_input_transient_bytes, p.backward_weight_transient_bytes, p.graph_slot_bytes.value_or(-1)});
  for (const double share : p.cpu_share) out.push_back(Bits(share));
}
StageProfile DecodeStage(const std::vector<int64_t>& w, size_t i) {
  StageProfile p;
  p.stage = static_cast<StageId>(w.at(i));
  p.rank = static_cast<RankId>(w.at(i + 1));
  i += 2;
  for (SampleSpread* x : {&p.forward, &p.backward, &p.backward_input, &p.backward_weight, &p.reduce_grad}) {
    *x = DecodeSpread(w, i);
    i += 3;
  }
  p.activation_bytes = w.at(i);
  p.weight_grad_bytes = w.at(i + 1);
  p.forward_message_bytes = w.at(i + 2);
  p.backward_message_bytes = w.at(i + 3);
  p.output_bytes = w.at(i + 4);
  p.forward_transient_bytes = w.at(i + 5);
  p.backward_transient_bytes = w.at(i + 6);
  p.input_bytes = w.at(i + 7);
  if (w.at(i + 8) >= 0) p.forward_send_bytes = w.at(i + 8);
  p.input_received = w.at(i + 9) != 0;
  p.input_grad_bytes = w.at(i + 10);
  p.cast_weight_bytes = w.at(i + 11);
  p.backward_input_transient_bytes = w.at(i + 12);
  p.backward_weight_transient_bytes = w.at(i + 13);
  if (w.at(i + 14) >= 0) p.graph_slot_bytes = w.at(i + 14);
  for (size_t k = 0; k < p.cpu_share.size(); ++k) p.cpu_share[k] = FromBits(w.at(i + 15 + k));
  return p;
}

// The step's costs, in the order they travel (Step: StepProfile, const or not).
template <typename Step>
auto StepSpreads(Step& s) {
  return std::array{&s.loss_allreduce, &s.norm_allreduce, &s.clip, &s.optimizer, &s.tied_exchange};
}

}  // namespace

std::vector<int64_t> PackRankProfile(const std::map<StageId, StageProfile>& stages,
                                     const std::vector<LinkProfile>& links, const ActionOverhead& overhead,
                                     const StepProfile& step) {
  std::vector<int64_t> words;
  words.push_back(static_cast<int64_t>(stages.size()));
  for (const auto& [s, p] : stages) Encode(p, words);
  words.push_back(static_cast<int64_t>(links.size()));
  for (const LinkProfile& l : links) {
    words.insert(words.end(),
                 {l.from, l.to, Bits(l.latency_ms), Bits(l.bandwidth_gbps), static_cast<int64_t>(l.samples.size())});
    for (const LinkSample& x : l.samples) words.insert(words.end(), {x.bytes, Bits(x.one_way_ms)});
  }
  words.insert(words.end(), {Bits(overhead.overhead_ms), Bits(overhead.device_lag_ms), Bits(overhead.action_ms)});
  for (const SampleSpread* x : StepSpreads(step)) EncodeSpread(*x, words);
  return words;
}

void UnpackRankProfile(const std::vector<int64_t>& w, bool stands_for_all, std::map<StageId, StageProfile>& stages,
                       ProfileResult& result) {
  size_t i = 0;
  const int64_t n = w.at(i++);
  for (int64_t k = 0; k < n; ++k, i += kStageWords) {
    const StageProfile p = DecodeStage(w, i);
    if (stands_for_all) stages[p.stage] = p;
  }
  const int64_t nl = w.at(i++);
  for (int64_t k = 0; k < nl; ++k) {
    LinkProfile l;
    l.from = static_cast<RankId>(w.at(i));
    l.to = static_cast<RankId>(w.at(i + 1));
    l.latency_ms = FromBits(w.at(i + 2));
    l.bandwidth_gbps = FromBits(w.at(i + 3));
    const int64_t ns = w.at(i + 4);
    i += 5;
    for (int64_t j = 0; j < ns; ++j, i += 2) l.samples.push_back({w.at(i), FromBits(w.at(i + 1))});
    if (stands_for_all) result.links.push_back(l);
  }
  if (stands_for_all)
    result.action_overhead.push_back({FromBits(w.at(i)), FromBits(w.at(i + 1)), FromBits(w.at(i + 2))});
  i += 3;
  StepProfile st;
  for (SampleSpread* x : StepSpreads(st)) {
    *x = DecodeSpread(w, i);
    i += 3;
  }
  result.step.push_back(st);
}

}  // namespace pplab
