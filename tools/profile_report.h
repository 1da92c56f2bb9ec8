// pplab profile's options, and what it writes and prints from a profile:
// the cost model's JSON (docs/cost-model.md) and the table (docs/profile.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "runtime/train/profile.h"
#include "runtime/train/worker_setup.h"

namespace pplab::cli {

struct ProfileCliOptions {
  std::string model = "tiny";
  int ranks = 2;
  int dp = 1;
  int tp = 1;
  bool sequence_parallel = false;
  std::string partition = "uniform";
  int virtual_stages = 1;
  int layers = 0;  // 0: the model's; else a slice of its first `layers` decoder layers
  // --microbatch-size: one size, or several profiled one after another by
  // the same workers (each into its own file, OutputFor).
  std::vector<int> microbatch_sizes;
  int microbatch_size = 0;  // the size being profiled
  int seq_len = 0;
  int warmup = 2;
  int repeats = 5;
  uint64_t seed = 1;
  double comm_timeout_s = 60;
  std::string device = "cpu";
  std::string backend = "auto";
  std::string precision = "fp32";
  std::string attention = "auto";
  std::string output;
  bool json = false;
  bool oversubscribe = false;
  // Ranks that share a device past its slots: "turns" times each alone,
  // "together" all at once (docs/profile.md, "Ranks that share a GPU").
  std::string shared_device = "turns";
  // --cuda-graphs: the stages' F and B as CUDA graphs, as `pplab train
  // --cuda-graphs` runs them (runtime/exec/graphed_stage.h).
  bool cuda_graphs = false;
  std::vector<std::string> raw_args;
  // The flags as parsed, defaults included (TrainOptions::parsed_flags):
  // the ranks compare their RanksFingerprint when they join.
  std::string parsed_flags;
};

// The cost-model document of one profile at o.microbatch_size: stages,
// link, step and meta (docs/profile.md). `threads`: each rank's compute
// threads; `devices`: where the first replica's pipeline ranks computed;
// `turns`: in how many turns the ranks timed their actions
// (ProfileOptions::turns).
nlohmann::json CostJson(const ProfileCliOptions& o, const LlamaConfig& config, const Partition& partition,
                        const ProfileResult& r, int threads, const DeviceMap& devices, int turns);

// The line that says which ranks' GPU waited for the host to launch its
// kernels in the executor-overhead run (meta.extra.launch_bound_per_rank),
// so that --cuda-graphs may make their stages faster; empty where none did,
// on the host clock, and for a profile taken with --cuda-graphs.
std::string LaunchBoundLine(const nlohmann::json& meta);

// Prints the profile's table from CostJson's document, and where it was
// written (`output`, none when empty).
void PrintTable(const nlohmann::json& doc, const std::string& output);

}  // namespace pplab::cli
