// `pplab train --init-from`: a model's published weights (here, pplab's own
// export of a checkpoint) as the start of training, on any plan; bad files
// refused before any worker starts.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "models/safetensors.h"
#include "runtime/data/corpus.h"
#include "runtime/data/fnv.h"
#include "runtime/data/tokenizer.h"
#include "schedules/file_io.h"
#include "tests/byte_level_json.h"
#include "tests/run_pplab.h"

namespace pplab::train_init_test {
namespace {

// The tiny preset with a tied head and Llama 3.1's rotary scaling: the two
// things a published model's file and config add to pplab's own.
const char* kTiedConfig = R"({"vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
  "tie_word_embeddings": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})";

std::string Common(const std::string& model) {
  return "train --synthetic --out '' -q --batch-size 8 --seq-len 32 -m 4 --warmup-steps 0 --eval-every 0 --json "
         "--model " +
         model + " ";
}

std::vector<double> Losses(const std::string& args) {
  const PplabRun r = Pplab(args);
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out.substr(r.out.find('{')))["losses"].get<std::vector<double>>();
}

// Writes DIR/config.json (the tiny preset's shape, `vocab` pieces) and
// returns the start of a `train` command on the test corpus with it and
// `tokenizer`.
std::string TextTraining(const std::string& dir, int vocab, const std::string& tokenizer) {
  WriteTextFile(dir + "/config.json", R"({"vocab_size": )" + std::to_string(vocab) +
                                          R"(, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128})");
  return "train -q --out '' --eval-every 0 --warmup-steps 0 --batch-size 8 --seq-len 32 -m 2 --json --model " + dir +
         "/config.json --tokenizer " + tokenizer + " --data " + std::string(PPLAB_TEST_DATA_DIR) +
         "/text/fortunes.txt --cache-dir " + dir + "/cache ";
}

// Greedy continuations of one prompt by `generate A` and `generate B`:
// both non-empty and the same text. Returns both outputs.
std::pair<nlohmann::json, nlohmann::json> SameGreedyText(const std::string& a_args, const std::string& b_args) {
  const std::string prompt = " --prompt 'The pipeline' --temperature 0 --max-new-tokens 12 --json";
  const PplabRun a = Pplab("generate " + a_args + prompt);
  const PplabRun b = Pplab("generate " + b_args + prompt);
  INFO(a.out << "\n" << b.out);
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  CHECK(ja["new_tokens"].get<int>() > 0);
  CHECK(ja["continuation"] == jb["continuation"]);
  return {ja, jb};
}

}  // namespace

TEST_CASE("train --init-from starts every plan from the file's weights, and a resume from its checkpoint",
          "[train][init]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/train_init";
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  const std::string model = dir + "/config.json";
  WriteTextFile(model, kTiedConfig);
  // Weights of seed 1 after 2 steps, exported as a Hugging Face file.
  REQUIRE(Pplab(Common(model) + "-k 1 --steps 2 --checkpoint-dir " + dir + "/first").code == 0);
  const std::string file = dir + "/model.safetensors";
  const PplabRun exported = Pplab("export-model --checkpoint " + dir + "/first -o " + file);
  INFO(exported.out);
  REQUIRE(exported.code == 0);
  // 4 layers of 9 tensors, the embedding and the final norm: the tied head
  // is left to the embedding, as published tied models are.
  CHECK_THAT(exported.out, Catch::Contains("wrote 38 parameters"));
  CHECK(WeightFiles::Open(file).Find("lm_head.weight") == nullptr);

  // Seed 9's data from those weights: the same losses on every plan
  // (zb-v and dualpipe keep both halves of the tied weight on one rank;
  // with --tp each rank cuts its share of the file's tensors).
  const std::string init = Common(model) + "--steps 3 --seed 9 --init-from " + file + " ";
  const std::vector<double> reference = Losses(init + "-k 1");
  REQUIRE(reference.size() == 3);
  for (const char* plan : {"-s 1f1b -k 2", "-s zb-v -k 2", "-s dualpipe -k 2", "--tp 2 -k 1", "--tp 2 -s 1f1b -k 2"}) {
    INFO(plan);
    const std::vector<double> losses = Losses(init + plan);
    REQUIRE(losses.size() == reference.size());
    for (size_t i = 0; i < losses.size(); ++i) CHECK(losses[i] == Approx(reference[i]).epsilon(1e-5));
  }
  // Not seed 9's own weights.
  CHECK(Losses(Common(model) + "--steps 1 --seed 9 -k 1")[0] != Approx(reference[0]).epsilon(1e-4));

  // A resume takes the checkpoint's weights, not the file's: step 3 of a
  // run from the file, checkpointed at 2, equals the uninterrupted run.
  const std::string ck = " --checkpoint-every 2 --checkpoint-dir " + dir + "/second";
  REQUIRE(Pplab(init + "-k 2 --steps 2" + ck).code == 0);
  const std::vector<double> resumed = Losses(init + "-k 2 --resume" + ck);
  REQUIRE(resumed.size() == 1);
  CHECK(resumed[0] == Approx(reference[2]).epsilon(1e-5));
  // And says so: the file is checked, not loaded (it said "weights: N
  // values from" the file, then continued the checkpoint's).
  const PplabRun again = Pplab(
      "train --synthetic --out '' --batch-size 8 --seq-len 32 -m 4 --warmup-steps 0 "
      "--eval-every 0 --model " +
      model + " --steps 3 --seed 9 --init-from " + file + " -k 2 --resume" + ck);
  INFO(again.out);
  CHECK(again.code == 0);
  CHECK_THAT(again.out, Catch::Contains("pplab: note: --init-from " + file + " is not loaded: the run resumes " + dir +
                                        "/second/step-000003, whose weights it continues") &&
                            !Catch::Contains("pplab: weights:"));
}

TEST_CASE("train --init-from refuses files of another model with one line, before any worker starts", "[train][init]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/train_init_bad";
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  REQUIRE(Pplab(Common("tiny") + "-k 1 --steps 1 --checkpoint-dir " + dir + "/ck").code == 0);
  const std::string file = dir + "/tiny.safetensors";
  REQUIRE(Pplab("export-model --checkpoint " + dir + "/ck -o " + file).code == 0);
  const std::string out = dir + "/run";
  auto refused = [&](const std::string& args, const std::string& why) {
    const PplabRun r = Pplab("train -k 2 --steps 1 --out " + out + " " + args);
    INFO(args << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains(why));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(out));  // nothing written, no worker started
  };
  refused("--synthetic --model small --init-from " + file,
          "--init-from: " + file +
              ": tensor 'model.embed_tokens.weight' is 256 x 32, the model's is 2048 x 128: the files are not of "
              "this model's config (--model small is a preset; give --model the weights' config.json, or their "
              "Hugging Face folder)");
  // --model left out is the default preset: said the same way.
  refused("--synthetic --init-from " + file, "(--model small is a preset; give --model the weights' config.json");
  refused("--synthetic --model tiny --init-from " + dir + "/none.safetensors",
          "--init-from: cannot read " + dir + "/none.safetensors: No such file or directory\n");  // no preset hint
  refused("--synthetic --model tiny --init-from " + dir,
          "is a folder without model.safetensors or model.safetensors.index.json");
  refused("--model tiny --init-from " + file, "text training needs the model's own tokenizer, --tokenizer");
  CHECK_THAT(Pplab("export-model --bf16 --checkpoint " + dir + "/ck -o " + dir + "/m.pt").out,
             Catch::Contains("--bf16 writes a .safetensors file"));
}

TEST_CASE("a model with a Llama 2 style tokenizer (no PAD) trains on text from its file, and generate samples from it",
          "[train][init]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/train_init_text";
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  const std::string corpus = std::string(PPLAB_TEST_DATA_DIR) + "/text/fortunes.txt";
  const std::string tokenizer = dir + "/tokenizer.model";
  TrainTokenizer(ReadCorpus({corpus}).documents, 200, tokenizer, TokenizerIds::kLlama2);
  const std::string model = dir + "/config.json";
  const std::string text = TextTraining(dir, 200, tokenizer);
  // From the seed, with the tokenizer's UNK as padding; then exported.
  const PplabRun first = Pplab(text + "-k 2 --steps 3 --checkpoint-dir " + dir + "/ck");
  INFO(first.out);
  REQUIRE(first.code == 0);
  const std::string file = dir + "/model.safetensors";
  REQUIRE(Pplab("export-model --checkpoint " + dir + "/ck -o " + file).code == 0);

  // The same greedy continuation from the checkpoint and from its export.
  const auto [ja, jb] = SameGreedyText("--checkpoint " + dir + "/ck",
                                       "--init-from " + file + " --model " + model + " --tokenizer " + tokenizer);
  CHECK(jb["weights"] == file);
  // Cached keys and values give the tokens a full forward per token gives,
  // also past the model's 128 positions (where the window slides).
  for (const int tokens : {12, 150}) {
    const std::string args =
        " --prompt 'The pipeline' --temperature 0 --json --max-new-tokens " + std::to_string(tokens);
    const PplabRun cached = Pplab("generate --checkpoint " + dir + "/ck" + args);
    const PplabRun full = Pplab("generate --checkpoint " + dir + "/ck" + args + " --no-kv-cache");
    INFO(cached.out << "\n" << full.out);
    REQUIRE(cached.code == 0);
    REQUIRE(full.code == 0);
    CHECK(nlohmann::json::parse(cached.out)["continuation"] == nlohmann::json::parse(full.out)["continuation"]);
  }

  // As a model's folder: weights, config.json and tokenizer.model, which
  // read back as the same model and the same continuation.
  const std::string folder = dir + "/hf/";
  const PplabRun exported = Pplab("export-model --checkpoint " + dir + "/ck -o " + folder);
  INFO(exported.out);
  REQUIRE(exported.code == 0);
  CHECK(LoadLlamaConfig(folder).ToJson() == LoadLlamaConfig(model).ToJson());
  CHECK(ReadTextFile(folder + "tokenizer.model") == ReadTextFile(tokenizer));
  // (The folder's tokenizer.model is the default.)
  SameGreedyText("--checkpoint " + dir + "/ck", "--init-from " + folder + " --model " + folder);

  // Text training from the file: the same losses on one rank and on two.
  const std::vector<double> one = Losses(text + "-k 1 --steps 2 --init-from " + file);
  const std::vector<double> two = Losses(text + "-s zb-h1 -k 2 --steps 2 --init-from " + file);
  REQUIRE(one.size() == 2);
  REQUIRE(two.size() == 2);
  for (size_t i = 0; i < one.size(); ++i) CHECK(two[i] == Approx(one[i]).epsilon(1e-5));

  const PplabRun lonely = Pplab("generate --init-from " + file + " --prompt x");
  CHECK(lonely.code != 0);
  CHECK_THAT(lonely.out, Catch::Contains("needs the model's config as --model"));
  // A path that is not there is named as such, whatever else is missing.
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--init-from " + dir + "/none --model " + model, "--init-from " + dir + "/none: no such file or directory"},
           {"--checkpoint " + dir + "/none", "--checkpoint " + dir + "/none: no such file or directory"},
           {"--checkpoint " + file, "--checkpoint " + file + " is a file, not a checkpoint directory"},
           {"--checkpoint " + dir + "/ck --model " + model, "--checkpoint excludes --model"}}) {
    const PplabRun r = Pplab("generate --prompt x " + args);
    INFO(args << ": " << r.out);
    CHECK(r.code != 0);
    CHECK(r.out == "pplab: error: " + message + "\n");
  }
  const PplabRun both = Pplab("generate --prompt x");
  CHECK(both.code != 0);
  CHECK_THAT(both.out, Catch::Contains("give --checkpoint, or --init-from with --model and --tokenizer"));
}

TEST_CASE(
    "a model with a Llama 3 style tokenizer.json trains on text, keeps it in checkpoint and export, and generates",
    "[train][init]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/train_init_json";
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  test::Spec spec;
  spec.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {" ", "a"}, {"e", "r"}, {"o", "n"}, {" ", "t"}};
  spec.added = {"<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"};
  spec.ignore_merges = true;
  const std::string tokenizer = dir + "/tokenizer.json";
  WriteTextFile(tokenizer, test::Build(spec).dump());
  const Tokenizer loaded = Tokenizer::Load(tokenizer);
  REQUIRE(loaded.VocabSize() == 256 + 8 + 3);
  const std::string text = TextTraining(dir, 267, tokenizer);
  // Two ranks give the one-rank losses on the file's tokens.
  const std::vector<double> one = Losses(text + "-k 1 --steps 2");
  const std::vector<double> two = Losses(text + "-s 1f1b -k 2 --steps 2 --checkpoint-dir " + dir + "/ck");
  REQUIRE(one.size() == 2);
  REQUIRE(two.size() == 2);
  for (size_t i = 0; i < one.size(); ++i) CHECK(two[i] == Approx(one[i]).epsilon(1e-5));

  // The checkpoint keeps a copy named for its kind, and its export folder
  // a tokenizer.json, which generate then takes by default.
  const std::string copy = "tokenizer-" + FnvHex(loaded.Fingerprint()) + ".json";
  CHECK(ReadTextFile(dir + "/ck/" + copy) == ReadTextFile(tokenizer));
  const std::string folder = dir + "/hf/";
  REQUIRE(Pplab("export-model --checkpoint " + dir + "/ck -o " + folder).code == 0);
  CHECK(ReadTextFile(folder + "tokenizer.json") == ReadTextFile(tokenizer));
  CHECK_FALSE(std::filesystem::exists(folder + "tokenizer.model"));
  // config.json names the tokenizer's special ids, which Hugging Face's
  // loaders would otherwise take from their defaults (BOS 1, EOS 2).
  const nlohmann::json config_json = nlohmann::json::parse(ReadTextFile(folder + "config.json"));
  CHECK(config_json["bos_token_id"] == loaded.Bos());
  CHECK(config_json["eos_token_id"] == loaded.Eos());
  CHECK(config_json["pad_token_id"] == loaded.Pad());
  // A folder holding what a loader would read before the files written
  // here (another model's tokenizer.model, a shard index) is refused, by name.
  // So is what Hugging Face's loaders read beside them: a tokenizer_config.json
  // names a tokenizer class, an adapter_config.json weights over these.
  for (const char* stale : {"tokenizer.model", "model.safetensors.index.json", "generation_config.json",
                            "tokenizer_config.json", "special_tokens_map.json", "adapter_config.json"}) {
    const std::string old = dir + "/old-" + stale + "/";
    std::filesystem::create_directories(old);
    WriteTextFile(old + stale, "another model's\n");
    const PplabRun refused = Pplab("export-model --checkpoint " + dir + "/ck -o " + old);
    INFO(refused.out);
    CHECK(refused.code != 0);
    CHECK_THAT(refused.out, Catch::StartsWith("pplab: error: export-model: -o " + old + " holds " + stale +
                                              ", which loaders of the folder read"));
    CHECK_FALSE(std::filesystem::exists(old + "model.safetensors"));
  }
  // A check that fails leaves no new folder behind: one inside the
  // checkpoint it reads.
  const std::string inside = dir + "/ck/" + ReadTextFile(dir + "/ck/latest").substr(0, 11) + "/hf/";
  const PplabRun into_checkpoint = Pplab("export-model --checkpoint " + dir + "/ck -o " + inside);
  INFO(into_checkpoint.out);
  CHECK(into_checkpoint.code != 0);
  CHECK_THAT(into_checkpoint.out, Catch::Contains("would replace a file of the checkpoint it reads"));
  CHECK_FALSE(std::filesystem::exists(inside));
  // Text training from the folder takes its tokenizer.json without
  // --tokenizer: the losses of the same run that names it.
  const std::string from_folder =
      "train -q --out '' --eval-every 0 --warmup-steps 0 --batch-size 8 --seq-len 32 -m 2 --json -k 1 --steps 2 "
      "--data " +
      std::string(PPLAB_TEST_DATA_DIR) + "/text/fortunes.txt --cache-dir " + dir + "/cache --model " + folder +
      " --init-from " + folder;
  CHECK(Losses(from_folder) == Losses(from_folder + " --tokenizer " + folder + "tokenizer.json"));
  SameGreedyText("--checkpoint " + dir + "/ck", "--init-from " + folder + " --model " + folder);
  // generation_config.json's eos_token_id ends the text too: a list that
  // holds every id stops at once, the tokenizer's EOS alone changes nothing.
  const std::string greedy = "generate --init-from " + folder + " --model " + folder +
                             " --prompt 'The pipeline' --temperature 0 --max-new-tokens 12 --json";
  const nlohmann::json without = nlohmann::json::parse(Pplab(greedy).out);
  REQUIRE(without["new_tokens"].get<int>() > 0);
  nlohmann::json every = nlohmann::json::array();
  for (int id = 0; id < 267; ++id) every.push_back(id);
  WriteTextFile(folder + "generation_config.json", nlohmann::json{{"eos_token_id", every}}.dump());
  const PplabRun stopped = Pplab(greedy);
  INFO(stopped.out);
  REQUIRE(stopped.code == 0);
  CHECK(nlohmann::json::parse(stopped.out)["new_tokens"] == 0);
  WriteTextFile(folder + "generation_config.json", nlohmann::json{{"eos_token_id", loaded.Eos()}}.dump());
  CHECK(nlohmann::json::parse(Pplab(greedy).out) == without);
  WriteTextFile(folder + "generation_config.json", R"({"eos_token_id": "x"})");
  const PplabRun bad = Pplab(greedy);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains(folder + "generation_config.json: eos_token_id is not a token id"));
  // One that cannot be read is refused by name (a FIFO was passed over).
  std::filesystem::remove(folder + "generation_config.json");
  REQUIRE(::mkfifo((folder + "generation_config.json").c_str(), 0600) == 0);
  const PplabRun fifo = Pplab(greedy);
  CHECK(fifo.code == 2);
  CHECK_THAT(fifo.out, Catch::Contains(folder + "generation_config.json: is a FIFO, not a regular file"));
  std::filesystem::remove(folder + "generation_config.json");
  // A tokenizer.json of another kind is one line naming the field, before
  // any worker starts.
  nlohmann::json metaspace = test::Build(spec);
  metaspace["pre_tokenizer"] = {{"type", "Metaspace"}};
  WriteTextFile(tokenizer, metaspace.dump());
  const PplabRun refused = Pplab(text + "-k 2 --steps 1");
  CHECK(refused.code != 0);
  CHECK_THAT(refused.out, Catch::Contains(tokenizer + ": pre_tokenizer \"Metaspace\" is not byte-level"));
}

TEST_CASE("a rotary scaling pplab does not compute: train refuses it by name before any worker, profile costs it",
          "[train][init]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/train_init_yarn";
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  const std::string model = dir + "/config.json";
  WriteTextFile(model, R"({"model_type": "llama", "vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}})");
  const PplabRun train = Pplab(Common(model) + "-k 2 --steps 1 --out " + dir + "/run");
  INFO(train.out);
  CHECK(train.code != 0);
  CHECK_THAT(train.out, Catch::Contains("--model " + model + ": rope_scaling type 'yarn' is not implemented"));
  CHECK(std::count(train.out.begin(), train.out.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(dir + "/run"));
  const PplabRun profile = Pplab("profile --model " + model +
                                 " -k 1 --microbatch-size 1 --seq-len 16 --repeats 2 "
                                 "--warmup 1 -o " +
                                 dir + "/cost.json");
  INFO(profile.out);
  CHECK(profile.code == 0);
  CHECK_THAT(ReadTextFile(dir + "/cost.json"), Catch::Contains("yarn"));  // the config as given
}

}  // namespace pplab::train_init_test
