// pplab train: run a plan for real. Without RANK/WORLD_SIZE in the
// environment it launches one worker per rank on this machine (or trains in
// this process with --ranks 1); with them (torchrun --no-python, Slurm) it is
// one of those workers. This file holds the flags and the Llama wiring; the
// options and the plan are in train_options.h, the checks before launch in
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
#include "runtime/data/corpus.h"
#include "runtime/data/fnv.h"
#include "runtime/data/run_text.h"
#include "runtime/data/token_cache.h"
#include "runtime/exec/device_info.h"
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
#include "tools/train_manifest.h"
#include "tools/train_options.h"
#include "tools/train_report.h"

namespace fs = std::filesystem;

namespace pplab::cli {
namespace {

// The trainer's hooks for --measure-memory and for the testing aids
// --kill-rank-at and --dump-grads.
void AddHooks(const TrainOptions& o, const Schedule& schedule, const Worker& worker, TrainerOptions& options) {
  if (o.measure_memory) options.memory = &MemoryMeter::For(worker.device);
  if (!o.kill_rank_at.empty()) {
    int kill_rank = -1, kill_step = -1;
    if (std::sscanf(o.kill_rank_at.c_str(), "%d:%d", &kill_rank, &kill_step) != 2) {
      throw Error("--kill-rank-at: expected RANK:STEP, got '" + o.kill_rank_at + "'");
    }
    if (kill_rank == worker.world_rank) {
      options.on_step = [kill_step](int step) {
        if (step == kill_step) ::raise(SIGKILL);
      };
    }
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
      const fs::path copy = fs::path(o.checkpoint_dir) / tokenizer_file;
      if (!fs::exists(copy)) WriteTextFile(copy.string(), ReadTextFile(text->prepared.tokenizer_path));
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
      for (int64_t b = 0; b < batches; ++b) {
        out.push_back(to_device(
            BatchFromRows([&](int64_t row, int32_t* ids) { text->dataset->ValSample((b * G + row) % n, ids); },
                          o.batch_size, o.seq_len, M, replica, o.dp, pad, kNoLossBit)));
      }
      return out;
    };
  }
  const TrainSummary summary = Train(
      schedule, worker.rank, *worker.transport, worker.group.get(),
      [&](StageId s) {
        return WorkerStage(worker, BuildLlamaStage(config, partition, schedule.ModelStage(s), o.seed, device, llama));
      },
      [&](int step) {
        StepBatch b =
            text != nullptr
                ? BatchFromRows(
                      [&](int64_t row, int32_t* ids) { text->dataset->TrainSample(data_offset + step * G + row, ids); },
                      o.batch_size, o.seq_len, M, replica, o.dp, pad, kNoLossBit)
                : SyntheticBatch(o.seed, step, o.batch_size, o.seq_len, config.vocab_size, M, replica, o.dp);
        if (step == o.nan_at) b.loss_scale = std::nan("");
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
    std::printf("nothing to do: the checkpoint in %s is at step %d, and --steps is %d\n", o.checkpoint_dir.c_str(),
                summary.first_step, o.steps);
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
  const std::string svg_path = WriteRunTraces(o, schedule, measured);
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
  PrintRunSummary(o, facts, summary, measured, svg_path);
  return 0;
}

int RunWorker(const TrainOptions& o, RankId world_rank, int world,
              const std::optional<PreparedText>& prepared = std::nullopt) {
  if (!DieWithLauncher()) throw Error("the launching pplab is gone; this worker stops");
  const Schedule schedule = LoadPlan(o);
  ShareCores(world);
  Worker worker = SetUpWorker(WorkerOptionsOf(o, schedule.ranks), world_rank, world);
  if (!IsWorker()) return TrainWorker(o, schedule, worker, prepared);
  // A worker that fails reports and exits here, its process groups still
  // alive: unwinding past `worker` would run NCCL's teardown, which can
  // block on the very operation that failed.
  try {
    return TrainWorker(o, schedule, worker, prepared);
  } catch (const std::exception& e) {
    ReportWorkerError(world_rank, e.what());
    std::_Exit(2);
  }
}

int RunTrain(const TrainOptions& given) {
  const TrainOptions o = WithDefaults(given);
  if (IsWorker()) return RunAsWorker([&o](RankId rank, int world) { return RunWorker(o, rank, world); });
  // Fail here, once, with one line, before any worker starts: the plan, the
  // model against it, the batch, the device, the machine's capacity, the
  // outputs and the checkpoint to resume.
  LlamaConfig config = LoadLlamaConfig(o.model);
  CheckModelWeights(o, config);
  // K against the model's layers before a plan of K ranks is generated.
  if (o.plan_file.empty() && o.ranks > config.num_hidden_layers) MakePartition(config, o.ranks, "uniform");
  const Schedule schedule = LoadPlan(o);
  CheckPlanFlags(o, schedule);
  ParseRecomputeStages(o.recompute, schedule.stages, "--recompute");
  ParseWarmUp(o.warm_up, c10::Device(c10::kCPU));
  CheckTensorParallelFlags(config, o.tp, o.sequence_parallel, o.seq_len);
  if (o.shard_optimizer && o.dp < 2) {
    throw Error("--shard-optimizer shards the AdamW moments over the data-parallel replicas: it needs --dp 2 or more");
  }
  const Partition partition =
      MakePartition(config, schedule.ModelStages(), o.partition, {schedule.placement, o.seq_len});
  ResolveAttention(ParseAttentionKind(o.attention));  // sdpa on a LibTorch without it: refused here, once
  if (o.seq_len > config.max_position_embeddings) {
    throw Error("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's max_position_embeddings " +
                std::to_string(config.max_position_embeddings));
  }
  const int nproc = o.nproc > 0 ? o.nproc : o.dp * o.tp * schedule.ranks;
  const std::string warning = CheckWorkerOptions(WorkerOptionsOf(o, schedule.ranks), nproc);
  SyntheticBatch(o.seed, 0, o.batch_size, 1, 2, schedule.microbatches, 0, o.dp);
  if (!o.oversubscribe) {
    CheckLocalCapacity(TrainLoad(o, nproc, config, partition, schedule.NumPipelines()), "--oversubscribe");
  }
  ClaimOutputs(given, o);
  const std::string latest = o.checkpoint_dir.empty() ? std::string() : PrepareCheckpointDir(o.checkpoint_dir);
  if (!warning.empty() && !o.quiet) std::fprintf(stderr, "pplab: warning: %s\n", warning.c_str());
  std::optional<PreparedText> prepared;
  if (!o.synthetic) {
    // Build the tokenizer and token cache once, here, so the workers find them.
    const auto text = OpenRunText(
        TextSourceOf(o, config), TextDataOf(o),
        [&o](const std::string& line) {
          if (!o.quiet) std::fprintf(stderr, "pplab: %s\n", line.c_str());
        },
        std::nullopt);
    if (!o.quiet && !o.json) {
      std::fprintf(
          stderr,
          "pplab: data: %lld documents, %lld tokens; %lld training and %lld validation samples of %d+1 tokens (%s)\n",
          static_cast<long long>(text->prepared.documents), static_cast<long long>(text->prepared.tokens),
          static_cast<long long>(text->dataset->NumTrainSamples()),
          static_cast<long long>(text->dataset->NumValSamples()), o.seq_len, o.packed ? "packed" : "padded");
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
  if (o.resume && !latest.empty()) {
    const int step = CheckResumePoint(o, latest, MustMatch(o, config, prepared ? &*prepared : nullptr));
    if (step == o.steps) {
      std::printf("nothing to do: the checkpoint in %s is at step %d, and --steps is %d\n", o.checkpoint_dir.c_str(),
                  step, o.steps);
      return 0;
    }
  }
  if (nproc == 1) return RunWorker(o, 0, 1, prepared);
  std::vector<std::string> env;
  if (prepared) env.push_back(PreparedTextEnv(*prepared));
  return LaunchWorkers(nproc, o.raw_args, o.comm_timeout_s, env);
}

}  // namespace

void SetupTrain(CLI::App& app, int& exit_code, const std::vector<std::string>& argv) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "train a Llama model with a pipeline plan, one process per rank");
  // A flag given twice takes the last value, so scripts can append overrides.
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("--schedule,-s", o->schedule, "schedule generator")->capture_default_str();
  sub->add_option("--plan", o->plan_file, "a plan file from `pplab export` instead of --schedule");
  sub->add_option("--ranks,-k", o->ranks, "pipeline ranks K")->check(CLI::Range(1, 4096))->capture_default_str();
  sub->add_option("--tp", o->tp,
                  "tensor-parallel ranks T per pipeline rank: each splits the layers' attention heads and MLP "
                  "columns with T - 1 others (Megatron-LM's layout; world = D x T x K processes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_flag("--sequence-parallel", o->sequence_parallel,
                "with --tp T: outside the split regions each tensor-parallel rank keeps 1/T of the positions "
                "(Megatron-LM's sequence parallelism), so the norms' activations and the hidden state sent between "
                "stages shrink by T; --seq-len must be a multiple of T");
  sub->add_option("--dp", o->dp, "data-parallel replicas D of the pipeline (world = D x T x K processes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--microbatches,-m", o->microbatches, "microbatches M per step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  sub->add_option("--virtual,-v", o->virtual_stages, "stages per rank (interleaved-1f1b, looped-bfs)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--model", o->model, kModelFlagHelp)->capture_default_str();
  sub->add_option("--partition", o->partition,
                  "uniform, parameters, compute (the ranks' FLOPs evened out for the plan's placement), or layers per "
                  "stage like 3,2,2,1")
      ->capture_default_str();
  sub->add_option("--batch-size", o->batch_size, "sequences per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "tokens per sequence")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  sub->add_option("--steps", o->steps, "training steps")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the weights and the data")->capture_default_str();
  sub->add_option("--lr", o->lr, "AdamW learning rate")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  sub->add_option("--warmup-steps", o->warmup_steps, "linear warm-up steps, then cosine decay to 0")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--clip-norm", o->clip_norm, "clip gradients to this global L2 norm (0: off)")
      ->check(CLI::Range(0.0, 1e30))
      ->capture_default_str();
  sub->add_option("--nproc", o->nproc, "worker processes (default: the plan's ranks)")->check(CLI::Range(1, 4096));
  sub->add_option("--comm-timeout", o->comm_timeout_s, "seconds a rank waits for a peer before giving up")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--device", o->device,
                  "cpu, or cuda / cuda:N (a CUDA LibTorch build; default one GPU per local rank)")
      ->capture_default_str();
  sub->add_option("--backend", o->backend, "auto (NCCL for CUDA devices, Gloo for the CPU), gloo or nccl")
      ->capture_default_str();
  sub->add_option("--precision", o->precision,
                  "fp32, or bf16: bf16 autocast compute and bf16 messages between ranks, with fp32 weights, AdamW "
                  "state, loss and softmax")
      ->capture_default_str();
  sub->add_option("--checkpoint-dir", o->checkpoint_dir, "write checkpoints here (one shard per rank, atomic)");
  sub->add_option("--checkpoint-every", o->checkpoint_every,
                  "steps between checkpoints (one is written at the end too)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_flag("--resume", o->resume,
                "continue the run in the outputs: from the latest checkpoint in --checkpoint-dir, if there is one, "
                "appending to its metrics");
  sub->add_flag("--overwrite", o->overwrite,
                "replace the run in the outputs (its metrics, traces and checkpoints) instead of refusing");
  sub->add_flag("--oversubscribe", o->oversubscribe,
                "start more local workers than this machine's cores (4 per core) or memory allow");
  CLI::Option* data =
      sub->add_option("--data", o->data,
                      "UTF-8 text files or directories to train on; *.jsonl files hold {\"prompt\", \"completion\"} or "
                      "{\"text\"} records, a prompt read but not learned (default: Debian's fortunes, " +
                          DefaultCorpusDir() + ")")
          ->expected(1, -1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* synthetic =
      sub->add_flag("--synthetic", o->synthetic, "train on random tokens instead of text (benchmarks, parity tests)")
          ->excludes(data);
  sub->add_option("--init-from", o->init_from,
                  "start from a published model's weights instead of the seed's: a .safetensors file, or the "
                  "model's folder (model.safetensors, or the files model.safetensors.index.json lists); --model "
                  "gives its config.json, and text training its --tokenizer (default: the folder's). A --resume from a "
                  "checkpoint takes the "
                  "checkpoint's");
  sub->add_option("--tokenizer", o->tokenizer,
                  "a tokenizer to use instead of training one: a SentencePiece .model, or a byte-level BPE "
                  "tokenizer.json (Llama 3, Qwen); with an --init-from folder, the folder's tokenizer.model, else its "
                  "tokenizer.json")
      ->excludes(synthetic);
  sub->add_option("--vocab-size", o->vocab_size, "pieces of the BPE tokenizer to train (default: the model's)")
      ->check(CLI::Range(8, 1 << 20));
  CLI::Option* no_flat =
      sub->add_flag("--no-flat-params", o->no_flat_params,
                    "keep each parameter and gradient apart instead of in one flat buffer per stage (the step's "
                    "zeroing, norm, clipping, data-parallel sum and AdamW then go parameter by parameter)");
  sub->add_flag("--shard-optimizer", o->shard_optimizer,
                "with --dp D: each replica keeps and updates 1/D of the AdamW moments (ZeRO stage 1), and the "
                "replicas then put the updated parameters together; same parameters bit for bit")
      ->excludes(no_flat);
  sub->add_option("--recompute", o->recompute,
                  "stages whose activations are recomputed: none, all, or stage ids like 0,1. Their F keeps only its "
                  "inputs, and their B or I runs the forward again first: less memory for one more forward per "
                  "microbatch, with the same gradients")
      ->capture_default_str();
  sub->add_flag("--packed", o->packed, "pack documents into full sequences instead of one padded document each");
  sub->add_option("--val-fraction", o->val_fraction, "share of the documents held out for validation")
      ->check(CLI::Range(0.0, 0.5))
      ->capture_default_str();
  sub->add_option("--cache-dir", o->cache_dir,
                  "where tokenizers and token caches are kept (default: " + DefaultCacheDir() + ")");
  sub->add_option("--eval-every", o->eval_every, "steps between validation losses (0: none)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--eval-batches", o->eval_batches, "batches of validation data per evaluation")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--out", o->out_dir,
                  "directory for the outputs not given otherwise: metrics.jsonl, checkpoints/, trace-measured.json, "
                  "trace-simulated.json, timeline.svg (\"\" for none)")
      ->capture_default_str();
  sub->add_option("--metrics", o->metrics_path, "append one JSON line per step (loss, lr, tokens/s, bubble, val loss)");
  sub->add_flag(
      "--measure-memory", o->measure_memory,
      "count tensor memory (CPU: a counting allocator; CUDA: the caching allocator's statistics); --json reports each "
      "rank's peak activation bytes of the last step");
  sub->add_option("--warm-up", o->warm_up,
                  "run each stage once, forward and backward, with no message, before the first step: auto (on a "
                  "CUDA device, where it sets up kernels, libraries and memory before any receive is posted), on or "
                  "off")
      ->capture_default_str();
  sub->add_option("--attention", o->attention,
                  "auto (sdpa where this LibTorch has it), sdpa (at::scaled_dot_product_attention, LibTorch 2.x) or "
                  "explicit (scores and softmax by hand)")
      ->capture_default_str();
  sub->add_option("--peak-tflops", o->peak_tflops,
                  "the device's peak TFLOP/s for model FLOPs utilisation (default: from the GPU's datasheet; none on "
                  "the CPU, so no MFU there)")
      ->check(CLI::Range(0.0, 1e9));
  sub->add_option("--trace", o->trace_path, "write the measured timeline of the last step (Chrome trace)");
  sub->add_option("--sim-trace", o->sim_trace_path,
                  "write the plan simulated with the compute costs measured in the last step (Chrome trace)");
  sub->add_flag("--quiet,-q", o->quiet, "no progress line");
  sub->add_flag("--json", o->json, "print one summary object at the end");
  sub->add_option("--kill-rank-at", o->kill_rank_at, "testing aid: RANK:STEP kills that rank at that step")
      ->group("");  // hidden
  sub->add_option("--nan-at", o->nan_at, "testing aid: make that step's loss NaN")->group("");
  sub->add_option("--dump-grads", o->dump_grads_dir,
                  "write each parameter's gradient of the last step to DIR/<global name>.pt (torch::save)");
  o->raw_args.assign(argv.begin() + (argv.empty() ? 0 : 1), argv.end());  // the workers get the same flags
  sub->callback([o, sub, &exit_code] {
    o->given_schedule = sub->count("--schedule") > 0;
    o->given_ranks = sub->count("--ranks") > 0;
    o->given_microbatches = sub->count("--microbatches") > 0;
    o->given_virtual = sub->count("--virtual") > 0;
    exit_code = RunTrain(*o);
  });
}

}  // namespace pplab::cli
