// libpplab_spm.so: SentencePiece behind a C interface (see spm_module.h).
#include "runtime/data/spm_module.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

int Fail(const std::string& message, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    std::strncpy(error, message.c_str(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  return 1;
}

template <typename T>
T* Copy(const T* data, size_t n) {
  T* out = static_cast<T*>(std::malloc(n * sizeof(T) + 1));
  if (out != nullptr && n > 0) std::memcpy(out, data, n * sizeof(T));
  return out;
}

// Feeds SentencePiece the non-empty lines of a text.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  LineIterator(const char* text, size_t size) : text_(text, size) { Advance(); }
  bool done() const override { return done_; }
  void Next() override { Advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void Advance() {
    while (pos_ < text_.size()) {
      size_t end = text_.find('\n', pos_);
      if (end == std::string::npos) end = text_.size();
      line_.assign(text_, pos_, end - pos_);
      pos_ = end + 1;
      if (!line_.empty()) return;
    }
    done_ = true;
  }
  std::string text_;
  size_t pos_ = 0;
  bool done_ = false;
  std::string line_;
};

}  // namespace

extern "C" {

int pplab_spm_load(const char* model, size_t model_size, void** handle, char* error, size_t error_size) {
  auto* p = new sentencepiece::SentencePieceProcessor();
  const auto status = p->LoadFromSerializedProto(std::string(model, model_size));
  if (!status.ok()) {
    delete p;
    return Fail(status.ToString(), error, error_size);
  }
  *handle = p;
  return 0;
}

void pplab_spm_free(void* handle) { delete static_cast<sentencepiece::SentencePieceProcessor*>(handle); }

void pplab_spm_info(void* handle, int* pieces, int* pad, int* bos, int* eos) {
  const auto* p = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  *pieces = p->GetPieceSize();
  *pad = p->pad_id() >= 0 ? p->pad_id() : p->unk_id();
  *bos = p->bos_id();
  *eos = p->eos_id();
}

int pplab_spm_encode(void* handle, const char* text, size_t size, int32_t** ids, size_t* count, char* error,
                     size_t error_size) {
  std::vector<int> out;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(std::string(text, size), &out);
  if (!status.ok()) return Fail(status.ToString(), error, error_size);
  std::vector<int32_t> narrow(out.begin(), out.end());
  *ids = Copy(narrow.data(), narrow.size());
  *count = narrow.size();
  return 0;
}

int pplab_spm_decode(void* handle, const int32_t* ids, size_t count, char** text, size_t* size, char* error,
                     size_t error_size) {
  const std::vector<int> in(ids, ids + count);
  std::string out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(in, &out);
  if (!status.ok()) return Fail(status.ToString(), error, error_size);
  *text = Copy(out.data(), out.size());
  *size = out.size();
  return 0;
}

int pplab_spm_piece(void* handle, int32_t id, char** text, size_t* size, char* error, size_t error_size) {
  const auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  if (id < 0 || id >= sp->GetPieceSize()) {
    return Fail("id " + std::to_string(id) + " is not a piece (0 to " + std::to_string(sp->GetPieceSize() - 1) + ")",
                error, error_size);
  }
  const std::string& piece = sp->IdToPiece(id);
  *text = Copy(piece.data(), piece.size());
  *size = piece.size();
  return 0;
}

int pplab_spm_train(const char* text, size_t size, int vocab_size, int llama2_ids, char** model, size_t* model_size,
                    char* error, size_t error_size) {
  // PAD 0 (the loss's ignore index), UNK 1, BOS 2, EOS 3, or Llama 2's ids;
  // the rarest 0.05 % of characters are spelled as bytes (byte fallback
  // takes 256 pieces, so only from 1024 pieces up; below that they become
  // UNK); one thread, so the result is the same on every machine.
  const std::unordered_map<std::string, std::string> spec = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"pad_id", llama2_ids ? "-1" : "0"},
      {"unk_id", llama2_ids ? "0" : "1"},
      {"bos_id", llama2_ids ? "1" : "2"},
      {"eos_id", llama2_ids ? "2" : "3"},
      {"character_coverage", "0.9995"},
      {"byte_fallback", vocab_size >= kByteFallbackVocab ? "true" : "false"},
      {"max_sentence_length", "65536"},
      {"num_threads", "1"},
      {"minloglevel", "2"},
  };
  LineIterator lines(text, size);
  std::string out;
  const auto status = sentencepiece::SentencePieceTrainer::Train(spec, &lines, &out);
  if (!status.ok()) return Fail(status.ToString(), error, error_size);
  *model = Copy(out.data(), out.size());
  *model_size = out.size();
  return 0;
}

void pplab_spm_free_buffer(void* buffer) { std::free(buffer); }
}
