// UcxWorker's watches on reply endpoints. A server answers on the endpoint
// UCX made for its client's connection, which UCX 1.13 (and later) destroys
// without telling anyone once that connection fails: ucp_ep_set_failed
// frees an endpoint its user never created ("not exposed to a user"), and
// a send on the pointer kept for it reads freed memory (the SIGSEGV in
// ucp_am_send_nbx when a server answered, or said kLeaving, after its
// client had gone). Nothing in UCX's API reports that; what it does do is
// end every request still open on the endpoint, with an error, before it
// frees it. So the server keeps one request open on each reply endpoint for
// as long as its client's endpoint is open: a one-byte rendezvous message
// the client's worker holds unread, and lets go of when it closes the
// endpoint. Its completion, whatever its status, tells the server that the
// endpoint must not be used again. Progress thread only.
#include <ucp/api/ucp.h>

#include <vector>

#include "tiering/peers/transport/ucx_abort.h"
#include "tiering/peers/transport/ucx_worker.h"

namespace tierfs {

using ucx_abort::InUcx;

void UcxWorker::Watch(ucp_ep_h ep, Completion ended) {
  static const char kByte = 0;  // never read: the peer holds the message unread
  auto* op = new Op{this, {}, std::move(ended), /*watch=*/true, ep};
  ucp_request_param_t p = SendParams(UCP_AM_SEND_FLAG_RNDV | UCP_AM_SEND_FLAG_REPLY, op);
  ucs_status_ptr_t request;
  {
    InUcx in(&wedged_);
    request = ucp_am_send_nbx(ep, kWatchAmId, nullptr, 0, &kByte, 1, &p);
  }
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    Completion done = std::move(op->done);
    delete op;
    if (done) done(request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
    return;
  }
  ++watched_[ep];
}

void UcxWorker::WatchEnded(ucp_ep_h ep) {
  auto it = watched_.find(ep);
  if (it != watched_.end() && --it->second <= 0) watched_.erase(it);
}

// After the last messages to the peers are out: the close (forced) ends
// each watch, and its peer's side sees the connection go.
void UcxWorker::CloseWatched() {
  std::vector<ucp_ep_h> eps;
  for (const auto& [ep, n] : watched_) eps.push_back(ep);
  for (ucp_ep_h ep : eps) CloseNow(ep);
}

// Held only on an endpoint this worker made, one at a time: a server can
// make a client hold no more than one descriptor per connection, and a
// stranger that wired up to this worker none.
ucs_status_t UcxWorker::OnWatch(void* data, const ucp_am_recv_param_t* param) {
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
      !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
    return Discard(param);
  }
  auto it = own_.find(param->reply_ep);
  if (it == own_.end() || it->second != nullptr) return UCS_ERR_REJECTED;
  it->second = data;
  return UCS_INPROGRESS;  // kept unread until the endpoint closes
}

void UcxWorker::ReleaseWatch(ucp_ep_h ep) {
  auto it = own_.find(ep);
  if (it == own_.end()) return;
  if (it->second != nullptr) {
    InUcx in(&wedged_);
    ucp_am_data_release(worker_, it->second);  // its server's watch completes
  }
  own_.erase(it);
}

}  // namespace tierfs
