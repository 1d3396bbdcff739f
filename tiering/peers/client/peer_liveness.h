// PeerLiveness: how long a peer with fetches waiting may answer nothing
// before PeerClient takes it for stalled (StallTime), and a stalled one
// before its connection is made afresh (SilenceBound), learnt from its
// ping round trips, smoothed as TCP does (RFC 6298). Pure arithmetic: no
// clock, no transport; PeerClient feeds it on its progress thread, which
// alone uses it (peer_connection.cc).
#pragma once

#include <chrono>

namespace tierfs {

class PeerLiveness {
 public:
  PeerLiveness() = default;
  // `dead_after`: the silence that is death (PeerClientOptions).
  explicit PeerLiveness(std::chrono::milliseconds dead_after) : dead_after_(dead_after) {}

  // A ping's round trip: the first sets the mean and half of it as the
  // deviation; each later one moves the mean by 1/8 and the deviation by
  // 1/4 of the difference.
  void OnRoundTrip(std::chrono::microseconds sample);

  // Eight smoothed round trips, or the round trip and four of its
  // deviations if more (a loaded host answers late, not never), within
  // [max(250 ms, dead_after / 40), dead_after / 4].
  std::chrono::milliseconds StallTime() const;
  // Twice the stall time, at least 1 s, at most dead_after / 2.
  std::chrono::milliseconds SilenceBound() const;

  // 0 while no round trip is measured.
  std::chrono::microseconds srtt() const { return srtt_; }
  std::chrono::microseconds rttvar() const { return rttvar_; }

  // No peer is taken for stalled sooner: 32 daemons on 2 cores answered
  // pings 50 ms late and more while working.
  static constexpr std::chrono::milliseconds kStallFloor{250};
  // Nor is a stalled one's connection made afresh sooner.
  static constexpr std::chrono::milliseconds kSilenceFloor{1000};

 private:
  std::chrono::milliseconds dead_after_{10000};
  std::chrono::microseconds srtt_{0}, rttvar_{0};
};

}  // namespace tierfs
