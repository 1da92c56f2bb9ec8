// The workers' store folders: each names its launcher, and the next launch
// removes those whose launcher is gone (a SIGKILLed launcher cannot).
#include "runtime/train/store_dir.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "schedules/file_io.h"

namespace pplab::store_dir_test {

TEST_CASE("a workers' store folder is removed once its launcher is gone, kept while it runs or cannot be told",
          "[launcher]") {
  const std::string own = ProcessStamp(::getpid());
  REQUIRE(own.rfind(std::to_string(::getpid()) + " ", 0) == 0);
  const std::string ns = own.substr(own.rfind(' ') + 1);
  REQUIRE(ns.rfind("pid:[", 0) == 0);
  // A child that has exited and been reaped: its PID names no process (or,
  // reused at once, one with a later start time than 1).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  CHECK(ProcessStamp(child).empty());
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/stale_stores";
  RemoveTree(dir);
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::vector<std::pair<std::string, std::string>> folders = {
      {"pplab-store-gone", std::to_string(child) + " 1 " + ns + "\n"},
      {"pplab-store-reused", std::to_string(::getpid()) + " 1 " + ns + "\n"},  // this PID, another start
      {"pplab-store-running", own + "\n"},
      {"pplab-store-elsewhere", std::to_string(child) + " 1 pid:[1]\n"},  // another PID namespace
      {"pplab-store-half", own.substr(0, 4)},                             // no line end: not whole
      {"pplab-store-unowned", ""},                                        // no owner file
      {"other-gone", std::to_string(child) + " 1 " + ns + "\n"},          // not a store
  };
  for (const auto& [name, owner] : folders) {
    REQUIRE(::mkdir((dir + "/" + name).c_str(), 0700) == 0);
    if (!owner.empty()) WriteTextFile(dir + "/" + name + "/owner", owner);
  }
  WriteTextFile(dir + "/pplab-store-file", own + "\n");  // a file, not a folder
  CHECK(RemoveStaleStores(dir) == 2);
  CHECK(ListDirectory(dir) == std::vector<std::string>{"other-gone", "pplab-store-elsewhere", "pplab-store-file",
                                                       "pplab-store-half", "pplab-store-running",
                                                       "pplab-store-unowned"});
  CHECK(RemoveStaleStores(dir) == 0);
  CHECK(RemoveStaleStores(dir + "/missing") == 0);
  RemoveTree(dir);
}

TEST_CASE("a store folder is this user's alone and names the process that made it", "[launcher]") {
  const std::string temp = std::string(PPLAB_TEST_TMP_DIR) + "/fresh_store";
  RemoveTree(temp);
  REQUIRE(::mkdir(temp.c_str(), 0700) == 0);
  const std::string dir = MakeStoreDir(temp);
  CHECK(dir.rfind(temp + "/pplab-store-", 0) == 0);
  struct stat info {};
  REQUIRE(::stat(dir.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0700);
  CHECK(ReadTextFile(dir + "/owner") == ProcessStamp(::getpid()) + "\n");
  CHECK(RemoveStaleStores(temp) == 0);  // its maker runs
  CHECK_THROWS_WITH(MakeStoreDir(temp + "/missing"), Catch::Contains(temp + "/missing"));
  RemoveTree(temp);
}

}  // namespace pplab::store_dir_test
