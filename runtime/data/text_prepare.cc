#include "runtime/data/text_prepare.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include "runtime/data/chat.h"
#include "runtime/data/corpus.h"
#include "runtime/data/fnv.h"
#include "runtime/data/token_cache.h"
#include "runtime/data/tokenizer.h"
#include "schedules/error.h"

namespace fs = std::filesystem;

namespace pplab {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string Fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "pplab").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "pplab").string();
  }
  return ".pplab-cache";
}

PreparedText PrepareText(const TextSource& source, const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  const Corpus corpus = ReadCorpus(source.paths);
  for (const std::string& note : corpus.notes) say(note);
  std::error_code ec;
  fs::create_directories(source.cache_dir, ec);
  if (ec || !fs::is_directory(source.cache_dir)) {
    throw Error("--cache-dir " + source.cache_dir + ": cannot create: " + (ec ? ec.message() : "not a directory"));
  }
  PreparedText out;
  out.corpus_fingerprint = corpus.fingerprint;
  out.documents = static_cast<int64_t>(corpus.documents.size());
  out.corpus_bytes = corpus.bytes;
  out.chats = !corpus.chats.empty();
  std::optional<Tokenizer> cached;  // the cache's tokenizer, when it loaded
  if (!source.tokenizer.empty()) {
    out.tokenizer_path = source.tokenizer;
  } else {
    out.tokenizer_path = (fs::path(source.cache_dir) / ("tokenizer-" + FnvHex(corpus.fingerprint) + "-" +
                                                        std::to_string(source.vocab_size) + ".model"))
                             .string();
    // A cached tokenizer that does not load, or loads with other than its
    // name's pieces (a model cut short can parse, with 4 of its 200), is
    // trained again, like a damaged token cache below: the same corpus
    // gives the same model, byte for byte.
    bool train = !fs::exists(out.tokenizer_path, ec);
    if (!train) {
      try {
        cached.emplace(Tokenizer::Load(out.tokenizer_path));
        if (cached->VocabSize() != source.vocab_size) {
          throw Error(out.tokenizer_path + ": " + std::to_string(cached->VocabSize()) + " pieces where its name says " +
                      std::to_string(source.vocab_size) + " (damaged)");
        }
      } catch (const Error& e) {
        say(std::string(e.what()) + "; training it again");
        cached.reset();
        train = true;
      }
    }
    if (train) {
      const auto start = std::chrono::steady_clock::now();
      // Prompts are text the model reads too (none in a plain corpus, whose
      // tokenizer this leaves as it was).
      std::vector<std::string> texts = corpus.documents;
      for (const std::string& p : corpus.prompts) {
        if (!p.empty()) texts.push_back(p);
      }
      TrainTokenizer(texts, source.vocab_size, out.tokenizer_path);
      say("trained a " + std::to_string(source.vocab_size) + "-piece BPE tokenizer on " +
          std::to_string(corpus.documents.size()) + " documents (" + Fixed(corpus.bytes / 1e6, 1) + " MB) in " +
          Fixed(SecondsSince(start), 1) + " s: " + out.tokenizer_path);
    }
  }
  const Tokenizer tokenizer = cached ? std::move(*cached) : Tokenizer::Load(out.tokenizer_path);
  out.tokenizer_fingerprint = tokenizer.Fingerprint();
  out.cache_path = (fs::path(source.cache_dir) /
                    ("tokens-" + FnvHex(corpus.fingerprint) + "-" + FnvHex(tokenizer.Fingerprint()) + ".bin"))
                       .string();
  bool build = !fs::exists(out.cache_path, ec);
  if (!build) {
    try {
      const TokenCache cache(out.cache_path, corpus.fingerprint, tokenizer.Fingerprint());
      out.tokens = cache.NumTokens();
    } catch (const Error& e) {
      say(std::string(e.what()) + "; rebuilding it");
      build = true;
    }
  }
  if (build) {
    const auto start = std::chrono::steady_clock::now();
    // Before any worker starts: every core is the launcher's.
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
    out.tokens = WriteTokenCache(corpus, tokenizer, out.cache_path, threads);
    say("tokenized " + std::to_string(out.documents) + " documents into " + std::to_string(out.tokens) + " tokens in " +
        Fixed(SecondsSince(start), 1) + " s on " + std::to_string(threads) + " threads" +
        (out.chats ? std::string(", chats in the ") + ChatLayoutName(ChatLayoutFor(tokenizer)) + " layout" : "") +
        ": " + out.cache_path);
  }
  return out;
}

}  // namespace pplab
