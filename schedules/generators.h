// Schedule generators: compute-only per-rank programs (F, B, I, W).
//
// Every generator returns a Schedule whose programs hold compute actions
// only; Lower() (lowering.h) inserts SEND/RECV afterwards. A rule a generator
// needs (for example M a multiple of K) is checked and reported as a
// pplab::Error that states the rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/schedule.h"

namespace pplab {

struct GeneratorOptions {
  int ranks = 1;           // K
  int microbatches = 1;    // M
  int virtual_stages = 0;  // v, stages per rank; 0 = the generator's default
};

struct GeneratorInfo {
  std::string name;          // e.g. "1f1b"
  std::string summary;       // one line for `pplab schedules`
  int default_virtual;       // v used when GeneratorOptions::virtual_stages == 0
  bool accepts_virtual;      // whether v may differ from default_virtual
  bool split_backward;       // emits I and W instead of B
  std::string pytorch_name;  // PyTorch's schedule class name (get_schedule_class), an alias; may be empty
  // Searches its order with a cost model (zb-auto): Generate() refuses it;
  // GenerateWithCosts() (sim/zb_auto.h) runs it.
  bool needs_costs = false;
  // Copies of the model its plans hold, one per pipeline (dualpipe: 2); the
  // model is cut into S / copies parts.
  int copies = 1;
};

// The largest plan Generate() builds, in compute actions (K v M times 2, or 3
// with a split backward): about 33.5 M, a few GiB once lowered and simulated.
constexpr int64_t kMaxComputeActions = int64_t{1} << 25;

// All generators, in the order `pplab schedules` lists them.
const std::vector<GeneratorInfo>& Generators();
// The generator called `name` or whose PyTorch name is `name`, ignoring
// case (e.g. "ZBVZeroBubble" or "zbvzerobubble" for zb-v); throws
// pplab::Error listing the known names.
const GeneratorInfo& FindGenerator(const std::string& name);
// The generators `given` names (--schedules), each by its own name, in the
// order given; every generator when `given` is empty. Throws pplab::Error
// naming one given twice, by name or alias (its rows would be doubled).
std::vector<std::string> GeneratorNames(const std::vector<std::string>& given);

// Runs generator `name` (or an alias, see FindGenerator); the schedule is
// named after the generator. Throws pplab::Error for an unknown name, a
// generator that needs costs (zb-auto; see sim/zb_auto.h), K < 1,
// M < 1, v < 1, a plan above kMaxComputeActions, or a rule of the family that
// the options break.
Schedule Generate(const std::string& name, const GeneratorOptions& options);

// The families, callable directly.
Schedule GenerateGPipe(int ranks, int microbatches);
Schedule Generate1F1B(int ranks, int microbatches);
Schedule GenerateInterleaved1F1B(int ranks, int microbatches, int virtual_stages);
Schedule GenerateLoopedBfs(int ranks, int microbatches, int virtual_stages);
Schedule GenerateZeroBubbleH1(int ranks, int microbatches);
Schedule GenerateZeroBubbleH2(int ranks, int microbatches);
Schedule GenerateZeroBubbleV(int ranks, int microbatches);
// V-Min and V-Half (controllable_memory.cc): zb-v's placement holding about
// 1/3 and 1/2 of 1F1B's activations.
Schedule GenerateVMin(int ranks, int microbatches);
Schedule GenerateVHalf(int ranks, int microbatches);
Schedule GenerateInterleavedZeroBubble(int ranks, int microbatches, int virtual_stages);
Schedule GenerateDualPipeV(int ranks, int microbatches);
// DeepSeek-V3's DualPipe: two copies of K stages as two pipelines over the
// K ranks (Schedule::pipeline_starts = {K}), microbatches 0..M/2-1 fed at
// rank 0 and M/2..M-1 at rank K-1. Rules: K even, M even and M >= 2K.
Schedule GenerateDualPipe(int ranks, int microbatches);

// Stage -> rank map of V-shaped schedules: 2K stages, stage s on rank s for
// s < K and on rank 2K-1-s after, so rank r holds stages r and 2K-1-r.
std::vector<RankId> VPlacement(int ranks);

}  // namespace pplab
