// A run's text, opened from a source or from what the launcher prepared, and
// the environment variable that carries the latter to the workers.
#include "runtime/data/run_text.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab::run_text_test {
namespace {

const std::string kText = std::string(PPLAB_TEST_DATA_DIR) + "/text";

TextSource Fortunes() {
  TextSource source;
  source.paths = {kText + "/fortunes.txt"};
  source.vocab_size = 200;
  source.cache_dir = std::string(PPLAB_TEST_TMP_DIR) + "/run_text_cache_" + std::to_string(::getpid());
  RemoveTree(source.cache_dir);
  std::filesystem::create_directories(source.cache_dir);
  return source;
}

}  // namespace

TEST_CASE("a prepared text round-trips through the workers' environment variable", "[data]") {
  PreparedText p;
  p.tokenizer_path = "/tmp/a dir/tokenizer-1.model";
  p.cache_path = "/tmp/a dir/tokens \"quoted\".bin";
  p.corpus_fingerprint = 0xfedcba9876543210ULL;  // past 2^63: would not survive a double
  p.tokenizer_fingerprint = 0x0000000000000001ULL;
  p.documents = 120;
  p.tokens = int64_t{1} << 40;
  p.chats = true;
  const std::string assignment = PreparedTextEnv(p);
  const std::string prefix = std::string(kPreparedTextEnv) + "=";
  REQUIRE(assignment.compare(0, prefix.size(), prefix) == 0);
  ::unsetenv(kPreparedTextEnv);
  CHECK_FALSE(PreparedTextFromEnv().has_value());
  REQUIRE(::setenv(kPreparedTextEnv, assignment.c_str() + prefix.size(), 1) == 0);
  const std::optional<PreparedText> back = PreparedTextFromEnv();
  ::unsetenv(kPreparedTextEnv);
  REQUIRE(back.has_value());
  CHECK(back->tokenizer_path == p.tokenizer_path);
  CHECK(back->cache_path == p.cache_path);
  CHECK(back->corpus_fingerprint == p.corpus_fingerprint);
  CHECK(back->tokenizer_fingerprint == p.tokenizer_fingerprint);
  CHECK(back->documents == p.documents);
  CHECK(back->tokens == p.tokens);
  CHECK(back->chats);
}

TEST_CASE("a malformed prepared-text variable is one error naming it", "[data]") {
  for (const char* value : {"not json", "{}", "{\"tokenizer_path\": 3}"}) {
    ::setenv(kPreparedTextEnv, value, 1);
    try {
      PreparedTextFromEnv();
      FAIL("accepted " << value);
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains(kPreparedTextEnv));
    }
  }
  ::unsetenv(kPreparedTextEnv);
}

TEST_CASE("a worker opening the launcher's prepared text reads the samples the launcher reads", "[data]") {
  const TextSource source = Fortunes();
  TextDataOptions data;
  data.seq_len = 16;
  data.seed = 3;
  data.bos = data.eos = data.pad = 77;  // replaced by the tokenizer's ids
  const std::unique_ptr<RunText> launcher = OpenRunText(source, data, nullptr, std::nullopt);
  CHECK(launcher->dataset->Options().bos == launcher->tokenizer->Bos());
  CHECK(launcher->dataset->Options().eos == launcher->tokenizer->Eos());
  CHECK(launcher->dataset->Options().pad == launcher->tokenizer->Pad());
  CHECK(launcher->dataset->Options().seq_len == 16);
  // The worker's source names no file: it must not read the corpus again.
  TextSource nowhere;
  nowhere.paths = {kText + "/no-such-file.txt"};
  const std::unique_ptr<RunText> worker = OpenRunText(nowhere, data, nullptr, launcher->prepared);
  REQUIRE(worker->dataset->NumTrainSamples() == launcher->dataset->NumTrainSamples());
  REQUIRE(worker->dataset->NumValSamples() == launcher->dataset->NumValSamples());
  std::vector<int32_t> a(17), b(17);
  for (int64_t i = 0; i < launcher->dataset->NumTrainSamples(); i += 7) {
    launcher->dataset->TrainSample(i, a.data());
    worker->dataset->TrainSample(i, b.data());
    REQUIRE(a == b);
  }
  // Without a prepared text the same missing file is refused by name.
  try {
    OpenRunText(nowhere, data, nullptr, std::nullopt);
    FAIL("opened a missing corpus");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("no-such-file.txt"));
  }
}

}  // namespace pplab::run_text_test
