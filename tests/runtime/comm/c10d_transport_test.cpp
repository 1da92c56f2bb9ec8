// The c10d transport between two ranks of one process (two threads, Gloo over
// loopback): both wire formats deliver the message exactly, and a receive
// posted with the wrong dtypes or shapes is refused with one line.
#include "runtime/comm/c10d_transport.h"

#include <torch/torch.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "runtime/comm/c10d_group.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/wire_cast_transport.h"
#include "schedules/error.h"
#include "tests/runtime/comm/two_ranks.h"

namespace pplab::c10d_transport_test {

TEST_CASE("a message's tensors arrive exactly, each as its own bytes", "[comm]") {
  const at::Tensor hidden = torch::arange(24, torch::kFloat32).reshape({2, 3, 4}) / 7;      // (B,T,C)
  const at::Tensor mask = torch::tensor({1, 1, 0, 1, 0, 0}, torch::kLong).reshape({2, 3});  // (B,T)
  const MessageSpec spec = {{c10::ScalarType::Float, {2, 3, 4}}, {c10::ScalarType::Long, {2, 3}}};
  TensorList got;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    C10dTransport transport(group, c10::Device(c10::kCPU), 0);
    const auto timeout = std::chrono::milliseconds(20000);
    if (rank == 0) {
      transport.Send(1, 5, {hidden, mask});
      transport.WaitSends(timeout);
    } else {
      transport.PostRecv(0, 5, spec);
      got = transport.WaitRecv(0, 5, timeout);
    }
    Barrier(*group, timeout);
  });
  REQUIRE(got.size() == 2);
  CHECK(got[0].equal(hidden));
  CHECK(got[1].equal(mask));
  CHECK(WireBytes({hidden, mask}) == 2 * 3 * 4 * 4 + 2 * 3 * 8);
}

TEST_CASE("over Gloo a bf16 wire sends bf16 and the receiver gets fp32", "[comm]") {
  const at::Tensor hidden = torch::randn({2, 3, 4});  // (B,T,C)
  const at::Tensor mask = torch::tensor({1, 1, 0, 1, 0, 0}, torch::kLong).reshape({2, 3});
  const MessageSpec spec = {{c10::ScalarType::Float, {2, 3, 4}}, {c10::ScalarType::Long, {2, 3}}};
  TensorList wire, got;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    const auto timeout = std::chrono::milliseconds(20000);
    auto inner = std::make_unique<C10dTransport>(group, c10::Device(c10::kCPU), 0);
    C10dTransport* raw = inner.get();
    WireCastTransport transport(std::move(inner), c10::ScalarType::BFloat16);
    if (rank == 0) {
      transport.Send(1, 5, {hidden, mask});
      transport.Send(1, 6, {hidden, mask});
      transport.WaitSends(timeout);
    } else {
      // Message 5 as it travels: a receive posted for bf16 (2 bytes a value).
      raw->PostRecv(0, 5, ToWire(spec, c10::ScalarType::BFloat16));
      wire = raw->WaitRecv(0, 5, timeout);
      transport.PostRecv(0, 6, spec);
      got = transport.WaitRecv(0, 6, timeout);
    }
    Barrier(*group, timeout);
  });
  REQUIRE(wire.size() == 2);
  CHECK(wire[0].scalar_type() == torch::kBFloat16);
  CHECK(wire[0].nbytes() == hidden.nbytes() / 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].scalar_type() == torch::kFloat32);
  CHECK(got[0].equal(hidden.to(torch::kBFloat16).to(torch::kFloat32)));
  CHECK(got[1].equal(mask));
}

TEST_CASE("per-direction groups carry messages both ways with every receive posted first, as the executor does",
          "[comm]") {
  // 1F1B's pattern between two ranks: activations up, gradients down, each
  // rank's receives posted before its first send. On NCCL only per-direction
  // groups keep this from deadlocking; here (Gloo) a sender and a receiver
  // that picked different groups for one message would time out.
  const auto act = [](int m) { return torch::full({2, 3}, 1.0 + m); };
  const auto grad = [](int m) { return torch::full({2, 3}, -1.0 - m); };
  const MessageSpec spec = {{c10::ScalarType::Float, {2, 3}}};
  std::vector<at::Tensor> got_act, got_grad;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    const auto timeout = std::chrono::milliseconds(20000);
    C10dTransport transport(group, c10::Device(c10::kCPU), 0, /*per_direction=*/true);
    transport.Connect({1 - rank, 1 - rank}, timeout);  // the executor's set-up; a repeat does nothing
    transport.Connect({1 - rank}, timeout);
    for (int m = 0; m < 3; ++m) transport.PostRecv(1 - rank, rank == 0 ? 10 + m : m, spec);
    for (int m = 0; m < 3; ++m) {
      if (rank == 0) {
        transport.Send(1, m, {act(m)});
        got_grad.push_back(transport.WaitRecv(1, 10 + m, timeout).at(0));
      } else {
        got_act.push_back(transport.WaitRecv(0, m, timeout).at(0));
        transport.Send(0, 10 + m, {grad(m)});
      }
    }
    transport.WaitSends(timeout);
    Barrier(*group, timeout);
  });
  REQUIRE(got_act.size() == 3);
  REQUIRE(got_grad.size() == 3);
  for (int m = 0; m < 3; ++m) {
    CHECK(got_act[m].equal(act(m)));
    CHECK(got_grad[m].equal(grad(m)));
  }
}

TEST_CASE("linking the pipeline pairs names a rank that never comes to link, within the timeout", "[comm]") {
  std::string error;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    C10dTransport transport(group, c10::Device(c10::kCPU), 0, /*per_direction=*/true);
    if (rank != 0) return;  // rank 1 never links
    try {
      transport.Connect({1}, std::chrono::milliseconds(1000));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  CHECK(error.find("rank 0: not every rank came to link its pipeline pairs within 1 s") != std::string::npos);
}

TEST_CASE("a receive posted without shapes, or waited for unposted, is refused, naming the message", "[comm]") {
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    if (rank != 1) return;
    C10dTransport transport(group, c10::Device(c10::kCPU), 0);
    CHECK_THROWS_WITH(transport.WaitRecv(0, 4, std::chrono::milliseconds(1000)),
                      Catch::Contains("receiving message 4 from rank 0: no receive was posted"));
    CHECK_THROWS_WITH(transport.PostRecv(0, 3, {}), Catch::Contains("needs the message's dtypes and shapes"));
  });
}

TEST_CASE("a collective that times out says a late rank keeps it waiting (Gloo names none)", "[comm]") {
  std::string error;
  std::promise<void> timed_out;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    if (rank == 1) {
      // Never joins; stays in the group until rank 0 has timed out (gone, it
      // would close the connection rather than leave rank 0 waiting).
      timed_out.get_future().wait_for(std::chrono::seconds(20));
      return;
    }
    try {
      AllReduceSum(*group, 1.0, std::chrono::milliseconds(300));
    } catch (const Error& e) {
      error = e.what();
    }
    timed_out.set_value();
  });
  INFO(error);
  CHECK_THAT(error, Catch::StartsWith("rank 0 in all-reduce: ") &&
                        Catch::Contains("a collective ends when every rank of its group has joined it: a rank that "
                                        "stopped, hung or fell behind keeps the others waiting"));
}

TEST_CASE("collectives sum over the group and gather to rank 0", "[comm]") {
  std::vector<std::vector<int64_t>> gathered;
  double sum = 0;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    const auto timeout = std::chrono::milliseconds(20000);
    const double s = AllReduceSum(*group, rank + 1.5, timeout);  // 1.5 + 2.5
    auto g = GatherToRank0(*group, {rank * 10, rank * 10 + 1}, timeout);
    if (rank == 0) sum = s, gathered = g;
  });
  CHECK(sum == 4.0);
  REQUIRE(gathered.size() == 2);
  CHECK(gathered[1] == std::vector<int64_t>{10, 11});
}

TEST_CASE("a Gloo all-reduce returns once the group's thread has let go of the tensor", "[comm]") {
  // Else a tensor the caller drops stays allocated for as long as that
  // thread takes, and the bytes held after an action vary from run to run.
  int held_elsewhere = 0;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    const auto timeout = std::chrono::milliseconds(20000);
    for (int i = 0; i < 200; ++i) {
      at::Tensor t = torch::ones({4096});
      AllReduceSumInPlace(*group, t, timeout);
      if (t.use_count() != 1 && rank == 0) ++held_elsewhere;
      if (rank == 0) REQUIRE(t[0].item<float>() == 2.0f);
    }
  });
  CHECK(held_elsewhere == 0);
}

TEST_CASE("the gather to rank 0 keeps each rank's own length, empty included", "[comm]") {
  std::vector<std::vector<int64_t>> gathered, on_rank1 = {{-1}};
  for (const bool rank1_empty : {false, true}) {
    OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
      const auto timeout = std::chrono::milliseconds(20000);
      const std::vector<int64_t> mine =
          rank == 0 ? std::vector<int64_t>{7}
                    : (rank1_empty ? std::vector<int64_t>{} : std::vector<int64_t>{1, 2, 3, -4});
      auto g = GatherToRank0(*group, mine, timeout);
      if (rank == 0) gathered = g;
      if (rank == 1) on_rank1 = g;
    });
    REQUIRE(gathered.size() == 2);
    CHECK(gathered[0] == std::vector<int64_t>{7});
    CHECK(gathered[1] == (rank1_empty ? std::vector<int64_t>{} : std::vector<int64_t>{1, 2, 3, -4}));
    CHECK(on_rank1.empty());
  }
}

TEST_CASE("under torchrun's agent store every rank is a client, under the attempt's prefix", "[comm]") {
  // The agent (here, the test) serves the store at MASTER_PORT before any
  // rank starts; a rank 0 that tried to serve it too would fail to listen.
  const int port = FreeLoopbackPort();
  c10d::TCPStoreOptions server_options;
  server_options.port = static_cast<std::uint16_t>(port);
  server_options.isServer = true;
  server_options.waitWorkers = false;
  server_options.timeout = std::chrono::milliseconds(20000);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  server_options.useLibUV = false;
#endif
  auto agent = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
  std::vector<double> sums(2, 0);
  std::string error;
  try {
    OnTwoRanks(
        [&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
          const auto timeout = std::chrono::milliseconds(20000);
          sums[static_cast<size_t>(rank)] = AllReduceSum(*group, rank + 1.0, timeout);
          HostBarrier(*group, timeout);
        },
        port);
  } catch (const Error& e) {
    error = e.what();
  }
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
  REQUIRE(error.empty());
  CHECK(sums == std::vector<double>{3.0, 3.0});
  CHECK(agent->check({"/worker/attempt_3/pplab-host-barrier/0"}));
}

TEST_CASE("the host barrier holds every rank until all arrive, again and again, and is bounded", "[comm]") {
  // Rank 1 arrives late at each of three barriers; rank 0 must not leave any
  // of them before rank 1 has announced it arrived.
  std::atomic<int> arrived1{0};
  std::vector<int> seen_by_0;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    const auto timeout = std::chrono::milliseconds(20000);
    for (int i = 1; i <= 3; ++i) {
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        arrived1 = i;
      }
      HostBarrier(*group, timeout);
      if (rank == 0) seen_by_0.push_back(arrived1.load());
    }
  });
  CHECK(seen_by_0 == std::vector<int>{1, 2, 3});
  // Alone at a barrier: it ends with one line naming the rank.
  std::string error;
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    if (rank != 0) return;
    try {
      HostBarrier(*group, std::chrono::milliseconds(300));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  CHECK(error.find("rank 0 in host barrier") != std::string::npos);
}

}  // namespace pplab::c10d_transport_test

namespace pplab::c10d_transport_test {
namespace {

// A c10d work item that records the timeout it was waited with.
class RecordingWork : public c10d::Work {
 public:
  explicit RecordingWork(bool finishes) : finishes_(finishes) {}
  bool wait(std::chrono::milliseconds timeout) override {
    waited_with = timeout;
    return finishes_;
  }
  std::chrono::milliseconds waited_with{-2};

 private:
  bool finishes_;
};

}  // namespace

TEST_CASE("a Gloo wait blocks at most the timeout and an NCCL wait only orders the stream without polling the host",
          "[comm]") {
  const std::chrono::milliseconds timeout{1234};
  auto gloo = c10::make_intrusive<RecordingWork>(true);
  Wait(Backend::kGloo, gloo, timeout, "gloo message");
  CHECK(gloo->waited_with == timeout);
  // ProcessGroupNCCL's wait(timeout) busy-waits the host until the GPU is
  // done; wait() with no timeout only makes the current stream wait.
  auto nccl = c10::make_intrusive<RecordingWork>(true);
  Wait(Backend::kNccl, nccl, timeout, "nccl message");
  CHECK(nccl->waited_with == std::chrono::milliseconds(0));  // c10d's kNoTimeout
  auto late = c10::make_intrusive<RecordingWork>(false);
  CHECK_THROWS_WITH(Wait(Backend::kGloo, late, timeout, "receiving message 3 from rank 1"),
                    "receiving message 3 from rank 1: timed out after 1234 ms");
}

}  // namespace pplab::c10d_transport_test

namespace pplab::c10d_transport_test {
namespace {

// A send whose completion the test decides, as NCCL's work reports it
// (isCompleted() queries the CUDA event after the send).
class ControlledWork : public c10d::Work {
 public:
  bool isCompleted() override { return done; }
  std::exception_ptr exception() const override { return error; }
  bool wait(std::chrono::milliseconds) override {
    waited = true;
    if (error) std::rethrow_exception(error);
    return true;
  }
  bool waited = false;
  bool done = false;
  std::exception_ptr error;
};

// A backend whose sends return ControlledWork items and keep their buffers'
// use counts observable.
class ControlledBackend : public C10dBackend {
 public:
  ControlledBackend() : C10dBackend(0, 2) {}
  const std::string getBackendName() const override { return "controlled"; }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int, int) override {
    buffers.push_back(tensors.at(0));
    works.push_back(c10::make_intrusive<ControlledWork>());
    return works.back();
  }
  std::vector<at::Tensor> buffers;  // what each send was given
  std::vector<c10::intrusive_ptr<ControlledWork>> works;
};

}  // namespace

TEST_CASE("a completed send's buffers are freed at the next send, a failed one is kept for WaitSends", "[comm]") {
  auto backend = c10::make_intrusive<ControlledBackend>();
  auto handle = std::make_shared<ProcessGroupHandle>();
  handle->group = backend;
  handle->world_size = 2;
  C10dTransport transport(handle, c10::Device(c10::kCPU), 0, /*per_direction=*/false);
  const auto timeout = std::chrono::milliseconds(1000);
  transport.Send(1, 1, {torch::ones({4})});
  REQUIRE(backend->works.size() == 1);
  // In flight: the transport holds message 1's buffer (the backend's copy
  // and the transport's: 2 owners of the storage).
  CHECK(transport.SendsInFlight() == 1);
  CHECK(backend->buffers[0].use_count() == 2);
  // Completed: the next send (or a look) lets it go before the step's end.
  backend->works[0]->done = true;
  transport.Send(1, 2, {torch::ones({4})});
  CHECK(backend->buffers[0].use_count() == 1);
  CHECK(transport.SendsInFlight() == 1);  // message 2
  // A send that completed with an error stays, and WaitSends reports it.
  backend->works[1]->done = true;
  backend->works[1]->error = std::make_exception_ptr(std::runtime_error("peer gone\nstack trace"));
  CHECK(transport.SendsInFlight() == 1);
  CHECK_THROWS_WITH(transport.WaitSends(timeout), "sending: peer gone");
}

TEST_CASE("an NCCL work that already failed is reported without waiting on it", "[comm]") {
  // ProcessGroupNCCL's wait() on a failed work aborts the communicator on
  // the calling thread first, which can hang; Wait reports the error as is.
  auto failed = c10::make_intrusive<ControlledWork>();
  failed->done = true;
  failed->error = std::make_exception_ptr(std::runtime_error("NCCL error: remote process exited\ntrace"));
  CHECK_THROWS_WITH(Wait(Backend::kNccl, failed, std::chrono::milliseconds(1000), "receiving message 4 from rank 1"),
                    "receiving message 4 from rank 1: NCCL error: remote process exited");
  CHECK_FALSE(failed->waited);
  // A healthy one is waited on (stream order).
  auto healthy = c10::make_intrusive<ControlledWork>();
  Wait(Backend::kNccl, healthy, std::chrono::milliseconds(1000), "sending");
  CHECK(healthy->waited);
}

}  // namespace pplab::c10d_transport_test
