// A training run's text, opened: the tokenizer, the mapped token cache and
// the samples. No LibTorch.
//
// The launcher prepares the text once (PrepareText: it reads and
// fingerprints the corpus, trains the tokenizer and fills the cache when they
// are missing) and hands its workers the result in one environment variable,
// so that they open the same files without reading the corpus again.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "runtime/data/text_dataset.h"
#include "runtime/data/text_prepare.h"
#include "runtime/data/token_cache.h"
#include "runtime/data/tokenizer.h"

namespace pplab {

struct RunText {
  PreparedText prepared;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<TokenCache> cache;
  std::unique_ptr<TextDataset> dataset;  // reads *cache
};

// Opens `prepared`, or when it is empty prepares `source` first (`log` as in
// PrepareText). `data`'s BOS, EOS and PAD ids are the tokenizer's; its other
// fields are used as given. Throws pplab::Error naming the file at fault,
// and when the cache holds an id outside the tokenizer's vocabulary.
std::unique_ptr<RunText> OpenRunText(const TextSource& source, TextDataOptions data,
                                     const std::function<void(const std::string&)>& log,
                                     const std::optional<PreparedText>& prepared);

// The environment variable that carries a PreparedText to the workers.
constexpr char kPreparedTextEnv[] = "PPLAB_PREPARED_TEXT";

// "PPLAB_PREPARED_TEXT=<one JSON object>", for a worker's environment. The
// fingerprints travel as hex strings: JSON numbers lose 64-bit integers in
// some readers.
std::string PreparedTextEnv(const PreparedText& p);

// What PreparedTextEnv put in this process's environment; nullopt when the
// variable is unset. Throws pplab::Error naming the variable when its value
// is malformed. corpus_bytes does not travel (0).
std::optional<PreparedText> PreparedTextFromEnv();

}  // namespace pplab
