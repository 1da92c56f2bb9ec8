#include "runtime/data/text_dataset.h"

#include <algorithm>
#include <utility>

#include "runtime/data/fnv.h"
#include "runtime/data/token_cache.h"
#include "schedules/error.h"

namespace pplab {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Windows of BOS + tokens + EOS (n ids) needed so that every next-token pair
// is in one window of seq_len + 1: starts at 0, L, 2L, ... while start + 1 < n.
int64_t WindowsOf(int64_t n, int64_t L) { return std::max<int64_t>(1, (n - 2 + L) / L); }

}  // namespace

TextDataset::TextDataset(const TokenCache& cache, const TextDataOptions& options) : cache_(cache), options_(options) {
  if (options.seq_len < 1) throw Error("--seq-len must be at least 1");
  const int64_t L = options.seq_len;
  const int64_t D = cache.NumDocuments();
  const uint64_t threshold = static_cast<uint64_t>(options.val_fraction * 1e6);
  std::vector<int64_t> val_docs;
  for (int64_t d = 0; d < D; ++d) {
    const uint64_t h = PplabFingerprint(&d, sizeof d, PplabFingerprint("pplab validation split"));
    (h % 1000000 < threshold ? val_docs : train_docs_).push_back(d);
  }
  if (options.val_fraction > 0 && val_docs.empty() && train_docs_.size() >= 2) {
    val_docs.push_back(train_docs_.back());
    train_docs_.pop_back();
  }
  val_docs_ = static_cast<int64_t>(val_docs.size());
  for (int64_t d : val_docs) {
    for (int64_t w = 0, n = WindowsOf(cache.DocSize(d) + 2, L); w < n; ++w) val_.push_back({d, w * L});
  }
  if (options.packed) {
    for (int64_t d : train_docs_) {
      packed_begin_.push_back(packed_tokens_);
      packed_tokens_ += cache.DocSize(d) + 2;
    }
  } else {
    for (int64_t d : train_docs_) {
      for (int64_t w = 0, n = WindowsOf(cache.DocSize(d) + 2, L); w < n; ++w) train_.push_back({d, w * L});
    }
  }
  // Leave out the samples with nothing to learn.
  std::vector<int32_t> buffer(L + 1);
  const auto learned = [&](const Window& w) {
    WriteWindow(w, buffer.data());
    return Learns(buffer.data());
  };
  for (std::vector<Window>* windows : {&train_, &val_}) {
    const size_t before = windows->size();
    windows->erase(std::remove_if(windows->begin(), windows->end(), [&](const Window& w) { return !learned(w); }),
                   windows->end());
    unlearned_ += static_cast<int64_t>(before - windows->size());
  }
  if (options.packed && packed_tokens_ > L) {
    const int64_t windows = (packed_tokens_ - 1) / L;
    std::vector<int64_t> kept;
    for (int64_t k = 0; k < windows; ++k) {
      WritePacked(k * L, buffer.data());
      if (Learns(buffer.data())) kept.push_back(k);
    }
    unlearned_ += windows - static_cast<int64_t>(kept.size());
    packed_filtered_ = static_cast<int64_t>(kept.size()) < windows;
    if (packed_filtered_) packed_kept_ = std::move(kept);
  }
  if (NumTrainSamples() == 0 && unlearned_ > 0) {
    throw Error("--data: none of the training split's " + std::to_string(unlearned_) +
                " samples of --seq-len + 1 = " + std::to_string(L + 1) +
                " tokens has a token to learn (each is all prompt or padding); a longer --seq-len reaches the "
                "completions");
  }
  if (NumTrainSamples() == 0) {
    throw Error("--data: the training split (" + std::to_string(packed_tokens_) +
                " tokens) is shorter than one sequence of --seq-len + 1 = " + std::to_string(L + 1) + " tokens");
  }
}

bool TextDataset::Learns(const int32_t* sample) const {
  for (int64_t i = 1; i <= options_.seq_len; ++i) {
    if ((sample[i] & kNoLossBit) == 0 && sample[i] != options_.pad) return true;
  }
  return false;
}

int64_t TextDataset::NumTrainSamples() const {
  if (!options_.packed) return static_cast<int64_t>(train_.size());
  if (packed_filtered_) return static_cast<int64_t>(packed_kept_.size());
  const int64_t L = options_.seq_len;
  return packed_tokens_ > L ? (packed_tokens_ - 1) / L : 0;
}

std::pair<int64_t, int64_t> TextDataset::EpochOf(int64_t position) const {
  const int64_t n = NumTrainSamples();
  return {position / n, position % n};
}

void TextDataset::WriteWindow(const Window& w, int32_t* out) const {
  const int64_t L = options_.seq_len;
  const int64_t size = cache_.DocSize(w.doc);
  const int32_t* ids = cache_.DocBegin(w.doc);
  for (int64_t i = 0; i <= L; ++i) {
    const int64_t p = w.start + i;  // position in BOS + tokens + EOS
    out[i] = p == 0 ? options_.bos : p <= size ? ids[p - 1] : p == size + 1 ? options_.eos : options_.pad;
  }
}

void TextDataset::WritePacked(int64_t start, int32_t* out) const {
  // The training document holding stream position `start`, then walk on.
  size_t k = std::upper_bound(packed_begin_.begin(), packed_begin_.end(), start) - packed_begin_.begin() - 1;
  for (int64_t i = 0; i <= options_.seq_len; ++i) {
    const int64_t p = start + i;
    while (k + 1 < packed_begin_.size() && p >= packed_begin_[k + 1]) ++k;
    const int64_t d = train_docs_[k];
    const int64_t local = p - packed_begin_[k];
    const int64_t size = cache_.DocSize(d);
    out[i] = local == 0 ? options_.bos : local <= size ? cache_.DocBegin(d)[local - 1] : options_.eos;
  }
}

void TextDataset::TrainSample(int64_t position, int32_t* out) const {
  const auto [epoch, offset] = EpochOf(position);
  if (epoch != order_epoch_) {
    const int64_t n = NumTrainSamples();
    order_.resize(n);
    for (int64_t i = 0; i < n; ++i) order_[i] = i;
    uint64_t state = options_.seed * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(epoch);
    for (int64_t i = n - 1; i > 0; --i) {
      // A uniform j in [0, i] without modulo bias worth speaking of.
      const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(SplitMix64(state)) * (i + 1)) >> 64);
      std::swap(order_[i], order_[j]);
    }
    order_epoch_ = epoch;
  }
  const int64_t sample = order_[offset];
  if (options_.packed) {
    WritePacked((packed_filtered_ ? packed_kept_[sample] : sample) * options_.seq_len, out);
  } else {
    WriteWindow(train_[sample], out);
  }
}

void TextDataset::ValSample(int64_t i, int32_t* out) const { WriteWindow(val_.at(i), out); }

}  // namespace pplab
