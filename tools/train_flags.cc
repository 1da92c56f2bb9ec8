#include "tools/train_flags.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>

#include "runtime/data/corpus.h"
#include "tools/commands.h"
#include "tools/train_options.h"

namespace pplab::cli {

void AddTrainFlags(CLI::App& sub, TrainOptions& o) {
  // A flag given twice takes the last value, so scripts can append overrides.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.add_option("--schedule,-s", o.schedule, "schedule generator")->capture_default_str();
  sub.add_option("--plan", o.plan_file, "a plan file from `pplab export` instead of --schedule");
  sub.add_option("--ranks,-k", o.ranks, "pipeline ranks K")->check(CLI::Range(1, 4096))->capture_default_str();
  sub.add_option("--tp", o.tp,
                 "tensor-parallel ranks T per pipeline rank: each splits the layers' attention heads and MLP "
                 "columns with T - 1 others (Megatron-LM's layout; world = D x T x K processes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub.add_flag("--sequence-parallel", o.sequence_parallel,
               "with --tp T: outside the split regions each tensor-parallel rank keeps 1/T of the positions "
               "(Megatron-LM's sequence parallelism), so the norms' activations and the hidden state sent between "
               "stages shrink by T; --seq-len must be a multiple of T");
  sub.add_option("--dp", o.dp, "data-parallel replicas D of the pipeline (world = D x T x K processes)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub.add_option("--microbatches,-m", o.microbatches, "microbatches M per step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  sub.add_option("--virtual,-v", o.virtual_stages, "stages per rank (interleaved-1f1b, looped-bfs, interleaved-zb)")
      ->check(CLI::Range(1, 64));
  sub.add_option("--model", o.model, kModelFlagHelp)->capture_default_str();
  sub.add_option("--partition", o.partition,
                 "uniform, parameters, compute (the ranks' FLOPs evened out for the plan's placement), or layers per "
                 "stage like 3,2,2,1")
      ->capture_default_str();
  sub.add_option("--batch-size", o.batch_size, "sequences per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub.add_option("--seq-len", o.seq_len, "tokens per sequence")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  sub.add_option("--steps", o.steps, "training steps")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  sub.add_option("--seed", o.seed, "seed of the weights and the data")->capture_default_str();
  sub.add_option("--lr", o.lr, "AdamW learning rate")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  sub.add_option("--warmup-steps", o.warmup_steps, "linear warm-up steps, then cosine decay to 0")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub.add_option("--clip-norm", o.clip_norm, "clip gradients to this global L2 norm (0: off)")
      ->check(CLI::Validator(
          [](std::string& value) {
            const double v = std::strtod(value.c_str(), nullptr);
            return std::isfinite(v) && v >= 0 ? std::string() : "must be a finite number, at least 0, got " + value;
          },
          "FLOAT >= 0"))
      ->capture_default_str();
  sub.add_option("--nproc", o.nproc, "worker processes (default: the plan's ranks)")->check(CLI::Range(1, 4096));
  sub.add_option("--comm-timeout", o.comm_timeout_s, "seconds a rank waits for a peer before giving up")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub.add_option("--device", o.device, "cpu, or cuda / cuda:N (a CUDA LibTorch build; default one GPU per local rank)")
      ->capture_default_str();
  sub.add_option("--backend", o.backend, "auto (NCCL for CUDA devices, Gloo for the CPU), gloo or nccl")
      ->capture_default_str();
  sub.add_option("--precision", o.precision,
                 "fp32, or bf16: bf16 autocast compute and bf16 messages between ranks, with fp32 weights, AdamW "
                 "state, loss and softmax")
      ->capture_default_str();
  sub.add_option("--checkpoint-dir", o.checkpoint_dir, "write checkpoints here (one shard per rank, atomic)");
  sub.add_option("--checkpoint-every", o.checkpoint_every, "steps between checkpoints (one is written at the end too)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub.add_flag("--resume", o.resume,
               "continue the run in the outputs: from the latest checkpoint in --checkpoint-dir, if there is one, "
               "appending to its metrics");
  sub.add_flag("--overwrite", o.overwrite,
               "replace the run in the outputs (its metrics, traces and checkpoints) instead of refusing");
  sub.add_flag("--oversubscribe", o.oversubscribe,
               "start more local workers than this machine's cores (4 per core) or memory allow");
  CLI::Option* data =
      sub.add_option("--data", o.data,
                     "UTF-8 text files or directories to train on; *.jsonl files hold {\"prompt\", \"completion\"} or "
                     "{\"text\"} records, a prompt read but not learned (default: Debian's fortunes, " +
                         DefaultCorpusDir() + ")")
          ->expected(1, -1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* synthetic =
      sub.add_flag("--synthetic", o.synthetic, "train on random tokens instead of text (benchmarks, parity tests)")
          ->excludes(data);
  sub.add_option("--init-from", o.init_from,
                 "start from a published model's weights instead of the seed's: a .safetensors file, or the "
                 "model's folder (model.safetensors, or the files model.safetensors.index.json lists); --model "
                 "gives its config.json, and text training its --tokenizer (default: the folder's). A --resume from a "
                 "checkpoint takes the "
                 "checkpoint's");
  CLI::Option* tokenizer =
      sub.add_option(
             "--tokenizer", o.tokenizer,
             "a tokenizer to use instead of training one: a SentencePiece .model, or a byte-level BPE "
             "tokenizer.json (Llama 3, Qwen); with an --init-from folder, the folder's tokenizer.model, else its "
             "tokenizer.json")
          ->excludes(synthetic);
  // Text-only flags: refused with --synthetic rather than ignored.
  sub.add_option("--vocab-size", o.vocab_size, "pieces of the BPE tokenizer to train (default: the model's)")
      ->check(CLI::Range(8, 1 << 20))
      ->excludes(synthetic)
      ->excludes(tokenizer);
  CLI::Option* no_flat =
      sub.add_flag("--no-flat-params", o.no_flat_params,
                   "keep each parameter and gradient apart instead of in one flat buffer per stage (the step's "
                   "zeroing, norm, clipping, data-parallel sum and AdamW then go parameter by parameter)");
  sub.add_flag("--shard-optimizer", o.shard_optimizer,
               "with --dp D: each replica keeps and updates 1/D of the AdamW moments (ZeRO stage 1), and the "
               "replicas then put the updated parameters together; same parameters bit for bit")
      ->excludes(no_flat);
  sub.add_flag("--cuda-graphs", o.cuda_graphs,
               "on a GPU, capture each stage's forward and backward as CUDA graphs, one pair per microbatch in "
               "flight, and replay them: one launch where eager runs launch every kernel (pays where the GPU waits "
               "for the host: short sequences, small models). Plans with whole B's; not with --tp or --recompute");
  sub.add_option("--recompute", o.recompute,
                 "stages whose activations are recomputed: none, all, or stage ids like 0,1. Their F keeps only its "
                 "inputs, and their B or I runs the forward again first: less memory for one more forward per "
                 "microbatch, with the same gradients")
      ->capture_default_str();
  sub.add_flag("--packed", o.packed, "pack documents into full sequences instead of one padded document each")
      ->excludes(synthetic);
  sub.add_option("--val-fraction", o.val_fraction, "share of the documents held out for validation")
      ->check(CLI::Range(0.0, 0.5))
      ->capture_default_str()
      ->excludes(synthetic);
  sub.add_option("--cache-dir", o.cache_dir,
                 "where tokenizers and token caches are kept (default: " + DefaultCacheDir() + ")")
      ->excludes(synthetic);
  sub.add_option("--eval-every", o.eval_every,
                 "steps between validation losses (0: none; --synthetic tokens have none)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  sub.add_option("--eval-batches", o.eval_batches, "batches of validation data per evaluation")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str()
      ->excludes(synthetic);
  sub.add_option("--out", o.out_dir,
                 "directory for the outputs not given otherwise: metrics.jsonl, checkpoints/, trace-measured.json, "
                 "trace-simulated.json, timeline.svg (\"\" for none)")
      ->capture_default_str();
  sub.add_option(
      "--metrics", o.metrics_path,
      "one JSON line per step (loss, lr, tokens/s, bubble, val loss); a new run starts the file over, a resumed one "
      "appends");
  sub.add_flag(
      "--measure-memory", o.measure_memory,
      "count tensor memory (CPU: a counting allocator; CUDA: the caching allocator's statistics); --json reports each "
      "rank's peak activation bytes of the last step (with --cuda-graphs, the graphs' slots included)");
  sub.add_option("--warm-up", o.warm_up,
                 "run each stage once, forward and backward, with no message, before the first step: auto (on a "
                 "CUDA device, where it sets up kernels, libraries and memory before any receive is posted), on or "
                 "off")
      ->capture_default_str();
  sub.add_option("--attention", o.attention,
                 "auto (sdpa where this LibTorch has it), sdpa (at::scaled_dot_product_attention, LibTorch 2.x) or "
                 "explicit (scores and softmax by hand)")
      ->capture_default_str();
  sub.add_option("--peak-tflops", o.peak_tflops,
                 "the device's peak TFLOP/s for model FLOPs utilisation (default: from the GPU's datasheet; none on "
                 "the CPU, so no MFU there)")
      ->check(CLI::Range(0.0, 1e9))
      ->check(CLI::Validator(
          [](std::string& value) {
            return std::strtod(value.c_str(), nullptr) > 0
                       ? std::string()
                       : "must be above 0 (leave it out for the device's datasheet peak), got " + value;
          },
          "> 0"));
  sub.add_option("--trace", o.trace_path, "write the measured timeline of the last step (Chrome trace)");
  sub.add_option("--sim-trace", o.sim_trace_path,
                 "write the plan simulated with the compute costs measured in the last step, or with --sim-cost's "
                 "(Chrome trace)");
  sub.add_option("--sim-cost", o.sim_cost_path,
                 "simulate the plan with this cost file (pplab profile at the run's microbatch size, or plan "
                 "--cost-out) instead of the costs measured in the last step: the picture then stacks that prediction "
                 "above the measured step, memory included, and the summary gives the predicted step time (and with "
                 "--measure-memory each rank's peak) against the measured");
  sub.add_flag("--quiet,-q", o.quiet,
               "no progress line and no lines about the data and weights read (warnings, and notes on how a "
               "resumed run differs from its checkpoint, still show)");
  sub.add_flag("--json", o.json, "print one summary object at the end");
  sub.add_option("--kill-rank-at", o.kill_rank_at,
                 "testing aid: RANK:STEP kills that rank at that step (-1: before the rendezvous; --steps + 1: "
                 "stops it, SIGSTOP, after its run, before it exits)")
      ->group("");  // hidden
  sub.add_option("--nan-at", o.nan_at, "testing aid: make that step's loss NaN (steps count from 1)")->group("");
  sub.add_option("--nan-gradient-at", o.nan_gradient_at,
                 "testing aid: make that step's gradients NaN on rank 0, its loss finite (steps count from 1)")
      ->group("");
  sub.add_option(
      "--dump-grads", o.dump_grads_dir,
      "write each parameter's gradient of the last step to DIR/<global name>.pt (torch::save), as the update "
      "used it: summed over microbatches and replicas, and scaled by --clip-norm where that clipped");
}

}  // namespace pplab::cli
