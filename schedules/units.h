// Unit-carrying type aliases shared by every layer of pplab.
//
// Time is an integer count of nanoseconds so that the simulator is
// deterministic and tests can compare exact values. Sizes are bytes.
#pragma once

#include <cstdint>

namespace pplab {

using TimeNs = std::int64_t;  // nanoseconds
using Bytes = std::int64_t;   // bytes
using RankId = int;           // pipeline rank, 0..K-1
using StageId = int;          // pipeline stage, 0..S-1
using MicrobatchId = int;     // microbatch, 0..M-1

constexpr TimeNs kNsPerMs = 1000000;

// Converts milliseconds (a user-facing float) to integer nanoseconds,
// rounding to the nearest nanosecond.
TimeNs MsToNs(double ms);
// Converts integer nanoseconds to milliseconds for display and JSON.
double NsToMs(TimeNs ns);

}  // namespace pplab
