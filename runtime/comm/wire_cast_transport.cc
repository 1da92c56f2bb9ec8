#include "runtime/comm/wire_cast_transport.h"

#include <ATen/ATen.h>

namespace pplab {

WireCastTransport::WireCastTransport(std::unique_ptr<Transport> inner, c10::ScalarType wire)
    : inner_(std::move(inner)), wire_(wire) {}

TensorList ToWire(const TensorList& tensors, c10::ScalarType wire) {
  TensorList out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    // detach: what travels is data; the cast need not join the sender's graph.
    out.push_back(t.defined() && t.scalar_type() == c10::ScalarType::Float ? t.detach().to(wire) : t);
  }
  return out;
}

MessageSpec ToWire(const MessageSpec& spec, c10::ScalarType wire) {
  MessageSpec out = spec;
  for (TensorSpec& t : out) {
    if (t.dtype == c10::ScalarType::Float) t.dtype = wire;
  }
  return out;
}

void WireCastTransport::Send(RankId peer, int64_t tag, const TensorList& tensors) {
  inner_->Send(peer, tag, ToWire(tensors, wire_));
}

void WireCastTransport::PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) {
  inner_->PostRecv(peer, tag, ToWire(spec, wire_));
}

TensorList WireCastTransport::WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) {
  TensorList got = inner_->WaitRecv(peer, tag, timeout);
  for (at::Tensor& t : got) {
    if (t.defined() && t.scalar_type() == wire_) t = t.to(c10::ScalarType::Float);
  }
  return got;
}

}  // namespace pplab
