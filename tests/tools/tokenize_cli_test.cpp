// `pplab tokenize`: the ids of a text, and the text of ids, by the library's
// own Tokenizer; bad input is one line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer.h"
#include "schedules/file_io.h"
#include "tests/byte_level_json.h"
#include "tests/run_pplab.h"

namespace pplab::tokenize_cli_test {

TEST_CASE("cli: tokenize prints the Tokenizer's ids, --decode gives the text back", "[cli][bpe]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/tokenize_cli";
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  test::Spec spec;
  spec.merges = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}};
  spec.added = {"<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"};
  const std::string path = dir + "/tokenizer.json";
  WriteTextFile(path, test::Build(spec).dump());
  const Tokenizer tokenizer = Tokenizer::Load(path);
  const std::string text = "the thin thing<|end_of_text|>";
  std::string want;
  for (int32_t id : tokenizer.Encode(text)) want += (want.empty() ? "" : " ") + std::to_string(id);
  // "the" 257, " " 32, "th" 256, "in" 259, "g" 103, EOS 261 (the merges'
  // tokens follow the bytes, then the added ones).
  REQUIRE(want == "257 32 256 259 32 256 259 103 261");

  const PplabRun ids = Pplab("tokenize --tokenizer " + path + " 'the thin thing<|end_of_text|>'");
  INFO(ids.out);
  REQUIRE(ids.code == 0);
  CHECK(ids.out == want + "\n");
  // Words are joined by one space; --file reads the text as it is.
  CHECK(Pplab("tokenize --tokenizer " + path + " the thin 'thing<|end_of_text|>'").out == want + "\n");
  WriteTextFile(dir + "/text.txt", text);
  CHECK(Pplab("tokenize --tokenizer " + path + " --file " + dir + "/text.txt").out == want + "\n");

  const PplabRun back = Pplab("tokenize --tokenizer " + path + " --decode " + want);
  INFO(back.out);
  REQUIRE(back.code == 0);
  CHECK(back.out == "the thin thing\n");  // EOS is not text
  // --decode --file reads the ids from the file, split at white space.
  WriteTextFile(dir + "/ids.txt", want + "\n");
  CHECK(Pplab("tokenize --tokenizer " + path + " --decode --file " + dir + "/ids.txt").out == "the thin thing\n");
  WriteTextFile(dir + "/bad-ids.txt", "257\n32 x\n");
  CHECK_THAT(Pplab("tokenize --tokenizer " + path + " --decode --file " + dir + "/bad-ids.txt").out,
             Catch::Contains("tokenize --decode --file " + dir + "/bad-ids.txt: 'x' is not a token id"));

  WriteTextFile(dir + "/empty.txt", "");
  WriteTextFile(dir + "/latin1.txt", "caf\xe9\n");
  const PplabRun json = Pplab("tokenize --tokenizer " + path + " --json the thin");
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  CHECK(j["ids"] == std::vector<int>{257, 32, 256, 259});
  // The vocabulary's pieces, as the file spells them (a space is byte-level's
  // "\u0120"), not each id decoded alone.
  CHECK(j["pieces"] == std::vector<std::string>{"the", "\xc4\xa0", "th", "in"});
  const PplabRun special = Pplab("tokenize --tokenizer " + path + " --json 'a<|end_of_text|>'");
  REQUIRE(special.code == 0);
  CHECK(nlohmann::json::parse(special.out)["pieces"] == std::vector<std::string>{"a", "<|end_of_text|>"});
  CHECK(j["kind"] == "tokenizer.json");
  CHECK(j["bos"] == 260);
  CHECK(j["eos"] == 261);
  CHECK(j["pad"] == 262);

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--decode 12 x", "tokenize --decode: 'x' is not a token id (0 to 262)"},
           {"--decode 263", "tokenize --decode: '263' is not a token id"},
           {"", "give the text as arguments or --file"},
           {"''", "tokenize: the text given is empty"},
           {"--file " + dir + "/empty.txt", "tokenize --file " + dir + "/empty.txt: the file is empty"},
           // Training refuses such a file; tokenize gave ids, with UNK.
           {"--file " + dir + "/latin1.txt", "tokenize --file " + dir +
                                                 "/latin1.txt: not UTF-8 text (invalid byte at "
                                                 "offset 3)"},
           {"\"$(printf 'ab \\377')\"", "tokenize: the text given: not UTF-8 text (invalid byte at offset 3)"}}) {
    const PplabRun bad = Pplab("tokenize --tokenizer " + path + " " + args);
    INFO(args << ": " << bad.out);
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains(message));
  }
  const PplabRun missing = Pplab("tokenize --tokenizer " + dir + "/none.json x");
  CHECK(missing.code == 2);
  CHECK_THAT(missing.out, Catch::Contains(dir + "/none.json"));
  RemoveTree(dir);
}

TEST_CASE("cli: tokenize refuses white space alone, which a SentencePiece model gives no token for", "[cli][data]") {
  const std::string dir = TempPath("tokenize-spm");
  std::filesystem::create_directories(dir);
  const std::string model = dir + "/t.model";
  TrainTokenizer({"the thin thing", "a pipeline of stages", "then the next thing"}, 30, model);
  const PplabRun space = Pplab("tokenize --tokenizer " + model + " ' '");
  CHECK(space.code == 2);
  CHECK_THAT(space.out, Catch::Contains("tokenize: the text given: no token (white space alone)"));
  WriteTextFile(dir + "/newlines.txt", "\n\n\n");
  const PplabRun lines = Pplab("tokenize --tokenizer " + model + " --file " + dir + "/newlines.txt");
  CHECK(lines.code == 2);
  CHECK_THAT(lines.out, Catch::Contains("tokenize --file " + dir + "/newlines.txt: no token (white space alone)"));
  CHECK(Pplab("tokenize --tokenizer " + model + " 'the thin'").code == 0);
  RemoveTree(dir);
}

TEST_CASE("cli: tokenize --records shows a record as training reads it, in read and learned runs", "[cli][chat]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/tokenize_cli_records";
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  test::Spec spec;
  spec.added = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|video_pad|>"};  // Qwen's: the chatml layout
  const std::string path = dir + "/tokenizer.json";
  WriteTextFile(path, test::Build(spec).dump());
  WriteTextFile(dir + "/data.jsonl",
                "{\"prompt\": \"Q:\", \"completion\": \" A\"}\n"
                "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                "{\"role\": \"assistant\", \"content\": \"Yo\"}]}\n");
  const std::string records = "tokenize --tokenizer " + path + " --records " + dir + "/data.jsonl ";
  const PplabRun chat = Pplab(records + "--record 2 --json");
  INFO(chat.out);
  REQUIRE(chat.code == 0);
  const auto j = nlohmann::json::parse(chat.out);
  CHECK(j["layout"] == "chatml");
  // Bytes are their own ids; the specials follow: <|im_start|> 257, <|im_end|> 258.
  const std::vector<std::pair<bool, std::string>> want = {
      {false, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"}, {true, "Yo<|im_end|>"}, {false, "\n"}};
  REQUIRE(j["spans"].size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(j["spans"][i]["learn"] == want[i].first);
    CHECK(j["spans"][i]["text"] == want[i].second);
  }
  CHECK(j["spans"][1]["ids"] == std::vector<int>{'Y', 'o', 258});
  CHECK(j["learn"].size() == j["ids"].size());
  // The prompt/completion record, as JSON (no chat layout) and as text.
  const PplabRun plain_json = Pplab(records + "--record 1 --json");
  INFO(plain_json.out);
  REQUIRE(plain_json.code == 0);
  CHECK(nlohmann::json::parse(plain_json.out)["layout"].is_null());
  CHECK(nlohmann::json::parse(plain_json.out)["chat"] == false);
  const PplabRun plain = Pplab(records + "--record 1");
  CHECK(plain.out == "record 1 of " + dir + "/data.jsonl: 4 tokens, 2 learned, then EOS (learned); BOS before it\n" +
                         "read  Q:\nlearn  A\n");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--record 3", "tokenize --record 3: " + dir + "/data.jsonl holds 2 records (from 1)"},
           {"--record 1 x", "tokenize --records: give no text, --file or --decode with it"}}) {
    const PplabRun bad = Pplab(records + args);
    INFO(args << ": " << bad.out);
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains(message));
  }
  // Past int: CLI11's "Could not convert", exit 104.
  const PplabRun huge = Pplab(records + "--record 99999999999");
  CHECK(huge.code != 0);
  CHECK_THAT(huge.out, Catch::Contains("--record: Value 99999999999 not in range"));
  // A bad records file is named by the flag that gave it, not train's --data.
  WriteTextFile(dir + "/bad.jsonl", "{\"prompt\": 1}\n");
  const PplabRun bad = Pplab("tokenize --tokenizer " + path + " --records " + dir + "/bad.jsonl");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::StartsWith("pplab: error: --records " + dir + "/bad.jsonl:1: "));
  RemoveTree(dir);
}

}  // namespace pplab::tokenize_cli_test
