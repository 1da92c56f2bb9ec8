#include "sim/percentiles.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"

namespace pplab::percentiles_test {

TEST_CASE("percentiles of a known sample set are exact (linear interpolation, type 7)", "[sim][percentiles]") {
  // 1..11 in shuffled order: h = 10 q lands on a sample for q = 0.1, 0.5, 0.9.
  const std::vector<double> eleven = {7, 3, 11, 1, 9, 5, 2, 10, 4, 8, 6};
  CHECK(Percentile(eleven, 0.1) == 2.0);
  CHECK(Percentile(eleven, 0.5) == 6.0);
  CHECK(Percentile(eleven, 0.9) == 10.0);
  CHECK(Percentile(eleven, 0.0) == 1.0);
  CHECK(Percentile(eleven, 1.0) == 11.0);
  const SampleSpread s = SpreadOfSamples(eleven);
  CHECK(s.p10 == 2.0);
  CHECK(s.median == 6.0);
  CHECK(s.p90 == 10.0);
  // Five samples (the profiler's default repeats): h = 0.4, 2, 3.6.
  const std::vector<double> five = {10, 20, 30, 40, 50};
  CHECK(Percentile(five, 0.1) == 14.0);
  CHECK(Percentile(five, 0.5) == 30.0);
  CHECK(Percentile(five, 0.9) == 46.0);
  // Even n: the median is the mean of the middle two.
  CHECK(Percentile({4, 1, 3, 2}, 0.5) == 2.5);
  // One sample: every percentile is it.
  const SampleSpread one = SpreadOfSamples({3.5});
  CHECK(one.p10 == 3.5);
  CHECK(one.median == 3.5);
  CHECK(one.p90 == 3.5);
  CHECK_THROWS_AS(Percentile({}, 0.5), Error);
  CHECK_THROWS_AS(Percentile({1}, 1.5), Error);
}

}  // namespace pplab::percentiles_test
