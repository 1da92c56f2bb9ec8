// Transport: point-to-point messages between pipeline ranks.
//
// A message is a list of tensors identified by (peer, tag); the executor
// derives tags from the IR so that each message of a step has its own. Sends
// never block; receives are posted ahead, with the message's dtypes and
// shapes when the plan and the model know them (MessageSpec), and waited for
// when the data is needed. Implementations: FakeTransport (in-process, for tests) and the c10d
// Gloo/NCCL one. Every wait is bounded: a peer that never answers makes
// WaitRecv throw pplab::Error naming the peer and the tag.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "runtime/exec/stage.h"
#include "schedules/units.h"

namespace pplab {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual RankId Rank() const = 0;
  // Starts sending `tensors` to `peer`. The caller may drop the tensors as
  // soon as this returns (the transport keeps what it sends alive), but must
  // not write to them before WaitSends: a send may be a view of them.
  virtual void Send(RankId peer, int64_t tag, const TensorList& tensors) = 0;
  // Posts the receive of message `tag` from `peer`; returns at once. `spec`
  // is what the message holds, or empty when not known in advance (a
  // transport that needs it throws pplab::Error naming the message).
  virtual void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) = 0;
  // Waits for a posted receive, at most `timeout`.
  virtual TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) = 0;
  // Waits until every send has left this rank, at most `timeout`.
  virtual void WaitSends(std::chrono::milliseconds timeout) = 0;
  // Sets up the links to `peers` before the first message, where a transport
  // needs that (NCCL's per-direction communicators); every rank calls it at
  // the same point with the peers its schedule talks to. Repeats link
  // nothing new (NCCL's transport still waits, bounded, for every rank).
  virtual void Connect(const std::vector<RankId>& peers, std::chrono::milliseconds timeout) {
    (void)peers, (void)timeout;
  }

  // How long this transport keeps message buffers, which the cost model's
  // memory rules describe (sim MessageMemory, written by `pplab profile`).
  struct BufferRules {
    // A sent message's buffer is freed by the first Send after the message
    // was delivered; false: only by WaitSends, at the step's end.
    bool sends_freed_after_delivery = false;
    // A receive's buffer exists from PostRecv; false: from WaitRecv.
    bool receives_allocated_when_posted = false;
    // A send's buffer is the sender's tensors themselves, which it keeps
    // alive until freed; false: a copy elsewhere (another device) or none.
    bool sends_view_tensors = false;
  };
  virtual BufferRules Buffers() const { return {}; }
};

// True when `tensors` have exactly the dtypes and shapes of `spec`.
bool Matches(const TensorList& tensors, const MessageSpec& spec);

}  // namespace pplab
