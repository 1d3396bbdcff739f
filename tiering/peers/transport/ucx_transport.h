// UcxTransport: PeerTransport (peer_transport.h) over one UcxWorker, its
// messages all of one active-message id. A thin adapter: the worker does
// the work (ucx_worker.h); this maps its types (ucp_ep_h, ucs_status_t,
// the receive parameters, the watches' statuses) to the interface's, so
// that no header above the transport needs a UCX type.
#pragma once

#include <chrono>
#include <memory>

#include "tiering/peers/transport/peer_transport.h"
#include "tiering/peers/transport/ucx_options.h"

namespace tierfs {

class UcxWorker;

class UcxTransport final : public PeerTransport {
 public:
  // A transport on a new worker (UcxWorker::Make), its messages of id `am_id`.
  static Result<std::unique_ptr<PeerTransport>> Make(const UcxOptions& options, unsigned am_id);
  // ... made within `limit` (UcxWorker::MakeWithin): in place of a failed one.
  static Result<std::unique_ptr<PeerTransport>> MakeWithin(const UcxOptions& options,
                                                           unsigned am_id,
                                                           std::chrono::milliseconds limit);
  UcxTransport(std::unique_ptr<UcxWorker> worker, unsigned am_id);
  ~UcxTransport() override;

  Status SetHandlers(Handler on_message, ErrorHandler on_error) override;
  std::string Address() const override;
  void Start(std::function<void()> tick) override;
  bool Post(std::function<void()> fn) override;
  bool wedged() const override;
  void WedgeForTest() override;
  void Abandon() override;
  void Stop(std::function<void()> close_all, std::chrono::milliseconds limit,
            std::function<bool()> settled) override;
  Result<PeerEndpoint> Connect(const std::string& address) override;
  void Close(PeerEndpoint endpoint) override;
  void Send(PeerEndpoint endpoint, const WireHeader& header, size_t header_size, const void* data,
            size_t size, uint32_t flags, Completion done) override;
  Receipt Receive(const Message& message, void* buf, size_t size, Completion done) override;
  void Watch(PeerEndpoint reply, WatchEnded ended) override;

 private:
  const std::unique_ptr<UcxWorker> worker_;
  const unsigned am_id_;
};

}  // namespace tierfs
