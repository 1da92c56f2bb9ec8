#include "schedules/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <tuple>

#include "schedules/error.h"

namespace pplab {
namespace {

// What a path that is not a regular file is, for the refusal.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

// stat()s PATH (following symlinks) and refuses anything but a regular file
// of at most kMaxInputBytes: a FIFO would block, /dev/zero never ends. Returns
// its size.
long long CheckInputFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error("cannot read " + path + ": " + FileKind(st.st_mode));
  if (st.st_size > kMaxInputBytes) {
    throw Error("cannot read " + path + ": larger than 1 GiB (" + std::to_string(st.st_size) + " bytes)");
  }
  return st.st_size;
}

// The folder a file of `path` lies in: "." for a bare name, "/" at the root.
std::string Folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::ifstream OpenInputFile(const std::string& path) {
  CheckInputFile(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + ": " + std::strerror(errno));
  char bom[3] = {};
  in.read(bom, 3);
  if (!(in.gcount() == 3 && bom[0] == '\xEF' && bom[1] == '\xBB' && bom[2] == '\xBF')) {
    in.clear();
    in.seekg(0);
  }
  return in;
}

int SkipSpace(std::istream& in) {
  while (true) {
    const int c = in.peek();
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c == std::char_traits<char>::eof() ? EOF : c;
    in.get();
  }
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in = OpenInputFile(path);
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    // The file may have grown since it was checked.
    if (text.size() > static_cast<size_t>(kMaxInputBytes)) throw Error("cannot read " + path + ": larger than 1 GiB");
  }
  if (in.bad()) throw Error("cannot read " + path + ": read error");
  return text;
}

void CheckWritable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error("cannot write " + path + ": is a directory");
    if (::access(path.c_str(), W_OK) != 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return;  // a device or FIFO is written through in place
  }
  const std::string dir = Folder(path);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0) throw Error("cannot write " + path + ": " + dir + ": " + std::strerror(errno));
  if (!S_ISDIR(dst.st_mode)) throw Error("cannot write " + path + ": " + dir + " is not a directory");
  // The temporary beside the file, then the rename, need a writable folder.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw Error("cannot write " + path + ": " + dir + ": " + std::strerror(errno));
  }
  // access(2) answers for the permission bits, which root passes: a file
  // made there says whether one can be (/proc, a root-squashed NFS mount
  // refused profile's -o only after the whole profile).
  const std::string probe = (dir == "/" ? "" : dir) + "/.pplab-write-check-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return;  // this process's own, from a check beside it: the folder takes files
    throw Error("cannot write " + path + ": " + dir + ": " + std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

namespace {

// A file's identity: (device, inode, "") where it exists, (device, inode of
// its folder, its name) where it does not; nullopt for a device, FIFO or
// folder, or a folder that cannot be read.
std::optional<std::tuple<dev_t, ino_t, std::string>> FileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return std::nullopt;
    return std::make_tuple(st.st_dev, st.st_ino, std::string());
  }
  if (::stat(Folder(path).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  const size_t slash = path.find_last_of('/');
  return std::make_tuple(st.st_dev, st.st_ino, path.substr(slash == std::string::npos ? 0 : slash + 1));
}

}  // namespace

std::string ResolvedPath(const std::string& path) {
  if (path.empty()) return "";
  if (char* real = ::realpath(path.c_str(), nullptr)) {
    std::string out = real;
    std::free(real);
    return out;
  }
  const size_t slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return "";
  const std::string folder = ResolvedPath(Folder(path));
  return folder.empty() ? "" : (folder == "/" ? "" : folder) + "/" + name;
}

std::string EntryWithin(const std::string& folder, const std::string& path) {
  const std::string dir = ResolvedPath(folder), target = ResolvedPath(path);
  if (dir.empty() || target.empty()) return "";
  const std::string prefix = dir == "/" ? dir : dir + "/";
  if (target.size() <= prefix.size() || target.compare(0, prefix.size(), prefix) != 0) return "";
  const std::string rest = target.substr(prefix.size());
  return rest.substr(0, rest.find('/'));
}

bool SameFile(const std::string& a, const std::string& b) {
  const auto x = FileIdentity(a);
  return x && x == FileIdentity(b);
}

void WriteFile(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path.empty()) throw Error("cannot write a file with no name");
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw Error("cannot write " + path + ": is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device, FIFO or symlink (e.g. /dev/stdout): write through it, never
    // replace it.
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + path + ": " + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw Error("cannot write " + path + ": write failed");
    return;
  }
  // A regular file: write a temporary beside it and rename, so a reader (or
  // a crash) never sees half a file. The temporary's name is this write's
  // own (process and count), so writers of one path never share one (ranks
  // that build one token cache, two runs that share a cache folder): the
  // last rename wins, and each rename moves a whole file.
  static std::atomic<uint64_t> writes{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(writes++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + path + " (through " + tmp + "): " + std::strerror(errno));
    try {
      write(out);
    } catch (...) {
      out.close();
      std::remove(tmp.c_str());
      throw;
    }
    out.flush();
    if (!out) {
      out.close();
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

void WriteTextFile(const std::string& path, const std::string& contents) {
  WriteFile(path, [&contents](std::ostream& out) { out << contents; });
}

std::vector<std::string> ListDirectory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw Error("cannot list " + dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int failure = errno;
  ::closedir(d);
  if (failure != 0) throw Error("cannot list " + dir + ": " + std::strerror(failure));
  std::sort(names.begin(), names.end());
  return names;
}

std::string RemoveTree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? "" : path + ": " + std::strerror(errno);
  }
  std::string first;
  if (S_ISDIR(st.st_mode)) {
    try {
      for (const std::string& name : ListDirectory(path)) {
        const std::string failure = RemoveTree(path + "/" + name);
        if (first.empty()) first = failure;
      }
    } catch (const Error& e) {
      first = e.what();
    }
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT && first.empty()) first = path + ": " + std::strerror(errno);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    first = path + ": " + std::strerror(errno);
  }
  return first;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace pplab
