// GPipe, 1F1B, interleaved 1F1B and looped BFS. The zero-bubble families live
// in zero_bubble.cc.
#include "schedules/generators.h"

#include <algorithm>
#include <cctype>

#include "schedules/error.h"

namespace pplab {
namespace {

void CheckCommon(const std::string& name, int ranks, int microbatches, int virtual_stages) {
  if (ranks < 1) throw Error(name + ": --ranks must be >= 1, got " + std::to_string(ranks));
  if (microbatches < 1) {
    throw Error(name + ": --microbatches must be >= 1, got " + std::to_string(microbatches));
  }
  if (virtual_stages < 1) {
    throw Error(name + ": --virtual must be >= 1, got " + std::to_string(virtual_stages));
  }
}

Schedule Empty(const std::string& name, int ranks, int microbatches, int virtual_stages) {
  Schedule s;
  s.name = name;
  s.ranks = ranks;
  s.stages = ranks * virtual_stages;
  s.microbatches = microbatches;
  s.placement = LoopPlacement(ranks, s.stages);
  s.programs.assign(ranks, {});
  return s;
}

Action F(StageId s, MicrobatchId m) { return {ActionKind::kForward, s, m}; }
Action B(StageId s, MicrobatchId m) { return {ActionKind::kBackward, s, m}; }

}  // namespace

const std::vector<GeneratorInfo>& Generators() {
  static const std::vector<GeneratorInfo> kGenerators = {
      {"gpipe", "all forwards, then all backwards (GPipe); activations of all M microbatches live at once", 1, false,
       false, "GPipe"},
      {"1f1b", "PipeDream-Flush / Megatron 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down", 1,
       false, false, "1F1B"},
      {"interleaved-1f1b",
       "Megatron interleaved 1F1B: v stages per rank, depth-first in groups of K microbatches; needs M % K == 0", 2,
       true, false, "Interleaved1F1B"},
      {"looped-bfs", "looped breadth-first: v stages per rank, each stage runs all microbatches before the next", 2,
       true, false, "LoopedBFS"},
      {"zb-h1", "zero bubble H1: backward split into I and W, W deferred into the bubbles; 1F1B's in-flight limit", 1,
       false, true, ""},
      {"zb-h2", "zero bubble H2: like zb-h1 with up to 2K-1 microbatches in flight; no bubble when M >= 2K-1", 1, false,
       true, ""},
      {"zb-v", "zero bubble V: two stages per rank in a V (r and 2K-1-r), 1F1B's memory; no bubble when M >= 2K", 2,
       false, true, "ZBVZeroBubble"},
      {"v-half",
       "V-Half (Qi et al., controllable memory): zb-v's V with about half of 1F1B's activations, a little more bubble",
       2, false, true, ""},
      {"v-min",
       "V-Min (Qi et al., controllable memory): zb-v's V with about a third of 1F1B's activations, more bubble", 2,
       false, true, ""},
      {"interleaved-zb",
       "interleaved zero bubble (PyTorch's ZB1P): interleaved 1F1B's order with I/W split and W deferred by r; "
       "needs M % max(1, M/K) == 0",
       2, true, true, "InterleavedZeroBubble"},
      {"dualpipev",
       "DualPipeV (DeepSeek): V placement, overlapped F&B of the two stages in the steady phase; needs M >= 2K", 2,
       false, true, "DualPipeV"},
      {"dualpipe",
       "DualPipe (DeepSeek-V3): two copies of the stages fed from both ends (half the microbatches each), "
       "overlapped F&B in the steady phase; needs K even, M even, M >= 2K",
       2, false, true, "", false, 2},
      {"zb-auto",
       "zero bubble automatic (Qi et al. section 3): the fastest of zb-h1, zb-h2 and a family of list schedules "
       "costed with the cost model, under a memory limit (default: zb-h1's)",
       1, false, true, "", true},
  };
  return kGenerators;
}

namespace {

std::string Lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const GeneratorInfo& FindGenerator(const std::string& name) {
  std::string known;
  const std::string wanted = Lowercase(name);
  for (const GeneratorInfo& g : Generators()) {
    if (Lowercase(g.name) == wanted || (!g.pytorch_name.empty() && Lowercase(g.pytorch_name) == wanted)) return g;
    known += (known.empty() ? "" : ", ") + g.name;
    if (!g.pytorch_name.empty()) known += " (" + g.pytorch_name + ")";
  }
  throw Error("unknown schedule '" + name + "' (known: " + known + ")");
}

std::vector<std::string> GeneratorNames(const std::vector<std::string>& given) {
  std::vector<std::string> names;
  for (const std::string& entry : given) {
    const std::string& name = FindGenerator(entry).name;
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      throw Error("--schedules names " + name + " twice" + (entry == name ? "" : " (" + entry + " is " + name + ")"));
    }
    names.push_back(name);
  }
  if (given.empty()) {
    for (const GeneratorInfo& g : Generators()) names.push_back(g.name);
  }
  return names;
}

Schedule Generate(const std::string& requested, const GeneratorOptions& options) {
  const GeneratorInfo& info = FindGenerator(requested);
  const std::string& name = info.name;
  if (info.needs_costs) {
    throw Error(name +
                ": searches its order with a cost model; generate it with GenerateWithCosts (sim/zb_auto.h), "
                "as pplab simulate, compare, show, export and plan do");
  }
  const int v = options.virtual_stages == 0 ? info.default_virtual : options.virtual_stages;
  if (!info.accepts_virtual && v != info.default_virtual) {
    throw Error(name + ": --virtual must be " + std::to_string(info.default_virtual) +
                " for this schedule (its placement fixes the stages per rank), got " + std::to_string(v));
  }
  const int64_t actions = static_cast<int64_t>(std::max(options.ranks, 0)) * std::max(v, 0) *
                          std::max(options.microbatches, 0) * (info.split_backward ? 3 : 2);
  if (actions > kMaxComputeActions) {
    throw Error(name + ": --ranks " + std::to_string(options.ranks) + " x --virtual " + std::to_string(v) +
                " x --microbatches " + std::to_string(options.microbatches) + " gives " + std::to_string(actions) +
                " compute actions, more than pplab plans (" + std::to_string(kMaxComputeActions) + ")");
  }
  if (name == "gpipe") return GenerateGPipe(options.ranks, options.microbatches);
  if (name == "1f1b") return Generate1F1B(options.ranks, options.microbatches);
  if (name == "interleaved-1f1b") return GenerateInterleaved1F1B(options.ranks, options.microbatches, v);
  if (name == "looped-bfs") return GenerateLoopedBfs(options.ranks, options.microbatches, v);
  if (name == "zb-h1") return GenerateZeroBubbleH1(options.ranks, options.microbatches);
  if (name == "zb-h2") return GenerateZeroBubbleH2(options.ranks, options.microbatches);
  if (name == "interleaved-zb") return GenerateInterleavedZeroBubble(options.ranks, options.microbatches, v);
  if (name == "dualpipev") return GenerateDualPipeV(options.ranks, options.microbatches);
  if (name == "dualpipe") return GenerateDualPipe(options.ranks, options.microbatches);
  if (name == "v-half") return GenerateVHalf(options.ranks, options.microbatches);
  if (name == "v-min") return GenerateVMin(options.ranks, options.microbatches);
  return GenerateZeroBubbleV(options.ranks, options.microbatches);
}

Schedule GenerateGPipe(int ranks, int microbatches) {
  CheckCommon("gpipe", ranks, microbatches, 1);
  Schedule s = Empty("gpipe", ranks, microbatches, 1);
  for (RankId r = 0; r < ranks; ++r) {
    for (MicrobatchId m = 0; m < microbatches; ++m) s.programs[r].push_back(F(r, m));
    for (MicrobatchId m = 0; m < microbatches; ++m) s.programs[r].push_back(B(r, m));
  }
  return s;
}

Schedule Generate1F1B(int ranks, int microbatches) {
  CheckCommon("1f1b", ranks, microbatches, 1);
  Schedule s = Empty("1f1b", ranks, microbatches, 1);
  for (RankId r = 0; r < ranks; ++r) {
    Program& p = s.programs[r];
    const int warmup = std::min(ranks - r - 1, microbatches);
    // Warm-up: fill the pipeline below this rank.
    for (MicrobatchId m = 0; m < warmup; ++m) p.push_back(F(r, m));
    // Steady state: one forward, one backward.
    for (MicrobatchId i = 0; i < microbatches - warmup; ++i) {
      p.push_back(F(r, warmup + i));
      p.push_back(B(r, i));
    }
    // Cool-down: drain the backwards still owed.
    for (MicrobatchId m = microbatches - warmup; m < microbatches; ++m) p.push_back(B(r, m));
  }
  return s;
}

Schedule GenerateInterleaved1F1B(int ranks, int microbatches, int virtual_stages) {
  const std::string name = "interleaved-1f1b";
  CheckCommon(name, ranks, microbatches, virtual_stages);
  if (virtual_stages < 2) {
    throw Error(name + ": needs --virtual >= 2 stages per rank (with 1 it is 1f1b), got " +
                std::to_string(virtual_stages));
  }
  if (microbatches % ranks != 0) {
    throw Error(name + ": Megatron's rule: microbatches must be a multiple of ranks (M % K == 0), got M=" +
                std::to_string(microbatches) + " K=" + std::to_string(ranks));
  }
  Schedule s = Empty(name, ranks, microbatches, virtual_stages);
  const int K = ranks, v = virtual_stages, total = microbatches * virtual_stages;
  // The k-th forward (backward) on a rank works on microbatch group k / (K v),
  // chunk (k / K) mod v (reversed for backward), microbatch offset k mod K.
  auto microbatch_of = [&](int k) { return (k / (K * v)) * K + k % K; };
  auto forward_chunk = [&](int k) { return (k / K) % v; };
  auto backward_chunk = [&](int k) { return v - 1 - (k / K) % v; };
  for (RankId r = 0; r < K; ++r) {
    Program& p = s.programs[r];
    const int warmup = microbatches == K ? total : std::min((K - r - 1) * 2 + (v - 1) * K, total);
    auto fwd = [&](int k) { p.push_back(F(forward_chunk(k) * K + r, microbatch_of(k))); };
    auto bwd = [&](int k) { p.push_back(B(backward_chunk(k) * K + r, microbatch_of(k))); };
    for (int k = 0; k < warmup; ++k) fwd(k);
    for (int i = 0; i < total - warmup; ++i) {
      fwd(warmup + i);
      bwd(i);
    }
    for (int k = total - warmup; k < total; ++k) bwd(k);
  }
  return s;
}

Schedule GenerateLoopedBfs(int ranks, int microbatches, int virtual_stages) {
  CheckCommon("looped-bfs", ranks, microbatches, virtual_stages);
  Schedule s = Empty("looped-bfs", ranks, microbatches, virtual_stages);
  for (RankId r = 0; r < ranks; ++r) {
    Program& p = s.programs[r];
    for (int c = 0; c < virtual_stages; ++c) {
      for (MicrobatchId m = 0; m < microbatches; ++m) p.push_back(F(c * ranks + r, m));
    }
    for (int c = virtual_stages - 1; c >= 0; --c) {
      for (MicrobatchId m = 0; m < microbatches; ++m) p.push_back(B(c * ranks + r, m));
    }
  }
  return s;
}

}  // namespace pplab
