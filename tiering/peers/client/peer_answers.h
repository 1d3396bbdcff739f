// PeerAnswers: what the job's peers send a PeerClient, taken in on the
// progress thread: kData answers (an eager body copied, a large one
// received into the request's own buffer), error answers, pongs, kLeaving;
// and each answer opened on its caller's thread (Open). A message is
// matched to its connection by its session id and authenticated before it
// counts (a forged or replayed one is counted and ignored: both ids travel
// in clear); one that authenticates and breaks the protocol cuts the peer
// off. What the connection does about it is PeerConnection's.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "tiering/peers/client/peer_connections.h"
#include "tiering/peers/transport/buffer_pool.h"
#include "tiering/peers/transport/peer_transport.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

class PeerAnswers {
 public:
  // `connections` must outlive this; `buffers` takes back the answers' buffers.
  PeerAnswers(PeerConnections* connections, std::shared_ptr<BufferPool> buffers)
      : connections_(connections), buffers_(std::move(buffers)) {}

  // The transport's handler: one message from a peer. Progress thread.
  PeerTransport::Receipt OnMessage(const PeerTransport::Message& m);
  // On the caller's thread, once `p` is done with its length: the answer's
  // tag checked, its bytes opened into `dest` and its sequence number
  // recorded. Its length, or -EBADMSG (forged or replayed: this Fetch
  // fails, the connection stays).
  ssize_t Open(PeerLink& l, const std::shared_ptr<PeerRequest>& p, char* dest);
  // Messages from no known connection, or that do not decode.
  uint64_t stray() const { return stray_.load(); }

 private:
  // A kData answer for `p`: copied, or received, into p->sealed.
  PeerTransport::Receipt OnData(PeerConnection& conn, const std::shared_ptr<PeerRequest>& p,
                                const PeerTransport::Message& m, uint64_t seq);
  // The error answer `m` (authenticated) for `conn`.
  void OnError(PeerConnection& conn, const PeerMessage& m);
  // An answer to `p` began to arrive: its latency, for l's hedge time.
  void Answered(PeerLink& l, const PeerRequest& p);

  PeerConnections* const connections_;
  const std::shared_ptr<BufferPool> buffers_;
  std::atomic<uint64_t> stray_{0};
};

}  // namespace tierfs
