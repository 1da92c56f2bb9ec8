// What the profile makes of links between ranks, apart from LibTorch: the
// fit of latency and bandwidth from ping-pong samples, and the ranks a
// rank's profile exchanges messages with.
#pragma once

#include <vector>

#include "schedules/units.h"

namespace pplab {

struct LinkSample {
  Bytes bytes = 0;        // wire bytes of one message
  double one_way_ms = 0;  // median of half a round trip
};

struct LinkProfile {
  RankId from = 0, to = 0;
  std::vector<LinkSample> samples;
  // Least-squares fit of one_way_ms = latency_ms + bytes / (bandwidth_gbps * 1e6).
  double latency_ms = 0;
  double bandwidth_gbps = 0;  // 0 = no bandwidth limit could be measured
};

// The ranks `rank`'s profile exchanges messages with, ascending: the ranks of
// its stages' neighbours (the forward pass through the pipeline) and its two
// neighbours on the ring of ranks (the link ping-pong, which also pairs rank
// K-1 with rank 0). Profile links them all before its first message
// (Transport::Connect): NCCL creates a pair's communicator at its first
// operation, and with K >= 3 ranks K-1 and 0 would otherwise each wait in
// the creation of a different one (up and down).
std::vector<RankId> ProfilePeers(const std::vector<RankId>& placement, RankId rank);

// Fits `link`'s latency_ms and bandwidth_gbps to its samples (least
// squares; see LinkProfile).
void FitLink(LinkProfile& link);

// The link that stands for all of `links` (the cost file's default link):
// the one whose fitted time for the largest message sampled is the median
// (the upper one of an even count). Its latency and bandwidth go together;
// the medians of each taken apart may belong to no link (a fast, far link's
// latency with a slow, near one's bandwidth). Null for no links.
const LinkProfile* MedianLink(const std::vector<LinkProfile>& links);

}  // namespace pplab
