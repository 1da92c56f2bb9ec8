// Schedule: per-rank ordered programs of actions, plus the stage placement.
//
// A schedule has K ranks, S stages and M microbatches. placement[s] is the
// rank that runs stage s. programs[r] is rank r's program, executed in order.
// Generators produce compute-only schedules (F, B, I, W); Lower() inserts the
// communication actions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "schedules/action.h"
#include "schedules/units.h"

namespace pplab {

using Program = std::vector<Action>;

struct Schedule {
  std::string name;
  int ranks = 0;                  // K
  int stages = 0;                 // S
  int microbatches = 0;           // M
  std::vector<RankId> placement;  // stage -> rank, size S
  std::vector<Program> programs;  // rank -> program, size K
  // Several pipelines sharing the ranks (DualPipe: two copies of the model,
  // one fed from rank 0 and one from rank K-1). pipeline_starts holds the
  // first stage of every pipeline after the first (ascending, in 1..S-1);
  // microbatch_pipeline[m] the pipeline microbatch m runs through. Inside a
  // pipeline the dependencies are the usual ones (F(s,m) -> F(s+1,m), ...);
  // none cross from one pipeline to the next, and the last stage of each
  // computes a loss. Both empty (every other schedule): one pipeline of
  // stages 0..S-1 that every microbatch runs through.
  std::vector<StageId> pipeline_starts;
  std::vector<int> microbatch_pipeline;

  // v = S / K when every rank holds the same number of stages, else 0.
  int StagesPerRank() const;
  // True when any backward is split into I and W.
  bool HasSplitBackward() const;
  // True when any program holds a SEND or RECV (per-stage actions such as
  // REDUCE_GRAD do not count: a schedule with them may still need lowering).
  bool HasComm() const;
  // Total number of actions over all ranks.
  size_t NumActions() const;
  // Number of simple compute actions (F, B, I, W) over all ranks, an
  // OVERLAP_F_B counting as its two parts.
  size_t NumComputeActions() const;
  // Stages placed on rank r, ascending.
  std::vector<StageId> StagesOf(RankId r) const;

  // 1 + pipeline_starts.size().
  int NumPipelines() const { return 1 + static_cast<int>(pipeline_starts.size()); }
  // The stages microbatch m runs through, [FirstStage(m), LastStage(m)]:
  // [0, S-1] with one pipeline.
  StageId FirstStage(MicrobatchId m) const;
  StageId LastStage(MicrobatchId m) const;
  // Whether microbatch m runs through stage s.
  bool Runs(StageId s, MicrobatchId m) const { return s >= FirstStage(m) && s <= LastStage(m); }
  // How many microbatches run through stage s (M with one pipeline).
  int MicrobatchesThrough(StageId s) const;

  // The pipeline stage s belongs to (0 with one pipeline) and its first stage.
  int PipelineOf(StageId s) const;
  StageId PipelineStart(StageId s) const;
  // Which part of the model stage s holds: its place in its pipeline
  // (s itself with one pipeline). Every pipeline is one copy of the model,
  // so stages of different pipelines with the same part hold the same
  // weights and train as one (their gradients are summed).
  StageId ModelStage(StageId s) const { return s - PipelineStart(s); }
  // The stages holding the same part of the model as `s`, `s` included, in
  // pipeline order.
  std::vector<StageId> CopiesOf(StageId s) const;
  // The number of parts the model is cut into: S with one pipeline, S / P
  // when the P pipelines are equally long, and 0 when they are not (such a
  // schedule cannot be run on one model).
  int ModelStages() const;
  // (first stage, last stage) of every pipeline, in pipeline order: where a
  // model with tied embeddings keeps the two halves of that weight.
  std::vector<std::pair<StageId, StageId>> PipelineEnds() const;
};

// The stage -> rank map where stage s runs on rank s mod K ("loop"
// placement of interleaved and looped schedules; identity when S == K).
std::vector<RankId> LoopPlacement(int ranks, int stages);

// Why `action` cannot appear in rank `rank`'s program (stage or microbatch
// out of range, stage placed elsewhere, or a stage its microbatch does not
// run through); empty when it can. Needs a
// placement of size S.
std::string WhyOutOfPlace(const Schedule& schedule, RankId rank, const Action& action);

// Checks the whole-schedule fields: K, S, M >= 1, placement of size S with
// ranks in range, K programs, and pipeline_starts / microbatch_pipeline
// (both empty, or starts ascending in 1..S-1 and one pipeline in range per
// microbatch). Throws pplab::Error naming the field.
void CheckHeader(const Schedule& schedule);

// CheckHeader(), and every action's stage and microbatch in range and the
// action on its stage's rank: what any pass needs before it can use a
// schedule. Throws pplab::Error naming the rank, step and action at fault.
void CheckShape(const Schedule& schedule);

}  // namespace pplab
