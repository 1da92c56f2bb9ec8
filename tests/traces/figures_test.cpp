// Numbers as the pictures print them (traces/figures.h).
#include "traces/figures.h"

#include <catch2/catch.hpp>

namespace pplab::figures_test {

TEST_CASE("byte counts read in the decimal unit that fits them, never 0.000 MB for a few bytes", "[render]") {
  CHECK(ByteCount(0, 3) == "0 B");
  CHECK(ByteCount(100, 3) == "100 B");
  CHECK(ByteCount(999, 2) == "999 B");
  CHECK(ByteCount(1000, 2) == "1.00 kB");
  CHECK(ByteCount(4100, 2) == "4.10 kB");
  CHECK(ByteCount(2000000, 3) == "2.000 MB");
  CHECK(ByteCount(1500000000, 2) == "1.50 GB");
  CHECK(ByteCount(Bytes{3} * 1000 * 1000 * 1000 * 1000 * 1000, 1) == "3000.0 TB");  // TB is the largest
  CHECK(ByteCount(-2500, 1) == "-2.5 kB");
}

TEST_CASE("fixed-point text has the digits asked for", "[render]") {
  CHECK(Fixed(1.0 / 3, 3) == "0.333");
  CHECK(Fixed(2.5, 0) == "2");  // to_chars rounds half to even
  CHECK(Fixed(-0.125, 2) == "-0.12");
}

}  // namespace pplab::figures_test
