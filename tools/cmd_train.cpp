// pplab train: run a plan for real. Without RANK/WORLD_SIZE in the
// environment it launches one worker per rank on this machine (or trains in
// this process with --ranks 1); with them (torchrun --no-python, Slurm) it is
// one of those workers. This file holds the Llama wiring; the flags are in
// train_flags.h, the options and the plan in train_options.h, the checks before launch in
// train_checks.h and train_manifest.h, the reports in train_report.h.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/llama.h"
#include "models/pretrained.h"
#include "runtime/data/fnv.h"
#include "runtime/data/run_text.h"
#include "runtime/data/token_cache.h"
#include "runtime/exec/device_info.h"
#include "runtime/exec/graphed_stage.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/train/batches.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/launcher.h"
#include "runtime/train/tensor_parallel_step.h"
#include "runtime/train/threads.h"
#include "runtime/train/trainer.h"
#include "runtime/train/worker_setup.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "sim/precision.h"
#include "sim/recompute.h"
#include "tools/commands.h"
#include "tools/train_checks.h"
#include "tools/train_flags.h"
#include "tools/train_manifest.h"
#include "tools/train_options.h"
#include "tools/train_report.h"

namespace fs = std::filesystem;

namespace pplab::cli {
namespace {

// A resume of a run already at --steps: one line, or with --json one object.
void PrintNothingToDo(const TrainOptions& o, int step) {
  if (o.json) {
    const nlohmann::json out = {
        {"nothing_to_do", true}, {"checkpoint_dir", o.checkpoint_dir}, {"step", step}, {"steps", o.steps}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("nothing to do: the checkpoint in %s is at step %d, and --steps is %d\n", o.checkpoint_dir.c_str(), step,
              o.steps);
}

// The step at which the testing aid --kill-rank-at RANK:STEP kills world
// rank `rank` (-1: before the rendezvous), or nullopt when it spares it.
std::optional<int> KillStepOf(const TrainOptions& o, RankId rank) {
  if (o.kill_rank_at.empty()) return std::nullopt;
  int kill_rank = -1, kill_step = -1;
  if (std::sscanf(o.kill_rank_at.c_str(), "%d:%d", &kill_rank, &kill_step) != 2) {
    throw Error("--kill-rank-at: expected RANK:STEP, got '" + o.kill_rank_at + "'");
  }
  if (kill_rank != rank) return std::nullopt;
  return kill_step;
}

// The trainer's hooks for --measure-memory and for the testing aids
// --kill-rank-at and --dump-grads.
void AddHooks(const TrainOptions& o, const Schedule& schedule, const Worker& worker, TrainerOptions& options) {
  if (o.measure_memory) options.memory = &MemoryMeter::For(worker.device);
  if (const std::optional<int> kill_step = KillStepOf(o, worker.world_rank)) {
    options.on_step = [kill_step = *kill_step](int step) {
      if (step == kill_step) ::raise(SIGKILL);
    };
  }
  if (!o.dump_grads_dir.empty() && worker.replica == 0) {  // replicas hold the same gradients
    // With tensor parallelism the group puts each split gradient together
    // and its rank 0 writes the whole model's.
    const TensorMap whole =
        worker.tp_group != nullptr ? GatherShares(*worker.tp_group, options.tp_split_dim, CommTimeout(o)) : TensorMap();
    const bool writes = worker.tp_rank == 0;
    options.after_last_step = [&o, &schedule, whole, writes](const std::map<StageId, Stage*>& stages) {
      for (const auto& [s, stage] : stages) {
        if (schedule.PipelineOf(s) != 0) continue;  // the other copies hold the same gradients
        for (auto& [name, p] : stage->NamedParameters()) {
          // A clone: the gradient is a view into its stage's flat buffer,
          // which torch::save would write whole.
          at::Tensor grad = p.grad().defined() ? p.grad().clone() : torch::zeros_like(p);
          if (whole) grad = whole(name, grad);
          if (!writes) continue;
          const std::string path = o.dump_grads_dir + "/" + name + ".pt";
          try {
            torch::save(grad, path);
          } catch (const std::exception& e) {
            throw Error("--dump-grads: cannot write " + path);
          }
        }
      }
    };
  }
}

// One worker's run once it has joined the others. `prepared`: the text the
// caller prepared, if any (else from the launcher's environment, else
// prepared here).
int TrainWorker(const TrainOptions& o, const Schedule& schedule, Worker& worker,
                const std::optional<PreparedText>& prepared) {
  const RankId world_rank = worker.world_rank;
  const int K = schedule.ranks;
  const int replica = worker.replica;
  const c10::Device device = worker.device;
  const auto timeout = CommTimeout(o);
  // Which pipeline ranks share a device: the first pipeline's, as the
  // traces hold, with the slots the other world ranks leave them.
  const std::vector<RankDevice> everywhere = WorldRankDevices(worker, timeout);
  std::vector<int> first_pipeline;
  for (RankId k = 0; k < K; ++k) first_pipeline.push_back(WorldRankOf(0, 0, k, K, worker.tp_size));
  const DeviceMap device_map = PipelineDeviceMap(everywhere, first_pipeline);
  LlamaConfig config = LoadLlamaConfig(o.model);
  std::unique_ptr<RunText> text;
  if (!o.synthetic) {
    text = OpenRunText(TextSourceOf(o, config), TextDataOf(o), nullptr, prepared ? prepared : PreparedTextFromEnv());
    // Ranks started by hand each read their own --data and tokenizer: the
    // same text, or the first stage's inputs and the last stage's targets
    // came from two corpora.
    if (worker.group != nullptr) {
      AgreeOnFingerprint(*worker.group, timeout,
                         text->prepared.corpus_fingerprint * 1099511628211ULL ^ text->prepared.tokenizer_fingerprint,
                         "read another text than rank 0 (--data, or its tokenizer): every rank must read the same "
                         "files");
    }
    // The model predicts the tokenizer's pieces; a published model keeps its
    // own vocabulary, which may hold more rows than its tokenizer's pieces.
    if (o.init_from.empty()) config.vocab_size = text->tokenizer->VocabSize();
  }
  // The model is cut into ModelStages() parts; a plan of P pipelines holds P
  // copies, stage s running part ModelStage(s).
  const Partition partition =
      MakePartition(config, schedule.ModelStages(), o.partition, {schedule.placement, o.seq_len});
  LlamaOptions llama;
  llama.attention = ResolveAttention(ParseAttentionKind(o.attention));
  // A batch's padding only ever ends a row (BatchFromRows; synthetic
  // tokens have none): SDPA runs causal only, the flash kernel's case.
  llama.padding = false;
  if (!o.init_from.empty()) llama.weights = std::make_shared<const WeightFiles>(WeightFiles::Open(o.init_from));
  llama.tensor_parallel = {worker.tp_size, worker.tp_rank, o.sequence_parallel};
  llama.tp_comm = worker.tp_comm;
  const StepFlops flops = FlopsOf(o, config, partition, schedule, device, PrecisionName(worker.precision));
  TrainerOptions options = TrainerOptionsOf(o, worker, config);
  options.recompute = ParseRecomputeStages(o.recompute, schedule.stages, "--recompute");
  if (config.tie_word_embeddings) options.tied_parameters = {kEmbeddingWeight, kLmHeadWeight};
  const nlohmann::json must_match = MustMatch(o, config, text != nullptr ? &text->prepared : nullptr);
  options.manifest_json = RunManifest(o, must_match, schedule, config, partition, worker.precision).dump();
  // The data position: samples consumed. It is step x batch size from the
  // start, plus what a resumed checkpoint recorded beyond that.
  const int64_t G = o.batch_size;
  int64_t data_offset = 0;
  if (text != nullptr) {
    const std::string tokenizer_file = "tokenizer-" + FnvHex(text->prepared.tokenizer_fingerprint) +
                                       (EndsWith(text->tokenizer->FileName(), ".json") ? ".json" : ".model");
    options.manifest_for_step = [&text, &data_offset, G, &o, tokenizer_file](int done) {
      nlohmann::json m = nlohmann::json::object();
      const int64_t position = data_offset + done * G;
      const auto [epoch, offset] = text->dataset->EpochOf(position);
      m["data_position"] = {{"samples_consumed", position},
                            {"epoch", epoch},
                            {"offset_in_epoch", offset},
                            {"train_samples", text->dataset->NumTrainSamples()}};
      // The checkpoint carries its tokenizer, so `pplab generate` needs
      // nothing else (rank 0 only calls this, before publishing).
      m["tokenizer_file"] = tokenizer_file;
      // A copy cut short or edited (a resumed run kept it, and generate
      // then refused the checkpoint) is written again.
      const fs::path copy = fs::path(o.checkpoint_dir) / tokenizer_file;
      const std::string tokenizer = ReadTextFile(text->prepared.tokenizer_path);
      std::error_code ec;
      if (!fs::is_regular_file(copy, ec) || fs::file_size(copy, ec) != tokenizer.size() ||
          ReadTextFile(copy.string()) != tokenizer) {
        if (fs::exists(fs::symlink_status(copy, ec)) && !fs::is_regular_file(fs::symlink_status(copy, ec))) {
          fs::remove(copy, ec);  // not a file of the run's (a FIFO would block the write)
        }
        WriteTextFile(copy.string(), tokenizer);
      }
      return m.dump();
    };
  }
  // Rank 0 reports: progress, metrics.
  std::unique_ptr<StepReporter> reporter;
  if (world_rank == 0) {
    std::function<int64_t(int)> epoch_of;
    if (text != nullptr) {
      epoch_of = [&text, &data_offset, G](int done) { return text->dataset->EpochOf(data_offset + done * G).first; };
    }
    reporter = std::make_unique<StepReporter>(o, flops, epoch_of);
    options.on_step_end = [&reporter](const StepReport& r) { reporter->OnStepEnd(r); };
  }
  options.check_resume = [must_match, &o, &data_offset, &reporter, G](const std::string& found_text) {
    const nlohmann::json found = nlohmann::json::parse(found_text);
    CheckResumable(o, must_match, found);
    if (reporter != nullptr) reporter->Resumed(found.at("step").get<int>());
    if (found.contains("data_position")) {
      data_offset = found["data_position"].at("samples_consumed").get<int64_t>() - found.at("step").get<int64_t>() * G;
    }
  };
  AddHooks(o, schedule, worker, options);
  const int M = schedule.microbatches;
  const int32_t pad = text != nullptr ? text->tokenizer->Pad() : 0;
  // On a GPU the batch goes through pinned host memory and asynchronous
  // copies: a plain copy to the GPU synchronizes the host with the stream,
  // so each of a step's 2-3 copies per microbatch would wait for the work
  // queued before it and leave the GPU idle while the host prepares the next.
  // (LibTorch's pinned-memory allocator keeps each buffer until its copy has
  // run.) The step clock waits for the copies before the step's time 0.
  auto copy = [&device](const at::Tensor& t) {
    return device.is_cuda() ? t.pin_memory().to(t.options().device(device), /*non_blocking=*/true) : t.to(device);
  };
  auto to_device = [&copy](StepBatch b) {
    for (MicrobatchData& m : b.microbatches) {
      for (at::Tensor& t : m.inputs) t = copy(t);
      m.targets = copy(m.targets);
    }
    return b;
  };
  if (text != nullptr && o.eval_every > 0 && text->dataset->NumValSamples() > 0) {
    options.eval_batches = [&] {
      const int64_t n = text->dataset->NumValSamples();
      const int64_t batches = std::min<int64_t>(o.eval_batches, (n + G - 1) / G);
      std::vector<StepBatch> out;
      // Each held-out window once: the last batch's rows past them repeat
      // windows with no target learned, so they add nothing to the mean.
      for (int64_t b = 0; b < batches; ++b) {
        out.push_back(to_device(BatchFromRows(
            [&](int64_t row, int32_t* ids) {
              const int64_t window = b * G + row;
              text->dataset->ValSample(window % n, ids);
              if (window >= n) {
                for (int i = 0; i <= o.seq_len; ++i) ids[i] |= kNoLossBit;
              }
            },
            o.batch_size, o.seq_len, M, replica, o.dp, pad, kNoLossBit)));
      }
      return out;
    };
  }
  // With --cuda-graphs each stage's F and B are captured and replayed
  // (runtime/exec/graphed_stage.h); the stages share one backend.
  const std::shared_ptr<GraphBackend> graphs = o.cuda_graphs ? MakeGraphBackend(device) : nullptr;
  // Rank 0 reports the slots its graphed stages captured.
  std::map<StageId, RunFacts::GraphSlots> graph_slots;
  if (graphs != nullptr) {
    options.after_last_step = [then = options.after_last_step, &graph_slots](const std::map<StageId, Stage*>& stages) {
      if (then) then(stages);
      for (const auto& [s, stage] : stages) {
        if (const auto* g = dynamic_cast<const GraphedStage*>(stage)) {
          const GraphStats stats = g->Stats();
          graph_slots[s] = {stats.slots, stats.slot_bytes};
        }
      }
    };
  }
  const TrainSummary summary = Train(
      schedule, worker.rank, *worker.transport, worker.group.get(),
      [&](StageId s) -> std::unique_ptr<Stage> {
        std::unique_ptr<Stage> stage =
            WorkerStage(worker, BuildLlamaStage(config, partition, schedule.ModelStage(s), o.seed, device, llama));
        if (graphs == nullptr) return stage;
        return MakeGraphedStage(std::move(stage), graphs);
      },
      [&](int step) {
        StepBatch b =
            text != nullptr
                ? BatchFromRows(
                      [&](int64_t row, int32_t* ids) { text->dataset->TrainSample(data_offset + step * G + row, ids); },
                      o.batch_size, o.seq_len, M, replica, o.dp, pad, kNoLossBit)
                : SyntheticBatch(o.seed, step, o.batch_size, o.seq_len, config.vocab_size, M, replica, o.dp);
        if (step + 1 == o.nan_at) b.loss_scale = std::nan("");
        return to_device(std::move(b));
      },
      [pad, &worker](const TensorList& outputs, const at::Tensor& targets) {
        // Under tensor parallelism the head, split by vocabulary, gives this
        // rank's share of the logits.
        if (worker.tp_size > 1) {
          return VocabParallelCrossEntropySum(outputs.at(0), targets, /*ignore_index=*/pad,
                                              {worker.tp_size, worker.tp_rank}, worker.tp_comm);
        }
        return TokenCrossEntropySum(outputs.at(0), targets, /*ignore_index=*/pad);
      },
      options);
  if (world_rank != 0) return 0;
  reporter->Finish();
  if (summary.losses.empty()) {
    PrintNothingToDo(o, summary.first_step);
    std::fflush(stdout);
    return 0;
  }
  // The measured last step, with the devices the ranks used
  // (docs/trace-format.md), and the same plan simulated with the compute
  // costs measured in it: the gaps between the two are communication and
  // executor overhead (see docs/fidelity.md).
  Timeline measured = summary.last_step;
  measured.devices = device_map.devices;
  if (!options.recompute.empty()) measured.recompute = FormatRecomputeStages(options.recompute, schedule.stages);
  measured.device_slots = device_map.device_slots;
  measured.data_parallel = o.dp;
  const RunPrediction prediction = WriteRunTraces(o, schedule, measured);
  RunFacts facts;
  facts.schedule = &schedule;
  facts.vocab_size = config.vocab_size;
  facts.text = text != nullptr;
  facts.chats = text != nullptr && text->prepared.chats;
  facts.partition = partition.ToString();
  facts.device = device.str();
  facts.device_name = DeviceName(device);
  facts.backend = BackendName(worker.backend);
  facts.precision = PrecisionName(worker.precision);
  facts.clock = worker.clock->Name();
  facts.attention = AttentionKindName(llama.attention);
  facts.recompute = FormatRecomputeStages(options.recompute, schedule.stages);
  facts.flops = flops;
  facts.cuda_graph_slots = graph_slots;
  PrintRunSummary(o, facts, summary, measured, prediction);
  return 0;
}

int RunWorker(const TrainOptions& o, const Schedule& schedule, RankId world_rank, int world,
              const std::optional<PreparedText>& prepared = std::nullopt) {
  if (!DieWithLauncher()) throw Error("the launching pplab is gone; this worker stops");
  // The testing aid's step -1: this rank dies before the rendezvous.
  if (KillStepOf(o, world_rank) == -1) ::raise(SIGKILL);
  ShareCores(world);
  Worker worker = SetUpWorker(WorkerOptionsOf(o, schedule.ranks), world_rank, world);
  if (!IsWorker()) return TrainWorker(o, schedule, worker, prepared);
  // A worker that fails reports and exits here, its process groups still
  // alive: unwinding past `worker` would run NCCL's teardown, which can
  // block on the very operation that failed.
  try {
    const int code = TrainWorker(o, schedule, worker, prepared);
    // The testing aid's step past --steps: this rank hangs after its run,
    // as one stuck in its teardown would.
    if (code == 0 && KillStepOf(o, world_rank) == o.steps + 1) ::raise(SIGSTOP);
    return code;
  } catch (const std::exception& e) {
    ReportWorkerError(world_rank, e.what());
    std::_Exit(2);
  }
}

// The batch splits into the plan's replicas and microbatches (a --plan
// file's M is not a flag, so the line names the file).
void CheckBatchSplits(const TrainOptions& o, const Schedule& schedule) {
  if (!o.plan_file.empty() && o.batch_size % (o.dp * schedule.microbatches) != 0) {
    throw Error("--batch-size " + std::to_string(o.batch_size) + " is not divisible by " +
                (o.dp > 1 ? "--dp " + std::to_string(o.dp) + " x " : std::string()) + "the " +
                std::to_string(schedule.microbatches) + " microbatches of --plan " + o.plan_file);
  }
  SyntheticBatch(o.seed, 0, o.batch_size, 1, 2, schedule.microbatches, 0, o.dp);
}

int RunTrain(const TrainOptions& flags) {
  // A --plan from `pplab plan` brings the flags it was costed with.
  TrainOptions given = flags;
  const std::vector<std::string> plan_notes = ApplyPlannedFlags(given);
  const TrainOptions o = WithDefaults(given);
  if (o.synthetic && o.given_eval_every && o.eval_every > 0) {
    throw Error("--eval-every " + std::to_string(o.eval_every) +
                ": --synthetic tokens have no validation split (give --eval-every 0, or train on --data)");
  }
  // A validation flag is used or refused, never dropped unsaid.
  if (!o.synthetic && o.given_eval_every && o.eval_every > 0 && o.val_fraction == 0) {
    throw Error("--eval-every " + std::to_string(o.eval_every) +
                ": --val-fraction 0 leaves no validation split (give --val-fraction above 0, or --eval-every 0)");
  }
  if (o.given_eval_batches && o.eval_every == 0) {
    throw Error("--eval-batches " + std::to_string(o.eval_batches) + ": --eval-every 0 never evaluates");
  }
  if (IsWorker()) {
    // Started by torchrun or Slurm, no launcher checked the outputs: each
    // rank does, alike, before the rendezvous (rank 0 writes nothing before
    // it), so an earlier run is refused, or with --overwrite replaced, here.
    // Rank 0 holds the run folders' lock for the run (its peers would
    // refuse each other's).
    // The lock is let go after the folders a refused rank made are removed
    // (declared first, it goes last): no other run takes one in between.
    std::optional<RunFolderLock> lock;
    std::optional<MadeFolders> made;
    const Schedule schedule = LoadPlan(o);
    if (std::getenv("PPLAB_LAUNCHER_PID") == nullptr) {
      // Before the rendezvous, as the launcher would, and before an
      // earlier run is removed: a lone rank with a batch the microbatches
      // do not split waited there for its peers.
      CheckBatchSplits(o, schedule);
      const bool replace_earlier = ClaimOutputs(given, o);
      if (replace_earlier) CheckOverwriteKeepsInputs(given, o);
      made.emplace(CheckOutputs(o));
      const bool rank0 = std::string(std::getenv("RANK")) == "0";
      if (rank0) lock.emplace(o);
      if (replace_earlier && rank0) RemoveEarlierRun(given, o);
    }
    // A bad RANK, a busy port: the folders go as they came.
    const auto remove_made = [&made] {
      if (made) made->RemoveEmpty();
    };
    const int code = RunAsWorker(
        [&o, &schedule](RankId rank, int world) { return RunWorker(o, schedule, rank, world); }, remove_made);
    if (code != 0) remove_made();
    return code;
  }
  // Before the checks below start CUDA in this process, which trains a
  // one-rank run itself; printed after them.
  const std::vector<std::string> cuda_warnings = PrepareCudaEnvironment(o.device);
  for (const std::string& note : plan_notes) std::fprintf(stderr, "pplab: note: %s\n", note.c_str());
  // Fail here, once, with one line, before any worker starts: the plan, the
  // model against it, the batch, the device, the machine's capacity, the
  // outputs and the checkpoint to resume.
  LlamaConfig config = LoadLlamaConfig(o.model);
  const int64_t init_values = CheckModelWeights(o, config);
  if (!o.tokenizer.empty()) {
    try {
      OpenInputFile(o.tokenizer);
    } catch (const Error& e) {
      throw Error(std::string("--tokenizer: ") + e.what());
    }
  }
  // K against the model's layers before a plan of K ranks is generated.
  if (o.plan_file.empty() && o.ranks > config.num_hidden_layers) MakePartition(config, o.ranks, "uniform");
  int dropped_fsdp = 0;
  const Schedule schedule = LoadPlan(o, &dropped_fsdp);
  if (dropped_fsdp > 0) {
    std::fprintf(stderr,
                 "pplab: note: --plan %s: its %d UNSHARD/RESHARD actions are not run (pplab has no FSDP: each rank "
                 "holds its stages' parameters whole)\n",
                 o.plan_file.c_str(), dropped_fsdp);
  }
  CheckPlanFlags(o, schedule);
  ParseRecomputeStages(o.recompute, schedule.stages, "--recompute");
  CheckCudaGraphs(o, schedule);
  ParseWarmUp(o.warm_up, c10::Device(c10::kCPU));
  CheckTensorParallelFlags(config, o.tp, o.sequence_parallel, o.seq_len);
  if (o.shard_optimizer && o.dp < 2) {
    throw Error("--shard-optimizer shards the AdamW moments over the data-parallel replicas: it needs --dp 2 or more");
  }
  const Partition partition =
      MakePartition(config, schedule.ModelStages(), o.partition, {schedule.placement, o.seq_len});
  ResolveAttention(ParseAttentionKind(o.attention));  // sdpa on a LibTorch without it: refused here, once
  CheckSimCost(o, config, partition, schedule);
  if (o.seq_len > config.max_position_embeddings) {
    throw Error("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's max_position_embeddings " +
                std::to_string(config.max_position_embeddings));
  }
  const int nproc = o.dp * o.tp * schedule.ranks;
  if (o.nproc > 0 && o.nproc != nproc) {
    throw Error("--nproc " + std::to_string(o.nproc) + ": the run has --dp " + std::to_string(o.dp) + " x --tp " +
                std::to_string(o.tp) + " x " + std::to_string(schedule.ranks) +
                " pipeline ranks = " + std::to_string(nproc) + " processes");
  }
  const std::string warning = CheckWorkerOptions(WorkerOptionsOf(o, schedule.ranks), nproc);
  CheckBatchSplits(o, schedule);
  if (!o.oversubscribe) {
    CheckLocalCapacity(TrainLoad(o, nproc, config, partition, schedule.NumPipelines()), "--oversubscribe");
  }
  const bool replace_earlier = ClaimOutputs(given, o);
  if (replace_earlier) CheckOverwriteKeepsInputs(given, o);
  // Held until the workers are done: another run into these folders is
  // refused from here on, before this one prunes, removes or writes. Let go
  // after the folders below are removed (declared first, it goes last), so
  // that no other run takes a folder this one then removes.
  std::optional<RunFolderLock> lock;
  // A run refused from here on, or failed, leaves no folder it made
  // behind empty.
  MadeFolders made = CheckOutputs(o);
  lock.emplace(o);
  // The checkpoints --overwrite replaces are not read (they go below).
  const std::string latest =
      o.checkpoint_dir.empty() || replace_earlier ? std::string() : PrepareCheckpointDir(o.checkpoint_dir);
  if (init_values > 0 && !o.quiet && !o.json) {
    // A resume continues the checkpoint's weights: the file is checked
    // against the model, not read into it (the line said it was).
    if (o.resume && !latest.empty()) {
      std::fprintf(stderr,
                   "pplab: note: --init-from %s is not loaded: the run resumes %s, whose weights it continues\n",
                   o.init_from.c_str(), latest.c_str());
    } else {
      std::fprintf(stderr, "pplab: weights: %lld values from %s\n", static_cast<long long>(init_values),
                   o.init_from.c_str());
    }
  }
  for (const std::string& w : cuda_warnings) std::fprintf(stderr, "pplab: warning: %s\n", w.c_str());
  if (!warning.empty()) std::fprintf(stderr, "pplab: warning: %s\n", warning.c_str());
  std::optional<PreparedText> prepared;
  if (!o.synthetic) {
    // Build the tokenizer and token cache once, here, so the workers find them.
    const auto open_text = [&] {
      return OpenRunText(
          TextSourceOf(o, config), TextDataOf(o),
          [&o](const std::string& line) {
            if (!o.quiet) std::fprintf(stderr, "pplab: %s\n", line.c_str());
          },
          std::nullopt);
    };
    std::unique_ptr<RunText> text;
    try {
      text = open_text();
    } catch (const Error& e) {
      // A resume without the checkpoint's --tokenizer trains one of the
      // model's pieces, which the corpus may not give: say which to give
      // (the error named only --vocab-size, a flag the run had not).
      if (!o.resume || latest.empty()) throw;
      throw Error(e.what() + CheckpointTokenizerHint(o, nlohmann::json::parse(ReadManifest(latest))));
    }
    if (!o.quiet && !o.json) {
      std::fprintf(stderr,
                   "pplab: data: %lld documents, %lld tokens; %lld training and %lld validation samples of %d+1 tokens "
                   "(%s%s)\n",
                   static_cast<long long>(text->prepared.documents), static_cast<long long>(text->prepared.tokens),
                   static_cast<long long>(text->dataset->NumTrainSamples()),
                   static_cast<long long>(text->dataset->NumValSamples()), o.seq_len, o.packed ? "packed" : "padded",
                   text->dataset->NumUnlearnedSamples() == 0
                       ? ""
                       : ("; " + std::to_string(text->dataset->NumUnlearnedSamples()) +
                          " more with no token to learn, all prompt or padding, left out")
                             .c_str());
    }
    if (o.eval_every > 0 && o.val_fraction > 0 && text->dataset->NumValSamples() == 0) {
      std::fprintf(stderr,
                   "pplab: note: --eval-every %d: the validation split is empty (--val-fraction %g of %lld "
                   "documents), so no validation loss is computed\n",
                   o.eval_every, o.val_fraction, static_cast<long long>(text->prepared.documents));
    }
    prepared = text->prepared;
    // A preset takes the tokenizer's vocabulary; a config file that names
    // its own must agree with it. A published model keeps its vocabulary,
    // which holds at least the tokenizer's pieces.
    std::error_code ec;
    if (!o.init_from.empty()) {
      if (text->tokenizer->VocabSize() > config.vocab_size) {
        throw Error("--tokenizer " + o.tokenizer + " has " + std::to_string(text->tokenizer->VocabSize()) +
                    " pieces, more than the vocab_size " + std::to_string(config.vocab_size) + " of --model " +
                    o.model + ": it is not that model's tokenizer");
      }
    } else if (fs::is_regular_file(o.model, ec)) {
      const nlohmann::json file = nlohmann::json::parse(ReadTextFile(o.model), nullptr, false);
      if (file.is_object() && file.contains("vocab_size") && file["vocab_size"] != text->tokenizer->VocabSize()) {
        throw Error("--model " + o.model + ": vocab_size " + file["vocab_size"].dump() + ", but the tokenizer " +
                    text->prepared.tokenizer_path + " has " + std::to_string(text->tokenizer->VocabSize()) +
                    " pieces (drop vocab_size from the file, or train a tokenizer with --vocab-size " +
                    file["vocab_size"].dump() + ")");
      }
    }
    if (o.init_from.empty()) config.vocab_size = text->tokenizer->VocabSize();
    // The tokenizer's vocabulary splits too, where the head is split by it.
    if (const std::string why = WhyNoTensorParallel(config, o.tp); !why.empty()) {
      throw Error("--tp " + std::to_string(o.tp) + ": the tokenizer " + text->prepared.tokenizer_path + "'s " + why);
    }
  }
  // Every check that could refuse the run has passed: only now does it
  // cost the earlier run it replaces.
  if (replace_earlier) RemoveEarlierRun(given, o);
  if (o.resume && !latest.empty()) {
    const int step = CheckResumePoint(o, latest, MustMatch(o, config, prepared ? &*prepared : nullptr));
    if (step == o.steps) {
      PrintNothingToDo(o, step);
      return 0;
    }
  }
  int code = 0;
  if (nproc == 1) {
    code = RunWorker(o, schedule, 0, 1, prepared);
  } else {
    std::vector<std::string> env;
    if (prepared) env.push_back(PreparedTextEnv(*prepared));
    // CPU workers are forked (no LibTorch start-up of their own), where that
    // is safe; CUDA ones are exec'd: the device checks above initialised CUDA
    // here, which a forked child cannot use (docs/runtime.md).
    code = LaunchWorkers(nproc, o.raw_args, o.comm_timeout_s, env, o.device.rfind("cpu", 0) == 0);
  }
  if (code != 0) made.RemoveEmpty();
  return code;
}

}  // namespace

void SetupTrain(CLI::App& app, int& exit_code, const std::vector<std::string>& argv) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "train a Llama model with a pipeline plan, one process per rank");
  AddTrainFlags(*sub, *o);
  o->raw_args.assign(argv.begin() + (argv.empty() ? 0 : 1), argv.end());  // the workers get the same flags
  sub->callback([o, sub, &exit_code] {
    o->given_schedule = sub->count("--schedule") > 0;
    o->given_ranks = sub->count("--ranks") > 0;
    o->given_microbatches = sub->count("--microbatches") > 0;
    o->given_virtual = sub->count("--virtual") > 0;
    o->given_eval_every = sub->count("--eval-every") > 0;
    o->given_eval_batches = sub->count("--eval-batches") > 0;
    o->parsed_flags = sub->config_to_str(true, false);
    for (const std::string& key : kPlannedFlags) {
      if (sub->count(PlannedFlag(key)) > 0) o->given_flags.insert(key);
    }
    exit_code = RunTrain(*o);
  });
}

}  // namespace pplab::cli
