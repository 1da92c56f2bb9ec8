// A cost model estimated from a timeline (usually a measured one): each
// stage's F/B/I/W time is the mean of that action's durations in it, the
// link's latency the median time a waiting receiver saw a message take, and
// the step's work (all-reduces, clipping, the optimizer) its step events'.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost_model.h"
#include "traces/timeline.h"

namespace pplab {

// The mean duration in ms of each (stage, compute kind) present in `timeline`.
std::map<std::pair<StageId, ActionKind>, double> MeanComputeMs(const Timeline& timeline);

// How long messages took as a receiver that waited for them saw it: for
// each compute action that takes a message from another rank whose SEND
// started no earlier than the end of the rank's previous compute action (or
// that is the rank's first), the action's start less the SEND's start, in
// ms; sorted. Empty when no action waited so. An action that takes two
// messages (an OVERLAP_F_B) counts the one sent last. Only compute actions
// count as the rank's work: a collective of its own between two of them
// (REDUCE_GRAD, UNSHARD) would add its time to the next one's sample.
std::vector<double> WaitedMessageMs(const Timeline& timeline);

// The same messages one by one, with the ranks of their SEND and of the
// action that waited: messages between a pair of ranks may take their own
// time in each direction (two ranks sharing one GPU: docs/fidelity.md).
struct WaitedMessage {
  RankId from = 0, to = 0;
  double ms = 0;
};
std::vector<WaitedMessage> WaitedMessages(const Timeline& timeline);
// Their times in ms, sorted (WaitedMessageMs of the timeline they came from).
std::vector<double> SortedMs(const std::vector<WaitedMessage>& waited);

// Per ordered pair of ranks with at least kMinLinkSamples waited messages:
// their count and median ms (the upper one of an even count, as the link's).
constexpr size_t kMinLinkSamples = 3;
struct LinkWaits {
  RankId from = 0, to = 0;
  size_t count = 0;
  double median_ms = 0;
};
std::vector<LinkWaits> WaitedByLink(const std::vector<WaitedMessage>& waited);

// The mean duration of each compute kind per stage of `timeline` as the cost
// model's JSON (format "pplab.cost", `meta` naming `origin`), with the
// median of WaitedMessageMs as the link's latency (none: 0), each pair of
// WaitedByLink's as a link of its own with its median, and, where the
// timeline has step events, the step's work as the simulator runs it: each
// all-reduce and the tied embeddings' swap the shortest any rank spent in
// it (the last to arrive waited for no one), clipping and the optimizer
// the longest. Throws
// pplab::Error when a stage lacks F or any backward.
std::string MeasuredCostJson(const Timeline& timeline, const std::string& origin);

// The same, parsed.
CostModel MeasuredCostModel(const Timeline& timeline, const std::string& origin);

}  // namespace pplab
