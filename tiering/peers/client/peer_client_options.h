// PeerClientOptions: what a PeerClient is told (the job's other nodes, its
// timers and bounds), and PeerLinkCounters, what it counts per peer: plain
// structs, in a header of their own, with no UCX type.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tiering/peers/config/source_port.h"
#include "tiering/peers/transport/ucx_options.h"

namespace tierfs {

struct PeerAddress {
  std::string name;  // as in the peer's own PeerIdentity
  std::string host;  // a name or an address
  uint16_t port = 0;
};

struct PeerClientOptions {
  std::vector<PeerAddress> peers;                   // the other nodes of the job
  std::chrono::milliseconds connect_timeout{3000};  // the whole handshake
  std::chrono::milliseconds retry_min{100}, retry_max{5000};
  std::chrono::milliseconds dead_after{10000};    // silence (no answer to pings) that is death
  std::chrono::milliseconds grace{60000};         // a peer never up is not dead before this
  std::chrono::milliseconds idle_close{1800000};  // an open connection unused this long is closed
  // Open (up or connecting) at once; beyond, the least used idle one closes.
  size_t max_connections = 1024;
  bool connect_at_start = false;  // connect to every peer at Start, not on first need
  size_t max_in_flight = 8;       // requests outstanding per peer
  // Where handshakes come from: a port of this range (below 1024) when
  // this process may bind one (root); SourcePort::kAny: any port.
  SourcePort source_port = SourcePort::kReservedIfAllowed;
  // Offers being sent at once, in all, and their bytes: beyond, an offer is dropped.
  size_t max_offers = 16;
  uint64_t max_offer_bytes = uint64_t{64} << 20;
  // A hedged Fetch reads SOURCE too once its peer has not begun to answer
  // for the p99 of that peer's answers, within [hedge_min, hedge_max]
  // (hedge_max while fewer than 16 answers are measured).
  std::chrono::milliseconds hedge_min{50}, hedge_max{500};
  // While reads want a peer that is stalled or down, it is pinged (stalled)
  // or connected to (down) this often, so that it is asked again as soon
  // as it answers; a connect's TCP part then has probe_connect at most.
  std::chrono::milliseconds probe{100}, probe_connect{1000};
  UcxOptions ucx;
};

struct PeerLinkCounters {
  std::atomic<uint64_t> fetched_chunks{0}, fetched_bytes{0};
  std::atomic<uint64_t> timeouts{0};          // no answer by the caller's deadline
  std::atomic<uint64_t> ups{0}, downs{0};     // state changes
  std::atomic<uint64_t> connect_failures{0};  // attempts that did not end up
  std::atomic<uint64_t> resumed{0};           // ups by a ticket: no MUNGE credential
  std::atomic<uint64_t> resume_refused{0};    // tickets the peer refused: a full handshake followed
  std::atomic<uint64_t> refused{0};           // authentication failed either way
  std::atomic<uint64_t> garbage{0};           // undecodable or unexpected answers: cut off
  std::atomic<uint64_t> forged{0};            // answers that do not authenticate: cut off
  std::atomic<uint64_t> replayed{0};          // ... that do, with a sequence number seen before
  std::atomic<uint64_t> errors{0};            // error answers (kStale, kNotFound, kIo, ...)
  std::atomic<uint64_t> busy{0};              // kBusy answers, and no slot by the deadline
  std::atomic<uint64_t> skipped{0};           // Fetch while the peer was not up, or slow
  std::atomic<uint64_t> late{0};              // answers to requests their caller gave up on
  std::atomic<uint64_t> stalls{0};            // silent with requests waiting: read here meanwhile
  std::atomic<uint64_t> closed_idle{0};       // connections closed unused (kBye)
  std::atomic<uint64_t> resets{0};            // "unknown session" answers: connected again
  std::atomic<uint64_t> connect_us{0};        // time to connect, summed over the ups
  std::atomic<uint64_t> latency_us{0};        // summed over the fetched chunks
  std::atomic<uint64_t> not_resident{0};      // kIfResident fetches it answered kNotResident
  std::atomic<uint64_t> offered{0};           // chunks offered to it
  std::atomic<uint64_t> offers_dropped{0};    // ... not sent: not up, or too many in flight
  std::atomic<uint64_t> left{0};              // times it said it was leaving the job (kLeaving)
  std::atomic<uint64_t> hedges{0};            // hedged Fetches that read SOURCE too
  std::atomic<uint64_t> hedges_won{0};        // ... and had SOURCE's bytes before the peer's
  std::atomic<uint64_t> hedges_lost{0};       // ... the peer had answered first: SOURCE's wasted
  std::atomic<uint64_t> hedge_bytes{0};       // bytes those hedges read from SOURCE
  std::atomic<uint64_t> probes{0};            // pings and connects made while reads wanted it
  // Connections dropped and made afresh: stalled and silent while reads wanted it.
  std::atomic<uint64_t> reconnects_after_silence{0};
};

}  // namespace tierfs
