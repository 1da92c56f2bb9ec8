// Transport over a c10d process group (runtime/comm/process_group.h): Gloo
// on the CPU, NCCL between GPUs.
//
// Receives are posted with the message's MessageSpec (dtypes and shapes),
// and each tensor travels as its own bytes on the group's device: no header,
// no host copy where the group is on the GPU. A sender's bytes can thus move
// as soon as both ends have posted. (A header announcing the shapes, which
// pplab used on Gloo until 2026-11-27, made the receiver post the payload's
// receive only when it waited, and on busy cores the sender's transport
// thread then answered a time slice later: docs/runtime.md, "Transports".)
// A send's buffers are kept until it completes, so the caller may drop its
// tensors at once: each Send first drops the earlier sends that completed
// without error, and WaitSends waits for the rest at the step's end. On
// NCCL (whose work reports completion from its CUDA event) a sent message
// thus holds memory while in flight, not until the end of the step; Gloo's
// send work reports completion only once waited for, so there they stay
// until WaitSends. A send on the CPU is a view of the caller's tensors, not
// a copy.
// Messages between two ranks are matched in the order the lowering pass
// guarantees per channel (ordered rank pair); tags tell them apart on Gloo.
//
// Per-direction groups (NCCL's default): NCCL runs one communicator's
// operations in issue order on one stream, so a posted receive holds up every
// operation behind it, and ignores tags. The executor posts receives ahead of
// the sends that come before them in its program: over one group, a rank's
// receive of the first gradient could queue before its send of the
// activation that gradient needs, and the pipeline would deadlock. So messages from a lower to a higher rank go over an
// "up" group and the others over a "down" group, two more c10d groups of all the ranks. Each pair then has one
// communicator per direction, on which only one side sends: a FIFO channel, matched in the validated order.
#pragma once

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "runtime/comm/process_group.h"
#include "runtime/comm/transport.h"

namespace pplab {

// Peers are pipeline ranks; pipeline rank p is group rank `rank_offset + p
// rank_stride` (runtime/train/worker_setup.h numbers them). Received tensors
// are placed on `device` (the stages' device).
class C10dTransport : public Transport {
 public:
  // Every rank of `group` must make its transport at the same point when
  // `per_direction` holds (it makes two groups); by default it holds on NCCL.
  C10dTransport(std::shared_ptr<ProcessGroupHandle> group, c10::Device device, RankId rank_offset = 0,
                std::optional<bool> per_direction = std::nullopt, RankId rank_stride = 1);
  ~C10dTransport() override;
  RankId Rank() const override;
  void Send(RankId peer, int64_t tag, const TensorList& tensors) override;
  void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) override;
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override;
  void WaitSends(std::chrono::milliseconds timeout) override;
  // NCCL's sends report completion without being waited for (Gloo's do
  // not); on the stages' own device a receive's buffers are allocated when
  // it is posted and a send is a view of the sent tensors.
  BufferRules Buffers() const override;
  // With per-direction groups: creates the communicators of each pair and
  // direction now, one exchange of one byte each, pairs in (lower rank,
  // higher rank) order, up before down. NCCL creates a pair's communicator in
  // the pair's first send or receive and blocks both ranks there until the
  // other joins: left to the step, where a rank posts its receives from one
  // direction first, two ranks could each wait in another communicator's
  // creation. One global order of pairs makes such a cycle impossible.
  void Connect(const std::vector<RankId>& peers, std::chrono::milliseconds timeout) override;
  // The sends whose buffers this transport still holds, after dropping those
  // that completed without error.
  size_t SendsInFlight();

 private:
  struct Pending;
  // Forgets the sends whose every work item completed without error (their
  // buffers are freed); one that failed stays for WaitSends to report.
  void DropFinishedSends();
  // The group that carries messages from `from` to `to` (pipeline ranks).
  ProcessGroupHandle& Channel(RankId from, RankId to) const;
  // The group rank of pipeline rank `peer`.
  RankId GroupRankOf(RankId peer) const { return rank_offset_ + peer * rank_stride_; }
  std::shared_ptr<ProcessGroupHandle> group_;
  std::shared_ptr<ProcessGroupHandle> up_, down_;  // per-direction groups, or none
  std::set<RankId> connected_;                     // peers Connect has linked
  c10::Device device_;
  RankId rank_offset_, rank_stride_;
  std::map<std::pair<RankId, int64_t>, std::unique_ptr<Pending>> receives_;
  std::vector<std::unique_ptr<Pending>> sends_;
};

// Bytes that one message of `tensors` puts on the wire: every tensor's bytes.
Bytes WireBytes(const TensorList& tensors);

}  // namespace pplab
