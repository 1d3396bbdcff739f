#include "tiering/peers/client/peer_offers.h"

#include <chrono>
#include <cstring>

namespace tierfs {

PeerOffers::PeerOffers(PeerConnections* connections, std::shared_ptr<BufferPool> buffers,
                       size_t max_offers, uint64_t max_offer_bytes)
    : connections_(connections),
      buffers_(std::move(buffers)),
      budget_(max_offers, max_offer_bytes) {}

bool PeerOffers::Offer(size_t peer, const ChunkRef& ref, const char* data) {
  if (peer >= connections_->size()) return false;
  PeerLink& l = connections_->link(peer);
  l.status.last_used.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                           std::memory_order_relaxed);
  ChunkRef whole = ref;
  whole.range_off = whole.range_len = 0;
  const uint64_t length = whole.chunk_length();
  if (!ValidChunkRef(whole) || length == 0) return false;
  const uint64_t bytes = whole.path.size() + length;
  if (l.status.state.load() != LinkState::kUp || !budget_.TryTake(bytes)) {
    l.counters.offers_dropped++;
    return false;
  }
  // The body: the path, then the bytes; sealed in place on the progress
  // thread, which numbers the connection's messages. The reference's path
  // views the body's.
  auto body = std::make_shared<BufferPool::Buffer>(buffers_->Take(bytes));
  std::memcpy(body->get(), whole.path.data(), whole.path.size());
  std::memcpy(body->get() + whole.path.size(), data, length);
  whole.path = std::string_view(body->get(), whole.path.size());
  bool posted = connections_->transport()->Post([this, peer, whole, body, bytes] {
    PeerLink& l = connections_->link(peer);
    LinkProgress& c = l.progress;
    WireHeader h;
    if (l.status.state.load() != LinkState::kUp) {
      l.counters.offers_dropped++;
      Done(std::move(*body), bytes);
      return;
    }
    size_t n = EncodeOffer(WireIds{0, c.crypto->session, c.crypto->next_seq++}, whole, &h);
    if (!SealWire(c.crypto->keys.send, &h, n, body->get(), bytes, nullptr)) {
      Done(std::move(*body), bytes);
      return;
    }
    l.counters.offered++;
    // With a reply endpoint, as every message: an offer may be the first
    // on a new connection, and the server answers nothing but keeps the
    // session for the requests that follow.
    const uint32_t flags = PeerTransport::kReply | (bytes <= kEager ? PeerTransport::kEager : 0);
    connections_->transport()->Send(c.ep, h, n, body->get(), bytes, flags,
                                    [this, body, bytes](bool) { Done(std::move(*body), bytes); });
  });
  if (!posted) Done(std::move(*body), bytes);
  return posted;
}

void PeerOffers::Done(BufferPool::Buffer body, uint64_t bytes) {
  buffers_->Give(std::move(body));
  budget_.Give(bytes);
}

}  // namespace tierfs
