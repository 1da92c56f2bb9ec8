#include "sim/percentiles.h"

#include <algorithm>
#include <cmath>

#include "schedules/error.h"

namespace pplab {

double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) throw Error("percentile of no samples");
  if (!(q >= 0 && q <= 1)) throw Error("percentile: q must be in [0, 1]");
  std::sort(samples.begin(), samples.end());
  const double h = static_cast<double>(samples.size() - 1) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (h - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

SampleSpread SpreadOfSamples(const std::vector<double>& samples) {
  return {Percentile(samples, 0.1), Percentile(samples, 0.5), Percentile(samples, 0.9)};
}

}  // namespace pplab
