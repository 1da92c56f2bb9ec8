// WireCastTransport: messages in a narrower dtype on the wire, around any
// transport. A bf16 run sends its fp32 activations and activation gradients
// as bf16 (half the bytes) and casts them back to fp32 on receipt, so the
// receiving stage's inputs (leaves of its graph) and gradients are fp32 as
// in an fp32 run; only their values are rounded to bf16.
//
// Float32 tensors travel as the wire dtype; other dtypes (the attention mask,
// token ids) travel as they are. A receive's MessageSpec is posted with the
// wire dtype in place of float32, which is what arrives: the transport
// allocates that many bytes. A message
// must not hold tensors of the wire dtype itself (they would come back as
// float32).
#pragma once

#include <c10/core/ScalarType.h>

#include <memory>

#include "runtime/comm/transport.h"

namespace pplab {

class WireCastTransport : public Transport {
 public:
  WireCastTransport(std::unique_ptr<Transport> inner, c10::ScalarType wire);
  RankId Rank() const override { return inner_->Rank(); }
  // Sends the float32 tensors as wire-dtype copies.
  void Send(RankId peer, int64_t tag, const TensorList& tensors) override;
  // Posts `spec` with its float32 entries as the wire dtype.
  void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) override;
  // The message with its wire-dtype tensors as float32 again.
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override;
  void WaitSends(std::chrono::milliseconds timeout) override { inner_->WaitSends(timeout); }
  BufferRules Buffers() const override { return inner_->Buffers(); }
  void Connect(const std::vector<RankId>& peers, std::chrono::milliseconds timeout) override {
    inner_->Connect(peers, timeout);
  }

 private:
  std::unique_ptr<Transport> inner_;
  c10::ScalarType wire_;
};

// `tensors` as they travel: float32 ones cast to `wire`, others unchanged.
TensorList ToWire(const TensorList& tensors, c10::ScalarType wire);
// `spec` as what arrives: float32 entries as `wire`.
MessageSpec ToWire(const MessageSpec& spec, c10::ScalarType wire);

}  // namespace pplab
