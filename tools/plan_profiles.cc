#include "tools/plan_profiles.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "models/llama_config.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "sim/precision.h"
#include "tools/plan_costs.h"

namespace pplab::cli {
namespace {

// Whether the profile's executor-overhead run found a rank whose GPU waited
// for the host to launch its kernels (meta.extra.launch_bound_per_rank,
// written by pplab profile; advice only, so any other value reads as no).
bool AnyLaunchBound(const CostModel& profile) {
  const nlohmann::json meta = nlohmann::json::parse(profile.meta_json);
  const nlohmann::json* ranks = nullptr;
  if (meta.contains("extra") && meta["extra"].is_object() && meta["extra"].contains("launch_bound_per_rank")) {
    ranks = &meta["extra"]["launch_bound_per_rank"];
  }
  if (ranks == nullptr || !ranks->is_array()) return false;
  return std::any_of(ranks->begin(), ranks->end(), [](const nlohmann::json& r) { return r == true; });
}

}  // namespace

std::string FitCostFiles(const PlanProfileFlags& o, PlanSearchOptions& search, std::vector<CostModel>& profiled,
                         std::string& train_device) {
  const std::string& sequence_parallel = o.sequence_parallel;
  std::string names;
  for (const std::string& file : o.cost_files) names += (names.empty() ? "" : ", ") + file;
  std::string costs_from = "fitted to " + names;
  std::optional<ProfileMeta> first;
  std::optional<LlamaConfig> recorded;
  profiled.reserve(o.cost_files.size());
  std::map<std::tuple<int, std::string, int>, std::string> configurations;  // -> the file measured so
  for (const std::string& file : o.cost_files) {
    profiled.push_back(CostModel::FromJson(ReadTextFile(file), file));
    const std::optional<ProfileMeta> meta = profiled.back().Profile();
    if (!meta) {
      throw Error("--cost " + file + " has no profile meta (meta.source is not \"pplab profile\"); plan needs " +
                  "a cost file from `pplab profile`");
    }
    if (meta->shared_device == "together") {
      throw Error("--cost " + file +
                  ": its ranks shared a device and were timed together (meta.shared_device \"together\"), so each "
                  "time holds the others' time slices; plan gives each rank a device of its own: profile with "
                  "--shared-device turns");
    }
    const LlamaConfig config = LlamaConfigFromJson(meta->config_json, file + ": meta.config");
    const std::string measured = "--cost " + file + " was measured with ";
    // Two profiles of one configuration would each claim its costs: the fit
    // (and the candidate measured as it is) would take whichever came first;
    // refused below, after what the profiles must share.
    const auto [earlier, fresh] =
        configurations.emplace(std::make_tuple(meta->microbatch_size, meta->partition, meta->ranks), file);
    if (first) {
      // Fitted together, the profiles must differ in what the fit spans
      // (microbatch size, partition, K) only.
      const std::string other = ", --cost " + o.cost_files.front() + " with ";
      const auto differ = [&](const std::string& flag, const std::string& mine, const std::string& theirs) {
        if (mine != theirs) {
          throw Error(measured + flag + " " + mine + other + theirs +
                      ": profiles fitted together must share it (only the microbatch size, partition and ranks may "
                      "differ)");
        }
      };
      differ("--model",
             SameShapeButDepth(config, *recorded) ? std::to_string(config.num_hidden_layers) + " layers" : meta->model,
             SameShapeButDepth(config, *recorded) ? std::to_string(recorded->num_hidden_layers) + " layers"
                                                  : first->model + " (the model configs differ)");
      differ("--seq-len", std::to_string(meta->seq_len), std::to_string(first->seq_len));
      differ("--precision", PrecisionName(meta->precision), PrecisionName(first->precision));
      differ("--attention", meta->attention, first->attention);
      differ("--tp", std::to_string(meta->tensor_parallel), std::to_string(first->tensor_parallel));
      differ("--sequence-parallel", meta->sequence_parallel ? "on" : "off", first->sequence_parallel ? "on" : "off");
      differ("--cuda-graphs", meta->cuda_graphs ? "on" : "off", first->cuda_graphs ? "on" : "off");
      const auto kind = [](const std::string& device) { return device.substr(0, device.find(':')); };
      differ("--device", kind(meta->device), kind(first->device));
      // On a CPU a rank's threads are the cores over the processes: a time
      // per FLOP measured with 2 threads is not one with 1.
      if (kind(first->device) == "cpu" && meta->threads_per_rank != first->threads_per_rank) {
        throw Error(measured + std::to_string(meta->threads_per_rank) + " threads a rank, --cost " +
                    o.cost_files.front() + " with " + std::to_string(first->threads_per_rank) +
                    " (meta.threads_per_rank): CPU profiles fitted together must share it");
      }
      if (!fresh) {
        throw Error(measured + "the microbatch size " + std::to_string(meta->microbatch_size) + ", partition " +
                    meta->partition + " and " + std::to_string(meta->ranks) + " ranks of --cost " + earlier->second +
                    ": give one profile for each configuration");
      }
      continue;
    }
    first = meta;
    recorded = config;
    // A slice (profile --layers): the model's layers as shaped, fewer of
    // them. Its costs per FLOP and bytes fit the whole model.
    if (!SameShapeButDepth(config, search.config)) {
      throw Error(measured + "--model " + meta->model + ", not " + o.model + " (the model configs differ)");
    }
    if (config.num_hidden_layers > search.config.num_hidden_layers) {
      throw Error("--cost " + file + " was measured on " + std::to_string(config.num_hidden_layers) +
                  " layers, more than the " + std::to_string(search.config.num_hidden_layers) + " of --model " +
                  o.model);
    }
    if (config.num_hidden_layers < search.config.num_hidden_layers) {
      costs_from += " (a slice of " + std::to_string(config.num_hidden_layers) + " of the model's " +
                    std::to_string(search.config.num_hidden_layers) + " layers)";
    }
    if (o.seq_len && *o.seq_len != meta->seq_len) {
      throw Error(measured + "--seq-len " + std::to_string(meta->seq_len) + ", not " + std::to_string(*o.seq_len));
    }
    if (o.precision && search.precision != meta->precision) {
      throw Error(measured + "--precision " + PrecisionName(meta->precision) + ", not " + *o.precision);
    }
    if (o.attention && *o.attention != meta->attention) {
      throw Error(measured + "--attention " + meta->attention + ", not " + *o.attention);
    }
  }
  search.fused_attention = first->attention == "sdpa";
  // Graphed stages (profile --cuda-graphs): plan costs the runs train
  // --cuda-graphs makes, and only those (PlanSearchOptions::cuda_graphs).
  search.cuda_graphs = first->cuda_graphs;
  if (search.cuda_graphs) costs_from += " (stages as CUDA graphs)";
  if (!search.cuda_graphs && std::any_of(profiled.begin(), profiled.end(), AnyLaunchBound)) {
    costs_from +=
        " (their GPU waited for the host to launch its kernels: profiles taken with --cuda-graphs may plan faster "
        "runs)";
  }
  search.precision = first->precision;  // its bytes per activation value
  // The plan holds on the device kind it was measured on (a GPU profile's
  // "cuda" or "cuda:N": each rank its own GPU, as train's --device cuda).
  if (first->device.rfind("cuda", 0) == 0) train_device = "cuda";
  search.seq_len = first->seq_len;
  std::vector<const CostModel*> all;
  for (const CostModel& m : profiled) all.push_back(&m);
  search.fit = FitProfiles(all, *recorded);
  const CostFit& f = search.fit;
  if (!f.ranges.empty()) {
    costs_from += " (" + std::to_string(f.ranges.size() + 1) +
                  " microbatch sizes: between each two, a fixed time a layer besides the time per FLOP)";
  }
  // A profile --tp T holds T's collectives in its times: plan costs that
  // T, in the profile's layout, and no other (CostFit::tensor_parallel).
  if (const int T = f.tensor_parallel; T > 1) {
    const std::string measured = "--cost " + o.cost_files.front() + " was measured with --tp " + std::to_string(T) +
                                 (f.sequence_parallel ? " --sequence-parallel" : "");
    if (o.tp && *o.tp != T) {
      throw Error("--tp " + std::to_string(*o.tp) + ": " + measured +
                  ", whose times hold its collectives: plan costs that T alone (profile again for another)");
    }
    if (sequence_parallel != "auto" && (sequence_parallel == "on") != f.sequence_parallel) {
      throw Error("--sequence-parallel " + sequence_parallel + ": " + measured +
                  ", whose times hold that layout: plan costs it alone");
    }
    search.tp = T;
    search.sequence_parallel = f.sequence_parallel;
    search.search_sequence_parallel = false;
  }
  // Every profile measured its own link: the one whose time for the largest
  // message among them is the median (the upper one of an even count),
  // whatever the order of the files. Its latency and bandwidth go together:
  // the medians of each taken apart may be no link's (a fast, far link's
  // latency with a slow, near one's bandwidth), as in profile's own default
  // link.
  Bytes largest = 0;
  for (const CostModel& m : profiled) {
    for (int s = 0; s < m.NumStages(); ++s) largest = std::max(largest, m.Stage(s).message_bytes);
  }
  const auto time = [largest](const Link& l) {
    return static_cast<double>(l.latency) +
           (l.bandwidth_gbps > 0 ? static_cast<double>(largest) / l.bandwidth_gbps : 0.0);
  };
  std::vector<Link> links;
  for (const CostModel& m : profiled) links.push_back(m.DefaultLink());
  std::stable_sort(links.begin(), links.end(), [&](const Link& a, const Link& b) { return time(a) < time(b); });
  search.link = links[links.size() / 2];
  // Their own stages stand in for a candidate only when they are the model's.
  if (recorded->num_hidden_layers == search.config.num_hidden_layers) search.profiles = all;
  return costs_from;
}

}  // namespace pplab::cli
