// pplab generate --checkpoint DIR --prompt TEXT: samples a continuation from
// a checkpoint in one process, so a user can see what the model learned; or
// from a published model's weights (--init-from), to see that they loaded.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "models/llama.h"
#include "models/pretrained.h"
#include "runtime/data/chat.h"
#include "runtime/data/fnv.h"
#include "runtime/data/tokenizer.h"
#include "runtime/train/adamw.h"
#include "runtime/train/checkpoint.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/json_reader.h"
#include "tools/commands.h"

namespace fs = std::filesystem;

namespace pplab::cli {
namespace {

struct GenerateOptions {
  std::string checkpoint;
  std::string init_from, model;  // a published model's weights and config instead of a checkpoint
  std::string prompt;
  bool chat = false;   // --prompt is a user's message to a chat model
  std::string system;  // with --chat: a system message before it
  std::string tokenizer;
  int max_new_tokens = 64;
  double temperature = 0.8;
  int top_k = 40;
  uint64_t seed = 1;
  bool json = false;
  bool no_kv_cache = false;
};

// The index at which the cumulative sum of `probs` (a double vector that
// sums to about 1) first passes u times its total: a draw from it for u
// uniform in [0, 1). An index of probability 0 is never drawn.
int64_t DrawIndex(const at::Tensor& probs, double u) {
  const double* p = probs.data_ptr<double>();
  const int64_t n = probs.size(0);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += p[i];
  const double target = u * total;
  double sum = 0;
  int64_t last = 0;  // the last index that can be drawn, should rounding leave target above every sum
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] <= 0) continue;
    sum += p[i];
    last = i;
    if (sum > target) return i;
  }
  return last;
}

// The checkpoint's tokenizer (or --tokenizer), refused unless it is the one
// the model was trained with.
Tokenizer LoadTokenizer(const GenerateOptions& o, const std::string& dir, const nlohmann::json& manifest) {
  if (!manifest.contains("tokenizer")) {
    throw Error("--checkpoint " + dir + " was trained on synthetic tokens: it has no tokenizer to generate text with");
  }
  const std::string want = manifest.at("tokenizer").get<std::string>();
  const std::string path =
      !o.tokenizer.empty() ? o.tokenizer
                           : (fs::path(dir).parent_path() / manifest.at("tokenizer_file").get<std::string>()).string();
  Tokenizer t = Tokenizer::Load(path);
  if (FnvHex(t.Fingerprint()) != want) {
    throw Error("tokenizer " + path + " (fingerprint " + FnvHex(t.Fingerprint()) +
                ") is not the one the checkpoint was trained with (" + want + ")");
  }
  return t;
}

// The model to sample from, as one stage, its tokenizer, and what to say
// it came from.
struct Loaded {
  LlamaConfig config;
  std::unique_ptr<Stage> model;
  std::optional<Tokenizer> tokenizer;
  nlohmann::json source;
  std::vector<int32_t> stop;  // ids that end the text besides the tokenizer's EOS
};

// The ids generation_config.json in `dir` says end a text (its
// eos_token_id: one id or a list, as an instruction-tuned model's turn end
// beside the end of text); none when the file is absent.
std::vector<int32_t> StopIds(const std::string& dir) {
  const fs::path path = fs::path(dir) / "generation_config.json";
  std::error_code ec;
  // Absent: none. Anything else by that name is read, so that a FIFO or a
  // folder is refused by name (it was passed over unsaid).
  if (!fs::exists(path, ec)) return {};
  const nlohmann::json j = ParseJsonStrict(ReadTextFile(path.string()), path.string());
  if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return {};
  const nlohmann::json& eos = j["eos_token_id"];
  std::vector<int32_t> out;
  for (const nlohmann::json& id : eos.is_array() ? eos : nlohmann::json::array({eos})) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      throw Error(path.string() + ": eos_token_id is not a token id or a list of them");
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

// From a checkpoint: its config, its tokenizer, its weights by global name.
Loaded FromCheckpoint(const GenerateOptions& o) {
  const std::string dir = ResolveCheckpoint(o.checkpoint);
  const std::string manifest_text = VerifyCheckpoint(dir);
  const nlohmann::json manifest = nlohmann::json::parse(manifest_text);
  Loaded l;
  l.config = LlamaConfigFromJson(manifest.at("model").dump(), dir + "/manifest.json");
  l.tokenizer = LoadTokenizer(o, dir, manifest);
  l.model = BuildLlamaStage(l.config, PartitionUniform(l.config, 1), 0, manifest.at("seed").get<uint64_t>(), c10::kCPU);
  AdamW holder(l.model->NamedParameters(), AdamWConfig{});
  LoadCheckpoint(dir, manifest_text, holder);
  l.source = {{"checkpoint", dir}, {"step", manifest.at("step")}};
  return l;
}

// From a published model's files, its config and its tokenizer.
Loaded FromWeights(const GenerateOptions& o) {
  std::error_code ec;
  if (!fs::exists(o.init_from, ec)) throw Error("--init-from " + o.init_from + ": no such file or directory");
  // A model's folder usually holds its tokenizer too.
  const std::string tokenizer = o.tokenizer.empty() ? FolderTokenizer(o.init_from) : o.tokenizer;
  if (o.model.empty()) {
    throw Error("--init-from " + o.init_from + " needs the model's config as --model (a config.json, or the folder)");
  }
  if (tokenizer.empty()) {
    throw Error("--init-from " + o.init_from +
                " needs the model's --tokenizer (its folder has no tokenizer.model or tokenizer.json)");
  }
  Loaded l;
  l.config = LoadLlamaConfig(o.model);
  LlamaOptions options;
  options.weights = std::make_shared<const WeightFiles>(WeightFiles::Open(o.init_from));
  try {
    CheckPretrained(*options.weights, l.config);
  } catch (const Error& e) {
    throw Error("--init-from: " + std::string(e.what()));
  }
  l.tokenizer = Tokenizer::Load(tokenizer);
  l.model = BuildLlamaStage(l.config, PartitionUniform(l.config, 1), 0, 0, c10::kCPU, options);
  l.source = {{"weights", o.init_from}};
  // The model's folder: --init-from's, else the one --model's config is in
  // (a preset's name has none: the current folder's file is not its).
  const std::string config_file = LlamaConfigPath(o.model);
  if (fs::is_directory(o.init_from, ec)) {
    l.stop = StopIds(o.init_from);
  } else if (!config_file.empty()) {
    const std::string folder = fs::path(config_file).parent_path().string();
    l.stop = StopIds(folder.empty() ? "." : folder);
  }
  return l;
}

int RunGenerate(const GenerateOptions& o) {
  if (o.checkpoint.empty() == o.init_from.empty()) {
    throw Error("generate: give --checkpoint, or --init-from with --model and --tokenizer (one of the two)");
  }
  Loaded loaded = o.checkpoint.empty() ? FromWeights(o) : FromCheckpoint(o);
  const LlamaConfig& config = loaded.config;
  const Tokenizer& tokenizer = *loaded.tokenizer;
  Stage* model = loaded.model.get();
  // A published model may keep more rows than its tokenizer has pieces;
  // those are never sampled.
  if (tokenizer.VocabSize() > config.vocab_size) {
    throw Error("the tokenizer " + tokenizer.Path() + " has " + std::to_string(tokenizer.VocabSize()) +
                " pieces, more than the model's vocab_size " + std::to_string(config.vocab_size) +
                ": it is not that model's tokenizer");
  }

  torch::NoGradGuard no_grad;
  // All 64 bits of the seed: ATen's CPU generator keeps 32, so seeds
  // 2^32 apart drew the same text.
  std::mt19937_64 rng(o.seed);
  std::vector<int32_t> ids = {tokenizer.Bos()};
  std::vector<int32_t> stop = loaded.stop;
  stop.push_back(tokenizer.Eos());
  const ChatLayout layout = ChatLayoutFor(tokenizer);
  if (o.chat) {
    // As training lays out a chat record (chat.h), up to the assistant's
    // header; its answer ends at the layout's end of a turn.
    std::vector<ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", o.prompt});
    EncodeChat(RenderChatPrompt(messages, layout), tokenizer, 0, ids);
    stop.push_back(ChatTurnEnd(layout, tokenizer));
  } else {
    for (int32_t id : tokenizer.Encode(o.prompt)) ids.push_back(id);
  }
  const size_t prompt_size = ids.size();
  const int64_t window = config.max_position_embeddings;
  // Keys and values are cached, so each new token costs one token's
  // forward; past the model's positions each token sees the last `window`
  // tokens, recomputed.
  const std::unique_ptr<LlamaDecoder> decoder = o.no_kv_cache ? nullptr : MakeLlamaDecoder(*model);
  auto last_logits = [&]() {  // (V), for the last token of ids
    const int64_t n = static_cast<int64_t>(ids.size());
    if (decoder != nullptr && n <= window) {
      const int64_t seen = decoder->Length();
      std::vector<int64_t> fresh(ids.begin() + seen, ids.end());
      return decoder->Next(torch::tensor(fresh, torch::kLong).view({1, n - seen}))[0][n - seen - 1];
    }
    const int64_t T = std::min<int64_t>(n, window);
    std::vector<int64_t> last(ids.end() - T, ids.end());
    at::Tensor tokens = torch::tensor(last, torch::kLong).view({1, T});  // (1, T)
    return model->Forward({tokens, torch::ones_like(tokens)}).at(0)[0][T - 1];
  };
  for (int i = 0; i < o.max_new_tokens; ++i) {
    at::Tensor next = last_logits().to(torch::kFloat64).narrow(0, 0, tokenizer.VocabSize());  // (pieces)
    if (!torch::isfinite(next).all().item<bool>()) {
      throw Error("the model's logits for token " + std::to_string(i + 1) +
                  " are not finite (NaN or infinite weights?): nothing to choose from");
    }
    int32_t chosen;
    if (o.temperature <= 0) {
      chosen = static_cast<int32_t>(next.argmax().item<int64_t>());
    } else {
      // From the largest logit down, so that a tiny temperature gives 0 and
      // -inf (the likeliest token) rather than inf - inf.
      next = (next - next.max()) / o.temperature;
      if (o.top_k > 0 && o.top_k < next.size(0)) {
        const at::Tensor kth = std::get<0>(next.topk(o.top_k)).min();
        next = next.masked_fill(next < kth, -std::numeric_limits<double>::infinity());
      }
      // u in [0, 1) from the top 53 bits, the same on every platform (unlike
      // std::uniform_real_distribution).
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      chosen = static_cast<int32_t>(DrawIndex(torch::softmax(next, 0).contiguous(), u));
    }
    if (std::find(stop.begin(), stop.end(), chosen) != stop.end()) break;
    ids.push_back(chosen);
  }
  // Decode prompt and continuation together (a piece may carry the space
  // before it), then split off what the prompt decodes to. A chat's answer
  // is decoded alone: its prompt holds the layout's special tokens.
  const std::vector<int32_t> fresh(ids.begin() + prompt_size, ids.end());
  std::string continuation = tokenizer.Decode(fresh);
  if (!o.chat) {
    const std::string prompt_text = tokenizer.Decode(std::vector<int32_t>(ids.begin(), ids.begin() + prompt_size));
    const std::string all_text = tokenizer.Decode(ids);
    if (all_text.compare(0, prompt_text.size(), prompt_text) == 0) continuation = all_text.substr(prompt_text.size());
  }
  if (o.json) {
    nlohmann::json j = loaded.source;
    j["prompt"] = o.prompt;
    if (o.chat) j["chat_layout"] = ChatLayoutName(layout);
    j["continuation"] = continuation;
    j["new_tokens"] = fresh.size();
    // A byte-level tokenizer's tokens can end inside a character (a model
    // may even sample a lone continuation byte): replaced by U+FFFD here,
    // as JSON must be UTF-8; the text output prints the bytes.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (o.chat) {
    std::printf("%s\n", continuation.c_str());
  } else {
    std::printf("%s%s\n", o.prompt.c_str(), continuation.c_str());
  }
  return 0;
}

}  // namespace

void SetupGenerate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub =
      app.add_subcommand("generate", "sample text from a checkpoint or a published model's weights (one process, CPU)");
  CLI::Option* checkpoint =
      sub->add_option("--checkpoint", o->checkpoint, "a --checkpoint-dir (its latest checkpoint) or one checkpoint");
  sub->add_option("--init-from", o->init_from,
                  "a published model's weights instead (a .safetensors file or the model's folder), with its "
                  "--model and --tokenizer")
      ->excludes(checkpoint);
  sub->add_option("--model", o->model, "with --init-from: the model's config.json (or its folder)")
      ->excludes(checkpoint);
  sub->add_option("--prompt", o->prompt, "text to continue (with --chat: the user's message to answer)")->required();
  CLI::Option* chat = sub->add_flag(
      "--chat", o->chat,
      "lay the prompt out as a user's message in the chat layout training gives chat records (llama3, chatml or "
      "plain, from the tokenizer; docs/data.md) and print the assistant's answer, which ends at the turn's end");
  sub->add_option("--system", o->system, "with --chat: a system message before the user's")->needs(chat);
  sub->add_option("--max-new-tokens", o->max_new_tokens,
                  "tokens to add at most (stops at end of text, and with --init-from at the ids its "
                  "generation_config.json names)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_option("--temperature", o->temperature, "sampling temperature (0: always the likeliest token)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  sub->add_option("--top-k", o->top_k, "sample among the k likeliest tokens (0: all)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the sampling")->capture_default_str();
  sub->add_option(
      "--tokenizer", o->tokenizer,
      "a tokenizer (.model or tokenizer.json): the checkpoint's own by default (another must be the same); with "
      "--init-from, the model's (default: tokenizer.model, else tokenizer.json, in the --init-from folder)");
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->add_flag("--no-kv-cache", o->no_kv_cache,
                "run the whole sequence through the model for every token instead of caching keys and values "
                "(slower; the same tokens, for comparison)");
  sub->callback([o, &exit_code] { exit_code = RunGenerate(*o); });
}

}  // namespace pplab::cli
