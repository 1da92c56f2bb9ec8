// `pplab train`'s options, and what follows from them alone: the plan the
// workers run, the output paths, the worker's and the text's options.
// Shared by the files of the train command (cmd_train.cpp, train_*.cc).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "runtime/data/text_dataset.h"
#include "runtime/data/text_prepare.h"
#include "runtime/train/trainer.h"
#include "runtime/train/worker_setup.h"
#include "schedules/schedule.h"

namespace pplab::cli {

// The defaults are the main job: the small preset on the default corpus,
// 2 ranks of 1F1B, a few minutes on two CPU cores.
struct TrainOptions {
  std::string schedule = "1f1b";
  std::string plan_file;
  int ranks = 2;
  int dp = 1;
  int tp = 1;                      // tensor-parallel ranks T per pipeline rank (world = D x T x K)
  bool sequence_parallel = false;  // with T > 1: each tensor-parallel rank keeps 1 / T of the positions
  int microbatches = 8;
  int virtual_stages = 0;
  std::string model = "small";
  // A published model's weights to start from (a .safetensors file or the
  // model's folder); "" for the seed's.
  std::string init_from;
  std::string partition = "uniform";
  int batch_size = 16;
  int seq_len = 128;
  int steps = 300;
  uint64_t seed = 1;
  double lr = 1e-3;
  int warmup_steps = 30;
  double clip_norm = 1.0;
  bool no_flat_params = false;
  bool shard_optimizer = false;  // ZeRO-1 over the --dp replicas
  // Data: text files (default corpus when empty) or synthetic tokens.
  std::vector<std::string> data;
  bool synthetic = false;
  std::string tokenizer;
  int vocab_size = 0;  // 0: the model's
  bool packed = false;
  double val_fraction = 0.05;
  std::string cache_dir;
  int eval_every = 50;
  bool given_eval_every = false;  // --eval-every on the command line
  int eval_batches = 4;
  // Outputs: everything not given goes into out_dir (none when it is "").
  std::string out_dir = "pplab-run";
  std::string metrics_path;
  int nproc = 0;
  double comm_timeout_s = 60;
  std::string trace_path;
  std::string sim_trace_path;
  // A cost file (a profile, `plan --cost-out`) the plan is simulated with
  // for --sim-trace, the picture and the summary's prediction, instead of
  // the compute costs measured in the last step; "" for those.
  std::string sim_cost_path;
  bool json = false;
  bool quiet = false;
  std::string kill_rank_at;  // "RANK:STEP", a testing aid
  int nan_at = -1;           // a testing aid: that step's loss is NaN
  int nan_gradient_at = 0;   // a testing aid: that step's gradients are NaN, its loss finite
  std::string dump_grads_dir;
  std::string device = "cpu";
  std::string backend = "auto";
  std::string precision = "fp32";
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  bool resume = false;
  bool overwrite = false;
  // Which of the flags a --plan fixes were given (they must agree with it).
  bool given_eval_batches = false;
  bool given_schedule = false, given_ranks = false, given_microbatches = false, given_virtual = false;
  // Which of kPlannedFlags were given on the command line (the others take
  // a --plan file's planned values).
  std::set<std::string> given_flags;
  bool oversubscribe = false;
  bool measure_memory = false;
  bool cuda_graphs = false;  // each stage's F and B as CUDA graphs (runtime/exec/graphed_stage.h)
  std::string attention = "auto";
  std::string recompute = "none";  // stages whose activations are recomputed (sim/recompute.h)
  std::string warm_up = "auto";    // auto (on a CUDA device), on or off: ParseWarmUp
  double peak_tflops = 0;          // 0: the device's from the table in runtime/train/mfu.h
  std::vector<std::string> raw_args;
  // The flags as parsed, defaults included, one `name=value` line each in
  // the order train declares them (CLI11's config text): `--lr=5` and
  // `--lr 5`, flags in another order, or a default given or not, give the
  // same text. The ranks compare RanksFingerprint of it.
  std::string parsed_flags;
};

// --comm-timeout as a duration.
std::chrono::milliseconds CommTimeout(const TrainOptions& o);

// What the ranks of a run compare when they join (worker_setup.h): the
// flags as parsed, and the bytes of the files named that shape the run
// (`files`; "" entries and presets skipped): a --model config.json or a
// --plan of one name, in each rank's own folder, differed unseen, and the
// ranks then aborted in Gloo on messages of other sizes. Never 0.
uint64_t RanksFingerprint(const std::string& parsed_flags, const std::vector<std::string>& files);

WorkerOptions WorkerOptionsOf(const TrainOptions& o, int pipeline_ranks);

// --warm-up: whether the workers run each stage once before the first step
// ("auto": on a CUDA device). Another value is refused in one line.
bool ParseWarmUp(const std::string& value, const c10::Device& device);

// The trainer's options from the flags, `worker`'s groups and clock, and
// the model's tensor-parallel layout; the caller adds the callbacks (data
// position, reports, evaluation, aids).
TrainerOptions TrainerOptionsOf(const TrainOptions& o, const Worker& worker, const LlamaConfig& config);

// The plan as the workers run it: generated or read from --plan, lowered,
// one model (a plan of several pipelines must hold whole copies apart), and
// with data parallelism a REDUCE_GRAD after each stage's last B or W (unless
// the plan has its own); without UNSHARD/RESHARD, which pplab, having no
// FSDP, runs as PyTorch runs them for a stage that is not FSDP-wrapped: not
// at all (how many the file had goes in `dropped_fsdp`); validated. Throws
// pplab::Error naming the plan.
Schedule LoadPlan(const TrainOptions& o, int* dropped_fsdp = nullptr);

// The train flags a `pplab plan` file records (its field "planned", keyed by
// the flag's name without dashes and with '_' for '-').
extern const std::vector<std::string> kPlannedFlags;
// The flag of one of them: "shard_optimizer" -> "--shard-optimizer".
std::string PlannedFlag(const std::string& key);

// Takes the train flags of --plan's "planned" field (pplab plan writes them:
// the model, partition, batch, recompute, ... it costed) for each flag not
// in o.given_flags. Returns one note for each given flag whose value
// differs from the plan's (the given one stands). Nothing for a plan without
// the field or a file that is not JSON (LoadPlan reports that). Throws
// pplab::Error naming the file and the field for a planned value of the
// wrong type or an unknown flag.
std::vector<std::string> ApplyPlannedFlags(TrainOptions& o);

// `o` with what was not given filled in: the output paths (everything goes
// into --out, unless that is ""), and for text training from a model's
// folder (--init-from DIR) the folder's tokenizer (FolderTokenizer).
TrainOptions WithDefaults(TrainOptions o);

// The text to train on: --data, or the default corpus (refused in one line
// when it is missing); the tokenizer to train has the model's vocabulary
// unless --vocab-size says otherwise.
TextSource TextSourceOf(const TrainOptions& o, const LlamaConfig& config);

// How samples are cut from the text (the tokenizer's ids are set on opening).
TextDataOptions TextDataOf(const TrainOptions& o);

}  // namespace pplab::cli
