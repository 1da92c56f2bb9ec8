#include "schedules/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "schedules/error.h"

namespace pplab {

TEST_CASE("a written file reads back, and a leading byte-order mark is dropped", "[file_io]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/round.txt";
  WriteTextFile(path, "\xEF\xBB\xBFhello\nworld\n");
  CHECK(ReadTextFile(path) == "hello\nworld\n");
  struct stat st {};
  CHECK(::stat((path + ".tmp").c_str(), &st) != 0);  // the temporary is gone
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

TEST_CASE("unreadable and unwritable paths are errors naming them", "[file_io]") {
  CHECK_THROWS_WITH(ReadTextFile("/nonexistent/x"), Catch::Contains("cannot read /nonexistent/x"));
  CHECK_THROWS_WITH(ReadTextFile(PPLAB_TEST_TMP_DIR), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(WriteTextFile("/nonexistent/dir/x.svg", "a"),
                    Catch::Contains("cannot write /nonexistent/dir/x.svg"));
  CHECK_THROWS_WITH(WriteTextFile(PPLAB_TEST_TMP_DIR, "a"), Catch::Contains("is a directory"));
}

}  // namespace pplab
