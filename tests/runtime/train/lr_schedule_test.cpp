#include "runtime/train/lr_schedule.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace pplab::lr_schedule_test {

TEST_CASE("learning rate: linear warm-up, then cosine decay to zero", "[lr]") {
  const LrSchedule s{1e-3, 2, 6};
  CHECK(s.At(0) == Approx(0.5e-3));
  CHECK(s.At(1) == Approx(1e-3));
  CHECK(s.At(2) == Approx(1e-3));                                   // decay starts at base
  CHECK(s.At(3) == Approx(1e-3 * 0.5 * (1 + std::cos(M_PI / 4))));  // a quarter of the way
  CHECK(s.At(4) == Approx(0.5e-3));
  CHECK(s.At(5) == Approx(1e-3 * 0.5 * (1 + std::cos(3 * M_PI / 4))));
  const LrSchedule no_warmup{2e-3, 0, 4};
  CHECK(no_warmup.At(0) == Approx(2e-3));
  CHECK(no_warmup.At(2) == Approx(1e-3));
}

}  // namespace pplab::lr_schedule_test
