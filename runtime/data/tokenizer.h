// Tokenizer: a SentencePiece model, trained here (BPE) or loaded from a
// `.model` file, or a Hugging Face tokenizer.json of the byte-level BPE
// kind (bpe_tokenizer.h: Llama 3, Qwen). No LibTorch.
//
// Ids: 0 is PAD (the loss ignores it), 1 UNK, 2 BOS (begin of text), 3 EOS
// (end of text). Models trained by pplab have exactly these; a loaded model
// must have BOS and EOS (any ids) or it is refused. One without a PAD piece
// (Llama 2's, Mistral's) pads with its UNK piece, which the loss then
// ignores: a byte-fallback tokenizer like theirs never encodes text as UNK.
//
// A tokenizer.json does not say which token is which, so they are found by
// the names published models use: EOS <|end_of_text|>, <|endoftext|>, </s>
// or <eos> (required); BOS <|begin_of_text|>, <|startoftext|>, <s> or
// <bos>, else EOS (Qwen has none, and separates documents by EOS); PAD
// <|finetune_right_pad_id|>, <|pad|>, <pad> or [PAD], else the last
// special token that is neither BOS nor EOS nor a chat marker (<|im_end|>,
// <|eot_id|>, ...; Qwen 2.5's is <|video_pad|>): the loss ignores PAD
// targets, and must learn where a text and a chat turn end.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pplab {

class Tokenizer {
 public:
  // Loads a SentencePiece model file or a tokenizer.json (told apart by
  // content, not name). Throws pplab::Error naming `path` when it cannot be
  // read, is of neither kind, or lacks the special tokens above.
  static Tokenizer Load(const std::string& path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  std::vector<int32_t> Encode(const std::string& text) const;  // no BOS/EOS added
  std::string Decode(const std::vector<int32_t>& ids) const;   // PAD/BOS/EOS dropped
  int VocabSize() const;
  // The vocabulary's piece of `id`, as the file spells it: SentencePiece's
  // "\xe2\x96\x81world" (a word start marked), a byte-level "\xc4\xa0world", an
  // added token's text ("<|end_of_text|>"); "" for an id out of range.
  std::string Piece(int32_t id) const;
  int32_t Pad() const { return pad_; }
  int32_t Bos() const { return bos_; }
  int32_t Eos() const { return eos_; }
  // The id of a tokenizer.json's added token whose text is `text` (as
  // "<|eot_id|>"), which Encode gives for that text; nullopt for any other
  // text and for every SentencePiece model.
  std::optional<int32_t> SpecialToken(const std::string& text) const;
  // FNV-1a of the model file's bytes: what a checkpoint records so that a
  // different tokenizer is refused.
  uint64_t Fingerprint() const { return fingerprint_; }
  const std::string& Path() const { return path_; }
  // The name a model's folder gives a file of this kind: "tokenizer.model"
  // or "tokenizer.json".
  const char* FileName() const;

 private:
  Tokenizer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int32_t pad_ = 0, bos_ = 2, eos_ = 3;
  uint64_t fingerprint_ = 0;
  std::string path_;
};

// The tokenizer file of a model's folder: its tokenizer.model, else its
// tokenizer.json (Mistral's and Llama 2's folders hold both, and their
// tokenizer.json is of SentencePiece's kind, which pplab reads from the
// .model). "" when `dir` is no folder or holds neither; an entry that is
// not a regular file is returned, for its reader to refuse by name.
std::string FolderTokenizer(const std::string& dir);

// The special pieces' ids of a tokenizer pplab trains: its own (PAD 0,
// UNK 1, BOS 2, EOS 3), or Llama 2's (UNK 0, BOS 1, EOS 2, no PAD), for
// tests of what published tokenizers are like.
enum class TokenizerIds { kPplab, kLlama2 };

// Trains a BPE model of `vocab_size` pieces on `documents` and writes it to
// `model_path` (atomically: a temporary file, then a rename). Deterministic
// for the same documents and size. Throws pplab::Error when SentencePiece
// refuses (e.g. a vocabulary smaller than the corpus's characters need).
void TrainTokenizer(const std::vector<std::string>& documents, int vocab_size, const std::string& model_path,
                    TokenizerIds ids = TokenizerIds::kPplab);

}  // namespace pplab
