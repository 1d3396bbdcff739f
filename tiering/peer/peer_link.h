// The state PeerClient keeps per peer (Link) and per Fetch (Pending);
// private to peer_client*.cc.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tiering/peer/peer_client.h"

namespace tierfs {

// One Fetch: shared by its caller and the progress thread.
struct PeerClient::Pending {
  uint64_t id = 0;
  size_t peer = 0;
  std::string path;  // the request's body; ref.path views it
  ChunkRef ref;
  char* dest = nullptr;
  uint64_t generation = 0;  // of the connection it was sent on (progress thread)

  std::mutex mu;  // guards the rest. A leaf lock.
  std::condition_variable cv;
  // Changed only on the progress thread (or by Stop after it ended), which
  // may therefore read it without the lock.
  enum Phase { kWaiting, kReceiving, kDone } phase = kWaiting;
  bool abandoned = false;  // the caller gave up: nothing may be written to dest
  ssize_t result = 0;
};

struct PeerClient::Link {
  size_t index = 0;
  PeerAddress address;
  std::atomic<int> state{kDown};
  PeerLinkCounters counters;

  std::mutex slot_mu;  // guards in_flight. A leaf lock.
  std::condition_variable slot_cv;
  size_t in_flight = 0;

  // Progress thread only.
  ucp_ep_h ep = nullptr;
  uint64_t generation = 0;  // one per connection attempt; stale callbacks compare it
  PeerNonce nonce{};
  bool checking = false;                           // the answer's credential is being checked
  std::chrono::steady_clock::time_point deadline;  // connecting: the answer is due
  std::chrono::steady_clock::time_point retry_at;
  std::chrono::milliseconds backoff{0};
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending;  // sent, by request id
};

}  // namespace tierfs
