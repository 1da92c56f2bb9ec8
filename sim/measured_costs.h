// A cost model estimated from a timeline (usually a measured one): each
// stage's F/B/I/W time is the mean of that action's durations in it, the
// link's latency the median time receivers saw messages take (those that
// came before they were needed counting as bounds), and the step's work (all-reduces, clipping, the optimizer) its step
// events'.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost_model.h"
#include "traces/timeline.h"

namespace pplab {

// The mean duration in ms of each (stage, compute kind) present in `timeline`.
std::map<std::pair<StageId, ActionKind>, double> MeanComputeMs(const Timeline& timeline);

// How long each message from another rank took, as the compute action that
// took it saw it: `ms` is the action's start less the SEND's start. The
// receiver shows a message's time only where it waited for it:
// - kIdle: the SEND started no earlier than the end of the rank's previous
//   compute action (or the action is the rank's first): the rank had run
//   out of work and waited for the whole message;
// - kLate: sent while the rank still worked, but the action started later
//   after that work's end than the rank's own gap between actions allows
//   (LateGapMs): it waited for the message's end;
// - kEarly: sent while the rank worked and there when it was needed: it
//   took at most `ms` (a left-censored time).
// Where the receiver shares its device (Timeline::devices) in a trace that
// is not measured, an action that started as the device came free (full
// with other ranks' compute, as many as its slots, up to its start) waited
// for the device: its message counts as kEarly, a bound. (A measured
// trace's times hold the sharing: docs/fidelity.md.)
// Counting only the late ones beside the idle ones would count the slow
// messages alone (the fast ones hide behind the work); CensoredMedian
// weighs the early ones' bounds in. An action that takes two messages (an
// OVERLAP_F_B) counts the one sent last. Only compute actions count as the
// rank's work: a collective of its own between two of them (REDUCE_GRAD,
// UNSHARD) would add its time to the next one's sample.
struct WaitedMessage {
  enum class Seen { kIdle, kLate, kEarly };
  RankId from = 0, to = 0;
  double ms = 0;
  Seen seen = Seen::kIdle;
  bool Exact() const { return seen != Seen::kEarly; }
};
std::vector<WaitedMessage> WaitedMessages(const Timeline& timeline);
// The gap after a rank's work past which an action that starts late waited
// for its message (kLate): 3 times the median gap between the rank's
// consecutive compute actions (the executor's own time between them, where
// most actions find their inputs there), at least kMinLateGapMs.
constexpr double kMinLateGapMs = 0.05;
double LateGapMs(const std::vector<TimeNs>& gaps_ns);
// The exact times (kIdle, kLate) in ms, sorted.
std::vector<double> SortedMs(const std::vector<WaitedMessage>& waited);
// The exact times of `timeline`'s messages (SortedMs of WaitedMessages).
std::vector<double> WaitedMessageMs(const Timeline& timeline);

// The median time of `messages`, the early ones' bounds weighed in: the
// nonparametric maximum-likelihood estimate for times of which some are
// known only to be at most a bound (the reverse Kaplan-Meier estimator,
// the Kaplan-Meier one of -ms). From the longest exact time t_1 down, the
// share of messages at most t_k is the product over the longer exact
// times t_i of (1 - d_i / n_i), where d_i messages took t_i and n_i
// messages, exact or bounded, are known to have taken at most t_i; the
// median is the shortest exact time whose share is above one half (the
// upper median of the exact times when none is bounded). Unset without an
// exact time.
std::optional<double> CensoredMedian(const std::vector<WaitedMessage>& messages);

// Per ordered pair of ranks with at least kMinLinkSamples exact times:
// their count, the bounded ones beside them, and CensoredMedian of the
// pair's messages (the link's latency).
constexpr size_t kMinLinkSamples = 3;
struct LinkWaits {
  RankId from = 0, to = 0;
  size_t count = 0;  // exact
  size_t early = 0;  // bounded
  double median_ms = 0;
};
std::vector<LinkWaits> WaitedByLink(const std::vector<WaitedMessage>& waited);

// The mean duration of each compute kind per stage of `timeline` as the cost
// model's JSON (format "pplab.cost", `meta` naming `origin`), with the
// CensoredMedian of WaitedMessages as the link's latency (none: 0), each
// pair of WaitedByLink's as a link of its own with its median, and, where the
// timeline has step events, the step's work as the simulator runs it: each
// all-reduce and the tied embeddings' swap the shortest any rank spent in
// it (the last to arrive waited for no one), clipping and the optimizer
// the longest. Throws
// pplab::Error when a stage lacks F or any backward.
std::string MeasuredCostJson(const Timeline& timeline, const std::string& origin);

// The same, parsed.
CostModel MeasuredCostModel(const Timeline& timeline, const std::string& origin);

}  // namespace pplab
