#include "runtime/train/store_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace {

// The file's text, or "" when it cannot be read.
std::string ReadIfThere(const std::string& path) {
  try {
    return ReadTextFile(path);
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

std::string MakeStoreDir(const std::string& temp) {
  RemoveStaleStores(temp);
  std::string dir = temp + "/pplab-store-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    throw Error("launcher: cannot create a directory for the workers' store in " + temp + ": " + std::strerror(errno));
  }
  // Written whole (WriteTextFile renames a finished file into place), with
  // a line end last: a folder whose owner is not yet there is kept. A
  // folder without one would never be removed, so it goes if that fails.
  try {
    WriteTextFile(dir + "/owner", ProcessStamp(::getpid()) + "\n");
  } catch (const Error&) {
    RemoveTree(dir);
    throw;
  }
  return dir;
}

std::string ProcessStamp(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string stat = ReadIfThere(proc + "/stat");
  // Field 22 is the start time; the name (field 2) is in parentheses and
  // may hold spaces, so count from the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) fields >> field;  // a failed read fails `fields`
  char ns[256];
  const ssize_t n = ::readlink((proc + "/ns/pid").c_str(), ns, sizeof ns - 1);
  if (!fields || n <= 0) return "";
  return std::to_string(pid) + " " + field + " " + std::string(ns, static_cast<size_t>(n));
}

int RemoveStaleStores(const std::string& dir) {
  const std::string own = ProcessStamp(::getpid());
  const std::string own_ns = own.substr(own.rfind(' ') + 1);
  int removed = 0;
  std::vector<std::string> names;
  try {
    names = ListDirectory(dir);
  } catch (const Error&) {
    return 0;  // MakeStoreDir's mkdtemp there says what is wrong
  }
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat info {};
    if (name.rfind("pplab-store-", 0) != 0 || ::lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
        info.st_uid != ::getuid()) {
      continue;
    }
    std::string owner = ReadIfThere(path + "/owner");
    if (owner.empty() || owner.back() != '\n') continue;  // not written yet
    owner.pop_back();
    const size_t first = owner.find(' '), last = owner.rfind(' ');
    if (first == std::string::npos || first == last || owner.substr(last + 1) != own_ns) continue;
    const long pid = std::atol(owner.c_str());
    if (pid <= 0 || ProcessStamp(static_cast<pid_t>(pid)) == owner) continue;
    if (RemoveTree(path).empty()) ++removed;
  }
  return removed;
}

}  // namespace pplab
