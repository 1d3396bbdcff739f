// PeerTransport: what a peer client and a peer server need of the network
// beneath their connections, and nothing more, as LevelDB's Env stands
// between the database and the operating system: endpoints to a peer's
// worker, messages (a header and a body) sent with a completion, one
// handler for every message received (an eager body is there; a large one
// is pulled by Receive, or refused unread; the sender's endpoint comes
// with it, to answer on), a watch on such an endpoint (a server's: UCX
// frees it when its peer fails), this transport's address for its peers,
// a progress thread to post work to and its tick, and whether the
// transport failed under its owner. UcxTransport (ucx_transport.h) carries
// it over UCX; the unit tests drive the client's connections through a
// fake one, by hand.
//
// Threading: one progress thread runs the handlers, the tick, the
// completions and whatever is posted. The calls marked "progress thread"
// are made on it only; Post, wedged, WedgeForTest and Stop on any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "tiering/base/status.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

// A connection to one peer's worker, as its transport knows it: opaque,
// compared and hashed only. Valid until Close, or until the error handler
// has been told of it.
struct PeerEndpointTag;
using PeerEndpoint = PeerEndpointTag*;

class PeerTransport {
 public:
  // One message received. `data`/`size`: the body; with `rendezvous` its
  // bytes have not moved yet: `data` describes them for Receive. `reply`:
  // the endpoint it may be answered on (sent with kReply), or null; the
  // transport's to keep (never Closed by its user), valid until its watch
  // ends (Watch).
  struct Message {
    const void* header = nullptr;
    size_t header_size = 0;
    void* data = nullptr;
    size_t size = 0;
    bool rendezvous = false;
    PeerEndpoint reply = nullptr;
  };
  // What the handler did with a message: done with it (an eager body may
  // be reused once it returns), receiving its body (Receive), or refusing
  // a rendezvous body unread.
  enum class Receipt { kDone, kReceiving, kRefused };
  using Handler = std::function<Receipt(const Message&)>;
  // An endpoint failed: the peer went away, reset, or (timed_out) its
  // transport gave up waiting. `why` says what, for a log line.
  using ErrorHandler = std::function<void(PeerEndpoint, bool timed_out, const std::string& why)>;
  // A send or receive ended: true if it did what it was asked.
  using Completion = std::function<void(bool ok)>;
  // A watch ended (Watch): its endpoint is never to be used again.
  // `refused`: the peer does not hold watches (another version of tierfs),
  // so it cannot be told apart from one that is gone. `why` says what, for
  // a log line.
  using WatchEnded = std::function<void(bool refused, const std::string& why)>;
  // Send's flags: the peer may answer on the endpoint the message came by
  // (kReply); the body goes with the header, with no rendezvous (kEager).
  static constexpr uint32_t kReply = 1, kEager = 2;

  virtual ~PeerTransport() = default;

  // Before Start: who hears the messages and the failed endpoints (of
  // those Connect made; `on_error` may be null if it makes none).
  virtual Status SetHandlers(Handler on_message, ErrorHandler on_error) = 0;
  // This transport's address, for a peer to connect to (the handshake
  // carries it). Before Start, or on the progress thread.
  virtual std::string Address() const = 0;
  // Starts the progress thread; `tick` runs on it every round (at most the
  // transport's tick apart).
  virtual void Start(std::function<void()> tick) = 0;
  // Runs `fn` on the progress thread soon. False (fn not run) once
  // stopping, or failed.
  virtual bool Post(std::function<void()> fn) = 0;
  // The transport failed under its owner (an abort contained on its
  // progress thread): that thread never runs again. Thread-safe.
  virtual bool wedged() const = 0;
  // Tests: the transport fails as after a contained abort.
  virtual void WedgeForTest() = 0;
  // A failed transport is left as it is, never called again.
  virtual void Abandon() = 0;
  // Runs `close_all` on the progress thread, progresses until `settled`
  // (if given) and the closes and sends end, for at most `limit`, then
  // ends the thread. Idempotent.
  virtual void Stop(std::function<void()> close_all, std::chrono::milliseconds limit,
                    std::function<bool()> settled) = 0;

  // --- Progress thread ---
  // An endpoint to the worker whose address is `address` (the handshake
  // carries it), or why the transport refused at once; later failures go
  // to the error handler.
  virtual Result<PeerEndpoint> Connect(const std::string& address) = 0;
  // Closes `endpoint` soon (its sends and receives complete, failed);
  // allowed in a handler for the endpoint whose message it handles.
  virtual void Close(PeerEndpoint endpoint) = 0;
  // Sends a message: the header is copied; `data` must stay valid until
  // `done` (if any) runs (on this thread, perhaps before Send returns).
  // `flags`: kReply, kEager.
  virtual void Send(PeerEndpoint endpoint, const WireHeader& header, size_t header_size,
                    const void* data, size_t size, uint32_t flags, Completion done) = 0;
  // Receives a rendezvous body of `message` into `buf`: what the handler
  // returns (kReceiving while it runs; kDone if it ended at once, `done`
  // having run).
  virtual Receipt Receive(const Message& message, void* buf, size_t size, Completion done) = 0;
  // Watches `reply` (a Message's): `ended` runs on this thread once the
  // peer let go of its endpoint (it closed it), refused the watch, or the
  // endpoint failed, before the transport frees it. Not run once stopping.
  virtual void Watch(PeerEndpoint reply, WatchEnded ended) = 0;
  // What a handler returns to drop `message` unread.
  static Receipt Discard(const Message& message) {
    return message.rendezvous ? Receipt::kRefused : Receipt::kDone;
  }
};

}  // namespace tierfs
