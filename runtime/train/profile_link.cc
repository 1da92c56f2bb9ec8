#include "runtime/train/profile_link.h"

#include <algorithm>
#include <set>

namespace pplab {

void FitLink(LinkProfile& link) {
  const size_t n = link.samples.size();
  if (n == 0) return;
  double mx = 0, my = 0;
  for (const LinkSample& s : link.samples) mx += s.bytes, my += s.one_way_ms;
  mx /= n, my /= n;
  double sxx = 0, sxy = 0;
  for (const LinkSample& s : link.samples) {
    sxx += (s.bytes - mx) * (s.bytes - mx);
    sxy += (s.bytes - mx) * (s.one_way_ms - my);
  }
  const double slope = sxx > 0 ? sxy / sxx : 0;  // ms per byte
  double smallest = link.samples.front().one_way_ms;
  for (const LinkSample& s : link.samples) smallest = std::min(smallest, s.one_way_ms);
  if (slope <= 0) {
    link.latency_ms = smallest;
    link.bandwidth_gbps = 0;
    return;
  }
  const double intercept = my - slope * mx;
  // A negative intercept is noise around a tiny latency: use the smallest message's time.
  link.latency_ms = intercept > 0 ? intercept : smallest;
  link.bandwidth_gbps = 1.0 / (slope * 1e6);  // bytes per ms / 1e6 = bytes per ns = GB/s
}

const LinkProfile* MedianLink(const std::vector<LinkProfile>& links) {
  if (links.empty()) return nullptr;
  Bytes largest = 0;
  for (const LinkProfile& l : links)
    for (const LinkSample& s : l.samples) largest = std::max(largest, s.bytes);
  const auto time = [largest](const LinkProfile* l) {
    return l->latency_ms + (l->bandwidth_gbps > 0 ? static_cast<double>(largest) / (l->bandwidth_gbps * 1e6) : 0.0);
  };
  std::vector<const LinkProfile*> order;
  for (const LinkProfile& l : links) order.push_back(&l);
  std::stable_sort(order.begin(), order.end(),
                   [&](const LinkProfile* a, const LinkProfile* b) { return time(a) < time(b); });
  return order[order.size() / 2];
}

std::vector<RankId> ProfilePeers(const std::vector<RankId>& placement, RankId rank) {
  const int S = static_cast<int>(placement.size());
  const int K = S == 0 ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  std::set<RankId> peers;
  for (int s = 0; s < S; ++s) {
    if (placement[s] != rank) continue;
    if (s > 0) peers.insert(placement[s - 1]);
    if (s + 1 < S) peers.insert(placement[s + 1]);
  }
  if (K > 1) {
    peers.insert((rank + 1) % K);
    peers.insert((rank + K - 1) % K);
  }
  peers.erase(rank);
  return {peers.begin(), peers.end()};
}

}  // namespace pplab
