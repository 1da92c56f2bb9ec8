// pplab train: run a plan for real. Without RANK/WORLD_SIZE in the
// environment it launches one worker per rank on this machine (or trains in
// this process with --ranks 1); with them (torchrun --no-python, Slurm) it is
// one of those workers.
#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "models/llama.h"
#include "runtime/c10d_transport.h"
#include "runtime/fake_transport.h"
#include "runtime/launcher.h"
#include "runtime/memory_meter.h"
#include "runtime/synthetic_data.h"
#include "runtime/trainer.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "tools/commands.h"
#include "traces/chrome_trace.h"

namespace pplab::cli {
namespace {

struct TrainOptions {
  std::string schedule = "1f1b";
  std::string plan_file;
  int ranks = 2;
  int dp = 1;
  int microbatches = 4;
  int virtual_stages = 0;
  std::string model = "tiny";
  std::string partition = "uniform";
  int batch_size = 8;
  int seq_len = 32;
  int steps = 10;
  uint64_t seed = 1;
  double lr = 1e-3;
  int warmup_steps = 0;
  double clip_norm = 0;
  int nproc = 0;
  double comm_timeout_s = 60;
  std::string trace_path;
  bool json = false;
  std::string kill_rank_at;  // "RANK:STEP", a testing aid
  int nan_at = -1;           // a testing aid: that step's loss is NaN
  std::string dump_grads_dir;
  std::string device = "cpu";
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  bool resume = false;
  bool measure_memory = false;
  std::vector<std::string> raw_args;
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    throw Error(std::string("environment variable ") + name + "='" + v + "' is not an integer");
  }
}

// The device of the stages; a CUDA device without an index means one GPU per
// local rank, as torchrun does.
c10::Device ParseDevice(const std::string& text) {
  try {
    c10::Device device(text);
    if (device.is_cuda()) {
      if (!torch::cuda::is_available()) throw Error("this LibTorch has no CUDA device");
      if (!device.has_index()) device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(EnvInt("LOCAL_RANK", 0)));
    }
    return device;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error("--device '" + text + "': " + what.substr(0, what.find('\n')));
  }
}

Schedule LoadPlan(const TrainOptions& o) {
  if (o.plan_file.empty()) return Lower(Generate(o.schedule, {o.ranks, o.microbatches, o.virtual_stages}));
  Schedule s = LoadScheduleFile(o.plan_file);
  if (!s.HasComm() && s.ranks > 1) s = Lower(s);
  const ValidationReport report = Validate(s);
  if (!report.ok()) throw Error(o.plan_file + ": invalid schedule: " + report.problems.front().message);
  return s;
}

int RunWorker(const TrainOptions& o, RankId world_rank, int world) {
  const Schedule schedule = LoadPlan(o);
  const int K = schedule.ranks;
  if (world != o.dp * K) {
    throw Error("world size " + std::to_string(world) + " but --dp " + std::to_string(o.dp) + " x " +
                std::to_string(K) + " pipeline ranks = " + std::to_string(o.dp * K));
  }
  const int replica = world_rank / K;
  const RankId rank = world_rank % K;  // pipeline rank within the replica
  // Share the cores between the workers of this machine, as torchrun's
  // OMP_NUM_THREADS=1 does, unless the user chose.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    at::set_num_threads(std::max(1, cores / std::max(1, world)));
  }
  const LlamaConfig config = LoadLlamaConfig(o.model);
  const Partition partition = MakePartition(config, schedule.stages, o.partition);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000));
  const c10::Device device = ParseDevice(o.device);
  std::shared_ptr<ProcessGroupHandle> group, dp_group;
  std::unique_ptr<Transport> transport;
  if (world > 1) {
    const char* addr = std::getenv("MASTER_ADDR");
    group = ConnectGloo(addr != nullptr ? addr : "127.0.0.1", EnvInt("MASTER_PORT", 29500), world_rank, world, timeout);
    transport = std::make_unique<C10dTransport>(group, device, replica * K);
    if (o.dp > 1) {
      // The replicas of this pipeline rank's stages.
      std::vector<RankId> members;
      for (int d = 0; d < o.dp; ++d) members.push_back(d * K + rank);
      dp_group = Subgroup(*group, "dp" + std::to_string(rank) + "/", members, timeout);
    }
  } else {
    transport = std::make_unique<FakeTransport>(0, std::make_shared<FakeNetwork>());
  }
  TrainerOptions options;
  options.steps = o.steps;
  options.lr = o.lr;
  options.warmup_steps = o.warmup_steps;
  options.clip_norm = o.clip_norm;
  options.dp_group = dp_group.get();
  options.dp_size = o.dp;
  options.checkpoint_dir = o.checkpoint_dir;
  options.checkpoint_every = o.checkpoint_every;
  options.resume = o.resume;
  // What a resumed run must share with the run that wrote the checkpoint for
  // its data and weights to continue exactly; plan, K, D and partition may
  // change (parameters and optimizer state are stored by name).
  const nlohmann::json must_match = {{"model", nlohmann::json::parse(config.ToJson())},
                                     {"seed", o.seed},
                                     {"batch_size", o.batch_size},
                                     {"seq_len", o.seq_len}};
  nlohmann::json manifest = must_match;
  manifest["schedule"] = schedule.name;
  manifest["ranks"] = K;
  manifest["dp"] = o.dp;
  manifest["partition"] = partition.ToString();
  options.manifest_json = manifest.dump();
  options.check_resume = [must_match, &o](const std::string& text) {
    const nlohmann::json found = nlohmann::json::parse(text);
    for (const auto& [key, value] : must_match.items()) {
      if (!found.contains(key) || found[key] != value) {
        throw Error("--resume: the checkpoint in " + o.checkpoint_dir + " was taken with " + key + " " +
                    (found.contains(key) ? found[key].dump() : std::string("(none)")) + ", this run has " +
                    value.dump());
      }
    }
  };
  options.comm_timeout = timeout;
  if (o.measure_memory) {
    if (!device.is_cpu()) throw Error("--measure-memory counts CPU memory only; --device is " + o.device);
    options.memory = &MemoryMeter::Cpu();
  }
  if (!o.kill_rank_at.empty()) {
    int kill_rank = -1, kill_step = -1;
    if (std::sscanf(o.kill_rank_at.c_str(), "%d:%d", &kill_rank, &kill_step) != 2) {
      throw Error("--kill-rank-at: expected RANK:STEP, got '" + o.kill_rank_at + "'");
    }
    if (kill_rank == world_rank) {
      options.on_step = [kill_step](int step) {
        if (step == kill_step) ::raise(SIGKILL);
      };
    }
  }
  if (!o.dump_grads_dir.empty() && replica == 0) {  // replicas hold the same gradients
    options.after_last_step = [&o](const std::map<StageId, Stage*>& stages) {
      for (const auto& [s, stage] : stages) {
        for (auto& [name, p] : stage->NamedParameters()) {
          const std::string path = o.dump_grads_dir + "/" + name + ".pt";
          try {
            torch::save(p.grad().defined() ? p.grad() : torch::zeros_like(p), path);
          } catch (const std::exception& e) {
            throw Error("--dump-grads: cannot write " + path);
          }
        }
      }
    };
  }
  const int V = config.vocab_size;
  const TrainSummary summary = Train(
      schedule, rank, *transport, group.get(),
      [&](StageId s) { return BuildLlamaStage(config, partition, s, o.seed, device); },
      [&](int step) {
        StepBatch b = SyntheticBatch(o.seed, step, o.batch_size, o.seq_len, V, schedule.microbatches, replica, o.dp);
        if (step == o.nan_at) b.loss_scale = std::nan("");
        for (MicrobatchData& m : b.microbatches) {
          for (at::Tensor& t : m.inputs) t = t.to(device);
          m.targets = m.targets.to(device);
        }
        return b;
      },
      [](const TensorList& outputs, const at::Tensor& targets) {
        return TokenCrossEntropySum(outputs.at(0), targets, /*ignore_index=*/0);
      },
      options);
  if (world_rank != 0) return 0;
  if (!o.trace_path.empty()) WriteTextFile(o.trace_path, TimelineToChromeTrace(summary.last_step));
  if (o.json) {
    const nlohmann::json j = {{"schedule", schedule.name},
                              {"ranks", schedule.ranks},
                              {"dp", o.dp},
                              {"microbatches", schedule.microbatches},
                              {"steps", o.steps},
                              {"model", o.model},
                              {"partition", partition.ToString()},
                              {"losses", summary.losses},
                              {"step_times_ms", summary.step_times_ms},
                              {"first_step", summary.first_step},
                              {"checkpoint_save_ms", summary.checkpoint_save_ms},
                              {"checkpoint_load_ms", summary.checkpoint_load_ms},
                              {"lrs", summary.lrs},
                              {"grad_norms", summary.grad_norms}};
    nlohmann::json out = j;
    if (o.measure_memory) out["measured_peak_activation_bytes"] = summary.peak_activation_bytes;
    std::printf("%s\n", out.dump().c_str());
  } else {
    for (size_t i = 0; i < summary.losses.size(); ++i) {
      std::printf("step %3zu  loss %.6f  lr %.3g  %8.2f ms\n", summary.first_step + i, summary.losses[i],
                  summary.lrs[i], summary.step_times_ms[i]);
    }
    if (!o.trace_path.empty()) std::printf("measured trace of the last step written to %s\n", o.trace_path.c_str());
  }
  std::fflush(stdout);
  return 0;
}

int RunTrain(const TrainOptions& o) {
  const bool worker = std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr;
  if (worker) {
    const RankId rank = EnvInt("RANK", 0);
    const int world = EnvInt("WORLD_SIZE", 1);
    try {
      return RunWorker(o, rank, world);
    } catch (const std::exception& e) {
      // Leave at once: a process group with a dead peer may block in its
      // destructors, and a worker must never hang.
      std::fprintf(stderr, "pplab: error: rank %d: %s\n", rank, e.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
  }
  // Fail here, once, on a bad plan, device or batch, before any worker starts.
  const Schedule schedule = LoadPlan(o);
  ParseDevice(o.device);
  SyntheticBatch(o.seed, 0, o.batch_size, 1, 2, schedule.microbatches, 0, o.dp);
  const int nproc = o.nproc > 0 ? o.nproc : o.dp * schedule.ranks;
  if (nproc == 1) return RunWorker(o, 0, 1);
  LaunchOptions launch;
  launch.nproc = nproc;
  launch.args = o.raw_args;
  launch.grace = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000) + 10000);
  return LaunchLocal(launch);
}

}  // namespace

void SetupTrain(CLI::App& app, int& exit_code, const std::vector<std::string>& argv) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "train a Llama model with a pipeline plan, one process per rank");
  sub->add_option("--schedule,-s", o->schedule, "schedule generator")->capture_default_str();
  sub->add_option("--plan", o->plan_file, "a plan file from `pplab export` instead of --schedule");
  sub->add_option("--ranks,-k", o->ranks, "pipeline ranks K")->check(CLI::Range(1, 4096))->capture_default_str();
  sub->add_option("--dp", o->dp, "data-parallel replicas D of the pipeline (world = D x K processes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--microbatches,-m", o->microbatches, "microbatches M per step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  sub->add_option("--virtual,-v", o->virtual_stages, "stages per rank (interleaved-1f1b, looped-bfs)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--model", o->model, "preset (tiny, small, default) or a JSON config file")->capture_default_str();
  sub->add_option("--partition", o->partition, "uniform, parameters, or layers per stage like 3,2,2,1")
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
  sub->add_option("--checkpoint-dir", o->checkpoint_dir, "write checkpoints here (one shard per rank, atomic)");
  sub->add_option("--checkpoint-every", o->checkpoint_every,
                  "steps between checkpoints (one is written at the end too)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub->add_flag("--resume", o->resume, "continue from the latest checkpoint in --checkpoint-dir, if there is one");
  sub->add_flag("--measure-memory", o->measure_memory,
                "count CPU tensor memory; --json reports each rank's peak activation bytes of the last step");
  sub->add_option("--trace", o->trace_path, "write the measured timeline of the last step (Chrome trace)");
  sub->add_flag("--json", o->json, "print one summary object at the end");
  sub->add_option("--kill-rank-at", o->kill_rank_at, "testing aid: RANK:STEP kills that rank at that step")
      ->group("");  // hidden
  sub->add_option("--nan-at", o->nan_at, "testing aid: make that step's loss NaN")->group("");
  sub->add_option("--dump-grads", o->dump_grads_dir,
                  "write each parameter's gradient of the last step to DIR/<global name>.pt (torch::save)");
  o->raw_args.assign(argv.begin() + (argv.empty() ? 0 : 1), argv.end());  // the workers get the same flags
  sub->callback([o, &exit_code] { exit_code = RunTrain(*o); });
}

}  // namespace pplab::cli
