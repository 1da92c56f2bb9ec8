// Transport over a torch c10d process group (Gloo on CPU).
//
// Each message travels as two point-to-point messages: a fixed-size int64
// header (number of tensors, their dtypes and shapes, payload bytes) on tag
// 2t, then all tensors' bytes in one uint8 payload on tag 2t+1. Receives
// post the header early; the payload receive is posted when the message is
// waited for (Gloo's receive work completes only inside wait(), so there is
// no cheap way to learn earlier that a header has landed).
// Received tensors are placed on `device`, so the executor's stages may live
// on a GPU while the wire is the host's.
#pragma once

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <string>

#include "runtime/transport.h"

namespace c10d {
class ProcessGroup;
class Store;
}  // namespace c10d

namespace pplab {

struct ProcessGroupHandle;  // owns the c10d objects (c10d_transport.cc)

// Connects to the TCPStore at host:port (rank 0 serves it) and creates a
// Gloo process group of `world_size` ranks. Throws pplab::Error naming the
// address after `timeout`.
std::shared_ptr<ProcessGroupHandle> ConnectGloo(const std::string& host, int port, RankId rank, int world_size,
                                                std::chrono::milliseconds timeout);

// ConnectGloo at MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default
// 29500) from the environment, as torchrun sets them.
std::shared_ptr<ProcessGroupHandle> ConnectGlooFromEnv(RankId rank, int world_size, std::chrono::milliseconds timeout);

// A Gloo group of some ranks of `world` (e.g. the data-parallel replicas of
// one stage), rendezvousing under `name` in the world's store. Every member
// calls it with the same name and members; `members` lists world ranks and
// must hold the caller's.
std::shared_ptr<ProcessGroupHandle> Subgroup(const ProcessGroupHandle& world, const std::string& name,
                                             const std::vector<RankId>& members, std::chrono::milliseconds timeout);

// Peers are pipeline ranks; pipeline rank p is world rank `rank_offset + p`
// (data-parallel replica d of a K-rank pipeline has offset d K).
class C10dTransport : public Transport {
 public:
  C10dTransport(std::shared_ptr<ProcessGroupHandle> group, c10::Device device, RankId rank_offset = 0);
  ~C10dTransport() override;
  RankId Rank() const override;
  void Send(RankId peer, int64_t tag, const TensorList& tensors) override;
  void PostRecv(RankId peer, int64_t tag) override;
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override;
  void WaitSends(std::chrono::milliseconds timeout) override;

 private:
  struct Pending;
  // Parses an arrived header and posts the payload receive.
  void PostPayload(RankId peer, int64_t tag, Pending& pending);
  std::shared_ptr<ProcessGroupHandle> group_;
  c10::Device device_;
  RankId rank_offset_;
  std::map<std::pair<RankId, int64_t>, std::unique_ptr<Pending>> receives_;
  std::vector<std::unique_ptr<Pending>> sends_;
};

// Bytes that one message of `tensors` puts on the wire: the header (512
// bytes) and every tensor's bytes.
Bytes WireBytes(const TensorList& tensors);

// This process's rank in `group`, and the group's size.
RankId GroupRank(const ProcessGroupHandle& group);
int GroupSize(const ProcessGroupHandle& group);

// Collectives the trainer needs besides pipeline messages.
// Sum of `value` over all ranks.
double AllReduceSum(ProcessGroupHandle& group, double value, std::chrono::milliseconds timeout);
// Sums `tensor` (a CPU tensor, in place) over all ranks of `group`.
void AllReduceSumInPlace(ProcessGroupHandle& group, at::Tensor& tensor, std::chrono::milliseconds timeout);
// An all-reduce started and not yet waited for (c10d_transport.cc).
struct PendingCollective;

// Starts summing `tensor` (a CPU tensor, in place) over all ranks of `group`
// and returns at once; Gloo does the work in its own threads, so it
// overlaps what the caller computes next. Every rank must start the group's
// collectives in the same order.
std::shared_ptr<PendingCollective> StartAllReduceSum(ProcessGroupHandle& group, const at::Tensor& tensor);
// Waits for a started all-reduce, at most `timeout`.
void WaitCollective(PendingCollective& pending, std::chrono::milliseconds timeout);

// Waits until every rank arrives.
void Barrier(ProcessGroupHandle& group, std::chrono::milliseconds timeout);
// Rank 0 gets every rank's int64 vector (others get an empty result).
std::vector<std::vector<int64_t>> GatherToRank0(ProcessGroupHandle& group, const std::vector<int64_t>& mine,
                                                std::chrono::milliseconds timeout);

}  // namespace pplab
