// UcxWorker: one UCX context and worker, driven by one progress thread; the
// transport under PeerServer and PeerClient.
//
// The UCX API is active messages (ucp_am_send_nbx and a receive handler per
// message id). A message arrives with its header, its sender's endpoint
// (UCP_AM_SEND_FLAG_REPLY) and, for a large body, a rendezvous descriptor:
// the receiver looks at the header first and then either pulls the body
// straight into the buffer it chooses (ucp_am_recv_data_nbx: the caller's
// destination, RDMA on InfiniBand, zero-copy TCP elsewhere) or refuses it
// without the bytes ever moving. That is exactly a request/response
// protocol with strict decoding. The tag API would need a receive posted per
// request and cannot tell a server which endpoint a request came from; the
// stream API is a byte stream that we would have to frame ourselves.
//
// Threading: the worker is UCS_THREAD_MODE_SINGLE. Every UCX call on it is
// made on the progress thread, including the handlers; other threads hand
// it work with Post(). The thread sleeps in epoll on the worker's event fd
// (UCP_FEATURE_WAKEUP) and an eventfd of its own, at most `tick` at a time,
// and runs the owner's tick function (timers) every round.
//
// Create it after the daemon forks: UCX starts threads of its own.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/base/status.h"
#include "tiering/peers/transport/ucx_options.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {

class UcxWorker {
 public:
  using Options = UcxOptions;
  // Runs on the progress thread. The return value is the handler's answer
  // to UCX: UCS_OK, or an error status to drop a rendezvous body unread.
  using AmHandler = std::function<ucs_status_t(const void* header, size_t header_size, void* data,
                                               size_t size, const ucp_am_recv_param_t* param)>;
  using Completion = std::function<void(ucs_status_t)>;

  // A worker ready for handlers, or why UCX cannot start (a configuration
  // error, usually).
  static Result<std::unique_ptr<UcxWorker>> Make(const Options& options);
  // Make, on a thread of its own that is left behind if UCX has not
  // answered within `limit` (ucx_worker_restart.cc): a new transport made
  // while an old one's thread is parked inside UCX, which a lock it holds
  // could block. Then an error, and what that thread makes is never used.
  static Result<std::unique_ptr<UcxWorker>> MakeWithin(const Options& options,
                                                       std::chrono::milliseconds limit);
  ~UcxWorker();  // Stop() if still running
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Before Start. `on_error` hears of every endpoint that failed (the peer
  // went away or broke the protocol); it should Close it.
  Status SetAmHandler(unsigned id, AmHandler handler);
  void SetEndpointErrorHandler(std::function<void(ucp_ep_h, ucs_status_t)> on_error);
  // Starts the progress thread; `tick` runs on it every round.
  void Start(std::function<void()> tick);
  // Runs `fn` on the progress thread soon. False (fn not run) once
  // stopping, or wedged.
  bool Post(std::function<void()> fn);
  // UCX aborted on the progress thread and the abort was contained: the
  // thread never runs again, and neither does this worker. The first call
  // that finds it so reports it (ucx_abort::ReportWedged). Thread-safe.
  bool wedged() const;
  // A test's way to a wedged worker (ucx_worker_restart.cc): the progress
  // thread, between two rounds, sets the flag and stops for good as the
  // abort handler leaves it (signals blocked, in pause()).
  void WedgeForTest();
  // A wedged worker's thread is parked for good: leaves it and the worker
  // behind as Stop does, at once and without a word (the restart that
  // replaces it says so), dropping what was posted. Not for a live worker.
  void Abandon();
  // Runs `close_all` on the progress thread (it should Close every
  // endpoint), lets the closes and sends finish for at most `limit`, then
  // ends the thread (or, if it is wedged or stuck in UCX 2 s past the
  // limit, leaves it and the worker behind). Idempotent. First, within the same `limit`, it keeps
  // progressing until `settled` (if given) is true: the owner's endpoints
  // that a peer is still wiring up to this worker. UCX 1.13 aborts the
  // peer (or this process, in ucp_worker_destroy) when this worker goes
  // while the peer's reply endpoint to it waits for its TCP connection:
  // see docs/DECISIONS.md, "A worker that goes".
  void Stop(std::function<void()> close_all, std::chrono::milliseconds limit,
            std::function<bool()> settled = nullptr);

  // --- Progress thread only (or before Start) ---
  ucp_worker_h worker() const { return worker_; }
  // This worker's address, for a peer to connect to (the handshake carries
  // it): a copy of UCX's packed address.
  std::string Address() const { return address_; }
  // An endpoint to the worker whose address is `address`, or why UCX
  // refused at once. Errors later go to the error handler.
  Result<ucp_ep_h> Connect(const std::string& address);
  // Force-closes `ep` (its sends and receives complete with an error) at
  // the start of the next round, outside any UCX callback: a handler may
  // call it for the endpoint whose message it is handling.
  void Close(ucp_ep_h ep);
  // Sends active message `id`. The header is copied; `data` must stay valid
  // until `done` runs (on this thread, perhaps before Send returns).
  void Send(ucp_ep_h ep, unsigned id, const WireHeader& header, size_t header_size,
            const void* data, size_t size, uint32_t flags, Completion done);
  // What a handler returns to drop a message unread: a rendezvous body is
  // refused without its bytes moving.
  static ucs_status_t Discard(const ucp_am_recv_param_t* param) {
    return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_ERR_REJECTED : UCS_OK;
  }
  // --- Reply endpoints (ucx_watch.cc) ---
  // UCX gives a server its client's endpoint with each message (the reply
  // endpoint) and destroys it without a word when the client fails (its
  // process gone, its connection reset or timed out): a pointer kept to it
  // then dangles, and a send on it crashes. Watch sends on `ep` a watch (a
  // one-byte rendezvous message, kWatchAmId) that the client's worker
  // holds unread for as long as its endpoint is open; `ended` runs on this
  // thread once the watch completes: the client let it go (it closes the
  // endpoint), refused it (a worker without watches, or `ep` is not its
  // own endpoint), or `ep` failed. UCX runs it before it frees `ep`; `ep`
  // must never be used after it. Not run once the worker is stopping.
  void Watch(ucp_ep_h ep, Completion ended);
  // Receives a rendezvous body (an AM handler's `data`) into `buf`. What
  // the handler must return: UCS_INPROGRESS while the receive runs, UCS_OK
  // if it completed (or failed) at once, `done` having run.
  ucs_status_t ReceiveBody(void* descriptor, void* buf, size_t size, Completion done);

 private:
  explicit UcxWorker(const Options& options);
  Status Init();
  void Release();  // what Init made
  void Loop();
  void RunPosted();
  void CloseDeferred();
  Result<ucp_ep_h> CreateEndpoint(ucp_ep_params_t* p);
  void CloseNow(ucp_ep_h ep);
  unsigned Progress();  // ucp_worker_progress, marked as a UCX call
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_size, void* data,
                           size_t size, const ucp_am_recv_param_t* param);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void OnSendDone(void* request, ucs_status_t status, void* user);
  static void OnReceiveDone(void* request, ucs_status_t status, size_t length, void* user);
  // A watch arrived (ucx_watch.cc): held if it came on an endpoint of ours
  // that holds none yet, refused otherwise.
  ucs_status_t OnWatch(void* data, const ucp_am_recv_param_t* param);
  // Lets go of the watch `ep` holds, if any, before `ep` closes.
  void ReleaseWatch(ucp_ep_h ep);
  // A watch of ours completed (OnSendDone).
  void WatchEnded(ucp_ep_h ep);
  // Closes every endpoint a watch of ours is open on (Stop): UCX asserts
  // when a worker is destroyed with a request open on an endpoint.
  void CloseWatched();
  // A send, receive or close in flight: what to run when it completes.
  struct Op {
    UcxWorker* self;
    WireHeader header;  // a send's header, alive until the send completes
    Completion done;
    bool watch = false;     // a watch (Watch): not waited for at Stop, `done` not run once stopping
    ucp_ep_h ep = nullptr;  // a watch's endpoint
  };
  // Completes an operation UCX returned: now (null or an error), or later
  // through its callback. True if it is still running.
  bool Track(ucs_status_ptr_t request, Op* op);
  ucp_request_param_t SendParams(uint32_t flags, Op* op);

  const Options options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Post's doorbell

  struct Handler;
  std::vector<std::unique_ptr<Handler>> handlers_;
  std::function<void(ucp_ep_h, ucs_status_t)> on_error_;
  std::function<void()> tick_;
  size_t pending_ops_ = 0;  // sends, receives and closes not completed; progress thread only
  std::vector<ucp_ep_h> to_close_;  // progress thread only
  // Endpoints this worker made (Connect) and has not closed, each with the
  // watch it holds for its peer (null: none). Progress thread only.
  std::unordered_map<ucp_ep_h, void*> own_;
  // Endpoints with watches of ours open on them (Watch), and how many;
  // alive while they are (UCX ends the watches before it frees one).
  // Progress thread only.
  std::unordered_map<ucp_ep_h, int> watched_;

  Mutex mu_;  // guards posted_ and stopping_. A leaf lock.
  std::vector<std::function<void()>> posted_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<bool> quit_{false};
  std::atomic<bool> exited_{false};  // the progress thread has left its loop
  std::atomic<bool> wedged_{false};  // set by the abort handler (ucx_abort.h)
  bool abandoned_ = false;           // Stop left the thread and the worker behind
  std::thread thread_;
};

}  // namespace tierfs
