// pplab tokenize --tokenizer FILE TEXT: the ids a tokenizer gives a text
// (or, with --decode, the text of ids), to compare with another library's
// and to see what training will read. No LibTorch.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/data/tokenizer.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "tools/commands.h"

namespace pplab::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  std::vector<std::string> text;
  std::string file;
  bool decode = false;
  bool json = false;
};

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

int RunTokenize(const TokenizeOptions& o) {
  if (o.text.empty() == o.file.empty()) throw Error("tokenize: give the text as arguments or --file, one of the two");
  const Tokenizer tokenizer = Tokenizer::Load(o.tokenizer);
  const std::string input = o.file.empty() ? Joined(o.text) : ReadTextFile(o.file);
  std::vector<int32_t> ids;
  std::string text;
  if (o.decode) {
    for (const std::string& word : o.text) {
      size_t used = 0;
      long id = -1;
      try {
        id = std::stol(word, &used);
      } catch (const std::exception&) {
      }
      if (used != word.size() || id < 0 || id >= tokenizer.VocabSize()) {
        throw Error("tokenize --decode: '" + word + "' is not a token id (0 to " +
                    std::to_string(tokenizer.VocabSize() - 1) + ")");
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    text = tokenizer.Decode(ids);
  } else {
    ids = tokenizer.Encode(input);
    text = input;
  }
  if (o.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tokenizer.Decode({id}));
    const nlohmann::json j = {{"tokenizer", o.tokenizer},
                              {"kind", tokenizer.FileName()},
                              {"vocab_size", tokenizer.VocabSize()},
                              {"bos", tokenizer.Bos()},
                              {"eos", tokenizer.Eos()},
                              {"pad", tokenizer.Pad()},
                              {"ids", ids},
                              {"pieces", pieces},
                              {"text", text}};
    // Invalid UTF-8 (a piece that is part of a character) is replaced in
    // JSON, which can only hold text.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (o.decode) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
    return 0;
  }
  std::string line;
  for (int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

void SetupTokenize(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* sub =
      app.add_subcommand("tokenize", "the token ids of a text (no BOS or EOS added), or with --decode the text of ids");
  sub->add_option("--tokenizer", o->tokenizer, "a SentencePiece .model or a byte-level BPE tokenizer.json")->required();
  sub->add_option("text", o->text, "the text (its words joined by spaces), or with --decode the ids");
  sub->add_option("--file", o->file, "read the text from this file, as it is");
  sub->add_flag("--decode", o->decode, "print the text of the ids given");
  sub->add_flag("--json", o->json, "print one JSON object: ids, each id's piece, the special ids, the text");
  sub->callback([o, &exit_code] { exit_code = RunTokenize(*o); });
}

}  // namespace pplab::cli
