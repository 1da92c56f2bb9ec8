// Chrome Trace Event format for timelines: opens in Perfetto and
// chrome://tracing. Specified in docs/trace-format.md.
//
// One process per rank ("rank r"), with threads "compute" (F, B, I, W),
// "send" and "recv"; complete events named like "F s2 mb3" with args
// {kind, stage, microbatch, action}; a flow arrow from each SEND to the RECV
// of its message; a counter "activation bytes" per rank. Timestamps are
// microseconds with nanosecond digits, so integer-ns times round-trip.
#pragma once

#include <string>

#include "traces/timeline.h"

namespace pplab {

constexpr int kTraceFormatVersion = 1;

// Serialises `timeline`; deterministic (same timeline, same bytes), one
// event per line.
std::string TimelineToChromeTrace(const Timeline& timeline);

// Parses a trace written by TimelineToChromeTrace (by the simulator or the
// executor). Errors name `origin` and the event at fault.
Timeline TimelineFromChromeTrace(const std::string& text, const std::string& origin);

}  // namespace pplab
