// TokenCache: a corpus tokenized once, stored in a binary file and read back
// by memory map, so every worker of every run shares the same pages and
// starts at once. No LibTorch.
//
// File layout (little-endian): a 64-byte header {magic "PPLABTOK", u32
// version 1, u32 0, u64 documents D, u64 tokens N, u64 corpus fingerprint,
// u64 tokenizer fingerprint, 16 bytes 0}, then D+1 u64 document offsets
// (offset[0] = 0, offset[D] = N), then N i32 token ids. BOS/EOS are not
// stored; samples add them. A document's prompt (Corpus::prompts) comes
// first, its ids carrying kNoLossBit; a chat (Corpus::chats) is rendered in
// the tokenizer's layout (chat.h), its read spans' ids carrying the bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/chat.h"

namespace pplab {

class Tokenizer;
struct Corpus;

// Set on the id of a token the loss does not predict (a prompt's, a chat's
// read spans'): ids are
// below 2^30, so the bit is free. Samples carry it (TextDataset), and
// BatchFromRows (runtime/train/batches.h) clears it from the inputs and
// makes such a token's target PAD.
constexpr int32_t kNoLossBit = int32_t{1} << 30;

// The ids the cache holds for document `d` of `corpus` (no BOS or EOS): a
// prompt's and a chat's read spans (in `layout`, ChatLayoutFor(tokenizer)
// for the cache's) with kNoLossBit set.
std::vector<int32_t> EncodeDocument(const Corpus& corpus, size_t d, const Tokenizer& tokenizer, ChatLayout layout);

// Tokenizes `corpus` with `tokenizer` on `threads` threads (Tokenizer's
// Encode is const and keeps no state between calls) and writes the cache
// file at `path` (atomically), the same bytes for any number of threads.
// Returns the number of tokens.
int64_t WriteTokenCache(const Corpus& corpus, const Tokenizer& tokenizer, const std::string& path, int threads = 1);

class TokenCache {
 public:
  // Maps `path`. Throws pplab::Error naming the file when it is missing,
  // truncated (its size is checked against its header before it is
  // mapped), or not a cache of these fingerprints. Should the file shrink
  // while mapped, reading it would be a bus error: the process then prints
  // one line naming the file and exits with code 2.
  TokenCache(const std::string& path, uint64_t corpus_fingerprint, uint64_t tokenizer_fingerprint);
  // Throws pplab::Error naming the file and the first token id outside
  // [0, vocab_size).
  void CheckIds(int32_t vocab_size) const;
  ~TokenCache();
  TokenCache(const TokenCache&) = delete;
  TokenCache& operator=(const TokenCache&) = delete;

  int64_t NumDocuments() const { return docs_; }
  int64_t NumTokens() const { return tokens_; }
  // Document d's tokens: [DocBegin(d), DocBegin(d) + DocSize(d)).
  const int32_t* DocBegin(int64_t d) const { return ids_ + offsets_[d]; }
  int64_t DocSize(int64_t d) const { return static_cast<int64_t>(offsets_[d + 1] - offsets_[d]); }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  int64_t docs_ = 0, tokens_ = 0;
  const uint64_t* offsets_ = nullptr;
  const int32_t* ids_ = nullptr;
};

}  // namespace pplab
