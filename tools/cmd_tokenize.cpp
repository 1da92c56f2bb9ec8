// pplab tokenize --tokenizer FILE TEXT: the ids a tokenizer gives a text
// (or, with --decode, the text of ids), to compare with another library's
// and to see what training will read; with --records, the ids of a record
// of a .jsonl file as the token cache holds them, split into what the loss
// reads and what it learns. No LibTorch.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/data/corpus.h"
#include "runtime/data/token_cache.h"
#include "runtime/data/tokenizer.h"
#include "runtime/data/unicode.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "tools/commands.h"

namespace pplab::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  std::vector<std::string> text;
  std::string file;
  std::string records;  // a .jsonl file of records (--data's)
  int record = 1;       // which of its records, from 1
  bool decode = false;
  bool json = false;
};

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// A text on one line: newlines and tabs written as \n and \t.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

// --records: one record as the cache holds it, in runs of read and learned
// tokens.
int RunRecord(const TokenizeOptions& o, const Tokenizer& tokenizer) {
  const Corpus corpus = ReadCorpus({o.records}, "--records");
  if (o.record < 1 || static_cast<size_t>(o.record) > corpus.documents.size()) {
    throw Error("tokenize --record " + std::to_string(o.record) + ": " + o.records + " holds " +
                std::to_string(corpus.documents.size()) + " records (from 1)");
  }
  const size_t d = static_cast<size_t>(o.record) - 1;
  const ChatLayout layout = ChatLayoutFor(tokenizer);
  const std::vector<int32_t> marked = EncodeDocument(corpus, d, tokenizer, layout);
  // Runs of ids with the same mark; training adds BOS before the record
  // (never a target) and EOS after it (learned).
  struct Run {
    bool learn;
    std::vector<int32_t> ids;
  };
  std::vector<Run> runs;
  std::vector<int32_t> ids;
  std::vector<bool> learn;
  for (int32_t m : marked) {
    const bool l = (m & kNoLossBit) == 0;
    const int32_t id = m & ~kNoLossBit;
    if (runs.empty() || runs.back().learn != l) runs.push_back({l, {}});
    runs.back().ids.push_back(id);
    ids.push_back(id);
    learn.push_back(l);
  }
  const bool chat = d < corpus.chats.size() && !corpus.chats[d].empty();
  const size_t learned = static_cast<size_t>(std::count(learn.begin(), learn.end(), true));
  if (o.json) {
    nlohmann::json spans = nlohmann::json::array();
    for (const Run& r : runs) {
      spans.push_back({{"learn", r.learn}, {"ids", r.ids}, {"text", tokenizer.Decode(r.ids)}});
    }
    const nlohmann::json j = {{"tokenizer", o.tokenizer},
                              {"records", o.records},
                              {"record", o.record},
                              {"chat", chat},
                              {"layout", chat ? nlohmann::json(ChatLayoutName(layout)) : nlohmann::json()},
                              {"ids", ids},
                              {"learn", learn},
                              {"spans", spans},
                              {"bos", tokenizer.Bos()},
                              {"eos", tokenizer.Eos()}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("record %d of %s%s: %zu tokens, %zu learned, then EOS (learned); BOS before it\n", o.record,
              o.records.c_str(), chat ? (std::string(" (") + ChatLayoutName(layout) + " layout)").c_str() : "",
              ids.size(), learned);
  for (const Run& r : runs)
    std::printf("%s %s\n", r.learn ? "learn" : "read ", OneLine(tokenizer.Decode(r.ids)).c_str());
  return 0;
}

int RunTokenize(const TokenizeOptions& o) {
  if (!o.records.empty()) {
    if (!o.text.empty() || !o.file.empty() || o.decode) {
      throw Error("tokenize --records: give no text, --file or --decode with it");
    }
    return RunRecord(o, Tokenizer::Load(o.tokenizer));
  }
  if (o.text.empty() == o.file.empty()) throw Error("tokenize: give the text as arguments or --file, one of the two");
  const Tokenizer tokenizer = Tokenizer::Load(o.tokenizer);
  const std::string input = o.file.empty() ? Joined(o.text) : ReadTextFile(o.file);
  if (input.empty()) {
    throw Error(std::string("tokenize") + (o.decode ? " --decode" : "") +
                (o.file.empty() ? ": the text given is empty" : " --file " + o.file + ": the file is empty"));
  }
  std::vector<int32_t> ids;
  std::string text;
  if (o.decode) {
    // The ids: the arguments, or the file's words (split at white space).
    std::vector<std::string> words = o.text;
    if (!o.file.empty()) {
      std::istringstream in(input);
      words.clear();
      for (std::string word; in >> word;) words.push_back(word);
    }
    for (const std::string& word : words) {
      size_t used = 0;
      long id = -1;
      try {
        id = std::stol(word, &used);
      } catch (const std::exception&) {
      }
      if (used != word.size() || id < 0 || id >= tokenizer.VocabSize()) {
        throw Error("tokenize --decode" + (o.file.empty() ? std::string() : " --file " + o.file) + ": '" + word +
                    "' is not a token id (0 to " + std::to_string(tokenizer.VocabSize() - 1) + ")");
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    if (ids.empty()) throw Error("tokenize --decode --file " + o.file + ": the file holds no ids");
    text = tokenizer.Decode(ids);
  } else {
    // As training reads text: UTF-8 (it refuses a file that is not), and
    // some token (the text's white space alone gives none).
    const std::string what = o.file.empty() ? "tokenize: the text given" : "tokenize --file " + o.file;
    if (const size_t bad = InvalidUtf8At(input); bad != std::string::npos) {
      throw Error(what + ": not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")");
    }
    ids = tokenizer.Encode(input);
    if (ids.empty()) throw Error(what + ": no token (white space alone)");
    text = input;
  }
  if (o.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tokenizer.Piece(id));
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
  sub->add_option("--file", o->file,
                  "read the text from this file, as it is (with --decode: the ids, split at white space)");
  sub->add_flag("--decode", o->decode, "print the text of the ids given");
  CLI::Option* records = sub->add_option(
      "--records", o->records,
      "a .jsonl file of --data records: print one as training reads it, in runs of tokens the loss reads and learns");
  sub->add_option("--record", o->record, "with --records: which record, from 1")
      ->needs(records)
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  sub->add_flag("--json", o->json,
                "print one JSON object: ids, each id's vocabulary piece (as the tokenizer file spells it), the "
                "special ids, the text");
  sub->callback([o, &exit_code] { exit_code = RunTokenize(*o); });
}

}  // namespace pplab::cli
