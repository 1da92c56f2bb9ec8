// TextDataset: training and validation samples of seq_len + 1 tokens cut
// from a TokenCache, and the order in which training reads them. No LibTorch.
//
// Each document becomes BOS + its tokens + EOS. Padded mode (the default, as
// the tutorials do): a sample is one document, or a window of a long one
// (windows start every seq_len tokens, so each next-token pair is seen once),
// filled up with PAD. Packed mode: the training documents are concatenated
// and cut into windows of seq_len + 1 that start every seq_len tokens; no PAD.
//
// Validation: a document goes to the validation split when the hash of its
// index falls under `val_fraction` (so the split does not depend on the seed
// or the sequence length); at least one document when the fraction is > 0
// and there are two or more.
//
// Samples that hold no token to learn (every target a prompt token, a
// non-assistant part of a chat, or PAD: a window inside a long prompt) are
// left out of both splits; they would add no gradient and no loss.
//
// Order: training reads an endless stream of samples, epoch after epoch;
// sample position p is sample perm_e[p mod N] of epoch e = p div N, where
// perm_e is a Fisher-Yates shuffle seeded by (seed, e). A run's position in
// the data is the number of samples it has consumed.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace pplab {

class TokenCache;

struct TextDataOptions {
  int seq_len = 128;
  bool packed = false;
  double val_fraction = 0.05;
  uint64_t seed = 1;
  int32_t bos = 2, eos = 3, pad = 0;
};

class TextDataset {
 public:
  // Keeps a reference to `cache`, which must outlive it. Throws pplab::Error
  // when the training split has no sample.
  TextDataset(const TokenCache& cache, const TextDataOptions& options);

  int64_t NumTrainSamples() const;
  int64_t NumValSamples() const { return static_cast<int64_t>(val_.size()); }
  int64_t NumTrainDocuments() const { return static_cast<int64_t>(train_docs_.size()); }
  int64_t NumValDocuments() const { return val_docs_; }
  // Samples of both splits left out for having no token to learn.
  int64_t NumUnlearnedSamples() const { return unlearned_; }

  // Writes the sample at stream position `position` into out[0 .. seq_len]
  // (seq_len + 1 ids). Not thread-safe (caches the current epoch's order).
  void TrainSample(int64_t position, int32_t* out) const;
  // Validation sample `i` (0 <= i < NumValSamples()), in document order.
  void ValSample(int64_t i, int32_t* out) const;

  // Epoch and offset within it of stream position `position`.
  std::pair<int64_t, int64_t> EpochOf(int64_t position) const;
  const TextDataOptions& Options() const { return options_; }

 private:
  // A sample of padded mode: document and the start of its window within
  // BOS + tokens + EOS.
  struct Window {
    int64_t doc, start;
  };
  void WriteWindow(const Window& w, int32_t* out) const;
  void WritePacked(int64_t start, int32_t* out) const;
  // Whether a sample's targets (out[1 .. seq_len]) hold a token to learn.
  bool Learns(const int32_t* sample) const;

  const TokenCache& cache_;
  TextDataOptions options_;
  std::vector<int64_t> train_docs_;
  int64_t val_docs_ = 0;
  std::vector<Window> train_, val_;    // padded mode; val_ in both modes
  std::vector<int64_t> packed_begin_;  // packed mode: stream start of each training document
  int64_t packed_tokens_ = 0;          // packed mode: length of the training stream
  // Packed mode, when some windows learn nothing (`packed_filtered_`): the
  // windows kept, by index (window k starts at k seq_len).
  bool packed_filtered_ = false;
  std::vector<int64_t> packed_kept_;
  int64_t unlearned_ = 0;
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;  // perm_e of order_epoch_
};

}  // namespace pplab
