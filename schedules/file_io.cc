#include "schedules/file_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "schedules/error.h"

namespace pplab {
namespace {

// No input pplab reads is anywhere near this; a larger one (or /dev/zero)
// is refused instead of exhausting memory.
constexpr size_t kMaxInputBytes = size_t{1} << 30;

}  // namespace

std::string ReadTextFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error("cannot read " + path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + ": " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) throw Error("cannot read " + path + ": larger than 1 GiB");
  }
  if (in.bad()) throw Error("cannot read " + path + ": read error");
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a UTF-8 byte-order mark
  return text;
}

void WriteTextFile(const std::string& path, const std::string& contents) {
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw Error("cannot write " + path + ": is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device, FIFO or symlink (e.g. /dev/stdout): write through it, never
    // replace it.
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + path + ": " + std::strerror(errno));
    out << contents;
    out.flush();
    if (!out) throw Error("cannot write " + path + ": write failed");
    return;
  }
  // A regular file: write a temporary beside it and rename, so a reader (or
  // a crash) never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + path + " (through " + tmp + "): " + std::strerror(errno));
    out << contents;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error("cannot write " + path + ": write failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error("cannot write " + path + ": " + why);
  }
}

}  // namespace pplab
