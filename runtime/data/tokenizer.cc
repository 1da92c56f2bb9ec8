#include "runtime/data/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/fnv.h"
#include "runtime/data/spm_module.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace {

// The SentencePiece module's functions (see spm_module.h for why it is
// loaded at run time).
struct SpmModule {
  decltype(&pplab_spm_load) load;
  decltype(&pplab_spm_free) free;
  decltype(&pplab_spm_info) info;
  decltype(&pplab_spm_encode) encode;
  decltype(&pplab_spm_decode) decode;
  decltype(&pplab_spm_piece) piece;
  decltype(&pplab_spm_train) train;
  decltype(&pplab_spm_free_buffer) free_buffer;
};

// Where the module is: $PPLAB_SPM_MODULE, beside the executable, or where
// the build put it.
std::vector<std::string> ModuleCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("PPLAB_SPM_MODULE"); env != nullptr && *env != '\0') out.push_back(env);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / "libpplab_spm.so").string());
#ifdef PPLAB_SPM_MODULE_PATH
  out.push_back(PPLAB_SPM_MODULE_PATH);
#endif
  return out;
}

const SpmModule& Module() {
  // Loaded once per process and never unloaded; a function-local static is
  // initialised once even with threads.
  static const SpmModule module = [] {
    void* lib = nullptr;
    std::string tried, why;
    for (const std::string& path : ModuleCandidates()) {
      lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (lib != nullptr) break;
      tried += (tried.empty() ? "" : ", ") + path;
      if (const char* e = ::dlerror()) why = e;
    }
    if (lib == nullptr) {
      throw Error("tokenizer: cannot load the SentencePiece module (tried " + tried + "): " + why +
                  " (is libsentencepiece-dev installed and pplab built with it?)");
    }
    auto sym = [lib](const char* name) {
      void* f = ::dlsym(lib, name);
      if (f == nullptr) throw Error(std::string("tokenizer: the SentencePiece module lacks ") + name);
      return f;
    };
    SpmModule m;
    m.load = reinterpret_cast<decltype(m.load)>(sym("pplab_spm_load"));
    m.free = reinterpret_cast<decltype(m.free)>(sym("pplab_spm_free"));
    m.info = reinterpret_cast<decltype(m.info)>(sym("pplab_spm_info"));
    m.encode = reinterpret_cast<decltype(m.encode)>(sym("pplab_spm_encode"));
    m.decode = reinterpret_cast<decltype(m.decode)>(sym("pplab_spm_decode"));
    m.piece = reinterpret_cast<decltype(m.piece)>(sym("pplab_spm_piece"));
    m.train = reinterpret_cast<decltype(m.train)>(sym("pplab_spm_train"));
    m.free_buffer = reinterpret_cast<decltype(m.free_buffer)>(sym("pplab_spm_free_buffer"));
    return m;
  }();
  return module;
}

// The special tokens of a tokenizer.json, by the names published models
// give them (the file itself does not say which is which).
struct Specials {
  int32_t pad = -1, bos = -1, eos = -1;
};

Specials FindSpecials(const ByteLevelBpe& bpe, const std::string& path) {
  const auto first_of = [&bpe](std::initializer_list<const char*> names) -> int32_t {
    for (const char* n : names) {
      if (const auto id = bpe.AddedToken(n)) return *id;
    }
    return -1;
  };
  Specials s;
  s.eos = first_of({"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>"});
  if (s.eos < 0) {
    throw Error(path + ": no end-of-text token (<|end_of_text|>, <|endoftext|>, </s> or <eos>) among added_tokens");
  }
  // Without a begin-of-text token (Qwen's), documents begin with the end
  // token, as Qwen separates them.
  s.bos = first_of({"<|begin_of_text|>", "<|startoftext|>", "<s>", "<bos>"});
  if (s.bos < 0) s.bos = s.eos;
  // Padding must not be EOS, whose targets the loss has to see, nor a
  // token that ends a chat turn or marks one (chat.h learns <|eot_id|> and
  // <|im_end|>): a padding token by name, or else the last special token
  // that is none of those.
  s.pad = first_of({"<|finetune_right_pad_id|>", "<|pad|>", "<pad>", "[PAD]"});
  const auto chat_marker = [&bpe](int32_t id) {
    for (const char* name :
         {"<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|start_header_id|>", "<|end_header_id|>"}) {
      if (bpe.AddedToken(name) == id) return true;
    }
    return false;
  };
  for (auto it = bpe.SpecialTokens().rbegin(); s.pad < 0 && it != bpe.SpecialTokens().rend(); ++it) {
    if (*it != s.bos && *it != s.eos && !chat_marker(*it)) s.pad = *it;
  }
  if (s.pad < 0) throw Error(path + ": no special token to pad with besides BOS, EOS and the chat markers");
  return s;
}

// tiktoken's format: lines of a base64 token, a space and its rank.
bool LooksLikeTiktoken(const std::string& bytes) {
  const size_t end = bytes.find('\n');
  const std::string line = bytes.substr(0, end);
  const size_t space = line.find(' ');
  if (end == std::string::npos || space == std::string::npos || space == 0 || space + 1 == line.size()) return false;
  for (size_t i = 0; i < line.size(); ++i) {
    const unsigned char c = line[i];
    const bool ok = i < space ? (std::isalnum(c) || c == '+' || c == '/' || c == '=') : i == space || std::isdigit(c);
    if (!ok) return false;
  }
  return true;
}

}  // namespace

struct Tokenizer::Impl {
  void* handle = nullptr;           // SentencePiece's, or
  std::optional<ByteLevelBpe> bpe;  // a tokenizer.json's
  int pieces = 0;
  ~Impl() {
    if (handle != nullptr) Module().free(handle);
  }
};

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::Load(const std::string& path) {
  const std::string bytes = ReadTextFile(path);
  Tokenizer t;
  t.impl_ = std::make_unique<Impl>();
  t.fingerprint_ = PplabFingerprint(bytes);
  t.path_ = path;
  // A tokenizer.json is text that opens with '{'; a SentencePiece model
  // is a protocol buffer, whose first byte is a field tag.
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') {
    t.impl_->bpe = ByteLevelBpe::FromJson(bytes, path);
    t.impl_->pieces = t.impl_->bpe->VocabSize();
    const Specials s = FindSpecials(*t.impl_->bpe, path);
    t.pad_ = s.pad;
    t.bos_ = s.bos;
    t.eos_ = s.eos;
    return t;
  }
  if (LooksLikeTiktoken(bytes)) {
    throw Error(path + ": a tiktoken file (as Llama 3's original/tokenizer.model); give the model's tokenizer.json");
  }
  const SpmModule& spm = Module();
  char error[512] = "";
  if (spm.load(bytes.data(), bytes.size(), &t.impl_->handle, error, sizeof error) != 0) {
    throw Error(path + ": not a SentencePiece model (" + error + ")");
  }
  int pad = -1, bos = -1, eos = -1;
  spm.info(t.impl_->handle, &t.impl_->pieces, &pad, &bos, &eos);
  if (pad < 0 || bos < 0 || eos < 0) {
    throw Error(path + ": the tokenizer needs BOS and EOS pieces (let pplab train one with --vocab-size)");
  }
  t.pad_ = pad;
  t.bos_ = bos;
  t.eos_ = eos;
  return t;
}

std::vector<int32_t> Tokenizer::Encode(const std::string& text) const {
  if (impl_->bpe) return impl_->bpe->Encode(text);
  const SpmModule& spm = Module();
  int32_t* ids = nullptr;
  size_t count = 0;
  char error[512] = "";
  if (spm.encode(impl_->handle, text.data(), text.size(), &ids, &count, error, sizeof error) != 0) {
    throw Error(path_ + ": cannot encode text: " + error);
  }
  std::vector<int32_t> out(ids, ids + count);
  spm.free_buffer(ids);
  return out;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> kept;
  for (int32_t id : ids) {
    if (id != pad_ && id != bos_ && id != eos_ && id >= 0 && id < VocabSize()) kept.push_back(id);
  }
  if (impl_->bpe) return impl_->bpe->Decode(kept);
  const SpmModule& spm = Module();
  char* text = nullptr;
  size_t size = 0;
  char error[512] = "";
  if (spm.decode(impl_->handle, kept.data(), kept.size(), &text, &size, error, sizeof error) != 0) {
    throw Error(path_ + ": cannot decode: " + error);
  }
  std::string out(text, size);
  spm.free_buffer(text);
  return out;
}

std::string Tokenizer::Piece(int32_t id) const {
  if (id < 0 || id >= VocabSize()) return "";
  if (impl_->bpe) return impl_->bpe->TokenText(id);
  const SpmModule& spm = Module();
  char* text = nullptr;
  size_t size = 0;
  char error[512] = "";
  if (spm.piece(impl_->handle, id, &text, &size, error, sizeof error) != 0) {
    throw Error(path_ + ": no piece: " + error);
  }
  std::string out(text, size);
  spm.free_buffer(text);
  return out;
}

int Tokenizer::VocabSize() const { return impl_->pieces; }

std::optional<int32_t> Tokenizer::SpecialToken(const std::string& text) const {
  if (!impl_->bpe) return std::nullopt;
  return impl_->bpe->AddedToken(text);
}

std::string FolderTokenizer(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    // Whatever it is: a FIFO or a folder by that name is then refused by
    // name when read (it read as "the folder has no tokenizer.model").
    if (std::filesystem::exists(path, ec)) return path.string();
  }
  return "";
}

const char* Tokenizer::FileName() const { return impl_->bpe ? "tokenizer.json" : "tokenizer.model"; }

namespace {

// SentencePiece's trainer skips a line longer than its max_sentence_length
// (65536 bytes, libpplab_spm.so), unseen: 5 MB of a one-line file never
// reached training. Such a line is given to it in parts of at most that
// size, each ending after a space where one is, else before a UTF-8
// character. Shorter lines go as they are.
constexpr size_t kMaxTrainLine = 65536;

// Its BPE trainer also crashes (a segmentation fault in ComputeFreq, no
// message) on a word, a run without a space, of more than 32768
// characters: a base64 blob or a minified script in the corpus. Such runs
// go to it in lines of this many bytes (or up to 3 more), each cut before a UTF-8
// character. No word is that long, and a piece is at most 16 characters.
constexpr size_t kMaxTrainWord = 4096;

// Appends document[start, end) and a newline to `text`, with a newline
// also inside each run of more than kMaxTrainWord bytes without a space.
void AppendTrainPart(const std::string& document, size_t start, size_t end, std::string& text) {
  size_t from = start, word = start;  // what is not appended yet; where the current word starts
  for (size_t i = start; i < end; ++i) {
    if (document[i] == ' ') {
      word = i + 1;
    } else if (i - word >= kMaxTrainWord && (static_cast<unsigned char>(document[i]) & 0xC0) != 0x80) {
      text.append(document, from, i - from);
      text += '\n';
      from = word = i;
    }
  }
  text.append(document, from, end - from);
  text += '\n';
}

void AppendTrainLines(const std::string& document, std::string& text) {
  size_t start = 0;
  while (start < document.size()) {
    size_t end = document.find('\n', start);
    if (end == std::string::npos) end = document.size();
    while (end - start > kMaxTrainLine) {
      size_t cut = document.find_last_of(" \t", start + kMaxTrainLine - 1);
      if (cut == std::string::npos || cut < start + kMaxTrainLine / 2) {
        cut = start + kMaxTrainLine;
        while (cut > start && (static_cast<unsigned char>(document[cut]) & 0xC0) == 0x80) --cut;
      } else {
        ++cut;  // the space stays with the part before
      }
      AppendTrainPart(document, start, cut, text);
      start = cut;
    }
    AppendTrainPart(document, start, end, text);
    start = end + 1;
  }
}

// SentencePiece's training errors in pplab's words; its own text (a check
// in its source) where none fits.
std::string TrainError(int vocab_size, const std::string& raw) {
  const std::string flag = "--vocab-size " + std::to_string(vocab_size) + ": ";
  std::smatch m;
  if (std::regex_search(raw, m, std::regex(R"(smaller than required_chars\. (\d+) vs (\d+))"))) {
    return flag + "this corpus's characters and the special pieces need " + m[2].str() + " pieces; give --vocab-size " +
           m[2].str() + " or more";
  }
  if (std::regex_search(raw, m, std::regex(R"(Please set it to a value <= (\d+))"))) {
    // From 1024 pieces up the vocabulary holds the 256 byte pieces too
    // (spm_module.cc's byte_fallback): below it they are not there, and
    // the corpus gives 256 fewer.
    int most = std::stoi(m[1].str());
    if (vocab_size >= kByteFallbackVocab && most < kByteFallbackVocab) most -= 256;
    // --vocab-size takes 8 at the least (tools/train_flags.cc): below it
    // only more text helps.
    constexpr int kLeastVocab = 8;
    if (most < kLeastVocab) {
      return flag + "BPE finds at most " + std::to_string(most) + " pieces in this corpus, fewer than the " +
             std::to_string(kLeastVocab) + " --vocab-size takes at the least; give more text";
    }
    return flag + "BPE finds at most " + std::to_string(most) + " pieces in this corpus; give --vocab-size " +
           std::to_string(most) + " or less, or more text";
  }
  // "Internal: ./src/file.cc(580) [condition] message": the message.
  std::string message = raw;
  if (std::regex_search(raw, m, std::regex(R"(^[A-Za-z ]+: \S+\(\d+\) \[.*?\] (.*)$)"))) message = m[1].str();
  return flag + "SentencePiece cannot train a BPE model of that size on this corpus: " + message;
}

}  // namespace

void TrainTokenizer(const std::vector<std::string>& documents, int vocab_size, const std::string& model_path,
                    TokenizerIds ids) {
  if (documents.empty()) throw Error("tokenizer: no text to train on");
  std::string text;
  for (const std::string& d : documents) AppendTrainLines(d, text);
  const SpmModule& spm = Module();
  char* model = nullptr;
  size_t size = 0;
  char error[1024] = "";
  if (spm.train(text.data(), text.size(), vocab_size, ids == TokenizerIds::kLlama2 ? 1 : 0, &model, &size, error,
                sizeof error) != 0) {
    throw Error(TrainError(vocab_size, error));
  }
  const std::string bytes(model, size);
  spm.free_buffer(model);
  WriteTextFile(model_path, bytes);
}

}  // namespace pplab
