// pplab profile: measure each stage's F, B, I and W time, its activation and
// message bytes, and the links between neighbouring ranks on this machine,
// with K worker processes launched as `pplab train` launches them, and write
// the simulator's cost model (docs/profile.md).
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "models/llama.h"
#include "models/llama_config.h"
#include "runtime/exec/graphed_stage.h"
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
#include "tools/output_files.h"
#include "tools/profile_report.h"
#include "tools/report.h"
#include "tools/train_checks.h"

namespace pplab::cli {
namespace {

constexpr int kMaxMicrobatchSize = 1 << 16;
constexpr size_t kMaxMicrobatchSizes = 16;

// Where the profile at `mb` sequences a microbatch is written: -o as given
// with one size; with several, "-mb<N>" before its extension (cost.json:
// cost-mb4.json), or at its end when it has none.
std::string OutputFor(const ProfileCliOptions& o, int mb) {
  if (o.output.empty() || o.microbatch_sizes.size() <= 1) return o.output;
  const size_t slash = o.output.find_last_of('/');
  const size_t dot = o.output.find_last_of('.');
  // (A leading dot, ".cost", starts the name, not an extension.)
  const bool extension = dot != std::string::npos && (slash == std::string::npos ? dot > 0 : dot > slash + 1);
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
  if (o.cuda_graphs) {
    CheckCudaGraphsTensorParallel(o.tp);
    CheckCudaGraphsDevice(o.device);
  }
  if (o.microbatch_sizes.size() > 1 && !o.output.empty() &&
      (o.output.back() == '/' || std::filesystem::is_directory(o.output))) {
    // Each size's file is named after -o's: a folder would give "DIR-mb1".
    throw Error("-o " + o.output + " is a folder; with several --microbatch-size values give a file name (-o " +
                "DIR/cost.json writes DIR/cost-mb1.json, ...)");
  }
  std::vector<FlagPath> outputs;
  for (const int mb : o.microbatch_sizes) outputs.push_back({"-o", OutputFor(o, mb)});
  CheckOutputFiles(outputs, {ModelInput(o.model)});
}

// What each rank sets up with: train's worker options, for profile's ranks.
WorkerOptions ProfileWorkerOptions(const ProfileCliOptions& o) {
  WorkerOptions setup;
  setup.pipeline_ranks = o.ranks;
  setup.dp = o.dp;
  setup.tp = o.tp;
  setup.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000));
  setup.device = o.device;
  setup.backend = o.backend;
  setup.precision = o.precision;
  // Ranks started by hand with other flags (message sizes, repeats) aborted
  // in Gloo; now every rank refuses them when they join, as in train.
  setup.flags_fingerprint = RanksFingerprint(o.parsed_flags, {LlamaConfigPath(o.model)});
  return setup;
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
  Worker worker = SetUpWorker(ProfileWorkerOptions(o), world_rank, world);
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
  // --cuda-graphs: each stage's F and B replay graphs, as in pplab train
  // --cuda-graphs (one backend for the rank's stages).
  const std::shared_ptr<GraphBackend> graphs = o.cuda_graphs ? MakeGraphBackend(worker.device) : nullptr;
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
    if (graphs != nullptr) owned.back() = MakeGraphedStage(std::move(owned.back()), graphs);
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
  options.graphed = o.cuda_graphs;
  if (config.tie_word_embeddings) options.tied_parameters = {kEmbeddingWeight, kLmHeadWeight};
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
  // Before anything starts CUDA in this process (which profiles a one-rank
  // run itself); printed after the checks.
  const std::vector<std::string> cuda_warnings = PrepareCudaEnvironment(o.device);
  const LlamaConfig config = ProfiledConfig(o);
  Check(o, config);
  ResolveAttention(ParseAttentionKind(o.attention));  // refused here, before any worker starts
  // The device and backend too (a CUDA device on a LibTorch without one was
  // refused by each worker, after they started: two lines).
  const std::string device_warning = CheckWorkerOptions(ProfileWorkerOptions(o), o.ranks * o.dp * o.tp);
  if (!o.oversubscribe) {
    // Each replica holds the whole model (K v stages) and its AdamW state,
    // in host memory on a CPU device.
    const double params = static_cast<double>(ModelParams(config));
    CheckLocalCapacity(LocalLoad{o.ranks * o.dp * o.tp, params * o.dp, o.device.rfind("cpu", 0) == 0},
                       "--oversubscribe");
  }
  for (const std::string& w : cuda_warnings) std::fprintf(stderr, "pplab: warning: %s\n", w.c_str());
  if (!device_warning.empty()) std::fprintf(stderr, "pplab: warning: %s\n", device_warning.c_str());
  const int processes = o.ranks * o.dp * o.tp;
  if (processes == 1) return RunWorker(o, 0, 1);
  // CPU workers are forked (no LibTorch start-up of their own), where that
  // is safe; CUDA ones are exec'd, as train's are (docs/runtime.md, "Launch
  // and faults": forking them is not measured on a GPU).
  return LaunchWorkers(processes, o.raw_args, o.comm_timeout_s, {}, o.device.rfind("cpu", 0) == 0);
}

}  // namespace

void SetupProfile(CLI::App& app, int& exit_code, const std::vector<std::string>& argv) {
  auto o = std::make_shared<ProfileCliOptions>();
  CLI::App* sub = app.add_subcommand("profile", "measure stage and link costs on this machine; write a cost model");
  sub->add_option("--model", o->model, kModelFlagHelp)->capture_default_str();
  // Ranges here as in train: a value past int was CLI11's "Could not convert".
  sub->add_option("--ranks,-k", o->ranks, "pipeline ranks K (worker processes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--layers", o->layers,
                  "profile a slice of the model: its first N decoder layers, as shaped (default: all); "
                  "pplab plan fits the whole model's costs to it")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--dp", o->dp,
                  "data-parallel replicas D (D x K workers); with D > 1 each stage's REDUCE_GRAD is measured")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--tp", o->tp,
                  "tensor-parallel ranks T per pipeline rank (D x T x K workers), as pplab train --tp: each stage's "
                  "times then hold the group's collectives")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_flag("--sequence-parallel", o->sequence_parallel,
                "with --tp 2 or more, split the positions outside the split regions over the group too, as pplab "
                "train --sequence-parallel");
  sub->add_option("--partition", o->partition,
                  "uniform, parameters, compute (the ranks' FLOPs evened out, stages looped over ranks), or layers "
                  "per stage like 3,2,2,1")
      ->capture_default_str();
  sub->add_option("--virtual,-v", o->virtual_stages, "stages per rank v (S = K v, stage s on rank s mod K)")
      ->check(CLI::Range(1, 64))
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
  sub->add_flag("--cuda-graphs", o->cuda_graphs,
                "time each stage's F and B replayed as CUDA graphs, as pplab train --cuda-graphs runs them, and "
                "measure what a graph slot holds (graph_slot_bytes); whole backwards only: no I and W");
  sub->add_option("-o,--output", o->output, "write the cost model JSON here (pplab simulate --cost reads it)");
  sub->add_flag("--json", o->json,
                "print the cost model as one JSON object instead of the table (one line a microbatch size)");
  sub->add_flag("--oversubscribe", o->oversubscribe,
                "start more local workers than this machine's cores (4 per core) or memory allow");
  o->raw_args.assign(argv.begin() + (argv.empty() ? 0 : 1), argv.end());  // the workers get the same flags
  sub->callback([o, sub, &exit_code] {
    o->parsed_flags = sub->config_to_str(true, false);
    exit_code = RunProfile(*o);
  });
}

}  // namespace pplab::cli
