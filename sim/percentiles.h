// Percentiles of repeated measurements: the median, p10 and p90 that the
// profiler records for each action and the simulator draws from.
#pragma once

#include <vector>

namespace pplab {

// The q-th quantile (q in [0, 1]) of `samples` by linear interpolation
// between order statistics (Hyndman and Fan's type 7, numpy's default):
// with x sorted ascending and h = (n - 1) q, x[floor h] + (h - floor h)
// (x[floor h + 1] - x[floor h]). So q = 0.5 is the usual median (the mean of
// the middle two for even n), q = 0 the minimum and q = 1 the maximum; a set
// of one value gives that value for every q. Throws pplab::Error when
// `samples` is empty or q is outside [0, 1] or not finite.
double Percentile(std::vector<double> samples, double q);

// The 10th, 50th and 90th percentiles of one set of samples.
struct SampleSpread {
  double p10 = 0, median = 0, p90 = 0;
};
// Throws as Percentile.
SampleSpread SpreadOfSamples(const std::vector<double>& samples);

}  // namespace pplab
