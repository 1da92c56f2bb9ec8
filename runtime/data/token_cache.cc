#include "runtime/data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

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

int64_t WriteTokenCache(const Corpus& corpus, const Tokenizer& tokenizer, const std::string& path) {
  std::vector<uint64_t> offsets{0};
  std::vector<int32_t> ids;
  for (const std::string& doc : corpus.documents) {
    const std::vector<int32_t> t = tokenizer.Encode(doc);
    ids.insert(ids.end(), t.begin(), t.end());
    offsets.push_back(ids.size());
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

TokenCache::TokenCache(const std::string& path, uint64_t corpus_fingerprint, uint64_t tokenizer_fingerprint) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("token cache " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("token cache " + path + ": not a regular file");
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ < kHeaderBytes + 8) {
    ::close(fd);
    throw Error("token cache " + path + ": truncated (" + std::to_string(map_bytes_) + " bytes)");
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("token cache " + path + ": cannot map: " + std::strerror(errno));
  }
  Header h;
  std::memcpy(&h, map_, sizeof h);
  auto fail = [&](const std::string& why) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw Error("token cache " + path + ": " + why);
  };
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != 1) fail("not a pplab token cache");
  if (h.corpus_fingerprint != corpus_fingerprint) fail("built from another corpus");
  if (h.tokenizer_fingerprint != tokenizer_fingerprint) fail("built with another tokenizer");
  // Sizes first, in a way that cannot overflow, then the offsets themselves.
  const uint64_t room = map_bytes_ - kHeaderBytes;
  if (h.documents >= room / 8 || h.tokens > (room - (h.documents + 1) * 8) / 4 ||
      kHeaderBytes + (h.documents + 1) * 8 + h.tokens * 4 != map_bytes_) {
    fail("truncated or padded (size does not match its header)");
  }
  docs_ = static_cast<int64_t>(h.documents);
  tokens_ = static_cast<int64_t>(h.tokens);
  offsets_ = reinterpret_cast<const uint64_t*>(static_cast<const char*>(map_) + kHeaderBytes);
  ids_ = reinterpret_cast<const int32_t*>(offsets_ + docs_ + 1);
  if (offsets_[0] != 0 || offsets_[docs_] != h.tokens) fail("document offsets are corrupted");
  for (int64_t d = 0; d < docs_; ++d) {
    if (offsets_[d + 1] < offsets_[d]) fail("document offsets are corrupted");
  }
}

TokenCache::~TokenCache() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

}  // namespace pplab
