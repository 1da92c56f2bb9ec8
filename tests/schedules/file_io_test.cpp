#include "schedules/file_io.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "schedules/error.h"
#include "schedules/schedule_io.h"

namespace pplab::file_io_test {
namespace {

// Names in `path`'s folder that start with its name and ".tmp": the
// temporaries WriteFile left.
std::vector<std::string> Temporaries(const std::string& path) {
  const std::string folder = path.substr(0, path.rfind('/')), name = path.substr(path.rfind('/') + 1);
  std::vector<std::string> out;
  for (const std::string& entry : ListDirectory(folder)) {
    if (entry.rfind(name + ".tmp", 0) == 0) out.push_back(entry);
  }
  return out;
}

}  // namespace

TEST_CASE("a written file reads back, and a leading byte-order mark is dropped", "[file_io]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/round.txt";
  WriteTextFile(path, "\xEF\xBB\xBFhello\nworld\n");
  CHECK(ReadTextFile(path) == "hello\nworld\n");
  CHECK(Temporaries(path).empty());  // the temporary is gone
}

TEST_CASE("writing through a symlink or a device never replaces it", "[file_io]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  const std::string target = dir + "/target.txt", link = dir + "/link.json";
  std::remove(link.c_str());
  WriteTextFile(target, "old");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  WriteTextFile(link, "new");
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(ReadTextFile(target) == "new");
  WriteTextFile("/dev/null", "discarded");
  REQUIRE(::lstat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("WriteFile keeps the old file whole when its writer throws, and leaves no temporary", "[file_io]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/write_file_throws.bin";
  WriteFile(path, [](std::ostream& out) { out.write("ab\0c", 4); });
  CHECK(ReadTextFile(path) == std::string("ab\0c", 4));
  CHECK_THROWS_WITH(WriteFile(path,
                              [](std::ostream& out) {
                                out << "half";
                                throw Error("the writer failed");
                              }),
                    "the writer failed");
  CHECK(ReadTextFile(path) == std::string("ab\0c", 4));
  CHECK(Temporaries(path).empty());
  CHECK_THROWS_WITH(WriteTextFile("", "a"), Catch::Contains("no name"));
  struct stat st {};
  CHECK(::stat(".tmp", &st) != 0);
}

TEST_CASE("two processes writing one file at once each replace it whole, and leave no temporary", "[file_io]") {
  // As ranks that build one token cache do: before, both wrote one
  // temporary, and one rename found it gone or half written.
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/write_file_race.bin";
  const std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  bool failed = false;
  for (int i = 0; i < 40; ++i) {
    try {
      WriteTextFile(path, child == 0 ? a : b);
    } catch (const Error&) {
      failed = true;
    }
  }
  if (child == 0) ::_exit(failed ? 1 : 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(failed);
  const std::string got = ReadTextFile(path);
  CHECK((got == a || got == b));
  CHECK(Temporaries(path).empty());
}

TEST_CASE("EntryWithin names the entry of a folder a path is in, through links and before it exists", "[file_io]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/entry_within";
  RemoveTree(dir);
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir + "/ck").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir + "/ck/step-000001").c_str(), 0755) == 0);
  WriteTextFile(dir + "/ck/latest", "step-000001\n");
  REQUIRE(::symlink("ck", (dir + "/alias").c_str()) == 0);
  CHECK(EntryWithin(dir + "/ck", dir + "/ck/latest") == "latest");
  CHECK(EntryWithin(dir + "/ck", dir + "/alias/latest") == "latest");
  CHECK(EntryWithin(dir + "/alias/", dir + "/ck/step-000001/new.json") == "step-000001");
  CHECK(EntryWithin(dir + "/ck", dir + "/ck/../ck/not-yet") == "not-yet");
  CHECK(EntryWithin(dir + "/ck", dir + "/ck").empty());
  CHECK(EntryWithin(dir + "/ck", dir + "/alias").empty());
  CHECK(EntryWithin(dir + "/ck", dir + "/ck-other/latest").empty());  // a prefix of the name is not inside
  CHECK(EntryWithin(dir + "/ck", dir + "/missing/deeper/x").empty());
  CHECK(ResolvedPath(dir + "/alias") == ResolvedPath(dir + "/ck"));
}

TEST_CASE("unreadable and unwritable paths are errors naming them", "[file_io]") {
  CHECK_THROWS_WITH(ReadTextFile("/nonexistent/x"), Catch::Contains("cannot read /nonexistent/x"));
  CHECK_THROWS_WITH(ReadTextFile(PPLAB_TEST_TMP_DIR), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(WriteTextFile("/nonexistent/dir/x.svg", "a"),
                    Catch::Contains("cannot write /nonexistent/dir/x.svg"));
  CHECK_THROWS_WITH(WriteTextFile(PPLAB_TEST_TMP_DIR, "a"), Catch::Contains("is a directory"));
}

TEST_CASE("a FIFO or a device is refused in one line instead of blocking or reading forever", "[file_io]") {
  const std::string fifo = std::string(PPLAB_TEST_TMP_DIR) + "/plan.fifo";
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // nobody writes to it: opening it to read would block
  CHECK_THROWS_WITH(ReadTextFile(fifo), Catch::Equals("cannot read " + fifo + ": is a FIFO, not a regular file"));
  CHECK_THROWS_WITH(LoadScheduleFile(fifo), Catch::Contains("is a FIFO"));
  std::remove(fifo.c_str());
  CHECK_THROWS_WITH(ReadTextFile("/dev/zero"), Catch::Equals("cannot read /dev/zero: is a device, not a regular file"));
  CHECK_THROWS_WITH(LoadScheduleFile("/dev/null"), Catch::Contains("is a device"));
}

TEST_CASE("a streamed input starts after its byte-order mark", "[file_io]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/bom.json";
  WriteTextFile(path, "\xEF\xBB\xBF \n {}");
  std::ifstream in = OpenInputFile(path);
  CHECK(SkipSpace(in) == '{');
  WriteTextFile(path, "{}");
  std::ifstream plain = OpenInputFile(path);
  CHECK(plain.get() == '{');
  WriteTextFile(path, "  \n");
  std::ifstream blank = OpenInputFile(path);
  CHECK(SkipSpace(blank) == EOF);
}

TEST_CASE("SameFile: one file by any of its names, a new file by its folder and name, a device never", "[file_io]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  const std::string file = dir + "/same.txt", link = dir + "/same-link.txt", other = dir + "/other.txt";
  WriteTextFile(file, "a");
  WriteTextFile(other, "a");
  std::remove(link.c_str());
  REQUIRE(::symlink(file.c_str(), link.c_str()) == 0);
  CHECK(SameFile(file, file));
  CHECK(SameFile(file, dir + "/./same.txt"));
  CHECK(SameFile(file, link));
  CHECK_FALSE(SameFile(file, other));  // the same contents, another file
  // Files that do not exist yet: the same name in the same folder.
  const std::string fresh = dir + "/not-yet.txt";
  std::remove(fresh.c_str());
  CHECK(SameFile(fresh, dir + "/./not-yet.txt"));
  CHECK_FALSE(SameFile(fresh, dir + "/not-yet-either.txt"));
  CHECK_FALSE(SameFile(fresh, file));
  // No folder: nothing to compare (CheckWritable refuses such a path first).
  CHECK_FALSE(SameFile(dir + "/no-such-folder/x", dir + "/no-such-folder/x"));
  // A device is written through in place: two outputs may share it.
  CHECK_FALSE(SameFile("/dev/null", "/dev/null"));
}

TEST_CASE("CheckWritable refuses what WriteTextFile would fail on, and creates nothing", "[file_io]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  CHECK_NOTHROW(CheckWritable(dir + "/new-output.csv"));
  struct stat st {};
  CHECK(::stat((dir + "/new-output.csv").c_str(), &st) != 0);
  CHECK_NOTHROW(CheckWritable("/dev/null"));
  CHECK_THROWS_WITH(CheckWritable("/nonexistent/dir/x.csv"),
                    Catch::StartsWith("cannot write /nonexistent/dir/x.csv: /nonexistent/dir"));
  CHECK_THROWS_WITH(CheckWritable(dir), Catch::Contains("is a directory"));
  WriteTextFile(dir + "/plain.txt", "x");
  CHECK_THROWS_WITH(CheckWritable(dir + "/plain.txt/x.csv"), Catch::Contains("is not a directory"));
  // A folder whose permission bits let root in but that takes no file:
  // refused by trying (profile -o /proc/x.json failed only at the end).
  CHECK_THROWS_WITH(CheckWritable("/proc/pplab-x.json"), Catch::StartsWith("cannot write /proc/pplab-x.json: /proc: "));
  // The check leaves nothing behind.
  for (const std::string& name : ListDirectory(dir)) CHECK(name.rfind(".pplab-write-check-", 0) != 0);
}

TEST_CASE("ListDirectory names a folder's entries sorted, and RemoveTree removes a tree without following links",
          "[file_io]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/tree";
  const std::string outside = std::string(PPLAB_TEST_TMP_DIR) + "/tree_outside";
  REQUIRE(RemoveTree(dir) == "");
  REQUIRE(RemoveTree(outside) == "");
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir + "/b").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir + "/b/c").c_str(), 0755) == 0);
  REQUIRE(::mkdir(outside.c_str(), 0755) == 0);
  WriteTextFile(dir + "/z.txt", "z");
  WriteTextFile(dir + "/.hidden", "h");
  WriteTextFile(dir + "/b/c/deep.txt", "d");
  WriteTextFile(outside + "/keep.txt", "k");
  REQUIRE(::symlink(outside.c_str(), (dir + "/link").c_str()) == 0);
  CHECK(ListDirectory(dir) == std::vector<std::string>{".hidden", "b", "link", "z.txt"});
  CHECK(ListDirectory(dir + "/b/c") == std::vector<std::string>{"deep.txt"});
  CHECK_THROWS_WITH(ListDirectory(dir + "/none"), Catch::Contains("cannot list " + dir + "/none: No such file"));
  CHECK_THROWS_WITH(ListDirectory(dir + "/z.txt"), Catch::Contains("cannot list " + dir + "/z.txt: Not a directory"));

  CHECK(RemoveTree(dir) == "");
  struct stat st {};
  CHECK(::lstat(dir.c_str(), &st) != 0);
  CHECK(ReadTextFile(outside + "/keep.txt") == "k");  // the link went, not what it points to
  CHECK(RemoveTree(dir) == "");                       // a missing path is no error
  WriteTextFile(dir, "a file");
  CHECK(RemoveTree(dir) == "");
  CHECK(::lstat(dir.c_str(), &st) != 0);
}

}  // namespace pplab::file_io_test
