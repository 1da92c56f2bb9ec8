// The bf16 wire of a bf16 run, over the in-process transport: what travels
// is bf16 (half the bytes), what arrives is fp32 again, masks unchanged.
#include "runtime/comm/wire_cast_transport.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/fake_transport.h"

namespace pplab::wire_cast_transport_test {

TEST_CASE("a bf16 wire carries half the bytes and delivers fp32 rounded to bf16", "[comm]") {
  const auto timeout = std::chrono::milliseconds(5000);
  const at::Tensor hidden = torch::randn({2, 16, 32});         // (B,T,C) float32
  const at::Tensor mask = torch::ones({2, 16}, torch::kLong);  // (B,T)
  const MessageSpec spec = {{c10::ScalarType::Float, {2, 16, 32}}, {c10::ScalarType::Long, {2, 16}}};
  auto network = std::make_shared<FakeNetwork>();
  WireCastTransport sender(std::make_unique<FakeTransport>(0, network), c10::ScalarType::BFloat16);
  WireCastTransport receiver(std::make_unique<FakeTransport>(1, network), c10::ScalarType::BFloat16);
  FakeTransport raw(1, network);  // sees the message as it travels

  // On the wire: bf16 hidden, the mask as it is; the payload is half.
  sender.Send(1, 7, {hidden, mask});
  raw.PostRecv(0, 7, ToWire(spec, c10::ScalarType::BFloat16));  // checks the dtypes and shapes that arrive
  const TensorList wire = raw.WaitRecv(0, 7, timeout);
  REQUIRE(wire.size() == 2);
  CHECK(wire[0].scalar_type() == torch::kBFloat16);
  CHECK(wire[1].scalar_type() == torch::kLong);
  CHECK(wire[1].equal(mask));
  CHECK(WireBytes({hidden}) == 2 * 16 * 32 * 4);
  CHECK(WireBytes({wire[0]}) == WireBytes({hidden}) / 2);
  CHECK(WireBytes({hidden, mask}) == 2 * 16 * 32 * 4 + 2 * 16 * 8);
  std::printf("wire bytes of a (2,16,32) activation and its mask: fp32 %lld, bf16 %lld\n",
              static_cast<long long>(WireBytes({hidden, mask})), static_cast<long long>(WireBytes(wire)));

  // Through the wrapper: fp32 again, each value rounded to bf16 (8 significant bits).
  sender.Send(1, 8, {hidden, mask});
  receiver.PostRecv(0, 8, spec);
  const TensorList got = receiver.WaitRecv(0, 8, timeout);
  REQUIRE(got.size() == 2);
  CHECK(got[0].scalar_type() == torch::kFloat32);
  CHECK(got[0].equal(hidden.to(torch::kBFloat16).to(torch::kFloat32)));
  CHECK((got[0] - hidden).abs().max().item<double>() <= hidden.abs().max().item<double>() / 256);
  CHECK(got[1].equal(mask));
  // A gradient message (one float tensor) likewise.
  sender.Send(1, 9, {hidden});
  receiver.PostRecv(0, 9, {spec[0]});
  CHECK(receiver.WaitRecv(0, 9, timeout).at(0).scalar_type() == torch::kFloat32);
  sender.WaitSends(timeout);
  CHECK(network->Pending() == 0);
}

TEST_CASE("a receive spec names the wire dtype in place of float32", "[comm]") {
  const MessageSpec spec = {{c10::ScalarType::Float, {2, 3, 4}}, {c10::ScalarType::Long, {2, 3}}};
  const MessageSpec wire = ToWire(spec, c10::ScalarType::BFloat16);
  REQUIRE(wire.size() == 2);
  CHECK(wire[0].dtype == c10::ScalarType::BFloat16);
  CHECK(wire[0].shape == spec[0].shape);
  CHECK(wire[1].dtype == c10::ScalarType::Long);
  CHECK(ToWire(spec, c10::ScalarType::Float).at(0).dtype == c10::ScalarType::Float);
}

}  // namespace pplab::wire_cast_transport_test
