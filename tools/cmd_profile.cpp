// pplab profile: measure each stage's F, B, I and W time, its activation and
// message bytes, and the links between neighbouring ranks on this machine,
// with K worker processes launched as `pplab train` launches them, and write
// the simulator's cost model (docs/profile.md).
#include <ATen/Parallel.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "models/llama.h"
#include "models/llama_config.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/train/batches.h"
#include "runtime/train/launcher.h"
#include "runtime/train/profile.h"
#include "runtime/train/threads.h"
#include "runtime/train/worker_setup.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "sim/cost_model.h"
#include "sim/precision.h"
#include "tools/commands.h"
#include "tools/local_capacity.h"
#include "tools/report.h"
#include "tools/train_checks.h"

namespace pplab::cli {
namespace {

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
  // "together" all at once (docs/profile.md, "Ranks that share a device").
  std::string shared_device = "turns";
  std::vector<std::string> raw_args;
};

constexpr int kMaxMicrobatchSize = 1 << 16;
constexpr size_t kMaxMicrobatchSizes = 16;

// Where the profile at `mb` sequences a microbatch is written: -o as given
// with one size; with several, "-mb<N>" before its extension (cost.json:
// cost-mb4.json), or at its end when it has none.
std::string OutputFor(const ProfileCliOptions& o, int mb) {
  if (o.output.empty() || o.microbatch_sizes.size() <= 1) return o.output;
  const size_t slash = o.output.find_last_of('/');
  const size_t dot = o.output.find_last_of('.');
  const bool extension = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string tag = "-mb" + std::to_string(mb);
  return extension ? o.output.substr(0, dot) + tag + o.output.substr(dot) : o.output + tag;
}

// The model profiled: --model, or with --layers a slice of it, the same
// layers' shapes with fewer of them (pplab plan fits the costs of the whole
// model to it: a model too large for one machine is profiled in a slice).
LlamaConfig ProfiledConfig(const ProfileCliOptions& o) {
  LlamaConfig config = LoadLlamaConfig(o.model);
  if (o.layers != 0) {
    if (o.layers < 1 || o.layers > config.num_hidden_layers) {
      throw Error("--layers " + std::to_string(o.layers) + ": must be in [1, " +
                  std::to_string(config.num_hidden_layers) + "] (the model's num_hidden_layers)");
    }
    config.num_hidden_layers = o.layers;
  }
  return config;
}

// Everything that can be refused without running a worker, once, before
// any starts: the model, the partition over K v stages, the sizes, -o.
void Check(const ProfileCliOptions& o, const LlamaConfig& config) {
  if (o.ranks < 1 || o.ranks > 4096) throw Error("--ranks " + std::to_string(o.ranks) + ": must be in [1, 4096]");
  if (o.dp < 1 || o.dp * o.ranks > 4096) {
    throw Error("--dp " + std::to_string(o.dp) + ": must be at least 1, with at most 4096 processes in all");
  }
  if (o.tp < 1 || o.tp * o.dp * o.ranks > 4096) {
    throw Error("--tp " + std::to_string(o.tp) + ": must be at least 1, with at most 4096 processes in all");
  }
  if (o.virtual_stages < 1 || o.virtual_stages > 64) {
    throw Error("--virtual " + std::to_string(o.virtual_stages) + ": must be in [1, 64]");
  }
  if (o.microbatch_sizes.empty() || o.microbatch_sizes.size() > kMaxMicrobatchSizes) {
    throw Error("--microbatch-size: give 1 to " + std::to_string(kMaxMicrobatchSizes) + " sizes");
  }
  for (size_t i = 0; i < o.microbatch_sizes.size(); ++i) {
    const int mb = o.microbatch_sizes[i];
    if (mb < 1 || mb > kMaxMicrobatchSize) {
      throw Error("--microbatch-size " + std::to_string(mb) + ": must be in [1, " + std::to_string(kMaxMicrobatchSize) +
                  "]");
    }
    if (std::find(o.microbatch_sizes.begin(), o.microbatch_sizes.begin() + i, mb) != o.microbatch_sizes.begin() + i) {
      throw Error("--microbatch-size " + std::to_string(mb) + " is given twice");
    }
  }
  if (o.seq_len < 1 || o.seq_len > config.max_position_embeddings) {
    throw Error("--seq-len " + std::to_string(o.seq_len) + ": must be in [1, " +
                std::to_string(config.max_position_embeddings) + "] (the model's max_position_embeddings)");
  }
  CheckTensorParallelFlags(config, o.tp, o.sequence_parallel, o.seq_len);
  if (o.repeats < 1 || o.repeats > 10000)
    throw Error("--repeats " + std::to_string(o.repeats) + ": must be in [1, 10000]");
  if (o.warmup < 0 || o.warmup > 10000) throw Error("--warmup " + std::to_string(o.warmup) + ": must be in [0, 10000]");
  ParsePrecision(o.precision);
  if (o.shared_device != "turns" && o.shared_device != "together") {
    throw Error("--shared-device " + o.shared_device + ": must be turns or together");
  }
  MakePartition(config, o.ranks * o.virtual_stages, o.partition,
                {LoopPlacement(o.ranks, o.ranks * o.virtual_stages), o.seq_len});
  for (const int mb : o.microbatch_sizes) {
    const std::string output = OutputFor(o, mb);
    if (output.empty()) continue;
    const auto slash = output.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : output.substr(0, slash));
    const bool exists = ::access(output.c_str(), F_OK) == 0;
    if (::access(dir.c_str(), W_OK) != 0 || (exists && ::access(output.c_str(), W_OK) != 0)) {
      throw Error("-o " + output + ": cannot write there");
    }
  }
}

// KIND_ms, KIND_p10_ms and KIND_p90_ms of one measured time.
void PutSpread(nlohmann::json& into, const std::string& kind, const SampleSpread& x) {
  into[kind + "_ms"] = x.median;
  into[kind + "_p10_ms"] = x.p10;
  into[kind + "_p90_ms"] = x.p90;
}

nlohmann::json SpreadJson(const SampleSpread& x) { return {{"median", x.median}, {"p10", x.p10}, {"p90", x.p90}}; }

// The step's work as the simulator takes it: each cost from the rank whose
// median is the largest (every rank waits for the slowest before the next
// step), with that rank's spread.
nlohmann::json StepJson(const std::vector<StepProfile>& ranks) {
  nlohmann::json step = nlohmann::json::object();
  for (const auto& [kind, member] :
       {std::pair<const char*, SampleSpread StepProfile::*>{"loss_allreduce", &StepProfile::loss_allreduce},
        {"norm_allreduce", &StepProfile::norm_allreduce},
        {"clip", &StepProfile::clip},
        {"optimizer", &StepProfile::optimizer},
        {"tied_exchange", &StepProfile::tied_exchange}}) {
    SampleSpread slowest;
    for (const StepProfile& r : ranks) {
      if ((r.*member).median >= slowest.median) slowest = r.*member;
    }
    // (A model without tied embeddings has no swap: its file has no entry.)
    if (member == &StepProfile::tied_exchange && slowest.p90 == 0) continue;
    PutSpread(step, kind, slowest);
  }
  return step;
}

// The cost-model document: stages, link, step, meta (docs/profile.md).
// `devices`: where the first replica's pipeline ranks computed; `turns`: in
// how many turns the ranks timed their actions (ProfileOptions::turns).
nlohmann::json CostJson(const ProfileCliOptions& o, const LlamaConfig& config, const Partition& partition,
                        const ProfileResult& r, int threads, const DeviceMap& devices, int turns) {
  using nlohmann::json;
  json stages = json::array(), extra_stages = json::array();
  // What a forward send held as a share of its message, over the stages
  // whose send was measured: for the stages whose next stage was on their
  // own rank here, but may not be in a plan.
  double sent = 0, held = 0;
  for (const StageProfile& p : r.stages) {
    if (!p.forward_send_bytes) continue;
    sent += static_cast<double>(p.forward_message_bytes);
    held += static_cast<double>(*p.forward_send_bytes);
  }
  for (const StageProfile& p : r.stages) {
    const bool last = p.stage == partition.NumStages() - 1;
    json stage = json::object();
    PutSpread(stage, "forward", p.forward);
    PutSpread(stage, "backward", p.backward);
    PutSpread(stage, "backward_input", p.backward_input);
    PutSpread(stage, "backward_weight", p.backward_weight);
    if (o.dp > 1) PutSpread(stage, "reduce_grad", p.reduce_grad);
    stage.update(json{{"activation_bytes", p.activation_bytes},
                      {"weight_grad_bytes", p.weight_grad_bytes},
                      // The largest of F's, B's and I's temporaries.
                      {"workspace_bytes", std::max({p.forward_transient_bytes, p.backward_transient_bytes,
                                                    p.backward_input_transient_bytes})},
                      // Each kind's own: F's, B's (for B and W) and I's.
                      {"forward_workspace_bytes", p.forward_transient_bytes},
                      {"backward_workspace_bytes", p.backward_transient_bytes},
                      {"backward_input_workspace_bytes", p.backward_input_transient_bytes},
                      // What the stage sends: its outputs, or on the last stage its input gradient.
                      {"message_bytes", last ? p.backward_message_bytes : p.forward_message_bytes},
                      // What the stage keeps from F to B when it is recomputed.
                      {"input_bytes", p.input_bytes}});
    if (p.forward_send_bytes) {
      stage["forward_send_bytes"] = *p.forward_send_bytes;
    } else if (!last && sent > 0) {
      stage["forward_send_bytes"] = std::llround(held / sent * static_cast<double>(p.forward_message_bytes));
    }
    if (p.stage > 0) stage["input_grad_bytes"] = p.input_grad_bytes;
    stage["cast_weight_bytes"] = p.cast_weight_bytes;
    // On a CPU: how much of its cores each kind keeps busy (StageProfile::
    // cpu_share), the share of its device slot the simulator holds for it.
    for (const auto& [kind, k] :
         {std::pair<const char*, int>{"forward", 0}, {"backward", 1}, {"backward_input", 2}, {"backward_weight", 3}}) {
      // (At least 0.001: the file's shares are positive.)
      if (p.cpu_share[k] >= 0) stage[std::string(kind) + "_device_share"] = std::max(1e-3, p.cpu_share[k]);
    }
    // Whether activation_bytes counts a received input of the stage's own.
    stage["activation_includes_input"] = p.input_received;
    stages.push_back(stage);
    extra_stages.push_back({{"stage", p.stage},
                            {"rank", p.rank},
                            {"layers", partition.End(p.stage) - partition.Begin(p.stage)},
                            {"forward_message_bytes", p.forward_message_bytes},
                            {"backward_message_bytes", p.backward_message_bytes},
                            {"output_bytes", p.output_bytes},
                            {"forward_transient_bytes", p.forward_transient_bytes},
                            {"backward_transient_bytes", p.backward_transient_bytes},
                            {"backward_input_transient_bytes", p.backward_input_transient_bytes}});
  }
  json doc = {{"format", "pplab.cost"}, {"version", 1}, {"stages", stages}, {"step", StepJson(r.step)}};
  // How the transport that carried the messages holds their buffers
  // (docs/cost-model.md, "Message buffers"); one pipeline rank had none.
  if (o.ranks > 1)
    doc["message_memory"] = {
        {"sent_freed", r.buffers.sends_freed_after_delivery ? "next_send_after_delivery" : "step_end"},
        {"receive_posted", r.buffers.receives_allocated_when_posted ? "one_action_ahead" : "at_use"}};
  if (o.dp > 1) doc["data_parallel"] = {{"degree", o.dp}};
  // Ranks that time-sliced a device were timed in turns, each with the
  // device's slots to itself: the simulator queues them for the device
  // (docs/cost-model.md) as the run did. Timed together, each time already
  // holds the others' share of the device: the file gives the device as
  // many slots as it has ranks, so the simulator runs them side by side.
  const bool shared = Oversubscribed(devices);
  if (turns > 1) {
    doc["devices"] = devices.devices;
    doc["device_slots"] = devices.device_slots;
  } else if (shared && o.shared_device == "together") {
    doc["devices"] = devices.devices;
    doc["device_slots"] = SlotsForRanks(devices);
  }
  json step_per_rank = json::array();
  for (const StepProfile& s : r.step) {
    json one = {{"loss_allreduce", SpreadJson(s.loss_allreduce)},
                {"norm_allreduce", SpreadJson(s.norm_allreduce)},
                {"clip", SpreadJson(s.clip)},
                {"optimizer", SpreadJson(s.optimizer)}};
    if (s.tied_exchange.p90 > 0) one["tied_exchange"] = SpreadJson(s.tied_exchange);
    step_per_rank.push_back(one);
  }
  json links = json::array(), extra_links = json::array();
  std::vector<double> latencies, bandwidths;
  for (const LinkProfile& l : r.links) {
    latencies.push_back(l.latency_ms);
    bandwidths.push_back(l.bandwidth_gbps);
    json samples = json::array();
    for (const LinkSample& s : l.samples) samples.push_back({{"bytes", s.bytes}, {"one_way_ms", s.one_way_ms}});
    extra_links.push_back({{"from", l.from},
                           {"to", l.to},
                           {"latency_ms", l.latency_ms},
                           {"bandwidth_gbps", l.bandwidth_gbps},
                           {"samples", samples}});
    if (r.links.size() > 1) {  // one pair is the default link; several get their own entries, both ways
      links.push_back(
          {{"from", l.from}, {"to", l.to}, {"latency_ms", l.latency_ms}, {"bandwidth_gbps", l.bandwidth_gbps}});
      links.push_back(
          {{"from", l.to}, {"to", l.from}, {"latency_ms", l.latency_ms}, {"bandwidth_gbps", l.bandwidth_gbps}});
    }
  }
  auto median = [](std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    return xs.empty() ? 0.0 : xs[xs.size() / 2];
  };
  if (!r.links.empty()) doc["link"] = {{"latency_ms", median(latencies)}, {"bandwidth_gbps", median(bandwidths)}};
  if (!links.empty()) doc["links"] = links;
  double overhead = 0;
  for (double x : r.action_overhead_ms) overhead += x;
  if (!r.action_overhead_ms.empty()) overhead /= static_cast<double>(r.action_overhead_ms.size());
  doc["meta"] = {{"source", "pplab profile"},
                 {"model", o.model},
                 {"config", json::parse(config.ToJson())},
                 {"partition", partition.ToString()},
                 {"microbatch_size", o.microbatch_size},
                 {"seq_len", o.seq_len},
                 {"device", o.device},
                 {"threads_per_rank", threads},
                 {"ranks", o.ranks},
                 {"precision", PrecisionName(ParsePrecision(o.precision))},
                 {"attention", AttentionKindName(ResolveAttention(ParseAttentionKind(o.attention)))},
                 {"tensor_parallel", o.tp},
                 {"sequence_parallel", o.sequence_parallel},
                 {"shared_device", shared ? o.shared_device : "none"},
                 {"extra",
                  {{"virtual_stages", o.virtual_stages},
                   {"dp", o.dp},
                   {"warmup", o.warmup},
                   {"repeats", o.repeats},
                   {"seed", o.seed},
                   {"action_overhead_ms", overhead},
                   {"devices", devices.devices},
                   {"device_slots", devices.device_slots},
                   {"measure_turns", turns},
                   {"action_overhead_ms_per_rank", r.action_overhead_ms},
                   {"step_per_world_rank", step_per_rank},
                   {"stages", extra_stages},
                   {"links", extra_links}}}};
  return doc;
}

void PrintTable(const nlohmann::json& doc, const std::string& output) {
  const auto& meta = doc["meta"];
  std::printf("profile of %s, partition %s, microbatch %d x %d tokens, %d ranks x %d threads, %s\n",
              meta["model"].get<std::string>().c_str(), meta["partition"].get<std::string>().c_str(),
              meta["microbatch_size"].get<int>(), meta["seq_len"].get<int>(), meta["ranks"].get<int>(),
              meta["threads_per_rank"].get<int>(), meta["precision"].get<std::string>().c_str());
  if (meta["tensor_parallel"].get<int>() > 1) {
    std::printf("each pipeline rank is %d tensor-parallel ranks%s: F, B, I and W hold their collectives\n",
                meta["tensor_parallel"].get<int>(),
                meta["sequence_parallel"].get<bool>() ? " with sequence parallelism" : "");
  }
  if (meta["extra"]["measure_turns"].get<int>() > 1) {
    std::printf(
        "ranks share devices past their slots (device by rank %s, slots by device %s): timed in %d turns, "
        "and simulate queues them for the device\n",
        meta["extra"]["devices"].dump().c_str(), meta["extra"]["device_slots"].dump().c_str(),
        meta["extra"]["measure_turns"].get<int>());
  } else if (meta["shared_device"] == "together") {
    std::printf(
        "ranks share devices past their slots (device by rank %s): timed together, so each time holds the "
        "others' time slices; simulate runs them side by side, and plan refuses this file\n",
        meta["extra"]["devices"].dump().c_str());
  }
  std::printf("%5s %4s %10s %10s %10s %10s %13s %13s %11s\n", "stage", "rank", "F ms", "B ms", "I ms", "W ms",
              "activ. MB", "I->W MB", "message KB");
  for (size_t s = 0; s < doc["stages"].size(); ++s) {
    const auto& st = doc["stages"][s];
    std::printf("%5zu %4d %10s %10s %10s %10s %13s %13s %11s\n", s, meta["extra"]["stages"][s]["rank"].get<int>(),
                Fixed(st["forward_ms"].get<double>(), 3).c_str(), Fixed(st["backward_ms"].get<double>(), 3).c_str(),
                Fixed(st["backward_input_ms"].get<double>(), 3).c_str(),
                Fixed(st["backward_weight_ms"].get<double>(), 3).c_str(),
                Fixed(st["activation_bytes"].get<double>() / 1e6, 3).c_str(),
                Fixed(st["weight_grad_bytes"].get<double>() / 1e6, 3).c_str(),
                Fixed(st["message_bytes"].get<double>() / 1e3, 1).c_str());
  }
  for (const auto& l : meta["extra"]["links"]) {
    std::printf("link %d <-> %d: latency %s ms, bandwidth %s GB/s (one way:", l["from"].get<int>(), l["to"].get<int>(),
                Fixed(l["latency_ms"].get<double>(), 4).c_str(), Fixed(l["bandwidth_gbps"].get<double>(), 3).c_str());
    for (const auto& s : l["samples"]) {
      std::printf(" %lld B %s ms;", s["bytes"].get<long long>(), Fixed(s["one_way_ms"].get<double>(), 4).c_str());
    }
    std::printf(")\n");
  }
  std::printf("executor overhead: %s ms per action\n",
              Fixed(meta["extra"]["action_overhead_ms"].get<double>(), 4).c_str());
  // Medians with [p10, p90]; the slowest rank's.
  auto spread = [](const nlohmann::json& at, const std::string& kind) {
    return Fixed(at[kind + "_ms"].get<double>(), 3) + " [" + Fixed(at[kind + "_p10_ms"].get<double>(), 3) + ", " +
           Fixed(at[kind + "_p90_ms"].get<double>(), 3) + "]";
  };
  const auto& step = doc["step"];
  std::printf("per step, ms, median [p10, p90]: loss all-reduce %s, norm all-reduce %s, clip %s, optimizer %s\n",
              spread(step, "loss_allreduce").c_str(), spread(step, "norm_allreduce").c_str(),
              spread(step, "clip").c_str(), spread(step, "optimizer").c_str());
  if (step.contains("tied_exchange_ms")) {
    std::printf("tied embeddings' gradient swap between the first and the last stage: %s ms\n",
                spread(step, "tied_exchange").c_str());
  }
  for (size_t s = 0; s < doc["stages"].size(); ++s) {
    const auto& st = doc["stages"][s];
    if (!st.contains("reduce_grad_ms")) continue;
    std::printf("stage %zu REDUCE_GRAD over %d replicas: %s ms\n", s, meta["extra"]["dp"].get<int>(),
                spread(st, "reduce_grad").c_str());
  }
  if (!output.empty()) std::printf("cost model written to %s\n", output.c_str());
}

int RunWorker(const ProfileCliOptions& o, RankId world_rank, int world) {
  if (!DieWithLauncher()) throw Error("the launching pplab is gone; this worker stops");
  const int K = o.ranks, T = o.tp;
  if (world != K * o.dp * T) {
    throw Error("world size " + std::to_string(world) + " but --ranks " + std::to_string(K) + " x --dp " +
                std::to_string(o.dp) + " x --tp " + std::to_string(T));
  }
  // The same thread policy as pplab train, so the ranks contend as in training.
  ShareCores(world);
  const LlamaConfig config = ProfiledConfig(o);
  const int S = K * o.virtual_stages;
  // Looped, as interleaved-1f1b places stages.
  const std::vector<RankId> placement = LoopPlacement(K, S);
  const Partition partition = MakePartition(config, S, o.partition, {placement, o.seq_len});
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000));
  WorkerOptions setup;
  setup.pipeline_ranks = K;
  setup.dp = o.dp;
  setup.tp = T;
  setup.comm_timeout = timeout;
  setup.device = o.device;
  setup.backend = o.backend;
  setup.precision = o.precision;
  Worker worker = SetUpWorker(setup, world_rank, world);
  const RankId rank = worker.rank;  // pipeline rank within the replica
  // Where every rank computes; ranks past a device's slots take turns, a
  // tensor-parallel group's together. World ranks k T (k < K) are the first
  // replica's pipeline (as pplab train's traces record).
  const std::vector<RankDevice> world_devices = WorldRankDevices(worker, timeout);
  std::vector<int> pipeline_ranks;
  for (RankId k = 0; k < K; ++k) pipeline_ranks.push_back(WorldRankOf(0, 0, k, K, T));
  // --shared-device together: every rank in the first turn.
  const std::vector<int> turns = o.shared_device == "together" ? std::vector<int>(world_devices.size(), 0)
                                                                : MeasureTurns(MapRankDevices(world_devices), T);
  MemoryMeter& meter = MemoryMeter::For(worker.device);
  std::vector<std::unique_ptr<Stage>> owned;
  std::map<StageId, Stage*> stages;
  for (int s = 0; s < S; ++s) {
    if (placement[s] != rank) continue;
    LlamaOptions llama;
    llama.attention = ResolveAttention(ParseAttentionKind(o.attention));
    llama.padding = false;  // synthetic tokens below
    llama.tensor_parallel = {worker.tp_size, worker.tp_rank, o.sequence_parallel};
    llama.tp_comm = worker.tp_comm;
    // The rotary scaling changes no cost: a type pplab does not compute is
    // profiled as none (the cost file still records the config as given).
    LlamaConfig built = config;
    built.rope_scaling = {};
    owned.push_back(WorkerStage(worker, BuildLlamaStage(built, partition, s, o.seed, worker.device, llama)));
    stages[s] = owned.back().get();
  }
  ProfileOptions options;
  options.warmup = o.warmup;
  options.repeats = o.repeats;
  options.comm_timeout = timeout;
  options.clock = worker.clock.get();
  options.device = worker.device;
  options.dp_group = worker.dp_group.get();
  options.dp = o.dp;
  options.tp = T;
  options.wire_dtype = worker.wire_dtype;
  if (config.tie_word_embeddings) options.tied_parameters = {kEmbeddingWeight, kLmHeadWeight};
  if (worker.group != nullptr) options.wire_format = DefaultWireFormat(*worker.group);
  options.turn = turns.at(world_rank);
  options.turns = *std::max_element(turns.begin(), turns.end()) + 1;
  const LossFn loss = [&worker](const TensorList& outputs, const at::Tensor& targets) {
    // Under tensor parallelism the head, split by vocabulary, gives this
    // rank's share of the logits (as in pplab train).
    if (worker.tp_size > 1) {
      return VocabParallelCrossEntropySum(outputs.at(0), targets, /*ignore_index=*/0, {worker.tp_size, worker.tp_rank},
                                          worker.tp_comm);
    }
    return TokenCrossEntropySum(outputs.at(0), targets, /*ignore_index=*/0);
  };
  // Each size in turn, on the same stages and links: one cost model each.
  for (const int mb : o.microbatch_sizes) {
    ProfileCliOptions at_size = o;
    at_size.microbatch_size = mb;
    StepBatch batch = SyntheticBatch(o.seed, 0, mb, o.seq_len, config.vocab_size, 1);
    for (MicrobatchData& m : batch.microbatches) {
      for (at::Tensor& t : m.inputs) t = t.to(worker.device);
      m.targets = m.targets.to(worker.device);
    }
    // Ping-pong one activation's payload (hidden (B,L,C) as it travels: 4
    // bytes a value in fp32, 2 in bf16; a 1/T share of the positions under
    // sequence parallelism) and 16 MiB.
    options.link_payload_bytes = {static_cast<Bytes>(mb) * o.seq_len / (o.sequence_parallel ? T : 1) *
                                      config.hidden_size * ActivationElementBytes(worker.precision),
                                  16 << 20};
    const ProfileResult result = Profile(placement, rank, stages, batch.microbatches.at(0), loss, batch.loss_scale,
                                         *worker.transport, worker.group.get(), meter, options);
    if (world_rank != 0) continue;
    const nlohmann::json doc = CostJson(at_size, config, partition, result, ThreadsInUse(),
                                        PipelineDeviceMap(world_devices, pipeline_ranks), options.turns);
    // Round-trip through the loader so a written file is a usable one.
    const std::string output = OutputFor(o, mb);
    const CostModel checked = CostModel::FromJson(doc.dump(), output.empty() ? "profile" : output);
    if (!output.empty()) WriteTextFile(output, checked.ToJson());
    if (o.json) {
      std::printf("%s\n", doc.dump().c_str());
    } else {
      PrintTable(doc, output);
    }
    std::fflush(stdout);
  }
  if (world_rank == 0 && !o.json && o.microbatch_sizes.size() > 1 && !o.output.empty()) {
    std::string costs;
    for (const int mb : o.microbatch_sizes) costs += " --cost " + OutputFor(o, mb);
    std::printf("pplab plan fits them together (a fixed time a layer besides the time per FLOP):%s\n", costs.c_str());
  }
  return 0;
}

int RunProfile(const ProfileCliOptions& o) {
  if (IsWorker()) {
    return RunAsWorker([&o](RankId rank, int world) {
      Check(o, ProfiledConfig(o));  // started by torchrun or Slurm: nobody checked before
      return RunWorker(o, rank, world);
    });
  }
  const LlamaConfig config = ProfiledConfig(o);
  Check(o, config);
  ResolveAttention(ParseAttentionKind(o.attention));  // refused here, before any worker starts
  if (!o.oversubscribe) {
    // Each replica holds the whole model (K v stages) and its AdamW state,
    // in host memory on a CPU device.
    const double params = static_cast<double>(ModelParams(config));
    CheckLocalCapacity(LocalLoad{o.ranks * o.dp * o.tp, params * o.dp, o.device.rfind("cpu", 0) == 0},
                       "--oversubscribe");
  }
  const int processes = o.ranks * o.dp * o.tp;
  if (processes == 1) return RunWorker(o, 0, 1);
  return LaunchWorkers(processes, o.raw_args, o.comm_timeout_s);
}

}  // namespace

void SetupProfile(CLI::App& app, int& exit_code, const std::vector<std::string>& argv) {
  auto o = std::make_shared<ProfileCliOptions>();
  CLI::App* sub = app.add_subcommand("profile", "measure stage and link costs on this machine; write a cost model");
  sub->add_option("--model", o->model, kModelFlagHelp)->capture_default_str();
  sub->add_option("--ranks,-k", o->ranks, "pipeline ranks K (worker processes)")->capture_default_str();
  sub->add_option("--layers", o->layers,
                  "profile a slice of the model: its first N decoder layers, as shaped (default: all); "
                  "pplab plan fits the whole model's costs to it");
  sub->add_option("--dp", o->dp,
                  "data-parallel replicas D (D x K workers); with D > 1 each stage's REDUCE_GRAD is measured")
      ->capture_default_str();
  sub->add_option("--tp", o->tp,
                  "tensor-parallel ranks T per pipeline rank (D x T x K workers), as pplab train --tp: each stage's "
                  "times then hold the group's collectives")
      ->capture_default_str();
  sub->add_flag("--sequence-parallel", o->sequence_parallel,
                "with --tp 2 or more, split the positions outside the split regions over the group too, as pplab "
                "train --sequence-parallel");
  sub->add_option("--partition", o->partition,
                  "uniform, parameters, compute (the ranks' FLOPs evened out, stages looped over ranks), or layers "
                  "per stage like 3,2,2,1")
      ->capture_default_str();
  sub->add_option("--virtual,-v", o->virtual_stages, "stages per rank v (S = K v, stage s on rank s mod K)")
      ->capture_default_str();
  sub->add_option("--microbatch-size", o->microbatch_sizes,
                  "sequences per microbatch; several, comma-separated (1,4,16), are profiled one after another, "
                  "each into its own file (-o cost.json: cost-mb1.json, ...), for pplab plan to fit together")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false);
  sub->add_option("--seq-len", o->seq_len, "tokens per sequence")->required();
  sub->add_option("--warmup", o->warmup, "unmeasured runs before measuring")->capture_default_str();
  sub->add_option("--repeats", o->repeats, "measured runs; their median, p10 and p90 are reported")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the weights and the data")->capture_default_str();
  sub->add_option("--comm-timeout", o->comm_timeout_s, "seconds a rank waits for a peer before giving up")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--device", o->device, "cpu, or cuda / cuda:N (times with CUDA events; GPU memory statistics)")
      ->capture_default_str();
  sub->add_option("--backend", o->backend, "auto (NCCL for CUDA devices, Gloo for the CPU), gloo or nccl")
      ->capture_default_str();
  sub->add_option("--precision", o->precision,
                  "fp32, or bf16 (autocast compute, bf16 messages; recorded in the cost model's meta)")
      ->capture_default_str();
  sub->add_option("--attention", o->attention, "auto, sdpa or explicit (as pplab train)")->capture_default_str();
  sub->add_option("--shared-device", o->shared_device,
                  "ranks sharing a device past its slots (2 ranks on one GPU): turns (each timed alone, a device's "
                  "costs for plan; simulate queues them) or together (timed at once, each time holds the others' "
                  "time slices: to predict a run on the shared device; plan refuses such a file)")
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "write the cost model JSON here (pplab simulate --cost reads it)");
  sub->add_flag("--json", o->json,
                "print the cost model as one JSON object instead of the table (one line a microbatch size)");
  sub->add_flag("--oversubscribe", o->oversubscribe,
                "start more local workers than this machine's cores (4 per core) or memory allow");
  o->raw_args.assign(argv.begin() + (argv.empty() ? 0 : 1), argv.end());  // the workers get the same flags
  sub->callback([o, &exit_code] { exit_code = RunProfile(*o); });
}

}  // namespace pplab::cli
