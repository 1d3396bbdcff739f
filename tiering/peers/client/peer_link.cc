#include "tiering/peers/client/peer_link.h"

#include <chrono>

namespace tierfs {

void VisitLinkCounters(const PeerLink& l, CounterVisitor& v) {
  const PeerLinkCounters& c = l.counters;
  v.Flag("up", l.status.state.load() == LinkState::kUp,
         {"1 if this node is connected to the peer."});
  v.Flag("dead", l.status.dead.load(), {"1 if the peer is taken for gone."});
  v.Counter("fetched_chunks", c.fetched_chunks, {"Chunks fetched from the peer."});
  v.Counter("fetched_bytes", c.fetched_bytes, {"Bytes fetched from the peer.", Unit::kBytes});
  v.Counter("latency_us", c.latency_us,
            {"Time spent fetching chunks from the peer, summed over the chunks fetched.",
             Unit::kMicroseconds});
  v.Counter("timeouts", c.timeouts, {"Fetches the peer did not answer in time."});
  v.Counter("ups", c.ups, {"Times the connection to the peer came up."});
  v.Counter("resumed", c.resumed,
            {"Times it came up by resuming an earlier session (no MUNGE credential)."});
  v.Counter("resume_refused", c.resume_refused,
            {"Resumptions the peer refused (it restarted, or the ticket expired): a full "
             "handshake followed."});
  v.Counter("downs", c.downs, {"Times the connection to the peer went down."});
  v.Counter("connect_failures", c.connect_failures,
            {"Attempts to connect to the peer that failed."});
  v.Counter("refused", c.refused, {"Handshakes with the peer that failed authentication."});
  v.Counter("garbage", c.garbage,
            {"Undecodable or unexpected answers from the peer (connection cut)."});
  v.Counter("forged", c.forged,
            {"Answers from the peer that did not authenticate (connection cut)."});
  v.Counter("replayed", c.replayed,
            {"Answers from the peer with a sequence number seen before (connection cut)."});
  v.Counter("errors", c.errors, {"Error answers from the peer."});
  v.Counter("busy", c.busy, {"Fetches the peer was too busy to answer."});
  v.Counter("skipped", c.skipped,
            {"Fetches not tried because the peer was not up, or slow to answer."});
  v.Counter("late", c.late, {"Answers that came after their fetch had given up."});
  v.Counter("stalls", c.stalls,
            {"Times the peer answered nothing, not even a ping, while fetches waited: they "
             "were read from SOURCE here."});
  v.Counter("closed_idle", c.closed_idle, {"Connections to the peer closed for being unused."});
  v.Counter("connect_us", c.connect_us,
            {"Time spent connecting to the peer (handshake and transport), summed over the ups.",
             Unit::kMicroseconds});
  v.Counter("resets", c.resets,
            {"Times the peer had forgotten the connection and it was made again."});
  v.Counter("not_resident", c.not_resident,
            {"Fetches of chunks the peer did not hold (read from SOURCE here, then offered)."});
  v.Counter("offered", c.offered, {"Chunks read from SOURCE here and offered to the peer."});
  v.Counter("offers_dropped", c.offers_dropped,
            {"Chunks not offered to the peer: it was not up, or too many offers were in flight."});
  v.Flag("slow",
         std::chrono::steady_clock::now().time_since_epoch().count() < l.status.slow_until.load(),
         {"1 if reads skip the peer now (it was slow or silent): they read SOURCE."});
  v.Counter("left", c.left, {"Times the peer said it was leaving the job."});
  v.Counter("hedges", c.hedges,
            {"Fetches the peer had not begun to answer in its hedge time: SOURCE was read too."});
  v.Counter("hedges_won", c.hedges_won,
            {"Hedged fetches that had SOURCE's bytes before the peer's answer."});
  v.Counter("hedges_lost", c.hedges_lost,
            {"Hedged fetches the peer had answered first: SOURCE's bytes were not needed."});
  v.Counter("hedge_bytes", c.hedge_bytes, {"Bytes hedged fetches read from SOURCE.", Unit::kBytes});
  v.Gauge("hedge_after_us", static_cast<double>(l.hedge_time.after().count()),
          {"How long a fetch waits for the peer before SOURCE is read too (the p99 of its "
           "answers, within bounds).",
           Unit::kMicroseconds});
  v.Counter("probes", c.probes,
            {"Pings and connects made on a short timer while reads wanted the peer."});
  v.Counter("reconnects_after_silence", c.reconnects_after_silence,
            {"Connections to the peer dropped and made afresh: it answered nothing while "
             "reads wanted it."});
}

}  // namespace tierfs
