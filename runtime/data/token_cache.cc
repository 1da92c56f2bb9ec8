#include "runtime/data/token_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "runtime/data/chat.h"
#include "runtime/data/corpus.h"
#include "runtime/data/tokenizer.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace {

constexpr char kMagic[8] = {'P', 'P', 'L', 'A', 'B', 'T', 'O', 'K'};
constexpr size_t kHeaderBytes = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t documents;
  uint64_t tokens;
  uint64_t corpus_fingerprint;
  uint64_t tokenizer_fingerprint;
  uint64_t zero[2];
};
static_assert(sizeof(Header) == kHeaderBytes, "the header is 64 bytes");

template <typename T>
void Append(std::string& out, const T* data, size_t n) {
  out.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

}  // namespace

std::vector<int32_t> EncodeDocument(const Corpus& corpus, size_t d, const Tokenizer& tokenizer, ChatLayout layout) {
  std::vector<int32_t> ids;
  if (d < corpus.chats.size() && !corpus.chats[d].empty()) {
    EncodeChat(RenderChat(corpus.chats[d], layout), tokenizer, kNoLossBit, ids);
    return ids;
  }
  const auto add = [&ids, &tokenizer](const std::string& text, int32_t bit) {
    if (text.empty()) return;
    for (int32_t id : tokenizer.Encode(text)) ids.push_back(id | bit);
  };
  if (d < corpus.prompts.size()) add(corpus.prompts[d], kNoLossBit);
  add(corpus.documents[d], 0);
  return ids;
}

int64_t WriteTokenCache(const Corpus& corpus, const Tokenizer& tokenizer, const std::string& path, int threads) {
  // Contiguous runs of documents, one per thread, each encoded into its own
  // ids and then joined in document order: the same file whatever the
  // number of threads (tested).
  const size_t n = corpus.documents.size();
  const ChatLayout layout = ChatLayoutFor(tokenizer);
  const size_t parts = std::max<size_t>(1, std::min<size_t>(threads, n));
  std::vector<std::vector<int32_t>> part_ids(parts);
  std::vector<std::vector<uint64_t>> part_lengths(parts);
  std::vector<std::string> part_errors(parts);
  const auto encode = [&](size_t p) {
    try {
      for (size_t d = n * p / parts; d < n * (p + 1) / parts; ++d) {
        const std::vector<int32_t> t = EncodeDocument(corpus, d, tokenizer, layout);
        part_ids[p].insert(part_ids[p].end(), t.begin(), t.end());
        part_lengths[p].push_back(t.size());
      }
    } catch (const std::exception& e) {
      part_errors[p] = e.what();
    }
  };
  std::vector<std::thread> workers;
  for (size_t p = 1; p < parts; ++p) workers.emplace_back(encode, p);
  encode(0);
  for (std::thread& w : workers) w.join();
  for (const std::string& e : part_errors) {
    if (!e.empty()) throw Error(e);
  }
  std::vector<uint64_t> offsets{0};
  std::vector<int32_t> ids;
  for (size_t p = 0; p < parts; ++p) {
    for (const uint64_t length : part_lengths[p]) offsets.push_back(offsets.back() + length);
    ids.insert(ids.end(), part_ids[p].begin(), part_ids[p].end());
    std::vector<int32_t>().swap(part_ids[p]);
  }
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = 1;
  h.documents = corpus.documents.size();
  h.tokens = ids.size();
  h.corpus_fingerprint = corpus.fingerprint;
  h.tokenizer_fingerprint = tokenizer.Fingerprint();
  std::string bytes;
  bytes.reserve(kHeaderBytes + offsets.size() * 8 + ids.size() * 4);
  Append(bytes, &h, 1);
  Append(bytes, offsets.data(), offsets.size());
  Append(bytes, ids.data(), ids.size());
  WriteTextFile(path, bytes);
  return static_cast<int64_t>(ids.size());
}

namespace {

// The cache being read, for the SIGBUS handler: a mapped file that shrinks
// under a run (truncated, or rewritten in place) faults on the next read.
// The handler can only use async-signal-safe calls, so the message is
// prepared when the file is mapped.
char g_bus_message[1024] = "pplab: error: a token cache shrank while it was in use (bus error reading it)\n";
size_t g_bus_message_size = 0;

void OnBusError(int) {
  const size_t n = g_bus_message_size > 0 ? g_bus_message_size : std::strlen(g_bus_message);
  if (::write(STDERR_FILENO, g_bus_message, n) < 0) {
  }
  ::_exit(2);
}

void WatchForShrinking(const std::string& path) {
  const std::string line =
      "pplab: error: token cache " + path + " shrank while in use (bus error reading it); run again to rebuild it\n";
  const size_t n = std::min(line.size(), sizeof g_bus_message - 1);
  std::memcpy(g_bus_message, line.data(), n);
  g_bus_message[n] = '\0';
  g_bus_message_size = n;
  struct sigaction bus {};
  bus.sa_handler = OnBusError;
  sigemptyset(&bus.sa_mask);
  ::sigaction(SIGBUS, &bus, nullptr);
}

}  // namespace

TokenCache::TokenCache(const std::string& path, uint64_t corpus_fingerprint, uint64_t tokenizer_fingerprint)
    : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("token cache " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("token cache " + path + ": not a regular file");
  }
  auto fail_fd = [&](const std::string& why) {
    ::close(fd);
    throw Error("token cache " + path + ": " + why);
  };
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kHeaderBytes + 8) fail_fd("truncated (" + std::to_string(bytes) + " bytes)");
  // The header is read and the size checked against it before anything is
  // mapped: reading a mapping past the end of its file is a bus error.
  Header h;
  if (::pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) fail_fd("cannot read the header");
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != 1) fail_fd("not a pplab token cache");
  if (h.corpus_fingerprint != corpus_fingerprint) fail_fd("built from another corpus");
  if (h.tokenizer_fingerprint != tokenizer_fingerprint) fail_fd("built with another tokenizer");
  // Sizes in a way that cannot overflow.
  const uint64_t room = bytes - kHeaderBytes;
  if (h.documents >= room / 8 || h.tokens > (room - (h.documents + 1) * 8) / 4 ||
      kHeaderBytes + (h.documents + 1) * 8 + h.tokens * 4 != bytes) {
    fail_fd("truncated or padded (" + std::to_string(bytes) + " bytes, its header says " +
            std::to_string(kHeaderBytes + (h.documents + 1) * 8 + h.tokens * 4) + ")");
  }
  map_bytes_ = bytes;
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("token cache " + path + ": cannot map: " + std::strerror(errno));
  }
  WatchForShrinking(path);
  auto fail = [&](const std::string& why) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw Error("token cache " + path + ": " + why);
  };
  docs_ = static_cast<int64_t>(h.documents);
  tokens_ = static_cast<int64_t>(h.tokens);
  offsets_ = reinterpret_cast<const uint64_t*>(static_cast<const char*>(map_) + kHeaderBytes);
  ids_ = reinterpret_cast<const int32_t*>(offsets_ + docs_ + 1);
  if (offsets_[0] != 0 || offsets_[docs_] != h.tokens) fail("document offsets are corrupted");
  for (int64_t d = 0; d < docs_; ++d) {
    if (offsets_[d + 1] < offsets_[d]) fail("document offsets are corrupted");
  }
}

void TokenCache::CheckIds(int32_t vocab_size) const {
  for (int64_t i = 0; i < tokens_; ++i) {
    const int32_t id = ids_[i] & ~kNoLossBit;
    if (ids_[i] < 0 || id >= vocab_size) {
      throw Error("token cache " + path_ + ": token " + std::to_string(i) + " has id " + std::to_string(ids_[i]) +
                  ", outside the tokenizer's " + std::to_string(vocab_size) +
                  " pieces (corrupted: delete the file to rebuild it)");
    }
  }
}

TokenCache::~TokenCache() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

}  // namespace pplab
