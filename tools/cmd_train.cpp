// pplab train: run a plan for real. Without RANK/WORLD_SIZE in the
// environment it launches one worker per rank on this machine (or trains in
// this process with --ranks 1); with them (torchrun --no-python, Slurm) it is
// one of those workers.
#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/flops.h"
#include "models/llama.h"
#include "runtime/data/corpus.h"
#include "runtime/data/fnv.h"
#include "runtime/exec/device_info.h"
#include "runtime/train/mfu.h"
#include "runtime/data/text_dataset.h"
#include "runtime/data/text_prepare.h"
#include "runtime/data/token_cache.h"
#include "runtime/data/tokenizer.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/train/batches.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/launcher.h"
#include "runtime/train/model_copies.h"
#include "runtime/train/threads.h"
#include "runtime/train/trainer.h"
#include "runtime/train/worker_setup.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "sim/measured_costs.h"
#include "sim/precision.h"
#include "sim/simulator.h"
#include "tools/cli_main.h"
#include "tools/commands.h"
#include "tools/progress.h"
#include "traces/chrome_trace.h"
#include "traces/explain.h"
#include "traces/render_svg.h"

namespace fs = std::filesystem;

namespace pplab::cli {
namespace {

// The defaults are the main job: the small preset on the default corpus,
// 2 ranks of 1F1B, a few minutes on two CPU cores.
struct TrainOptions {
  std::string schedule = "1f1b";
  std::string plan_file;
  int ranks = 2;
  int dp = 1;
  int microbatches = 8;
  int virtual_stages = 0;
  std::string model = "small";
  std::string partition = "uniform";
  int batch_size = 16;
  int seq_len = 128;
  int steps = 300;
  uint64_t seed = 1;
  double lr = 1e-3;
  int warmup_steps = 30;
  double clip_norm = 1.0;
  bool no_flat_params = false;
  // Data: text files (default corpus when empty) or synthetic tokens.
  std::vector<std::string> data;
  bool synthetic = false;
  std::string tokenizer;
  int vocab_size = 0;  // 0: the model's
  bool packed = false;
  double val_fraction = 0.05;
  std::string cache_dir;
  int eval_every = 50;
  int eval_batches = 4;
  // Outputs: everything not given goes into out_dir (none when it is "").
  std::string out_dir = "pplab-run";
  std::string metrics_path;
  int nproc = 0;
  double comm_timeout_s = 60;
  std::string trace_path;
  std::string sim_trace_path;
  bool json = false;
  bool quiet = false;
  std::string kill_rank_at;  // "RANK:STEP", a testing aid
  int nan_at = -1;           // a testing aid: that step's loss is NaN
  std::string dump_grads_dir;
  std::string device = "cpu";
  std::string backend = "auto";
  std::string precision = "fp32";
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  bool resume = false;
  bool overwrite = false;
  // Which of the flags a --plan fixes were given (they must agree with it).
  bool given_schedule = false, given_ranks = false, given_microbatches = false, given_virtual = false;
  bool oversubscribe = false;
  bool measure_memory = false;
  std::string attention = "auto";
  double peak_tflops = 0;  // 0: the device's from the table in runtime/train/mfu.h
  std::vector<std::string> raw_args;
};

WorkerOptions WorkerOptionsOf(const TrainOptions& o, int pipeline_ranks) {
  WorkerOptions w;
  w.pipeline_ranks = pipeline_ranks;
  w.dp = o.dp;
  w.device = o.device;
  w.backend = o.backend;
  w.precision = o.precision;
  w.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000));
  return w;
}

// A plan of several pipelines (DualPipe) trains one copy of the model per
// pipeline; the copies must be whole and apart (see WhyNotOneModel).
Schedule OneModel(Schedule s) {
  if (const std::string why = WhyNotOneModel(s); !why.empty()) throw Error("train: " + why);
  return s;
}

// The plan as the workers run it: lowered, one model, and with data
// parallelism a REDUCE_GRAD after each stage's last B or W (unless the plan
// has its own).
Schedule LoadPlan(const TrainOptions& o) {
  Schedule s;
  if (o.plan_file.empty()) {
    s = Lower(Generate(o.schedule, {o.ranks, o.microbatches, o.virtual_stages}));
  } else {
    s = LoadScheduleFile(o.plan_file);
    if (!s.HasComm() && s.ranks > 1) s = Lower(s);
  }
  s = OneModel(std::move(s));
  bool has_reduce = false;
  for (const Program& p : s.programs) {
    for (const Action& a : p) has_reduce = has_reduce || a.kind == ActionKind::kReduceGrad;
  }
  if (o.dp > 1 && !has_reduce) s = AddReduceGrad(s);
  const ValidationReport report = Validate(s);
  if (!report.ok()) {
    throw Error((o.plan_file.empty() ? o.schedule : o.plan_file) +
                ": invalid schedule: " + report.problems.front().message);
  }
  return s;
}

// Fills in the output paths not given: everything goes into --out, unless
// that is "".
TrainOptions WithOutputs(TrainOptions o) {
  if (o.out_dir.empty()) return o;
  const fs::path out(o.out_dir);
  if (o.metrics_path.empty()) o.metrics_path = (out / "metrics.jsonl").string();
  if (o.checkpoint_dir.empty()) o.checkpoint_dir = (out / "checkpoints").string();
  if (o.trace_path.empty()) o.trace_path = (out / "trace-measured.json").string();
  if (o.sim_trace_path.empty()) o.sim_trace_path = (out / "trace-simulated.json").string();
  return o;
}

TextSource SourceOf(const TrainOptions& o, const LlamaConfig& config) {
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

// A run's text: the tokenizer, the mapped token cache and the samples.
struct RunText {
  PreparedText prepared;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<TokenCache> cache;
  std::unique_ptr<TextDataset> dataset;
};

// The launcher prepares the text once and hands its workers the result in
// this variable, so that they do not read and fingerprint the corpus again.
constexpr char kPreparedTextEnv[] = "PPLAB_PREPARED_TEXT";

std::string PreparedTextEnv(const PreparedText& p) {
  const nlohmann::json j = {{"tokenizer_path", p.tokenizer_path},
                            {"cache_path", p.cache_path},
                            {"corpus", FnvHex(p.corpus_fingerprint)},
                            {"tokenizer", FnvHex(p.tokenizer_fingerprint)},
                            {"documents", p.documents},
                            {"tokens", p.tokens}};
  return std::string(kPreparedTextEnv) + "=" + j.dump();
}

std::optional<PreparedText> PreparedTextFromEnv() {
  const char* text = std::getenv(kPreparedTextEnv);
  if (text == nullptr) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    PreparedText p;
    p.tokenizer_path = j.at("tokenizer_path").get<std::string>();
    p.cache_path = j.at("cache_path").get<std::string>();
    p.corpus_fingerprint = std::stoull(j.at("corpus").get<std::string>(), nullptr, 16);
    p.tokenizer_fingerprint = std::stoull(j.at("tokenizer").get<std::string>(), nullptr, 16);
    p.documents = j.at("documents").get<int64_t>();
    p.tokens = j.at("tokens").get<int64_t>();
    return p;
  } catch (const std::exception& e) {
    throw Error(std::string("environment variable ") + kPreparedTextEnv + " is malformed: " + e.what());
  }
}

// `prepared`: what the launcher already prepared, or null to prepare here
// (the launcher itself, or a worker started by torchrun or Slurm).
std::unique_ptr<RunText> OpenText(const TrainOptions& o, const LlamaConfig& config,
                                  const std::function<void(const std::string&)>& log,
                                  const std::optional<PreparedText>& prepared = std::nullopt) {
  auto text = std::make_unique<RunText>();
  text->prepared = prepared ? *prepared : PrepareText(SourceOf(o, config), log);
  text->tokenizer.emplace(Tokenizer::Load(text->prepared.tokenizer_path));
  text->cache = std::make_unique<TokenCache>(text->prepared.cache_path, text->prepared.corpus_fingerprint,
                                             text->prepared.tokenizer_fingerprint);
  text->cache->CheckIds(text->tokenizer->VocabSize());
  TextDataOptions d;
  d.seq_len = o.seq_len;
  d.packed = o.packed;
  d.val_fraction = o.val_fraction;
  d.seed = o.seed;
  d.bos = text->tokenizer->Bos();
  d.eos = text->tokenizer->Eos();
  d.pad = text->tokenizer->Pad();
  text->dataset = std::make_unique<TextDataset>(*text->cache, d);
  return text;
}

// Appends one JSON object per line to the metrics file.
class MetricsFile {
 public:
  // `resumed_at` >= 0: a resumed run; the lines of steps after it (written
  // by the interrupted run past its last checkpoint) are dropped first, so
  // the file holds each step once, in order.
  MetricsFile(const std::string& path, int resumed_at) : path_(path) {
    if (path.empty()) return;
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (resumed_at >= 0 && fs::exists(path, ec)) TruncateAfter(resumed_at);
    file_ = std::fopen(path.c_str(), "a");
    if (file_ == nullptr) throw Error("--metrics " + path + ": cannot open for appending: " + std::strerror(errno));
  }
  ~MetricsFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  void TruncateAfter(int step) {
    const std::string text = ReadTextFile(path_);
    std::string kept;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      start = end + 1;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step) {
        continue;
      }
      if (!line.empty()) kept += line + "\n";
    }
    if (kept != text) WriteTextFile(path_, kept);
  }
  void Write(const nlohmann::json& record) {
    if (file_ == nullptr) return;
    const std::string line = record.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
      throw Error("--metrics " + path_ + ": write failed: " + std::strerror(errno));
    }
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

// What a resumed run must share with the run that wrote the checkpoint for
// its data and weights to continue exactly; plan, K, D and partition may
// change (parameters and optimizer state are stored by name). `config` has
// the tokenizer's vocabulary; `text` is null for synthetic data.
nlohmann::json MustMatch(const TrainOptions& o, const LlamaConfig& config, const PreparedText* text) {
  nlohmann::json must_match = {{"model", nlohmann::json::parse(config.ToJson())},
                               {"seed", o.seed},
                               {"batch_size", o.batch_size},
                               {"seq_len", o.seq_len}};
  if (text != nullptr) {
    must_match["tokenizer"] = FnvHex(text->tokenizer_fingerprint);
    must_match["corpus"] = FnvHex(text->corpus_fingerprint);
    must_match["packed"] = o.packed;
  } else {
    must_match["data"] = "synthetic";
  }
  return must_match;
}

// Refuses a checkpoint whose manifest differs from `must_match`, naming the field.
void CheckResumable(const TrainOptions& o, const nlohmann::json& must_match, const nlohmann::json& found) {
  for (const auto& [key, value] : must_match.items()) {
    if (!found.contains(key) || found[key] != value) {
      throw Error("--resume: the checkpoint in " + o.checkpoint_dir + " was taken with " + key + " " +
                  (found.contains(key) ? found[key].dump() : std::string("(none)")) + ", this run has " +
                  value.dump());
    }
  }
}

// A resume may change the precision: the checkpoint holds fp32 weights and
// AdamW moments in either, so it continues exactly as far as its state goes;
// only the arithmetic of the steps to come changes. Returns the line that
// says so ("" when the precision is the same). A checkpoint without the
// field was written before precisions existed, in fp32.
std::string PrecisionChangeNote(const TrainOptions& o, const nlohmann::json& found) {
  const std::string was = found.contains("precision") && found["precision"].is_string()
                              ? found["precision"].get<std::string>()
                              : std::string("fp32");
  const std::string now = PrecisionName(ParsePrecision(o.precision));
  if (was == now) return "";
  return "the checkpoint in " + o.checkpoint_dir + " was trained in " + was + "; this run continues it in " + now +
         " (weights and AdamW state are fp32 in both)";
}

// The model FLOPs of a step and the peak they are measured against (MFU).
struct StepFlops {
  std::vector<double> per_rank;  // each pipeline rank of one replica (models/flops.h)
  double world = 0;              // all ranks of all replicas
  PeakFlops peak;
  // MFU of each pipeline rank for a step of `seconds`; empty when no peak is known.
  std::vector<double> Mfu(double seconds) const {
    std::vector<double> out;
    if (peak.tflops <= 0) return out;
    for (double f : per_rank) out.push_back(pplab::Mfu(f, seconds, peak.tflops));
    return out;
  }
};

// `precision`: what the matmuls run in ("fp32" or "bf16", from --precision).
// fp32 on a GPU whose cuBLAS may use TF32 is "tf32".
StepFlops FlopsOf(const TrainOptions& o, const LlamaConfig& config, const Partition& partition,
                  const Schedule& schedule, const c10::Device& device, const std::string& precision = "fp32") {
  StepFlops f;
  // Stage s runs model part ModelStage(s) on the microbatches of its
  // pipeline (all of them, or half in each of dualpipe's two copies).
  f.per_rank.assign(schedule.ranks, 0.0);
  const double sequences = static_cast<double>(o.batch_size / o.dp);
  for (StageId s = 0; s < schedule.stages; ++s) {
    const double share = static_cast<double>(schedule.MicrobatchesThrough(s)) / schedule.microbatches;
    f.per_rank[schedule.placement[s]] +=
        sequences * share * StageTrainingFlops(config, partition, schedule.ModelStage(s), o.seq_len);
  }
  for (double x : f.per_rank) f.world += x * o.dp;
  f.peak = ResolvePeak(DeviceName(device), precision == "fp32" ? Fp32MatmulPrecision(device) : precision,
                       o.peak_tflops);
  return f;
}

// One worker's run once it has joined the others. `prepared`: the text the
// caller prepared, if any (else from the launcher's environment, else
// prepared here).
int TrainWorker(const TrainOptions& o, const Schedule& schedule, Worker& worker,
                const std::optional<PreparedText>& prepared) {
  const RankId world_rank = worker.world_rank;
  const int K = schedule.ranks;
  const int replica = worker.replica;
  const RankId rank = worker.rank;  // pipeline rank within the replica
  const c10::Device device = worker.device;
  // Which pipeline ranks share a device: the first replica's (world ranks
  // 0..K-1), as the traces hold.
  const std::vector<RankDevice> everywhere =
      WorldRankDevices(worker, std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000)));
  const DeviceMap device_map = MapRankDevices(std::vector<RankDevice>(everywhere.begin(), everywhere.begin() + K));
  LlamaConfig config = LoadLlamaConfig(o.model);
  std::unique_ptr<RunText> text;
  if (!o.synthetic) {
    text = OpenText(o, config, nullptr, prepared ? prepared : PreparedTextFromEnv());
    config.vocab_size = text->tokenizer->VocabSize();  // the model predicts the tokenizer's pieces
  }
  // The model is cut into ModelStages() parts; a plan of P pipelines holds P
  // copies, stage s running part ModelStage(s).
  const Partition partition = MakePartition(config, schedule.ModelStages(), o.partition);
  LlamaOptions llama;
  llama.attention = ResolveAttention(ParseAttentionKind(o.attention));
  llama.padding = !o.synthetic;  // synthetic tokens are never padding (SyntheticBatch)
  const StepFlops flops = FlopsOf(o, config, partition, schedule, device, PrecisionName(ParsePrecision(o.precision)));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout_s * 1000));
  TrainerOptions options;
  options.steps = o.steps;
  options.lr = o.lr;
  options.warmup_steps = o.warmup_steps;
  options.clip_norm = o.clip_norm;
  options.flat_parameters = !o.no_flat_params;
  options.dp_group = worker.dp_group.get();
  options.clock = worker.clock.get();
  options.dp_size = o.dp;
  options.checkpoint_dir = o.checkpoint_dir;
  options.checkpoint_every = o.checkpoint_every;
  options.resume = o.resume;
  options.eval_every = o.eval_every;
  const nlohmann::json must_match = MustMatch(o, config, text != nullptr ? &text->prepared : nullptr);
  nlohmann::json manifest = must_match;
  manifest["schedule"] = schedule.name;
  manifest["ranks"] = K;
  manifest["dp"] = o.dp;
  manifest["partition"] = partition.ToString();
  // Not a field a resume must match: weights and AdamW state are fp32 in
  // both precisions, so a checkpoint continues in either (the launcher says so).
  manifest["precision"] = PrecisionName(worker.precision);
  int64_t parameter_elements = 0;
  for (int s = 0; s < partition.NumStages(); ++s) parameter_elements += StageParams(config, partition, s);
  manifest["parameter_elements"] = parameter_elements;
  // The LR schedule is a function of the step and these; training draws no
  // random numbers beyond the seed (weights from (seed, name), the data
  // order from (seed, epoch), no dropout), so the seed and the data position
  // are the whole random state.
  manifest["lr_schedule"] = {{"lr", o.lr},
                             {"warmup_steps", o.warmup_steps},
                             {"total_steps", o.steps},
                             {"kind", "linear warm-up, cosine to 0"}};
  manifest["rng"] = {{"seed", o.seed}, {"stateful_generators", 0}};
  options.manifest_json = manifest.dump();
  options.run_id = worker.run_id;
  // The data position: samples consumed. It is step x batch size from the
  // start, plus what a resumed checkpoint recorded beyond that.
  const int64_t G = o.batch_size;
  int64_t data_offset = 0;
  if (text != nullptr) {
    const std::string tokenizer_file = "tokenizer-" + FnvHex(text->prepared.tokenizer_fingerprint) + ".model";
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
  int resumed_at = o.resume ? 0 : -1;  // no checkpoint to resume: the run starts over, so do its metrics
  options.check_resume = [must_match, &o, &data_offset, &resumed_at, G](const std::string& found_text) {
    const nlohmann::json found = nlohmann::json::parse(found_text);
    CheckResumable(o, must_match, found);
    resumed_at = found.at("step").get<int>();
    if (found.contains("data_position")) {
      data_offset = found["data_position"].at("samples_consumed").get<int64_t>() - found.at("step").get<int64_t>() * G;
    }
  };
  options.comm_timeout = timeout;
  if (o.measure_memory) {
    options.memory = &MemoryMeter::For(device);
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
    options.after_last_step = [&o, &schedule](const std::map<StageId, Stage*>& stages) {
      for (const auto& [s, stage] : stages) {
        if (schedule.PipelineOf(s) != 0) continue;  // the other copies hold the same gradients
        for (auto& [name, p] : stage->NamedParameters()) {
          const std::string path = o.dump_grads_dir + "/" + name + ".pt";
          try {
            // A clone: the gradient is a view into its stage's flat buffer,
            // which torch::save would write whole.
            torch::save(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p), path);
          } catch (const std::exception& e) {
            throw Error("--dump-grads: cannot write " + path);
          }
        }
      }
    };
  }
  const int V = config.vocab_size;
  const int M = schedule.microbatches;
  const int32_t pad = text != nullptr ? text->tokenizer->Pad() : 0;
  auto to_device = [&device](StepBatch b) {
    for (MicrobatchData& m : b.microbatches) {
      for (at::Tensor& t : m.inputs) t = t.to(device);
      m.targets = m.targets.to(device);
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
                          o.batch_size, o.seq_len, M, replica, o.dp, pad)));
      }
      return out;
    };
  }
  // Rank 0 reports: progress, metrics.
  const bool reporter = world_rank == 0;
  std::unique_ptr<MetricsFile> metrics;  // opened once the resume point is known
  std::unique_ptr<Progress> progress;
  const auto run_start = std::chrono::steady_clock::now();
  int first_done = -1;
  if (reporter) {
    options.on_step_end = [&](const StepReport& r) {
      const int done = r.step + 1;
      if (metrics == nullptr) metrics = std::make_unique<MetricsFile>(o.metrics_path, resumed_at);
      if (first_done < 0) first_done = r.step;
      if (progress == nullptr) {
        const bool quiet = o.quiet || (o.json && !isatty(fileno(stderr)));
        progress = std::make_unique<Progress>(r.step, o.steps, quiet ? nullptr : stderr, isatty(fileno(stderr)));
      }
      const double tokens = static_cast<double>(G) * o.seq_len;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
      ProgressLine line;
      line.done = done;
      line.loss = r.loss;
      line.lr = r.lr;
      line.tokens_per_s = r.step_ms > 0 ? tokens / (r.step_ms / 1000) : 0;
      line.bubble = r.bubble;
      line.val_loss = r.val_loss;
      line.seconds_left = elapsed / (done - first_done) * (o.steps - done);
      line.mfu = flops.Mfu(r.step_ms / 1000);
      progress->Update(line);
      nlohmann::json record = {{"step", done},         {"loss", r.loss},
                               {"lr", r.lr},           {"grad_norm", r.grad_norm},
                               {"step_ms", r.step_ms}, {"tokens_per_s", line.tokens_per_s},
                               {"bubble", r.bubble}};
      if (r.val_loss >= 0) record["val_loss"] = r.val_loss;
      if (!line.mfu.empty()) record["mfu_per_rank"] = line.mfu;
      if (text != nullptr) record["epoch"] = text->dataset->EpochOf(data_offset + done * G).first;
      metrics->Write(record);
    };
  }
  const TrainSummary summary = Train(
      schedule, rank, *worker.transport, worker.group.get(),
      [&](StageId s) {
        return WorkerStage(worker, BuildLlamaStage(config, partition, schedule.ModelStage(s), o.seed, device, llama));
      },
      [&](int step) {
        StepBatch b =
            text != nullptr
                ? BatchFromRows(
                      [&](int64_t row, int32_t* ids) { text->dataset->TrainSample(data_offset + step * G + row, ids); },
                      o.batch_size, o.seq_len, M, replica, o.dp, pad)
                : SyntheticBatch(o.seed, step, o.batch_size, o.seq_len, V, M, replica, o.dp);
        if (step == o.nan_at) b.loss_scale = std::nan("");
        return to_device(std::move(b));
      },
      [pad](const TensorList& outputs, const at::Tensor& targets) {
        return TokenCrossEntropySum(outputs.at(0), targets, /*ignore_index=*/pad);
      },
      options);
  if (world_rank != 0) return 0;
  if (progress != nullptr) progress->Finish();
  if (summary.losses.empty()) {
    std::printf("nothing to do: the checkpoint in %s is at step %d, and --steps is %d\n", o.checkpoint_dir.c_str(),
                summary.first_step, o.steps);
    std::fflush(stdout);
    return 0;
  }
  // The measured last step, and the same plan simulated with the compute
  // costs measured in it: the gaps between the two are communication and
  // executor overhead (see docs/fidelity.md).
  std::string svg_path;
  // Both traces record the devices the ranks used (docs/trace-format.md).
  Timeline measured = summary.last_step;
  measured.devices = device_map.devices;
  measured.device_slots = device_map.device_slots;
  if (!o.trace_path.empty()) WriteTextFile(o.trace_path, TimelineToChromeTrace(measured));
  if (!o.sim_trace_path.empty()) {
    CostModel costs = MeasuredCostModel(measured, o.trace_path.empty() ? "the measured step" : o.trace_path);
    costs.SetDevices(device_map.devices);
    costs.SetDeviceSlots(device_map.device_slots);
    SimResult predicted = Simulate(schedule, costs);
    predicted.timeline.name = schedule.name;
    WriteTextFile(o.sim_trace_path, TimelineToChromeTrace(predicted.timeline));
    if (!o.out_dir.empty()) {
      svg_path = (fs::path(o.out_dir) / "timeline.svg").string();
      SvgOptions svg;
      svg.title = schedule.name + "  K=" + std::to_string(K) + "  M=" + std::to_string(M) +
                  ": simulated (measured compute costs) above measured";
      WriteTextFile(svg_path, RenderSvgStack({&predicted.timeline, &measured}, svg));
    }
  }
  const double tokens = static_cast<double>(G) * o.seq_len;
  double total_ms = 0;
  for (double ms : summary.step_times_ms) total_ms += ms;
  const double tokens_per_s = total_ms > 0 ? tokens * summary.step_times_ms.size() / (total_ms / 1000) : 0;
  if (o.json) {
    nlohmann::json val = nlohmann::json::array();
    for (const auto& [step, loss] : summary.val_losses) val.push_back({{"step", step}, {"loss", loss}});
    const nlohmann::json j = {{"schedule", schedule.name},
                              {"ranks", schedule.ranks},
                              {"dp", o.dp},
                              {"microbatches", schedule.microbatches},
                              {"steps", o.steps},
                              {"model", o.model},
                              {"vocab_size", config.vocab_size},
                              {"data", text != nullptr ? "text" : "synthetic"},
                              {"partition", partition.ToString()},
                              {"losses", summary.losses},
                              {"val_losses", val},
                              {"step_times_ms", summary.step_times_ms},
                              {"step_clock_ms", summary.step_clock_ms},
                              {"host_issue_ms", summary.host_issue_ms},
                              {"device_lag_ms", summary.device_lag_ms},
                              {"device", device.str()},
                              {"backend", BackendName(worker.backend)},
                              {"precision", PrecisionName(worker.precision)},
                              {"clock", worker.clock->Name()},
                              {"tokens_per_s", tokens_per_s},
                              {"bubbles", summary.bubbles},
                              {"first_step", summary.first_step},
                              {"checkpoint_save_ms", summary.checkpoint_save_ms},
                              {"checkpoint_load_ms", summary.checkpoint_load_ms},
                              {"lrs", summary.lrs},
                              {"grad_norms", summary.grad_norms}};
    nlohmann::json out = j;
    if (o.measure_memory) out["measured_peak_activation_bytes"] = summary.peak_activation_bytes;
    // Executor overhead of the last step, per rank: the idle time in which
    // the data was there and the device free (explain's "other"), over the
    // step's makespan. Issue 10's target is under 2 % on a GPU.
    if (CanExplainIdle(measured)) {
      const IdleExplanation idle = ExplainIdle(measured);
      nlohmann::json overhead = nlohmann::json::array();
      for (const RankIdle& r : idle.per_rank) {
        overhead.push_back(idle.makespan > 0 ? static_cast<double>(r.other) / static_cast<double>(idle.makespan) : 0.0);
      }
      out["executor_overhead"] = overhead;
    }
    out["attention"] = AttentionKindName(llama.attention);
    // MFU over all steps, as tokens_per_s (models/flops.h for the FLOPs).
    out["model_flops_per_step"] = flops.world;
    out["model_flops_per_rank"] = flops.per_rank;
    out["device_name"] = DeviceName(device);
    out["peak_tflops"] = flops.peak.tflops > 0 ? nlohmann::json(flops.peak.tflops) : nlohmann::json(nullptr);
    out["peak_source"] = flops.peak.source;
    const std::vector<double> mfu = flops.Mfu(total_ms / 1000 / std::max<size_t>(1, summary.step_times_ms.size()));
    double mfu_sum = 0;
    for (double m : mfu) mfu_sum += m;
    out["mfu_per_rank"] = mfu.empty() ? nlohmann::json(nullptr) : nlohmann::json(mfu);
    out["mfu"] = mfu.empty() ? nlohmann::json(nullptr) : nlohmann::json(mfu_sum / mfu.size());
    std::printf("%s\n", out.dump().c_str());
  } else {
    if (!summary.losses.empty()) {
      std::printf("trained steps %d..%d of %s: loss %.4f -> %.4f", summary.first_step + 1, o.steps,
                  schedule.name.c_str(), summary.losses.front(), summary.losses.back());
      if (!summary.val_losses.empty()) std::printf(", validation loss %.4f", summary.val_losses.back().second);
      std::printf(", %.0f tokens/s", tokens_per_s);
      const std::string mfu = MfuText(flops.Mfu(total_ms / 1000 / std::max<size_t>(1, summary.step_times_ms.size())));
      std::printf("%s\n", mfu.empty() ? "" : (", " + mfu).c_str());
    }
    if (!o.checkpoint_dir.empty()) std::printf("checkpoint: %s\n", o.checkpoint_dir.c_str());
    if (!o.metrics_path.empty()) std::printf("metrics: %s\n", o.metrics_path.c_str());
    if (!o.trace_path.empty()) std::printf("measured trace of the last step: %s\n", o.trace_path.c_str());
    if (!o.sim_trace_path.empty()) std::printf("simulated trace of the same plan: %s\n", o.sim_trace_path.c_str());
    if (!svg_path.empty()) std::printf("both, stacked: %s\n", svg_path.c_str());
    if (text != nullptr && !o.checkpoint_dir.empty()) {
      std::printf("sample from it: %s generate --checkpoint %s --prompt \"The meaning of life\"\n",
                  ProgramName().c_str(), o.checkpoint_dir.c_str());
    }
  }
  std::fflush(stdout);
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

// The run files in --out (those not given a path of their own): a run
// folder's, which a new run must not mix into. Files given by flag (e.g.
// --trace t.json) are the user's to overwrite, as with any -o.
std::vector<std::string> RunFolderFiles(const TrainOptions& given, const TrainOptions& o) {
  std::vector<std::string> files;
  if (o.out_dir.empty()) return files;
  if (given.metrics_path.empty()) files.push_back(o.metrics_path);
  if (given.trace_path.empty()) files.push_back(o.trace_path);
  if (given.sim_trace_path.empty()) files.push_back(o.sim_trace_path);
  files.push_back((fs::path(o.out_dir) / "timeline.svg").string());
  return files;
}

// A new run never mixes into an earlier one's run folder or checkpoints: it
// continues it (--resume), replaces it (--overwrite) or is refused.
void ClaimOutputs(const TrainOptions& given, const TrainOptions& o) {
  if (o.resume && o.overwrite) throw Error("--resume continues the run in the outputs, --overwrite replaces it: pick one");
  std::vector<std::string> found;
  std::error_code ec;
  const std::vector<std::string> files = RunFolderFiles(given, o);
  for (const std::string& path : files) {
    if (fs::exists(path, ec)) found.push_back(path);
  }
  if (!o.checkpoint_dir.empty() && HoldsCheckpoints(o.checkpoint_dir)) found.push_back(o.checkpoint_dir);
  if (found.empty() || o.resume) return;
  if (!o.overwrite) {
    const std::string where = o.out_dir.empty() ? "--checkpoint-dir " + o.checkpoint_dir : "--out " + o.out_dir;
    throw Error(where + " already holds a run (" + found.front() +
                "): pass --resume to continue it, --out NEW for another folder, or --overwrite to replace it");
  }
  for (const std::string& path : files) fs::remove(path, ec);
  if (!o.checkpoint_dir.empty()) RemoveCheckpoints(o.checkpoint_dir);
}

// Local processes this machine can run: refuses more than 4 per core, or
// more than the memory they would need (weights, gradients and AdamW
// moments, 16 bytes a parameter, plus about 300 MB of LibTorch per process),
// unless --oversubscribe.
// `copies`: copies of the model the plan holds (2 for DualPipe).
void CheckLocalCapacity(const TrainOptions& o, int nproc, const LlamaConfig& config, const Partition& partition,
                        int copies) {
  if (o.oversubscribe || nproc <= 1) return;
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  if (nproc > 4 * cores) {
    throw Error(std::to_string(nproc) + " local worker processes on " + std::to_string(cores) +
                " cores (at most 4 per core): use fewer ranks, start them on several nodes (torchrun), or pass "
                "--oversubscribe");
  }
  double params = 0;
  for (int s = 0; s < partition.NumStages(); ++s) params += static_cast<double>(StageParams(config, partition, s));
  const double need = params * 16 * o.dp * copies + nproc * 300e6;
  double available = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char key[64];
    double kb = 0;
    while (std::fscanf(f, "%63s %lf kB", key, &kb) == 2) {
      if (std::string(key) == "MemAvailable:") available = kb * 1024;
    }
    std::fclose(f);
  }
  if (available > 0 && need > available) {
    throw Error(std::to_string(nproc) + " local worker processes need about " + std::to_string(static_cast<int64_t>(need / 1e6)) +
                " MB (model state and LibTorch), this machine has " + std::to_string(static_cast<int64_t>(available / 1e6)) +
                " MB available: use fewer ranks or a smaller model, or pass --oversubscribe");
  }
}

int RunTrain(const TrainOptions& given) {
  const TrainOptions o = WithOutputs(given);
  if (IsWorker()) return RunAsWorker([&o](RankId rank, int world) { return RunWorker(o, rank, world); });
  // Fail here, once, with one line, before any worker starts: the plan, the
  // model against it, the batch, the device, the machine's capacity, the
  // outputs and the checkpoint to resume.
  LlamaConfig config = LoadLlamaConfig(o.model);
  // K against the model's layers before a plan of K ranks is generated.
  if (o.plan_file.empty() && o.ranks > config.num_hidden_layers) MakePartition(config, o.ranks, "uniform");
  const Schedule schedule = LoadPlan(o);
  if (!o.plan_file.empty()) {
    // The plan fixes these; a flag that says otherwise is a mistake.
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
  const Partition partition = MakePartition(config, schedule.ModelStages(), o.partition);
  ResolveAttention(ParseAttentionKind(o.attention));  // sdpa on a LibTorch without it: refused here, once
  if (o.seq_len > config.max_position_embeddings) {
    throw Error("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's max_position_embeddings " +
                std::to_string(config.max_position_embeddings));
  }
  const int nproc = o.nproc > 0 ? o.nproc : o.dp * schedule.ranks;
  const std::string warning = CheckWorkerOptions(WorkerOptionsOf(o, schedule.ranks), nproc);
  SyntheticBatch(o.seed, 0, o.batch_size, 1, 2, schedule.microbatches, 0, o.dp);
  CheckLocalCapacity(o, nproc, config, partition, schedule.NumPipelines());
  ClaimOutputs(given, o);
  const std::string latest = o.checkpoint_dir.empty() ? std::string() : PrepareCheckpointDir(o.checkpoint_dir);
  if (!warning.empty() && !o.quiet) std::fprintf(stderr, "pplab: warning: %s\n", warning.c_str());
  std::optional<PreparedText> prepared;
  if (!o.synthetic) {
    // Build the tokenizer and token cache once, here, so the workers find them.
    const auto text = OpenText(o, config, [&o](const std::string& line) {
      if (!o.quiet) std::fprintf(stderr, "pplab: %s\n", line.c_str());
    });
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
    // its own must agree with it.
    std::error_code ec;
    if (fs::is_regular_file(o.model, ec)) {
      const nlohmann::json file = nlohmann::json::parse(ReadTextFile(o.model), nullptr, false);
      if (file.is_object() && file.contains("vocab_size") && file["vocab_size"] != text->tokenizer->VocabSize()) {
        throw Error("--model " + o.model + ": vocab_size " + file["vocab_size"].dump() + ", but the tokenizer " +
                    text->prepared.tokenizer_path + " has " + std::to_string(text->tokenizer->VocabSize()) +
                    " pieces (drop vocab_size from the file, or train a tokenizer with --vocab-size " +
                    file["vocab_size"].dump() + ")");
      }
    }
    config.vocab_size = text->tokenizer->VocabSize();
  }
  if (o.resume && !latest.empty()) {
    // The checkpoint's fields (not its shards, which the workers verify).
    const nlohmann::json found = nlohmann::json::parse(ReadManifest(latest));
    CheckResumable(o, MustMatch(o, config, prepared ? &*prepared : nullptr), found);
    const int step = found.at("step").get<int>();
    if (step > o.steps) {
      throw Error("--steps " + std::to_string(o.steps) + " is below the step of the checkpoint to resume (" + latest +
                  ", step " + std::to_string(step) + "): pass --steps above it to continue");
    }
    if (step == o.steps) {
      std::printf("nothing to do: the checkpoint in %s is at step %d, and --steps is %d\n", o.checkpoint_dir.c_str(),
                  step, o.steps);
      return 0;
    }
    const std::string note = PrecisionChangeNote(o, found);
    if (!note.empty() && !o.quiet) std::fprintf(stderr, "pplab: note: %s\n", note.c_str());
    if (found.contains("lr_schedule") && found["lr_schedule"].at("total_steps") != o.steps && !o.quiet) {
      std::fprintf(stderr,
                   "pplab: note: the learning-rate schedule was recorded for %s steps; it now decays over --steps "
                   "%d from step %d on\n",
                   found["lr_schedule"]["total_steps"].dump().c_str(), o.steps, step);
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
  CLI::Option* data = sub->add_option("--data", o->data,
                                      "UTF-8 text files or directories to train on (default: Debian's fortunes, " +
                                          DefaultCorpusDir() + ")")
                          ->expected(1, -1)
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* synthetic =
      sub->add_flag("--synthetic", o->synthetic, "train on random tokens instead of text (benchmarks, parity tests)")
          ->excludes(data);
  sub->add_option("--tokenizer", o->tokenizer, "a SentencePiece .model to use instead of training one")
      ->excludes(synthetic);
  sub->add_option("--vocab-size", o->vocab_size, "pieces of the BPE tokenizer to train (default: the model's)")
      ->check(CLI::Range(8, 1 << 20));
  sub->add_flag("--no-flat-params", o->no_flat_params,
                "keep each parameter and gradient apart instead of in one flat buffer per stage (the step's "
                "zeroing, norm, clipping, data-parallel sum and AdamW then go parameter by parameter)");
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
  sub->add_flag("--measure-memory", o->measure_memory,
                "count tensor memory (CPU: a counting allocator; CUDA: the caching allocator's statistics); --json reports each "
                "rank's peak activation bytes of the last step");
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
