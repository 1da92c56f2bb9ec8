// Preparing text data for training: read the corpus, train or load the
// tokenizer, tokenize once into a cached file. No LibTorch.
//
// Cache files live in `cache_dir`, named by what they were made from, so a
// changed corpus or tokenizer gets new files and an unchanged one is reused:
//   tokenizer-<corpus fingerprint>-<vocab size>.model
//   tokens-<corpus fingerprint>-<tokenizer fingerprint>.bin
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pplab {

struct TextSource {
  std::vector<std::string> paths;  // files or directories (see corpus.h)
  std::string tokenizer;           // a SentencePiece .model to use; empty: train one
  int vocab_size = 2048;           // pieces of the tokenizer to train
  std::string cache_dir;
};

struct PreparedText {
  std::string tokenizer_path;
  std::string cache_path;
  uint64_t corpus_fingerprint = 0;
  uint64_t tokenizer_fingerprint = 0;
  int64_t documents = 0;
  int64_t tokens = 0;
  size_t corpus_bytes = 0;
  bool chats = false;  // some documents are chat records (chat.h)
};

// Makes sure the tokenizer and token cache exist (building what is missing)
// and returns where they are. `log` (may be empty) gets a line per thing
// built. Throws pplab::Error naming the file, flag or directory at fault.
PreparedText PrepareText(const TextSource& source, const std::function<void(const std::string&)>& log);

// The default cache directory: $XDG_CACHE_HOME/pplab, else ~/.cache/pplab,
// else ./.pplab-cache.
std::string DefaultCacheDir();

}  // namespace pplab
