#include "schedules/schedule.h"

#include "schedules/error.h"

namespace pplab {

int Schedule::StagesPerRank() const {
  if (ranks <= 0 || stages % ranks != 0) return 0;
  std::vector<int> count(ranks, 0);
  for (RankId r : placement) {
    if (r >= 0 && r < ranks) ++count[r];
  }
  for (int c : count) {
    if (c != stages / ranks) return 0;
  }
  return stages / ranks;
}

bool Schedule::HasSplitBackward() const {
  for (const Program& p : programs) {
    for (const Action& a : p) {
      for (const Action& part : PartsOf(a)) {
        if (part.kind == ActionKind::kBackwardInput || part.kind == ActionKind::kBackwardWeight) return true;
      }
    }
  }
  return false;
}

bool Schedule::HasComm() const {
  for (const Program& p : programs) {
    for (const Action& a : p) {
      if (IsComm(a.kind)) return true;
    }
  }
  return false;
}

size_t Schedule::NumActions() const {
  size_t n = 0;
  for (const Program& p : programs) n += p.size();
  return n;
}

size_t Schedule::NumComputeActions() const {
  size_t n = 0;
  for (const Program& p : programs) {
    for (const Action& a : p) n += PartsOf(a).count;
  }
  return n;
}

std::vector<StageId> Schedule::StagesOf(RankId r) const {
  std::vector<StageId> out;
  for (StageId s = 0; s < static_cast<StageId>(placement.size()); ++s) {
    if (placement[s] == r) out.push_back(s);
  }
  return out;
}

StageId Schedule::FirstStage(MicrobatchId m) const {
  if (pipeline_starts.empty() || m < 0 || m >= static_cast<int>(microbatch_pipeline.size())) return 0;
  const int p = microbatch_pipeline[m];
  return p <= 0 ? 0 : pipeline_starts[p - 1];
}

StageId Schedule::LastStage(MicrobatchId m) const {
  if (pipeline_starts.empty() || m < 0 || m >= static_cast<int>(microbatch_pipeline.size())) return stages - 1;
  const int p = microbatch_pipeline[m];
  return p >= static_cast<int>(pipeline_starts.size()) ? stages - 1 : pipeline_starts[p] - 1;
}

int Schedule::MicrobatchesThrough(StageId s) const {
  int n = 0;
  for (MicrobatchId m = 0; m < microbatches; ++m) n += Runs(s, m);
  return n;
}

int Schedule::PipelineOf(StageId s) const {
  int p = 0;
  while (p < static_cast<int>(pipeline_starts.size()) && s >= pipeline_starts[p]) ++p;
  return p;
}

StageId Schedule::PipelineStart(StageId s) const {
  const int p = PipelineOf(s);
  return p == 0 ? 0 : pipeline_starts[p - 1];
}

std::vector<StageId> Schedule::CopiesOf(StageId s) const {
  std::vector<StageId> out;
  for (StageId t = 0; t < stages; ++t) {
    if (ModelStage(t) == ModelStage(s)) out.push_back(t);
  }
  return out;
}

int Schedule::ModelStages() const {
  const int length = pipeline_starts.empty() ? stages : pipeline_starts.front();
  StageId start = 0;
  for (StageId next : pipeline_starts) {
    if (next - start != length) return 0;
    start = next;
  }
  return stages - start == length ? length : 0;
}

std::vector<std::pair<StageId, StageId>> Schedule::PipelineEnds() const {
  std::vector<std::pair<StageId, StageId>> ends;
  StageId start = 0;
  for (StageId next : pipeline_starts) {
    ends.emplace_back(start, next - 1);
    start = next;
  }
  ends.emplace_back(start, stages - 1);
  return ends;
}

std::vector<RankId> LoopPlacement(int ranks, int stages) {
  std::vector<RankId> placement(stages);
  for (StageId s = 0; s < stages; ++s) placement[s] = s % ranks;
  return placement;
}

std::string WhyOutOfPlace(const Schedule& schedule, RankId rank, const Action& action) {
  if (action.kind == ActionKind::kOverlapFB) {
    for (const Action& part : PartsOf(action)) {
      const std::string why = WhyOutOfPlace(schedule, rank, part);
      if (!why.empty()) {
        return std::string(part.kind == ActionKind::kForward ? "its F part: " : "its backward part: ") + why +
               " (both parts of an overlapped action must be on its rank)";
      }
    }
    return "";
  }
  const Action& a = action;
  if (a.stage < 0 || a.stage >= schedule.stages) {
    return "stage is not in [0, " + std::to_string(schedule.stages) + ")";
  }
  if (a.microbatch < 0 || a.microbatch >= schedule.microbatches) {
    return "microbatch is not in [0, " + std::to_string(schedule.microbatches) + ")";
  }
  if (schedule.placement[a.stage] != rank) {
    return "stage " + std::to_string(a.stage) + " is placed on rank " + std::to_string(schedule.placement[a.stage]);
  }
  if (!IsPerStage(a.kind) && !schedule.Runs(a.stage, a.microbatch)) {
    return "microbatch " + std::to_string(a.microbatch) + " runs through stages " +
           std::to_string(schedule.FirstStage(a.microbatch)) + ".." + std::to_string(schedule.LastStage(a.microbatch)) +
           " only (its pipeline)";
  }
  return "";
}

void CheckHeader(const Schedule& schedule) {
  const std::string where = "schedule '" + schedule.name + "': ";
  if (schedule.ranks < 1) throw Error(where + "ranks must be >= 1, got " + std::to_string(schedule.ranks));
  if (schedule.stages < 1) throw Error(where + "stages must be >= 1, got " + std::to_string(schedule.stages));
  if (schedule.microbatches < 1) {
    throw Error(where + "microbatches must be >= 1, got " + std::to_string(schedule.microbatches));
  }
  if (static_cast<int>(schedule.placement.size()) != schedule.stages) {
    throw Error(where + "placement has " + std::to_string(schedule.placement.size()) +
                " entries but stages = " + std::to_string(schedule.stages));
  }
  for (StageId s = 0; s < schedule.stages; ++s) {
    const RankId r = schedule.placement[s];
    if (r < 0 || r >= schedule.ranks) {
      throw Error(where + "placement[" + std::to_string(s) + "] = " + std::to_string(r) + " is not a rank in [0, " +
                  std::to_string(schedule.ranks) + ")");
    }
  }
  if (static_cast<int>(schedule.programs.size()) != schedule.ranks) {
    throw Error(where + "has " + std::to_string(schedule.programs.size()) +
                " programs but ranks = " + std::to_string(schedule.ranks));
  }
  if (schedule.pipeline_starts.empty() != schedule.microbatch_pipeline.empty()) {
    throw Error(where + "pipeline_starts and microbatch_pipeline go together: give both or neither");
  }
  StageId previous = 0;
  for (StageId start : schedule.pipeline_starts) {
    if (start <= previous || start >= schedule.stages) {
      throw Error(where + "pipeline_starts must ascend within [1, " + std::to_string(schedule.stages - 1) + "], got " +
                  std::to_string(start) + (previous > 0 ? " after " + std::to_string(previous) : std::string()));
    }
    previous = start;
  }
  if (!schedule.microbatch_pipeline.empty()) {
    if (static_cast<int>(schedule.microbatch_pipeline.size()) != schedule.microbatches) {
      throw Error(where + "microbatch_pipeline has " + std::to_string(schedule.microbatch_pipeline.size()) +
                  " entries but microbatches = " + std::to_string(schedule.microbatches));
    }
    for (MicrobatchId m = 0; m < schedule.microbatches; ++m) {
      const int p = schedule.microbatch_pipeline[m];
      if (p < 0 || p >= schedule.NumPipelines()) {
        throw Error(where + "microbatch_pipeline[" + std::to_string(m) + "] = " + std::to_string(p) +
                    " is not a pipeline in [0, " + std::to_string(schedule.NumPipelines()) + ")");
      }
    }
  }
}

void CheckShape(const Schedule& schedule) {
  CheckHeader(schedule);
  const std::string where = "schedule '" + schedule.name + "': ";
  for (RankId r = 0; r < schedule.ranks; ++r) {
    const Program& program = schedule.programs[r];
    for (size_t step = 0; step < program.size(); ++step) {
      const Action& a = program[step];
      const std::string why = WhyOutOfPlace(schedule, r, a);
      if (why.empty()) continue;
      throw Error(where + "rank " + std::to_string(r) + " step " + std::to_string(step) + " action " + FormatAction(a) +
                  ": " + why);
    }
  }
}

}  // namespace pplab
