#include "tools/train_options.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "models/llama_config.h"
#include "models/tensor_parallel.h"
#include "runtime/data/corpus.h"
#include "runtime/data/fnv.h"
#include "runtime/data/tokenizer.h"
#include "runtime/train/launcher.h"
#include "runtime/train/model_copies.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/json_reader.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "tools/output_files.h"

namespace fs = std::filesystem;

namespace pplab::cli {

std::chrono::milliseconds CommTimeout(const TrainOptions& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000));
}

uint64_t RanksFingerprint(const std::string& parsed_flags, const std::vector<std::string>& files) {
  uint64_t h = Fnv1a64(parsed_flags);
  for (const std::string& file : files) {
    if (file.empty()) continue;
    // A file a rank cannot read fails its run on its own; its name stands in.
    std::ifstream in(file, std::ios::binary);
    std::string bytes;
    if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    h = Fnv1a64(bytes, Fnv1a64("\n" + file + "\n", h));
  }
  return h | 1;
}

WorkerOptions WorkerOptionsOf(const TrainOptions& o, int pipeline_ranks) {
  WorkerOptions w;
  w.pipeline_ranks = pipeline_ranks;
  w.dp = o.dp;
  w.tp = o.tp;
  w.device = o.device;
  w.backend = o.backend;
  w.precision = o.precision;
  w.comm_timeout = CommTimeout(o);
  w.flags_fingerprint = RanksFingerprint(o.parsed_flags, {LlamaConfigPath(o.model), o.plan_file, o.tokenizer});
  // An --init-from's weight files may be gigabytes: their names, sizes and
  // first MiB (each safetensors header, and the start of its data) stand
  // for them. Ranks started by hand, each loading its own copy, began from
  // two models unseen.
  if (!o.init_from.empty()) {
    uint64_t h = w.flags_fingerprint;
    for (const FlagPath& file : WeightInputs("--init-from", o.init_from)) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(file.path, ec);
      std::ifstream in(file.path, std::ios::binary);
      std::string head(size_t{1} << 20, '\0');
      in.read(head.data(), static_cast<std::streamsize>(head.size()));
      head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
      h = Fnv1a64(head, Fnv1a64(std::filesystem::path(file.path).filename().string() + "\n" +
                                    std::to_string(ec ? 0 : size) + "\n",
                                h));
    }
    w.flags_fingerprint = h | 1;
  }
  return w;
}

bool ParseWarmUp(const std::string& value, const c10::Device& device) {
  if (value == "auto") return device.is_cuda();
  if (value == "on") return true;
  if (value == "off") return false;
  throw Error("--warm-up: expected auto, on or off, got '" + value + "'");
}

TrainerOptions TrainerOptionsOf(const TrainOptions& o, const Worker& worker, const LlamaConfig& config) {
  TrainerOptions options;
  options.steps = o.steps;
  options.nan_gradient_at = o.nan_gradient_at;
  options.lr = o.lr;
  options.warmup_steps = o.warmup_steps;
  options.clip_norm = o.clip_norm;
  options.flat_parameters = !o.no_flat_params;
  options.share_weight_casts = !o.cuda_graphs;
  options.warm_up = ParseWarmUp(o.warm_up, worker.device);
  options.shard_optimizer = o.shard_optimizer;
  options.dp_group = worker.dp_group.get();
  options.clock = worker.clock.get();
  options.dp_size = o.dp;
  options.tp_group = worker.tp_group.get();
  options.tp_size = worker.tp_size;
  options.tp_rank = worker.tp_rank;
  options.tp_split_dim = [config](const std::string& name) {
    return TensorParallelDim(TensorParallelSplit(name, config));
  };
  options.tp_partial_gradient = [config, sequence = o.sequence_parallel](const std::string& name) {
    return TensorParallelSplit(name, config, sequence) == TensorSplit::kPartialGradient;
  };
  options.checkpoint_dir = o.checkpoint_dir;
  options.checkpoint_every = o.checkpoint_every;
  options.resume = o.resume;
  options.eval_every = o.eval_every;
  options.comm_timeout = CommTimeout(o);
  // A host blocked inside an action on a GPU with NCCL: one line through the
  // launcher, then out at once, as RunAsWorker leaves on an error. (Over
  // Gloo every wait blocks the host and bounds itself.)
  if (worker.backend == Backend::kNccl) {
    options.on_host_stuck = [world_rank = worker.world_rank](const std::string& line,
                                                             const std::vector<std::string>& stack) {
      // The frames first, on this rank's stderr; the line through the launcher.
      std::string frames;
      for (size_t i = 0; i < stack.size(); ++i) frames += "  #" + std::to_string(i) + " " + stack[i] + "\n";
      if (!frames.empty()) {
        std::fprintf(stderr, "pplab: rank %d: the host's stack, blocked:\n%s", world_rank, frames.c_str());
      }
      ReportWorkerError(world_rank, line + (frames.empty() ? "" : " (its stack is above)"));
      std::_Exit(2);
    };
  }
  options.run_id = worker.run_id;
  return options;
}

Schedule LoadPlan(const TrainOptions& o, int* dropped_fsdp) {
  Schedule s;
  if (o.plan_file.empty()) {
    if (FindGenerator(o.schedule).needs_costs) {
      throw Error("-s " + o.schedule +
                  ": its order is searched with a cost model, so train runs it from a file: write one with pplab "
                  "export -s " +
                  o.schedule + " (or pplab plan -o) and pass it as --plan");
    }
    s = Lower(Generate(o.schedule, {o.ranks, o.microbatches, o.virtual_stages}));
  } else {
    s = LoadScheduleFile(o.plan_file);
    // Checked as written before it is lowered (the check below sees the
    // lowered plan with its REDUCE_GRADs), so that a problem names the
    // file's own actions.
    if (const ValidationReport report = ValidateFromFile(s); !report.ok()) {
      throw Error(o.plan_file + ": invalid schedule: " + report.problems.front().message);
    }
    // pplab has no FSDP: each rank holds its stages' parameters whole, and
    // UNSHARD/RESHARD have nothing to gather or free (PyTorch skips them
    // too for a stage that is not FSDP-wrapped).
    const int fsdp = DropFsdpActions(s);
    if (dropped_fsdp != nullptr) *dropped_fsdp = fsdp;
  }
  // A plan of several pipelines (DualPipe) trains one copy of the model per
  // pipeline; the copies must be whole and apart.
  if (const std::string why = WhyNotOneModel(s); !why.empty()) throw Error("train: " + why);
  bool has_reduce = false;
  for (const Program& p : s.programs) {
    for (const Action& a : p) has_reduce = has_reduce || a.kind == ActionKind::kReduceGrad;
  }
  const bool add_reduce = o.dp > 1 && !has_reduce;
  if (add_reduce) s = AddReduceGrad(s);
  if (o.dp > 1) {
    if (const std::string why = MissingReduceGrad(s); !why.empty()) {
      throw Error("--plan " + o.plan_file + ": --dp " + std::to_string(o.dp) +
                  " needs a REDUCE_GRAD for every stage, but " + why + " (a plan with none gets them added)");
    }
  }
  // A file was checked above; again only where REDUCE_GRADs went in.
  if (!o.plan_file.empty() && !add_reduce) return s;
  const ValidationReport report = Validate(s);
  if (!report.ok()) {
    throw Error((o.plan_file.empty() ? o.schedule : o.plan_file) +
                ": invalid schedule: " + report.problems.front().message);
  }
  return s;
}

const std::vector<std::string> kPlannedFlags = {
    "model",     "partition", "batch_size",      "seq_len",   "dp",          "tp",    "sequence_parallel",
    "recompute", "attention", "shard_optimizer", "precision", "cuda_graphs", "device"};

std::string PlannedFlag(const std::string& key) {
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::vector<std::string> ApplyPlannedFlags(TrainOptions& o) {
  if (o.plan_file.empty()) return {};
  // Only "planned" is wanted: the programs' action strings are dropped as
  // they are read (held as JSON, a large plan's would take ~40x its text).
  const JsonValueFilter no_programs = [](int depth, const std::string& top_key, nlohmann::json&) {
    return top_key != "programs" || depth < 2;
  };
  nlohmann::json doc;
  try {
    std::ifstream in = OpenInputFile(o.plan_file);
    doc = ParseJsonStrict(in, o.plan_file, no_programs);
  } catch (const Error&) {
    return {};  // a CSV plan, or one LoadPlan refuses with its own line
  }
  if (!doc.is_object() || !doc.contains("planned") || !doc["planned"].is_object()) return {};
  std::vector<std::string> notes;
  for (const auto& [key, value] : doc["planned"].items()) {
    const std::string at = "--plan " + o.plan_file + ": planned." + key;
    const std::string flag = PlannedFlag(key);
    const bool given = o.given_flags.count(key) > 0;
    // One flag: checks the planned value's type, then takes it or notes the
    // given one that differs.
    const auto take = [&](auto& field) {
      using T = std::decay_t<decltype(field)>;
      T planned{};
      if constexpr (std::is_same_v<T, bool>) {
        if (!value.is_boolean()) throw Error(at + " must be true or false, got " + value.dump());
        planned = value.get<bool>();
      } else if constexpr (std::is_same_v<T, int>) {
        if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > (1 << 30)) {
          throw Error(at + " must be a positive integer, got " + value.dump());
        }
        planned = value.get<int>();
      } else {
        if (!value.is_string()) throw Error(at + " must be a string, got " + value.dump());
        planned = value.get<std::string>();
      }
      if (!given) {
        field = planned;
      } else if (field != planned) {
        const auto text = [&](const T& v) {
          if constexpr (std::is_same_v<T, bool>) {
            return std::string(v ? "on" : "off");
          } else if constexpr (std::is_same_v<T, int>) {
            return std::to_string(v);
          } else {
            return v;
          }
        };
        notes.push_back("--plan " + o.plan_file + " was planned with " + flag + " " + text(planned) +
                        "; this run takes " + flag + " " + text(field) + ", as given");
      }
    };
    if (key == "model") {
      take(o.model);
      // A path the plan was made beside may not be there from here.
      if (!given) {
        try {
          LoadLlamaConfig(o.model);
        } catch (const Error& e) {
          throw Error(at + " (--model " + o.model + "): " + e.what());
        }
      }
    } else if (key == "partition") {
      take(o.partition);
    } else if (key == "batch_size") {
      take(o.batch_size);
    } else if (key == "seq_len") {
      take(o.seq_len);
    } else if (key == "dp") {
      take(o.dp);
    } else if (key == "tp") {
      take(o.tp);
    } else if (key == "sequence_parallel") {
      take(o.sequence_parallel);
    } else if (key == "recompute") {
      take(o.recompute);
    } else if (key == "attention") {
      take(o.attention);
    } else if (key == "shard_optimizer") {
      take(o.shard_optimizer);
    } else if (key == "precision") {
      take(o.precision);
    } else if (key == "cuda_graphs") {
      take(o.cuda_graphs);
    } else if (key == "device") {
      take(o.device);
    } else {
      std::string known;
      for (const std::string& k : kPlannedFlags) known += (known.empty() ? "" : ", ") + k;
      throw Error(at + " is not a train flag a plan records (those are " + known + ")");
    }
  }
  // A planned switch that the given sizes leave without a use goes with
  // them (there is no flag to turn it off): the plan's --shard-optimizer
  // under a given --dp 1, its --sequence-parallel under a given --tp 1.
  const auto drop = [&](bool& field, const char* key, const char* size_key, int size, const char* needs) {
    if (!field || o.given_flags.count(key) > 0 || o.given_flags.count(size_key) == 0 || size > 1) return;
    field = false;
    notes.push_back("--plan " + o.plan_file + " was planned with " + PlannedFlag(key) + ", which needs " + needs +
                    "; this run takes " + PlannedFlag(size_key) + " " + std::to_string(size) + " without it");
  };
  drop(o.shard_optimizer, "shard_optimizer", "dp", o.dp, "--dp 2 or more");
  drop(o.sequence_parallel, "sequence_parallel", "tp", o.tp, "--tp 2 or more");
  return notes;
}

TrainOptions WithDefaults(TrainOptions o) {
  if (o.tokenizer.empty() && !o.synthetic && !o.init_from.empty()) o.tokenizer = FolderTokenizer(o.init_from);
  if (o.out_dir.empty()) return o;
  const fs::path out(o.out_dir);
  if (o.metrics_path.empty()) o.metrics_path = (out / "metrics.jsonl").string();
  if (o.checkpoint_dir.empty()) o.checkpoint_dir = (out / "checkpoints").string();
  if (o.trace_path.empty()) o.trace_path = (out / "trace-measured.json").string();
  if (o.sim_trace_path.empty()) o.sim_trace_path = (out / "trace-simulated.json").string();
  return o;
}

TextSource TextSourceOf(const TrainOptions& o, const LlamaConfig& config) {
  TextSource source;
  source.paths = o.data;
  if (source.paths.empty()) {
    if (!fs::is_directory(DefaultCorpusDir())) {
      throw Error("no --data given and the default corpus " + DefaultCorpusDir() +
                  " is missing (apt-get install fortunes fortunes-min, or pass --data FILE...)");
    }
    source.paths = {DefaultCorpusDir()};
  }
  source.tokenizer = o.tokenizer;
  source.vocab_size = o.vocab_size > 0 ? o.vocab_size : config.vocab_size;
  source.cache_dir = o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir;
  return source;
}

TextDataOptions TextDataOf(const TrainOptions& o) {
  TextDataOptions d;
  d.seq_len = o.seq_len;
  d.packed = o.packed;
  d.val_fraction = o.val_fraction;
  d.seed = o.seed;
  return d;
}

}  // namespace pplab::cli
