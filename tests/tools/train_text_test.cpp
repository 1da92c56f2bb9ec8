// `pplab train` on text and `pplab generate`, through the binary as a user
// runs them.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/data/corpus.h"
#include "runtime/data/tokenizer.h"
#include "schedules/file_io.h"
#include "tests/byte_level_json.h"
#include "tests/run_pplab.h"

namespace fs = std::filesystem;

namespace pplab::train_text_test {
namespace {

const std::string kCorpus = std::string(PPLAB_TEST_DATA_DIR) + "/text/fortunes.txt";

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/train_text_" + name;
  RemoveTree(dir);
  fs::create_directories(dir);
  return dir;
}

// Train on the test corpus with small settings; `args` come last and win.
PplabRun TrainText(const std::string& cache, const std::string& args) {
  return Pplab("train -q --out '' --model tiny --data " + kCorpus + " --vocab-size 200 --cache-dir " + cache +
               " --batch-size 8 --seq-len 32 -m 2 --warmup-steps 0 --eval-every 0 " + args);
}

// Each fortune of the test corpus cut at the first space past its middle:
// (its first half, the rest from that space).
std::vector<std::pair<std::string, std::string>> HalvedFortunes() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& doc : ReadCorpus({kCorpus}).documents) {
    const size_t cut = doc.find(' ', doc.size() / 2);
    if (cut != std::string::npos) out.emplace_back(doc.substr(0, cut), doc.substr(cut));
  }
  return out;
}

// The start of a 3-step `train` on records with `tokenizer`; the data file
// comes last.
std::string RecordTraining(const std::string& dir, const std::string& tokenizer, int eval_every) {
  return "train -q --out '' --model tiny --tokenizer " + tokenizer + " --cache-dir " + dir +
         "/cache --batch-size 8 --seq-len 32 --warmup-steps 0 --eval-every " + std::to_string(eval_every) +
         " --steps 3 --seed 4 --json --data ";
}

nlohmann::json Json(const PplabRun& r) {
  INFO(r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

}  // namespace

TEST_CASE("training on text lowers the loss, and pipelined equals single-process on padded text", "[train][data]") {
  const std::string cache = Tmp("cache_a");
  const auto pipelined = Json(TrainText(cache, "-s 1f1b -k 2 --steps 30 --lr 3e-3 --seed 4 --json"));
  const auto losses = pipelined["losses"].get<std::vector<double>>();
  REQUIRE(losses.size() == 30);
  CHECK(pipelined["data"] == "text");
  CHECK(pipelined["vocab_size"] == 200);
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[27] + losses[28] + losses[29]) / 3;
  INFO("first " << first << " last " << last);
  CHECK(last < first - 0.5);
  // The same 3 steps in one process over the whole batch: equal losses, so
  // the padding mask and the loss scale travel through the pipeline right.
  const auto a = Json(TrainText(cache, "-s 1f1b -k 2 -m 4 --steps 3 --seed 4 --json"));
  const auto b = Json(TrainText(cache, "-k 1 -m 1 --steps 3 --seed 4 --json"));
  const auto la = a["losses"].get<std::vector<double>>(), lb = b["losses"].get<std::vector<double>>();
  REQUIRE(la.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(la[i] == Approx(lb[i]).epsilon(1e-5));
}

TEST_CASE("validation runs DualPipe's forwards, the overlapped ones too, and equals one process's", "[train][data]") {
  // The forward-only plan of DualPipe keeps the forward half of each
  // OVERLAP_F_B: without it a rank waited for activations never sent.
  const std::string cache = Tmp("cache_eval");
  const auto dual =
      Json(TrainText(cache, "-s dualpipe -k 2 -m 4 --steps 1 --seed 4 --eval-every 1 --comm-timeout 20 --json"));
  const auto one = Json(TrainText(cache, "-k 1 -m 1 --steps 1 --seed 4 --eval-every 1 --json"));
  REQUIRE(dual["val_losses"].size() == 1);
  REQUIRE(one["val_losses"].size() == 1);
  CHECK(dual["val_losses"][0]["loss"].get<double>() ==
        Approx(one["val_losses"][0]["loss"].get<double>()).epsilon(1e-5));
}

TEST_CASE("the validation loss is the mean over the held-out tokens, the same at any batch size", "[train][data]") {
  // With --lr 0 the weights stay the seed's, so every run evaluates one
  // model on all held-out windows (--eval-batches covers them at batch 1).
  // Batches of padded windows hold different token counts, and 3 leaves a
  // last batch part empty: a mean of batch means, or a window counted twice,
  // moves the figure in the third decimal.
  const std::string cache = Tmp("cache_val");
  std::vector<double> val;
  for (const int g : {1, 3, 8}) {
    const auto r = Json(TrainText(cache, "-m 1 --batch-size " + std::to_string(g) +
                                             " --lr 0 --steps 1 --seed 4 --eval-every 1 --eval-batches 100000 --json"));
    REQUIRE(r["val_losses"].size() == 1);
    val.push_back(r["val_losses"][0]["loss"].get<double>());
  }
  INFO(val[0] << " " << val[1] << " " << val[2]);
  CHECK(val[1] == Approx(val[0]).epsilon(1e-6));
  CHECK(val[2] == Approx(val[0]).epsilon(1e-6));
}

TEST_CASE("text training resumes at the recorded data position, and generate samples from it",
          "[train][data][checkpoint]") {
  const std::string cache = Tmp("cache_b"), dir = Tmp("ck");
  const std::string common = "--steps 4 --checkpoint-every 2 --seed 6 --json --checkpoint-dir " + dir;
  const auto straight = Json(TrainText(cache, common));
  const nlohmann::json manifest = nlohmann::json::parse(ReadTextFile(dir + "/step-000002/manifest.json"));
  CHECK(manifest["data_position"]["samples_consumed"] == 2 * 8);
  CHECK(manifest["lr_schedule"]["total_steps"] == 4);
  CHECK(manifest["rng"]["seed"] == 6);
  CHECK(manifest["tokenizer_file"].get<std::string>().find("tokenizer-") == 0);
  CHECK(fs::exists(dir + "/" + manifest["tokenizer_file"].get<std::string>()));
  WriteTextFile(dir + "/latest", "step-000002\n");  // back to the middle of the run
  // The tokenizer copy cut short: the resumed run writes it whole again
  // (it kept the damaged copy, and generate refused the checkpoint).
  const std::string copy = dir + "/" + manifest["tokenizer_file"].get<std::string>();
  const std::string whole = ReadTextFile(copy);
  WriteTextFile(copy, whole.substr(0, 100));
  const auto resumed = Json(TrainText(cache, common + " --resume"));
  CHECK(resumed["first_step"] == 2);
  CHECK(ReadTextFile(copy) == whole);
  const auto ls = straight["losses"].get<std::vector<double>>(), lr = resumed["losses"].get<std::vector<double>>();
  REQUIRE(lr.size() == 2);
  CHECK(lr[0] == ls[2]);
  CHECK(lr[1] == ls[3]);

  // Greedy sampling is deterministic and produces text.
  const std::string gen =
      "generate --checkpoint " + dir + " --prompt 'The pipeline' --max-new-tokens 8 --temperature 0 --json";
  const auto g1 = Json(Pplab(gen)), g2 = Json(Pplab(gen));
  CHECK(g1["continuation"] == g2["continuation"]);
  CHECK(g1["step"] == 4);
  CHECK(g1["new_tokens"].get<int>() <= 8);
  // A temperature far below any logit gap samples the likeliest token too.
  const auto cold = Json(Pplab("generate --checkpoint " + dir +
                               " --prompt 'The pipeline' --max-new-tokens 8 --temperature 1e-310 --json"));
  CHECK(cold["continuation"] == g1["continuation"]);
  // A seed draws one text, and every bit of it counts: seeds 2^32 apart
  // drew the same (ATen's generator keeps 32 bits).
  const std::string sampled =
      "generate --checkpoint " + dir + " --prompt 'The pipeline' --max-new-tokens 16 --json --seed ";
  const auto s1 = Json(Pplab(sampled + "1")), s1_again = Json(Pplab(sampled + "1")),
             s_high = Json(Pplab(sampled + "4294967297"));
  CHECK(s1["continuation"] == s1_again["continuation"]);
  CHECK(s1["continuation"] != s_high["continuation"]);

  // Another tokenizer is refused, by generate and by a resume.
  const std::string other_cache = Tmp("cache_other");
  REQUIRE(TrainText(other_cache, "--steps 1 --vocab-size 180").code == 0);
  std::string other_model;
  for (const std::string& name : ListDirectory(other_cache)) {
    if (fs::path(name).extension() == ".model") other_model = other_cache + "/" + name;
  }
  REQUIRE(!other_model.empty());
  const PplabRun g3 = Pplab("generate --checkpoint " + dir + " --prompt x --tokenizer " + other_model);
  CHECK(g3.code != 0);
  CHECK_THAT(g3.out, Catch::Contains("is not the one the checkpoint was trained with"));
  // The step folder as the shell completes it (a trailing slash) finds the
  // tokenizer copy beside it.
  CHECK(
      Json(Pplab("generate --checkpoint " + dir +
                 "/step-000004/ --prompt 'The pipeline' --max-new-tokens 8 --temperature 0 --json"))["continuation"] ==
      g1["continuation"]);
  // Weights exported from a run of the preset's own vocabulary, read with
  // the preset's name: a generation_config.json in the current folder is
  // not the preset's (a preset has no folder), so the text is the
  // checkpoint's.
  const std::string ck256 = Tmp("ck_vocab_256"), exported = Tmp("exported"),
                    elsewhere = Tmp("cwd_with_generation_config");
  REQUIRE(TrainText(Tmp("cache_256"), "--steps 1 --vocab-size 256 --checkpoint-dir " + ck256).code == 0);
  REQUIRE(Pplab("export-model --checkpoint " + ck256 + " -o " + exported + "/model.safetensors").code == 0);
  nlohmann::json every = nlohmann::json::array();
  for (int id = 0; id < 256; ++id) every.push_back(id);
  WriteTextFile(elsewhere + "/generation_config.json", nlohmann::json{{"eos_token_id", every}}.dump());
  const std::string greedy = " --prompt 'The pipeline' --max-new-tokens 8 --temperature 0 --json";
  const auto from_checkpoint = Json(Pplab("generate --checkpoint " + ck256 + greedy));
  REQUIRE(from_checkpoint["new_tokens"].get<int>() > 0);
  const std::string ck256_tokenizer =
      ck256 + "/" +
      nlohmann::json::parse(ReadTextFile(ck256 + "/step-000001/manifest.json"))["tokenizer_file"].get<std::string>();
  const auto from_weights = Json(Pplab("generate --init-from " + exported + "/model.safetensors --model tiny " +
                                           "--tokenizer " + ck256_tokenizer + greedy,
                                       "cd " + elsewhere + " && "));
  CHECK(from_weights["continuation"] == from_checkpoint["continuation"]);
  // An existing folder given without its slash is written as a folder.
  const std::string folder_no_slash = Tmp("exported_folder");
  REQUIRE(Pplab("export-model --checkpoint " + ck256 + " -o " + folder_no_slash).code == 0);
  CHECK(fs::exists(folder_no_slash + "/config.json"));
  CHECK(fs::exists(folder_no_slash + "/model.safetensors"));
  // A checkpoint whose tokenizer copy was replaced exports no folder.
  const std::string swapped = Tmp("ck_swapped");
  REQUIRE(std::system(("cp -r " + dir + "/. " + swapped + " && cp " + other_model + " " + swapped + "/" +
                       manifest["tokenizer_file"].get<std::string>())
                          .c_str()) == 0);
  const PplabRun folder = Pplab("export-model --checkpoint " + swapped + " -o " + exported + "/hf/");
  CHECK(folder.code == 2);
  CHECK_THAT(folder.out,
             Catch::Contains("is not the one the checkpoint was trained with") && Catch::Contains("nothing written"));
  CHECK_FALSE(fs::exists(exported + "/hf/model.safetensors"));
  // (--vocab-size, which TrainText passes, is refused beside --tokenizer.)
  const PplabRun r = Pplab("train -q --out '' --model tiny --data " + kCorpus + " --cache-dir " + cache +
                           " --batch-size 8 --seq-len 32 -m 2 --warmup-steps 0 --eval-every 0 " + common +
                           " --resume --steps 6 --tokenizer " + other_model);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("--resume: the checkpoint in " + dir + " was taken with"));
  // Without --tokenizer another is trained (here of 180 pieces): the error
  // names the copy the checkpoint holds, to give instead.
  const PplabRun other =
      Pplab("train -q --out '' --model tiny --data " + kCorpus + " --vocab-size 180 --cache-dir " + cache +
            " --batch-size 8 --seq-len 32 -m 2 --warmup-steps 0 --eval-every 0 " + common + " --resume --steps 6");
  CHECK(other.code != 0);
  CHECK_THAT(other.out,
             Catch::Contains("was taken with tokenizer") &&
                 Catch::Contains("the checkpoint was trained with the tokenizer it holds: give --tokenizer " + dir +
                                 "/" + manifest["tokenizer_file"].get<std::string>()));
  // A tokenizer the corpus cannot give: the error said only "--vocab-size
  // 100000: BPE finds at most ...", a flag a resume need not have given.
  const PplabRun cannot =
      Pplab("train -q --out '' --model tiny --data " + kCorpus + " --vocab-size 100000 " + "--cache-dir " + cache +
            " --batch-size 8 --seq-len 32 -m 2 " + common + " --resume --steps 6");
  CHECK(cannot.code != 0);
  CHECK_THAT(cannot.out, Catch::Contains("--vocab-size 100000: BPE finds at most") &&
                             Catch::Contains("; the checkpoint was trained with the tokenizer it holds: give "
                                             "--tokenizer " +
                                             dir + "/"));
  // Synthetic tokens against text, said as such (it read "data (none)").
  const PplabRun synthetic = Pplab("train -q --out '' --model tiny --synthetic --batch-size 8 --seq-len 32 -m 2 " +
                                   common + " --resume --steps 6");
  CHECK(synthetic.code != 0);
  CHECK_THAT(synthetic.out, Catch::Contains("--resume: the checkpoint in " + dir +
                                            " was trained on text (--data), this run on synthetic tokens"));

  // A checkpoint of synthetic training has no tokenizer to generate with.
  const std::string synth = Tmp("ck_synth");
  REQUIRE(Pplab("train -q --out '' --synthetic --model tiny -k 1 -m 1 --batch-size 2 --seq-len 8 --steps 1 "
                "--checkpoint-dir " +
                synth)
              .code == 0);
  const PplabRun g4 = Pplab("generate --checkpoint " + synth + " --prompt x");
  CHECK(g4.code != 0);
  CHECK_THAT(g4.out, Catch::Contains("was trained on synthetic tokens"));
  const PplabRun text_on_synthetic = Pplab(
      "train -q --out '' --model tiny -k 1 -m 1 --batch-size 2 --seq-len 8 "
      "--steps 2 --resume --data " +
      kCorpus + " --cache-dir " + cache + " --checkpoint-dir " + synth);
  CHECK(text_on_synthetic.code != 0);
  CHECK_THAT(text_on_synthetic.out, Catch::Contains("was trained on synthetic tokens (--synthetic), this run on text"));
}

TEST_CASE("prompt and completion records: the prompt is read, not learned, and pipelined equals one process",
          "[train][data]") {
  // Each fortune as a record: its first half the prompt, the rest (from a
  // space) the completion; and the same text unmasked; one tokenizer.
  const std::string dir = Tmp("sft");
  const Corpus fortunes = ReadCorpus({kCorpus});
  const std::string tokenizer = dir + "/tokenizer.model";
  TrainTokenizer(fortunes.documents, 200, tokenizer);
  std::string sft, plain;
  const auto halves = HalvedFortunes();
  REQUIRE(halves.size() > 20);
  for (const auto& [prompt, completion] : halves) {
    sft += nlohmann::json{{"prompt", prompt}, {"completion", completion}}.dump() + "\n";
    plain += nlohmann::json{{"text", prompt + completion}}.dump() + "\n";
  }
  WriteTextFile(dir + "/sft.jsonl", sft);
  WriteTextFile(dir + "/plain.jsonl", plain);
  const std::string args = RecordTraining(dir, tokenizer, 1);
  const auto pipelined = Json(Pplab(args + dir + "/sft.jsonl -s 1f1b -k 2 -m 4"));
  const auto one = Json(Pplab(args + dir + "/sft.jsonl -k 1 -m 1"));
  const auto unmasked = Json(Pplab(args + dir + "/plain.jsonl -k 1 -m 1"));
  const auto lp = pipelined["losses"].get<std::vector<double>>(), lo = one["losses"].get<std::vector<double>>();
  REQUIRE(lp.size() == 3);
  REQUIRE(lo.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(lp[i] == Approx(lo[i]).epsilon(1e-5));
  REQUIRE(pipelined["val_losses"].size() == 3);
  CHECK(pipelined["val_losses"][2]["loss"].get<double>() ==
        Approx(one["val_losses"][2]["loss"].get<double>()).epsilon(1e-5));
  // The same text with its prompts learned is another loss.
  CHECK(unmasked["losses"][0].get<double>() != Approx(lo[0]).epsilon(1e-3));
}

TEST_CASE(
    "chat records under a Llama 3 tokenizer train as their layout written out by hand, and pipelined equals "
    "one process",
    "[train][data]") {
  // Each fortune as a two-turn chat (a user's first half, the assistant's
  // rest); beside it the same chat as a prompt/completion record holding
  // Llama 3's layout as text, whose specials the tokenizer.json reads as
  // the same ids. The records differ, the tokens and their masks must not.
  const std::string dir = Tmp("chat");
  test::Spec spec;
  spec.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {" ", "a"}, {"e", "r"}, {"o", "n"}, {" ", "t"}};
  spec.added = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>",      "<|finetune_right_pad_id|>"};
  const std::string tokenizer = dir + "/tokenizer.json";
  WriteTextFile(tokenizer, test::Build(spec).dump());
  std::string chat, written;
  const auto halves = HalvedFortunes();
  REQUIRE(halves.size() > 20);
  for (const auto& [user, assistant] : halves) {
    chat += nlohmann::json{{"messages",
                            {{{"role", "user"}, {"content", user}}, {{"role", "assistant"}, {"content", assistant}}}}}
                .dump() +
            "\n";
    written += nlohmann::json{{"prompt", "<|start_header_id|>user<|end_header_id|>\n\n" + user +
                                             "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
                              {"completion", assistant + "<|eot_id|>"}}
                   .dump() +
               "\n";
  }
  WriteTextFile(dir + "/chat.jsonl", chat);
  WriteTextFile(dir + "/written.jsonl", written);
  const std::string args = RecordTraining(dir, tokenizer, 3);
  const auto pipelined = Json(Pplab(args + dir + "/chat.jsonl -s 1f1b -k 2 -m 4 --checkpoint-dir " + dir + "/ck"));
  const auto one = Json(Pplab(args + dir + "/chat.jsonl -k 1 -m 1"));
  const auto by_hand = Json(Pplab(args + dir + "/written.jsonl -k 1 -m 1"));
  const auto lp = pipelined["losses"].get<std::vector<double>>(), lo = one["losses"].get<std::vector<double>>();
  REQUIRE(lo.size() == 3);
  REQUIRE(lp.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(lp[i] == Approx(lo[i]).epsilon(1e-5));
  CHECK(by_hand["losses"] == one["losses"]);
  CHECK(by_hand["val_losses"] == one["val_losses"]);

  // generate --chat asks in the same layout and stops at <|eot_id|>: its
  // answer begins the continuation of that layout written as text, which
  // goes on past the turn's end.
  const std::string generate = "generate --checkpoint " + dir + "/ck --temperature 0 --max-new-tokens 24 --json ";
  const auto answer = Json(Pplab(generate + "--chat --system 'Be brief.' --prompt 'The pipeline'"));
  CHECK(answer["chat_layout"] == "llama3");
  const auto text = Json(Pplab(generate + "--prompt '<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                                          "<|start_header_id|>user<|end_header_id|>\n\nThe pipeline<|eot_id|>"
                                          "<|start_header_id|>assistant<|end_header_id|>\n\n'"));
  const std::string a = answer["continuation"], t = text["continuation"];
  INFO(a << "\n" << t);
  CHECK(t.compare(0, a.size(), a) == 0);
  if (answer["new_tokens"].get<int>() < 24) CHECK(t.compare(a.size(), 10, "<|eot_id|>") == 0);
  const PplabRun lone = Pplab(generate + "--system x --prompt y");
  CHECK(lone.code != 0);
  CHECK_THAT(lone.out, Catch::Contains("--system requires --chat"));
}

TEST_CASE("the outputs of a run: metrics lines, validation, both traces and the picture", "[train][data]") {
  const std::string cache = Tmp("cache_c"), out = Tmp("out");
  const PplabRun r = Pplab("train -q --model tiny --data " + kCorpus + " --vocab-size 200 --cache-dir " + cache +
                           " --batch-size 8 --seq-len 32 -m 2 --steps 6 --eval-every 3 --out " + out);
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ifstream metrics(out + "/metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 6);
  for (int i = 0; i < 6; ++i) {
    CHECK(lines[i]["step"] == i + 1);
    CHECK(lines[i].contains("val_loss") == ((i + 1) % 3 == 0));
    CHECK(lines[i]["bubble"].get<double>() >= 0);
    CHECK(lines[i]["bubble"].get<double>() < 1);
  }
  CHECK(fs::exists(out + "/checkpoints/latest"));
  CHECK(fs::exists(out + "/trace-measured.json"));
  CHECK(fs::exists(out + "/trace-simulated.json"));
  const std::string svg = ReadTextFile(out + "/timeline.svg");
  CHECK_THAT(svg, Catch::Contains("simulated"));
  CHECK_THAT(svg, Catch::Contains("measured"));
}

TEST_CASE("bad data is one clear line", "[train][data]") {
  const std::string dir = Tmp("bad");
  WriteTextFile(dir + "/empty.txt", "\n");
  WriteTextFile(dir + "/model.json",
                R"({"vocab_size": 999, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128})");
  const std::string base = "train -q --out '' --model tiny --steps 1 --cache-dir " + dir + "/cache ";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"--data " + dir + "/none.txt", "none.txt: no such file or directory"},
                        Case{"--data " + dir + "/empty.txt", "no text in " + dir + "/empty.txt"},
                        Case{"--data " + kCorpus + " --vocab-size 20", "--vocab-size 20"},
                        Case{"--data " + kCorpus + " --tokenizer " + kCorpus, "not a SentencePiece model"},
                        // checked before any worker starts
                        Case{"--data " + kCorpus + " --vocab-size 200 -k 2 --seq-len 16 --model " + dir + "/model.json",
                             "model.json: vocab_size 999, but the tokenizer"}}) {
    const PplabRun r = Pplab(base + c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains(c.says));
  }
}

}  // namespace pplab::train_text_test

namespace pplab::train_text_test {

TEST_CASE("a validation split that comes out empty is said, even with -q", "[train][data]") {
  const std::string dir = Tmp("empty_split");
  WriteTextFile(dir + "/one.txt", "only one document here to train on\n");
  const PplabRun r = Pplab("train -q --out '' --model tiny --data " + dir + "/one.txt --vocab-size 40 --cache-dir " +
                           dir + "/cache --batch-size 2 --seq-len 8 -m 1 --steps 1 --val-fraction 0.5 --eval-every 1");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("pplab: note: --eval-every 1: the validation split is empty (--val-fraction 0.5 "
                                    "of 1 documents), so no validation loss is computed"));
}

}  // namespace pplab::train_text_test
