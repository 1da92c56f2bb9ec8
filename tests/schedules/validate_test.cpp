#include "schedules/validate.h"

#include <catch2/catch.hpp>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"

namespace pplab::validate_test {
namespace {

Schedule FromCsv(const std::string& csv) { return ScheduleFromPytorchCsv(csv, "test.csv", "hand-written"); }

bool AnyProblemContains(const ValidationReport& r, const std::string& text) {
  for (const Problem& p : r.problems) {
    if (p.message.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a rank that waits for a gradient before sending its forward deadlocks", "[validate]") {
  // Rank 0 blocks on the gradient of mb 0 before it has sent mb 0 forward.
  const Schedule s = FromCsv("0RECV_B0,0F0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  const ValidationReport r = Validate(s);
  REQUIRE_FALSE(r.ok());
  REQUIRE(AnyProblemContains(r, "deadlock"));
  const std::string text = FormatReport(s, r);
  INFO(text);
  // The grid marks the receive that can never complete and the send it waits for.
  CHECK_THAT(text, Catch::Contains("[0RECV_B0]"));
  CHECK_THAT(text, Catch::Contains("[1SEND_B0]"));
  CHECK_THAT(text, Catch::Contains("rank\\step"));
}

TEST_CASE("a compute-only file's problems name the actions and steps it holds, then it is lowered", "[validate]") {
  // 1F1 twice: lowered first, its second RECV_F1 (in no file) was the first problem.
  Schedule dup = FromCsv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1,1F1\n");
  bool lowered = true;
  ValidationReport r = ValidateFromFile(dup, &lowered);
  CHECK_FALSE(lowered);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].message == "duplicate action 1F1 at rank 1 step 4 (first at rank 1 step 2 (1F1))");
  // A cycle through the stages is found in the file's own steps.
  Schedule cycle = FromCsv("0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n");
  r = ValidateFromFile(cycle, &lowered);
  CHECK_FALSE(lowered);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.problems[0].message, Catch::StartsWith("deadlock: cycle of 4 dependent actions: rank 0 step 1 (0B0)"));
  // A good one comes back lowered and checked.
  Schedule good = FromCsv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  r = ValidateFromFile(good, &lowered);
  CHECK(lowered);
  CHECK(r.ok());
  CHECK(good.HasComm());
}

TEST_CASE("backward before its own forward on one rank is a deadlock", "[validate]") {
  const Schedule s = Lower(FromCsv("0B0,0F0\n"));
  const ValidationReport r = Validate(s);
  CHECK(AnyProblemContains(r, "deadlock"));
}

TEST_CASE("messages sent in another order than received break the channel", "[validate]") {
  const Schedule s = FromCsv(
      "0F0,0F1,0SEND_F1,0SEND_F0,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
  const ValidationReport r = Validate(s);
  REQUIRE_FALSE(r.ok());
  CHECK(AnyProblemContains(r, "channel rank 0 -> rank 1 out of order at message 0"));
}

TEST_CASE("missing, duplicate and misplaced actions are reported", "[validate]") {
  const Schedule good = Lower(Generate1F1B(2, 2));
  {
    Schedule s = good;
    s.programs[1].pop_back();  // drop 1SEND_B1
    CHECK(AnyProblemContains(Validate(s), "missing SEND_B for stage 1 microbatch 1"));
  }
  {
    Schedule s = StripComm(good);
    s.programs[0].push_back({ActionKind::kForward, 0, 0});
    CHECK(AnyProblemContains(Validate(Lower(s)), "duplicate action 0F0"));
  }
  {
    Schedule s = good;
    s.programs[0].push_back({ActionKind::kForward, 1, 0});
    CHECK(AnyProblemContains(Validate(s), "stage 1 is placed on rank 1"));
  }
  {
    Schedule s = StripComm(good);
    s.programs[1].erase(s.programs[1].begin() + 1);  // 1B0
    CHECK(AnyProblemContains(Validate(Lower(s)), "missing backward (B, or I and W) for stage 1 microbatch 0"));
  }
  {
    Schedule s = good;
    s.programs[0].insert(s.programs[0].begin(), {ActionKind::kSendB, 0, 0});
    CHECK(AnyProblemContains(Validate(s), "talks to stage -1"));
  }
  CHECK(Validate(good).ok());
}

TEST_CASE("a split backward needs both I and W", "[validate]") {
  Schedule s = StripComm(Lower(Generate("zb-h1", {2, 2, 1})));
  for (Program& p : s.programs) {
    p.erase(std::remove_if(p.begin(), p.end(), [](const Action& a) { return a.kind == ActionKind::kBackwardWeight; }),
            p.end());
  }
  CHECK(AnyProblemContains(Validate(Lower(s)), "I without W"));
}

}  // namespace pplab::validate_test
