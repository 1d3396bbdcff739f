#include "tiering/peers/transport/ucx_transport.h"

#include "tiering/peers/transport/ucx_worker.h"

namespace tierfs {
namespace {

ucp_ep_h Ucx(PeerEndpoint endpoint) { return reinterpret_cast<ucp_ep_h>(endpoint); }
PeerEndpoint Ours(ucp_ep_h ep) { return reinterpret_cast<PeerEndpoint>(ep); }

// None for none: a send nobody waits for costs no wrapper.
UcxWorker::Completion Done(PeerTransport::Completion done) {
  if (!done) return nullptr;
  return [done = std::move(done)](ucs_status_t s) { done(s == UCS_OK); };
}

}  // namespace

Result<std::unique_ptr<PeerTransport>> UcxTransport::Make(const UcxOptions& options,
                                                          unsigned am_id) {
  auto worker = UcxWorker::Make(options);
  if (!worker.ok()) return worker.status();
  return std::unique_ptr<PeerTransport>(new UcxTransport(std::move(worker).value(), am_id));
}

Result<std::unique_ptr<PeerTransport>> UcxTransport::MakeWithin(const UcxOptions& options,
                                                                unsigned am_id,
                                                                std::chrono::milliseconds limit) {
  auto worker = UcxWorker::MakeWithin(options, limit);
  if (!worker.ok()) return worker.status();
  return std::unique_ptr<PeerTransport>(new UcxTransport(std::move(worker).value(), am_id));
}

UcxTransport::UcxTransport(std::unique_ptr<UcxWorker> worker, unsigned am_id)
    : worker_(std::move(worker)), am_id_(am_id) {}

UcxTransport::~UcxTransport() = default;

Status UcxTransport::SetHandlers(Handler on_message, ErrorHandler on_error) {
  Status s = worker_->SetAmHandler(am_id_, [on_message = std::move(on_message)](
                                               const void* header, size_t header_size, void* data,
                                               size_t size, const ucp_am_recv_param_t* param) {
    const Message m{header,
                    header_size,
                    data,
                    size,
                    (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0,
                    (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0
                        ? Ours(param->reply_ep)
                        : nullptr};
    switch (on_message(m)) {
      case Receipt::kReceiving:
        return UCS_INPROGRESS;
      case Receipt::kRefused:
        return UCS_ERR_REJECTED;
      case Receipt::kDone:
        break;
    }
    return UCS_OK;
  });
  if (!s.ok()) return s;
  if (!on_error) return Status::Ok();  // no endpoint of its own to hear of
  worker_->SetEndpointErrorHandler(
      [on_error = std::move(on_error)](ucp_ep_h ep, ucs_status_t status) {
        on_error(Ours(ep), status == UCS_ERR_ENDPOINT_TIMEOUT, ucs_status_string(status));
      });
  return Status::Ok();
}

std::string UcxTransport::Address() const { return worker_->Address(); }

void UcxTransport::Start(std::function<void()> tick) { worker_->Start(std::move(tick)); }
bool UcxTransport::Post(std::function<void()> fn) { return worker_->Post(std::move(fn)); }
bool UcxTransport::wedged() const { return worker_->wedged(); }
void UcxTransport::WedgeForTest() { worker_->WedgeForTest(); }
void UcxTransport::Abandon() { worker_->Abandon(); }

void UcxTransport::Stop(std::function<void()> close_all, std::chrono::milliseconds limit,
                        std::function<bool()> settled) {
  worker_->Stop(std::move(close_all), limit, std::move(settled));
}

Result<PeerEndpoint> UcxTransport::Connect(const std::string& address) {
  Result<ucp_ep_h> ep = worker_->Connect(address);
  if (!ep.ok()) return ep.status();
  return Ours(*ep);
}

void UcxTransport::Close(PeerEndpoint endpoint) { worker_->Close(Ucx(endpoint)); }

void UcxTransport::Send(PeerEndpoint endpoint, const WireHeader& header, size_t header_size,
                        const void* data, size_t size, uint32_t flags, Completion done) {
  const uint32_t ucx_flags = ((flags & kReply) != 0 ? UCP_AM_SEND_FLAG_REPLY : 0) |
                             ((flags & kEager) != 0 ? UCP_AM_SEND_FLAG_EAGER : 0);
  worker_->Send(Ucx(endpoint), am_id_, header, header_size, data, size, ucx_flags,
                Done(std::move(done)));
}

PeerTransport::Receipt UcxTransport::Receive(const Message& message, void* buf, size_t size,
                                             Completion done) {
  const ucs_status_t s = worker_->ReceiveBody(message.data, buf, size, Done(std::move(done)));
  return s == UCS_INPROGRESS ? Receipt::kReceiving : Receipt::kDone;
}

// A peer that does not hold the watch (a worker without watches: another
// version of tierfs; or one that refuses it) ends it UCS_ERR_REJECTED or
// UCS_ERR_INVALID_PARAM.
void UcxTransport::Watch(PeerEndpoint reply, WatchEnded ended) {
  worker_->Watch(Ucx(reply), [ended = std::move(ended)](ucs_status_t s) {
    ended(s == UCS_ERR_REJECTED || s == UCS_ERR_INVALID_PARAM, ucs_status_string(s));
  });
}

}  // namespace tierfs
