// Lowering: inserts the communication actions of a compute-only schedule.
#pragma once

#include "schedules/schedule.h"

namespace pplab {

// Returns `compute_only` with SEND/RECV actions inserted from its placement:
//   - RECV_F(s, m) right before F(s, m) when stage s-1 is on another rank,
//   - SEND_F(s, m) right after F(s, m) when stage s+1 is on another rank,
//   - RECV_B(s, m) right before B/I(s, m) when stage s+1 is on another rank,
//   - SEND_B(s, m) right after B/I(s, m) when stage s-1 is on another rank.
// Nothing is inserted between stages on the same rank. Because every message
// is sent right after it is produced and received right before it is used,
// a compute order without a cycle stays without a cycle when RECV blocks, and
// Validate() checks that each rank pair's channel carries the messages in the
// same order on both sides. Throws pplab::Error if the input already holds
// communication actions or fails CheckShape().
Schedule Lower(const Schedule& compute_only);

// Returns the schedule with its SEND/RECV actions removed.
Schedule StripComm(const Schedule& schedule);

}  // namespace pplab
