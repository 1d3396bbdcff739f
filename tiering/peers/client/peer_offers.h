// PeerOffers: chunks this node read from SOURCE, offered to a peer (their
// home, which answered kNotResident). One-way: the chunk is copied, sealed
// on the progress thread (which numbers the connection's messages) and
// sent without waiting; the peer keeps it if it has room and its snapshot
// agrees, and never answers. At most max_offers offers and max_offer_bytes
// bytes are in flight, in all (OfferBudget): an offer beyond is dropped,
// never queued, as is one to a peer not up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tiering/peers/client/offer_budget.h"
#include "tiering/peers/client/peer_connections.h"
#include "tiering/peers/transport/buffer_pool.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

class PeerOffers {
 public:
  // `connections` must outlive this; the bodies' buffers come from `buffers`.
  PeerOffers(PeerConnections* connections, std::shared_ptr<BufferPool> buffers, size_t max_offers,
             uint64_t max_offer_bytes);

  // Offers the whole chunk `ref` (its range ignored), whose
  // ref.chunk_length() bytes are at `data`, to peer `peer`. False if not
  // sent: a bad ref, the peer is not up, or the budget is spent (counted
  // as dropped). Thread-safe.
  bool Offer(size_t peer, const ChunkRef& ref, const char* data);

  // Offers up to this size (path and bytes) are sent eagerly: the bytes go
  // with the header, with no rendezvous round trips and the wake-ups they
  // cost both sides.
  static constexpr uint64_t kEager = uint64_t{1} << 20;

 private:
  // An offer sent or dropped: its buffer back, its budget released.
  void Done(BufferPool::Buffer body, uint64_t bytes);

  PeerConnections* const connections_;
  const std::shared_ptr<BufferPool> buffers_;
  OfferBudget budget_;  // offers being sent, in all
};

}  // namespace tierfs
