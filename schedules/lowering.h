// Lowering: inserts the communication actions of a compute-only schedule.
#pragma once

#include <string>

#include "schedules/schedule.h"

namespace pplab {

// Returns `compute_only` with SEND/RECV actions inserted from its placement:
//   - RECV_F(s, m) right before F(s, m) when stage s-1 is on another rank,
//   - SEND_F(s, m) right after F(s, m) when stage s+1 is on another rank,
//   - RECV_B(s, m) right before B/I(s, m) when stage s+1 is on another rank,
//   - SEND_B(s, m) right after B/I(s, m) when stage s-1 is on another rank.
// Nothing is inserted between stages on the same rank. An OVERLAP_F_B gets
// the receives of both its parts before it and their sends after it;
// per-stage actions (REDUCE_GRAD, UNSHARD, RESHARD) stay where they are. Then, per channel
// (ordered pair of ranks), a RECV is moved earlier where its peer sent that
// message before the one the rank needs first, so both sides list each
// channel's messages in the same order (what ordered point-to-point transports
// such as NCCL require). Every message is sent right after it is produced and
// received no later than right before it is used, so a compute order without
// a cycle stays without a cycle even when RECV blocks. Throws pplab::Error if
// the input already holds communication actions or fails CheckShape().
Schedule Lower(const Schedule& compute_only);

// Returns the schedule with its SEND/RECV actions removed (compute and
// per-stage actions stay).
Schedule StripComm(const Schedule& schedule);

// Removes the UNSHARD and RESHARD actions of `schedule` (FSDP's gather and
// free of a stage's parameters, which PyTorch's lowering writes for every
// stage and skips at run time for a stage that is not FSDP-wrapped) and
// returns how many there were.
int DropFsdpActions(Schedule& schedule);

// Returns `schedule` with REDUCE_GRAD(s) inserted right after the last B or W
// of each stage s on its rank (where PyTorch's lowering puts it). Throws
// pplab::Error if the schedule already holds a REDUCE_GRAD.
Schedule AddReduceGrad(const Schedule& schedule);

// "" when every stage of every rank of `schedule` reaches a REDUCE_GRAD, as
// data parallelism needs (its replicas would otherwise update with
// unreduced gradients); else which rank lacks one for which stage.
std::string MissingReduceGrad(const Schedule& schedule);

}  // namespace pplab
