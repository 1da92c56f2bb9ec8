// What `pplab train` checks once, before any worker starts, besides the plan
// and the checkpoint (train_manifest.h): flags against a plan file, the run
// folder, and what this machine can hold. Each throws pplab::Error with one
// line naming the flag or path at fault and how to proceed.
#pragma once

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/schedule.h"
#include "tools/train_options.h"

namespace pplab::cli {

// A --plan fixes the schedule, K, M and v: a flag given with it that says
// otherwise is refused.
void CheckPlanFlags(const TrainOptions& o, const Schedule& schedule);

// A new run never mixes into an earlier one's run folder or checkpoints: it
// continues it (--resume), replaces it (--overwrite: the run folder's files
// and the checkpoints are removed here) or is refused. `given`: the options
// as parsed; `o`: with the output paths filled in (WithOutputs). Files given
// a path by flag (e.g. --trace t.json) are the user's to overwrite.
void ClaimOutputs(const TrainOptions& given, const TrainOptions& o);

// `nproc` local processes of `copies` copies of the model (2 for DualPipe)
// must fit this machine: at most 4 per core, and the memory they need
// (weights, gradients and AdamW moments, 16 bytes a parameter per replica,
// plus about 300 MB of LibTorch per process) within MemAvailable, unless
// --oversubscribe.
void CheckLocalCapacity(const TrainOptions& o, int nproc, const LlamaConfig& config, const Partition& partition,
                        int copies);

}  // namespace pplab::cli
