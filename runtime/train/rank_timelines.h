// The ranks' timelines of a training run: one time 0 for all of them, and
// the last step's events (and activation peaks) gathered on rank 0.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "runtime/train/trainer.h"
#include "schedules/schedule.h"
#include "traces/timeline.h"

namespace pplab {

struct ProcessGroupHandle;

// Time 0 of every rank's timelines, given this rank's reading `mine` as it
// leaves the start barrier. The processes of one host read one steady
// clock, so where every rank runs on rank 0's host (the same boot id, and
// a reading within 1 s of rank 0's, as ranks just out of one barrier are)
// all take rank 0's reading: the same instant. Otherwise each keeps its own,
// which ranks leave a barrier milliseconds apart on a busy host (a consumer
// seemed to start up to 1.9 ms before its message was sent on the 2-core
// VM, docs/fidelity.md) and which is all there is across hosts.
std::chrono::steady_clock::time_point SharedOrigin(ProcessGroupHandle& group,
                                                   std::chrono::steady_clock::time_point mine,
                                                   std::chrono::milliseconds timeout);

// The last step's timeline and activation peaks, gathered on rank 0 (the
// first pipeline's ranks stand for all), the timeline shifted to start at 0.
// `group` is the world's (null for one process), `tp_size` the ranks of a
// tensor-parallel group (world rank k T of the first pipeline is its
// pipeline rank k); the peaks are gathered only with options.memory, and
// with them `live_after` (StepResult::live_after, parallel to `events`)
// becomes the timeline's memory samples: each rank's live bytes at its
// events' ends, the measured "activation bytes" counter. `step_events`
// (this rank's step work after its actions, on the actions' clock; empty
// where it was not timed) become the timeline's step events, each with its
// pipeline rank. Ends in a barrier through the store, so that no rank tears
// its communicators down while another still reads the gathers' results.
void GatherLastStep(const Schedule& schedule, RankId rank, ProcessGroupHandle* group, const TrainerOptions& options,
                    int tp_size, const std::vector<TimelineEvent>& events,
                    const std::vector<std::optional<Bytes>>& live_after, const std::vector<StepEvent>& step_events,
                    Bytes peak, TrainSummary& summary);

}  // namespace pplab
