#include "tools/train_checks.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/pretrained.h"
#include "models/tensor_parallel.h"
#include "runtime/data/text_prepare.h"
#include "runtime/exec/graphed_stage.h"
#include "runtime/train/checkpoint.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "sim/cost_model.h"
#include "sim/precision.h"
#include "tools/output_files.h"

namespace fs = std::filesystem;

namespace pplab::cli {
namespace {

// The run files in --out (those not given a path of their own): a run
// folder's, which a new run must not mix into.
std::vector<std::string> RunFolderFiles(const TrainOptions& given, const TrainOptions& o) {
  std::vector<std::string> files;
  if (o.out_dir.empty()) return files;
  if (given.metrics_path.empty()) files.push_back(o.metrics_path);
  if (given.trace_path.empty()) files.push_back(o.trace_path);
  if (given.sim_trace_path.empty()) files.push_back(o.sim_trace_path);
  files.push_back((fs::path(o.out_dir) / "timeline.svg").string());
  return files;
}

}  // namespace

int64_t CheckModelWeights(const TrainOptions& o, const LlamaConfig& config) {
  try {
    RotaryFrequencies(config);  // refused here rather than in every worker
  } catch (const Error& e) {
    throw Error("--model " + o.model + ": " + e.what());
  }
  if (o.init_from.empty()) return 0;
  // A published model's token ids are its own tokenizer's pieces.
  if (!o.synthetic && o.tokenizer.empty()) {
    throw Error(
        "--init-from " + o.init_from +
        ": text training needs the model's own tokenizer, --tokenizer (its tokenizer.model or tokenizer.json, which "
        "are taken from an --init-from folder that holds one); "
        "or train on --synthetic tokens");
  }
  std::optional<WeightFiles> files;
  try {
    files.emplace(WeightFiles::Open(o.init_from));
  } catch (const Error& e) {
    throw Error("--init-from: " + std::string(e.what()));
  }
  int64_t values = 0;
  try {
    values = CheckPretrained(*files, config);
  } catch (const Error& e) {
    // The weights against a preset's shape: most likely --model was left
    // out (its default is a preset), which the tensor's sizes did not say.
    const std::vector<std::string> presets = LlamaPresetNames();
    const bool preset = std::find(presets.begin(), presets.end(), o.model) != presets.end();
    throw Error("--init-from: " + std::string(e.what()) +
                (preset ? " (--model " + o.model +
                              " is a preset; give --model the weights' config.json, or their Hugging Face folder)"
                        : ""));
  }
  return values;
}

void CheckTensorParallelFlags(const LlamaConfig& config, int tp, bool sequence_parallel, int64_t seq_len) {
  if (const std::string why = WhyNoTensorParallel(config, tp); !why.empty()) {
    throw Error("--tp " + std::to_string(tp) + ": the model's " + why);
  }
  if (sequence_parallel && tp < 2) {
    throw Error("--sequence-parallel splits the positions over the tensor-parallel ranks: it needs --tp 2 or more");
  }
  if (const std::string why = WhyNoSequenceParallel(seq_len, sequence_parallel ? tp : 1); !why.empty()) {
    throw Error("--sequence-parallel: " + why + " (--tp)");
  }
}

void CheckPlanFlags(const TrainOptions& o, const Schedule& schedule) {
  if (o.plan_file.empty()) return;
  auto conflict = [&o](const char* flag, const std::string& given, const std::string& planned) {
    throw Error(std::string(flag) + " " + given + " conflicts with --plan " + o.plan_file + " (" + planned +
                "): drop the flag, the plan fixes it");
  };
  if (o.given_schedule && o.schedule != schedule.name) conflict("--schedule", o.schedule, "schedule " + schedule.name);
  if (o.given_ranks && o.ranks != schedule.ranks) {
    conflict("--ranks", std::to_string(o.ranks), "K " + std::to_string(schedule.ranks));
  }
  if (o.given_microbatches && o.microbatches != schedule.microbatches) {
    conflict("--microbatches", std::to_string(o.microbatches), "M " + std::to_string(schedule.microbatches));
  }
  const int v = schedule.stages / std::max(1, schedule.ranks);
  if (o.given_virtual && o.virtual_stages != v) {
    conflict("--virtual", std::to_string(o.virtual_stages), "v " + std::to_string(v));
  }
}

void CheckCudaGraphsTensorParallel(int tp) {
  if (tp > 1) {
    throw Error("--cuda-graphs with --tp " + std::to_string(tp) +
                ": a tensor-parallel stage's forward runs collectives between its products, which pplab does not "
                "capture; drop one of the two");
  }
}

void CheckCudaGraphsDevice(const std::string& device) {
  if (GraphStandInRequested()) return;
  if (device.rfind("cuda", 0) != 0) {
    throw Error("--cuda-graphs captures a GPU's work: it needs --device cuda, got --device " + device);
  }
  if (!CudaGraphsBuilt()) throw Error("--cuda-graphs: this pplab was built against a LibTorch without CUDA");
}

void CheckCudaGraphs(const TrainOptions& o, const Schedule& schedule) {
  if (!o.cuda_graphs) return;
  CheckCudaGraphsTensorParallel(o.tp);
  if (o.recompute != "none") {
    throw Error("--cuda-graphs with --recompute " + o.recompute +
                ": a graph keeps each microbatch's activations in its own memory from its capture on, so "
                "recomputing saves nothing; drop one of the two");
  }
  if (schedule.HasSplitBackward()) {
    throw Error("--cuda-graphs: schedule " + schedule.name +
                " splits B into I and W, and a captured backward computes both; use a schedule with whole B's "
                "(gpipe, 1f1b, interleaved-1f1b, ...)");
  }
  // After the plan's checks, which hold on any build: then the device.
  CheckCudaGraphsDevice(o.device);
}

void CheckSimCost(const TrainOptions& o, const LlamaConfig& config, const Partition& partition,
                  const Schedule& schedule) {
  if (o.sim_cost_path.empty()) return;
  const std::string flag = "--sim-cost " + o.sim_cost_path;
  const std::vector<std::pair<const char*, std::string>> outputs = {
      {"--trace", o.trace_path},
      {"--sim-trace", o.sim_trace_path},
      {"--metrics", o.metrics_path},
      {"--out's picture", o.out_dir.empty() ? "" : (fs::path(o.out_dir) / "timeline.svg").string()}};
  for (const auto& [what, path] : outputs) {
    if (!path.empty() && SameFile(o.sim_cost_path, path)) {
      throw Error(flag + " is also " + what + " (" + path + "), which the run writes: give the costs another file");
    }
  }
  const CostModel costs = CostModel::FromJson(ReadTextFile(o.sim_cost_path), o.sim_cost_path);
  costs.CheckStages(schedule.stages, schedule.name);
  const std::optional<ProfileMeta> profile = costs.Profile();
  if (!profile) return;  // plan --cost-out, stats --cost-out or by hand: the user's costs
  const std::string measured = flag + " was measured with ";
  const int sequences = schedule.microbatches > 0 ? o.batch_size / (o.dp * schedule.microbatches) : 0;
  if (profile->microbatch_size != sequences) {
    throw Error(measured + "microbatches of " + std::to_string(profile->microbatch_size) +
                " sequences, this run's are of " + std::to_string(sequences) +
                " (profile at this size, or cost it with pplab plan --cost-out)");
  }
  if (profile->seq_len != o.seq_len) {
    throw Error(measured + "--seq-len " + std::to_string(profile->seq_len) + ", not " + std::to_string(o.seq_len));
  }
  if (profile->precision != ParsePrecision(o.precision)) {
    throw Error(measured + "--precision " + PrecisionName(profile->precision) + ", not " + o.precision);
  }
  if (profile->partition != partition.ToString()) {
    throw Error(measured + "the layers " + profile->partition + " a stage, this run's are " + partition.ToString());
  }
  // Each stage's times and bytes are one tensor-parallel rank's share
  // (plan refuses the same mismatch).
  if (profile->tensor_parallel != o.tp) {
    throw Error(measured + "--tp " + std::to_string(profile->tensor_parallel) + ", not " + std::to_string(o.tp));
  }
  if (profile->sequence_parallel != (o.sequence_parallel && o.tp > 1)) {
    throw Error(measured + (profile->sequence_parallel ? "--sequence-parallel, this run has none"
                                                       : "no --sequence-parallel, this run has it"));
  }
  if (profile->cuda_graphs != o.cuda_graphs) {
    const std::string how =
        profile->cuda_graphs ? "--cuda-graphs, this run is eager" : "eager stages, this run has --cuda-graphs";
    throw Error(measured + how + " (profile the way the run goes)");
  }
  // The whole shape, as plan and simulate --model hold a profile to it: the
  // vocabulary (the head's stage), head_dim and tied weights too (a profile
  // of another vocabulary predicted a peak 91 % low).
  const LlamaConfig recorded = LlamaConfigFromJson(profile->config_json, o.sim_cost_path + ": meta.config");
  if (!SameShapeButDepth(recorded, config)) {
    throw Error(measured + "--model " + profile->model + ", whose shape differs from --model " + o.model + "'s");
  }
  // The ranks the stages ran on, and their replicas: a --dp 2 profile's
  // REDUCE_GRADs and shared device predicted a --dp 1 run 84 % high.
  if (profile->ranks != schedule.ranks) {
    throw Error(measured + std::to_string(profile->ranks) + " pipeline ranks, this run's plan has " +
                std::to_string(schedule.ranks));
  }
  const int profile_dp = costs.DataParallelGroup().degree;
  if (profile_dp != o.dp) {
    throw Error(measured + "--dp " + std::to_string(profile_dp) + ", not " + std::to_string(o.dp));
  }
}

namespace {

// --out's own checkpoints folder where this run's are elsewhere
// (--checkpoint-dir) and it holds some: part of the run in --out all the
// same ("" otherwise). A run replaced with --checkpoint-dir NEW left them,
// and the next --resume without the flag continued them under the new
// run's metrics.
std::string OutCheckpoints(const TrainOptions& o) {
  if (o.out_dir.empty()) return "";
  const std::string own = (fs::path(o.out_dir) / "checkpoints").string();
  if (!o.checkpoint_dir.empty() && ResolvedPath(own) == ResolvedPath(o.checkpoint_dir)) return "";
  return HoldsCheckpoints(own) ? own : "";
}

// --out is a folder of checkpoints of its own (another run's
// --checkpoint-dir), apart from this run's checkpoints.
bool OutHoldsCheckpoints(const TrainOptions& o) {
  return !o.out_dir.empty() && HoldsCheckpoints(o.out_dir) &&
         (o.checkpoint_dir.empty() || ResolvedPath(o.out_dir) != ResolvedPath(o.checkpoint_dir));
}

// A folder of another kind where --checkpoint-dir or --out is meant: one
// checkpoint (a step folder), a run's --out, or a folder of checkpoints.
// A resume aimed at one of them found no `latest`, started at step 1 and
// wrote its checkpoints (or metrics) in among the other run's files.
void RefuseOtherKindsOfFolder(const TrainOptions& o) {
  std::error_code ec;
  if (!o.checkpoint_dir.empty()) {
    const fs::path dir = o.checkpoint_dir;
    if (fs::exists(dir / "manifest.json", ec)) {
      throw Error("--checkpoint-dir " + o.checkpoint_dir +
                  " is one checkpoint (it holds manifest.json), not a folder of checkpoints: give the folder it "
                  "is in");
    }
    // (--out and --checkpoint-dir may be one folder: its metrics are this run's.)
    const bool own_out = !o.out_dir.empty() && ResolvedPath(o.out_dir) == ResolvedPath(o.checkpoint_dir);
    for (const char* run_file : {"metrics.jsonl", "checkpoints"}) {
      const fs::path at = dir / run_file;
      if (!own_out && fs::exists(at, ec)) {
        throw Error("--checkpoint-dir " + o.checkpoint_dir + " holds a run's outputs (" + at.string() +
                    "), not its checkpoints" +
                    (HoldsCheckpoints((dir / "checkpoints").string())
                         ? ": give " + (dir / "checkpoints").string() + ", or --out " + o.checkpoint_dir
                         : ": give another folder"));
      }
    }
  }
  if (OutHoldsCheckpoints(o) && !o.overwrite) {
    throw Error("--out " + o.out_dir + " is a folder of checkpoints (it holds " +
                (fs::exists(fs::path(o.out_dir) / "latest", ec) ? "latest" : "step folders") +
                "), not a run's folder: give the run's folder (the one that holds it), or --overwrite to replace "
                "them with this run");
  }
}

}  // namespace

bool ClaimOutputs(const TrainOptions& given, const TrainOptions& o) {
  if (o.resume && o.overwrite)
    throw Error("--resume continues the run in the outputs, --overwrite replaces it: pick one");
  RefuseOtherKindsOfFolder(o);
  if (o.checkpoint_dir.empty() && (o.resume || o.checkpoint_every > 0)) {
    throw Error(std::string(o.resume ? "--resume continues from" : "--checkpoint-every writes into") +
                " --checkpoint-dir, and this run has none (--out '' and no --checkpoint-dir): give one");
  }
  struct Found {
    std::string flag, folder, path;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const std::string& path : RunFolderFiles(given, o)) {
    if (fs::exists(path, ec)) found.push_back({"--out", o.out_dir, path});
  }
  if (const std::string own = OutCheckpoints(o); !own.empty()) found.push_back({"--out", o.out_dir, own});
  if (OutHoldsCheckpoints(o)) found.push_back({"--out", o.out_dir, o.out_dir});  // --overwrite: replaced
  const bool checkpoints = !o.checkpoint_dir.empty() && HoldsCheckpoints(o.checkpoint_dir);
  if (checkpoints) found.push_back({"--checkpoint-dir", o.checkpoint_dir, o.checkpoint_dir});
  if (found.empty()) return false;
  if (o.resume) {
    if (checkpoints) return false;  // continued, not replaced
    // Nothing to continue from: the run would start at step 1 over the
    // earlier run's files (its metrics replaced unsaid).
    throw Error("--resume: --checkpoint-dir " + o.checkpoint_dir + " holds no checkpoint to continue from, and " +
                found.front().flag + " " + found.front().folder + " holds a run (" + found.front().path +
                ") that starting over would write over: give that run's --checkpoint-dir, or --overwrite to "
                "replace it");
  }
  if (!o.overwrite) {
    throw Error(found.front().flag + " " + found.front().folder + " already holds a run (" + found.front().path +
                "): pass --resume to continue it, " + found.front().flag +
                " NEW for another folder, or --overwrite "
                "to replace it");
  }
  return true;
}

void RemoveEarlierRun(const TrainOptions& given, const TrainOptions& o) {
  std::error_code ec;
  for (const std::string& path : RunFolderFiles(given, o)) fs::remove(path, ec);
  if (const std::string own = OutCheckpoints(o); !own.empty()) RemoveCheckpoints(own);
  if (OutHoldsCheckpoints(o)) RemoveCheckpoints(o.out_dir);  // --out was a folder of checkpoints
  if (!o.checkpoint_dir.empty()) RemoveCheckpoints(o.checkpoint_dir);
}

RunFolderLock::RunFolderLock(const TrainOptions& o) {
  std::vector<std::string> locked;
  for (const auto& [flag, dir] : {std::pair<const char*, std::string>{"--out", o.out_dir},
                                  std::pair<const char*, std::string>{"--checkpoint-dir", o.checkpoint_dir}}) {
    if (dir.empty()) continue;
    // One lock a folder: two of one process's on one folder would refuse each other.
    const std::string resolved = ResolvedPath(dir);
    if (std::find(locked.begin(), locked.end(), resolved) != locked.end()) continue;
    locked.push_back(resolved);
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;  // CheckOutputs made it: gone since, the writes will say so
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      ::close(fd);
      if (error != EWOULDBLOCK) continue;  // a file system without locks: unguarded, as before
      throw Error(std::string(flag) + " " + dir +
                  " is in use: another pplab run is writing into it (it holds the folder's lock); wait for it to end, "
                  "or give another folder");
    }
    fds_.push_back(fd);
  }
}

RunFolderLock::~RunFolderLock() {
  for (const int fd : fds_) ::close(fd);
}

namespace {

std::vector<FlagPath> InputsOf(const TrainOptions& o) {
  std::vector<FlagPath> inputs = {{"--plan", o.plan_file}, ModelInput(o.model), {"--tokenizer", o.tokenizer}};
  for (const FlagPath& weights : WeightInputs("--init-from", o.init_from)) inputs.push_back(weights);
  for (const std::string& data : o.data) inputs.push_back({"--data", data});
  return inputs;
}

}  // namespace

void CheckOverwriteKeepsInputs(const TrainOptions& given, const TrainOptions& o) {
  const std::vector<std::string> files = RunFolderFiles(given, o);
  for (const FlagPath& in : InputsOf(o)) {
    if (in.path.empty()) continue;
    const bool run_file =
        std::any_of(files.begin(), files.end(), [&in](const std::string& f) { return SameFile(in.path, f); });
    const std::string own = OutCheckpoints(o);
    if (run_file || (!o.checkpoint_dir.empty() && IsCheckpointEntry(EntryWithin(o.checkpoint_dir, in.path))) ||
        (!own.empty() && IsCheckpointEntry(EntryWithin(own, in.path)))) {
      throw Error(in.flag + " " + in.path +
                  " is part of the earlier run --overwrite would remove; copy it elsewhere first");
    }
  }
}

MadeFolders::MadeFolders() : exceptions_(std::uncaught_exceptions()) {}

MadeFolders::MadeFolders(MadeFolders&& other) noexcept : made_(std::move(other.made_)), exceptions_(other.exceptions_) {
  other.made_.clear();
}

MadeFolders::~MadeFolders() {
  if (std::uncaught_exceptions() > exceptions_) RemoveEmpty();
}

std::string MadeFolders::Make(const std::string& dir) {
  std::vector<std::string> missing;  // deepest first
  std::error_code ec;
  // The path as written, as create_directories makes it: normalised,
  // "t/x/../y" recorded t and t/y, and left t/x behind.
  for (fs::path p = fs::path(dir); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) return ec.message();
  if (!fs::is_directory(dir, ec)) return "not a directory";
  // Deeper ones first: a parent is empty only once its child is gone.
  made_.insert(made_.begin(), missing.begin(), missing.end());
  return "";
}

void MadeFolders::RemoveEmpty() {
  for (const std::string& dir : made_) ::rmdir(dir.c_str());  // fails, harmlessly, where not empty
  made_.clear();
}

MadeFolders CheckOutputs(const TrainOptions& o) {
  const std::pair<const char*, std::string> folders[] = {
      {"--out", o.out_dir}, {"--checkpoint-dir", o.checkpoint_dir}, {"--dump-grads", o.dump_grads_dir}};
  const std::vector<FlagPath> outputs = {
      {"--metrics", o.metrics_path},
      {"--trace", o.trace_path},
      {"--sim-trace", o.sim_trace_path},
      {"--out", o.out_dir.empty() ? "" : (fs::path(o.out_dir) / "timeline.svg").string()}};
  // Text folders are read whole: the run's own files (its folders, the
  // token cache and tokenizer, each output file) must not land in one, where
  // the next run would read them as text (checked before the folders are made).
  // (An output file that is a data file is CheckOutputFiles's: an input.)
  std::vector<std::tuple<std::string, std::string, bool>> written;  // flag, path, a folder
  for (const auto& [flag, dir] : folders) written.emplace_back(flag, dir, true);
  if (!o.synthetic) written.emplace_back("--cache-dir", o.cache_dir, true);
  for (const FlagPath& out : outputs) written.emplace_back(out.flag, out.path, false);
  for (const std::string& data : o.data) {
    for (const auto& [flag, path, folder] : written) {
      if (path.empty()) continue;
      if ((folder && ResolvedPath(path) == ResolvedPath(data)) || !EntryWithin(data, path).empty()) {
        throw Error("--data " + data + " holds " + flag + " " + path +
                    ": the run's files would be read as text; put them elsewhere");
      }
    }
  }
  // Nor may an output file be one of the cache's own (runtime/data/
  // text_prepare.cc names them tokens-... and tokenizer-...): --metrics on
  // the token cache cut it while the run read it, --trace on a cached
  // tokenizer replaced it with the trace.
  if (!o.synthetic) {
    const std::string cache = o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir;
    for (const FlagPath& out : outputs) {
      const std::string entry = out.path.empty() ? "" : EntryWithin(cache, out.path);
      if (entry.rfind("tokens-", 0) == 0 || entry.rfind("tokenizer-", 0) == 0) {
        throw Error(out.flag + " " + out.path + " is a file of the token cache (" + cache +
                    "), which this run reads and writes: put it elsewhere");
      }
    }
  }
  // A folder that is a file is refused before any is made (a refused run
  // left an empty --out behind).
  for (const auto& [flag, dir] : folders) {
    std::error_code ec;
    if (!dir.empty() && fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
      throw Error(std::string(flag) + " " + dir + ": cannot create: " + std::strerror(ENOTDIR));
    }
  }
  MadeFolders made;
  for (const auto& [flag, dir] : folders) {
    if (dir.empty()) continue;
    if (const std::string why = made.Make(dir); !why.empty()) {
      throw Error(std::string(flag) + " " + dir + ": cannot create: " + why);
    }
  }
  CheckOutputFiles(outputs, InputsOf(o));
  // --dump-grads writes NAME.pt for every parameter: no other output may
  // be such a file there, nor its folder the checkpoints'.
  if (!o.dump_grads_dir.empty()) {
    if (!o.checkpoint_dir.empty() && ResolvedPath(o.dump_grads_dir) == ResolvedPath(o.checkpoint_dir)) {
      throw Error("--dump-grads " + o.dump_grads_dir + " is --checkpoint-dir " + o.checkpoint_dir +
                  ": give the gradients a folder of their own");
    }
    for (const FlagPath& out : outputs) {
      if (!out.path.empty() && EndsWith(out.path, ".pt") && !EntryWithin(o.dump_grads_dir, out.path).empty()) {
        throw Error(out.flag + " " + out.path + " is in --dump-grads " + o.dump_grads_dir +
                    ", whose NAME.pt files are the gradients'");
      }
    }
  }
  // The checkpoints' own names in their folder are theirs alone.
  for (const FlagPath& out : outputs) {
    if (!out.path.empty() && !o.checkpoint_dir.empty() && IsCheckpointEntry(EntryWithin(o.checkpoint_dir, out.path))) {
      throw Error(out.flag + " " + out.path + " is in --checkpoint-dir " + o.checkpoint_dir +
                  " under a name its checkpoints use (latest, step-*, tokenizer-*)");
    }
  }
  return made;
}

LocalLoad TrainLoad(const TrainOptions& o, int nproc, const LlamaConfig& config, const Partition& partition,
                    int copies) {
  double params = 0;
  for (int s = 0; s < partition.NumStages(); ++s) params += static_cast<double>(StageParams(config, partition, s));
  // A CUDA device holds the model state on the GPUs.
  return LocalLoad{nproc, params * o.dp * copies, o.device.rfind("cpu", 0) == 0};
}

}  // namespace pplab::cli
