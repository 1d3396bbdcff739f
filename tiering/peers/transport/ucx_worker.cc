#include "tiering/peers/transport/ucx_worker.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "tiering/base/log.h"
#include "tiering/peers/transport/ucx_abort.h"

namespace tierfs {

// An active message handler, registered with UCX by address.
struct UcxWorker::Handler {
  UcxWorker::AmHandler fn;
};

namespace {

// What closing the endpoints watches are open on may take past Stop's limit.
constexpr std::chrono::milliseconds kWatchCloses(200);

Status UcxError(ucs_status_t s, const char* what) {
  return Status::Error(EIO, fmt::format("{}: {}", what, ucs_status_string(s)));
}

}  // namespace

Result<std::unique_ptr<UcxWorker>> UcxWorker::Make(const Options& options) {
  std::unique_ptr<UcxWorker> w(new UcxWorker(options));
  if (Status s = w->Init(); !s.ok()) return s;
  UcxWorker* self = w.get();
  Status watch = w->SetAmHandler(
      kWatchAmId, [self](const void*, size_t, void* data, size_t,
                         const ucp_am_recv_param_t* param) { return self->OnWatch(data, param); });
  if (!watch.ok()) return watch;
  return w;
}

UcxWorker::UcxWorker(const Options& options) : options_(options) {}

using ucx_abort::InUcx;

Status UcxWorker::Init() {
  if (options_.contain_aborts) ucx_abort::Contain();
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return UcxError(s, "ucp_config_read");
  if (!options_.tls.empty()) s = ucp_config_modify(config, "TLS", options_.tls.c_str());
  if (s == UCS_OK && !options_.tcp_port_range.empty()) {
    s = ucp_config_modify(config, "TCP_PORT_RANGE", options_.tcp_port_range.c_str());
  }
  if (s == UCS_OK && !options_.net_devices.empty()) {
    s = ucp_config_modify(config, "NET_DEVICES", options_.net_devices.c_str());
  }
  if (s != UCS_OK) {
    ucp_config_release(config);
    return UcxError(s, "ucp_config_modify");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "tierfs-peer";
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) {
    context_ = nullptr;
    return UcxError(s, "ucp_init");
  }

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  s = ucp_worker_create(context_, &wp, &worker_);
  if (s != UCS_OK) {
    ucp_cleanup(context_);
    context_ = nullptr;
    worker_ = nullptr;
    return UcxError(s, "ucp_worker_create");
  }
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  int worker_fd = -1;
  if (ucp_worker_query(worker_, &attr) != UCS_OK || attr.max_am_header < kMaxHeader ||
      ucp_worker_get_efd(worker_, &worker_fd) != UCS_OK) {
    Release();
    return Status::Error(EIO, "UCX worker: no event fd or active message headers too small");
  }
  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  if (ucp_worker_get_address(worker_, &address, &address_length) != UCS_OK) {
    Release();
    return Status::Error(EIO, "UCX worker: no address");
  }
  address_.assign(reinterpret_cast<const char*>(address), address_length);
  ucp_worker_release_address(worker_, address);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  bool ok = epoll_fd_ >= 0 && wake_fd_ >= 0;
  ok = ok && ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, worker_fd, &ev) == 0;
  ok = ok && ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) == 0;
  if (!ok) {
    int err = errno;
    Release();
    return Status::FromErrno(err, "UCX worker: epoll");
  }
  return Status::Ok();
}

void UcxWorker::Release() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  worker_ = nullptr;
  context_ = nullptr;
}

UcxWorker::~UcxWorker() {
  if (worker_ != nullptr) Stop([] {}, std::chrono::milliseconds(1000));
  if (!abandoned_) Release();  // else a thread may still be in UCX: left as it is
}

Status UcxWorker::SetAmHandler(unsigned id, AmHandler handler) {
  handlers_.push_back(std::make_unique<Handler>(Handler{std::move(handler)}));
  ucp_am_handler_param_t p{};
  p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                 UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  p.id = id;
  p.flags = UCP_AM_FLAG_WHOLE_MSG;
  p.cb = &UcxWorker::OnAm;
  p.arg = handlers_.back().get();
  ucs_status_t s = ucp_worker_set_am_recv_handler(worker_, &p);
  return s == UCS_OK ? Status::Ok() : UcxError(s, "ucp_worker_set_am_recv_handler");
}

void UcxWorker::SetEndpointErrorHandler(std::function<void(ucp_ep_h, ucs_status_t)> on_error) {
  on_error_ = std::move(on_error);
}

void UcxWorker::Start(std::function<void()> tick) {
  tick_ = std::move(tick);
  thread_ = std::thread([this] { Loop(); });
}

bool UcxWorker::Post(std::function<void()> fn) {
  if (wedged()) return false;  // reported outside the lock
  {
    MutexLock lock(mu_);
    if (stopping_ || wedged_.load()) return false;
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  return true;
}

bool UcxWorker::wedged() const {
  if (!wedged_.load()) return false;
  ucx_abort::ReportWedged();
  return true;
}

void UcxWorker::Stop(std::function<void()> close_all, std::chrono::milliseconds limit,
                     std::function<bool()> settled) {
  if (!thread_.joinable()) return;
  auto deadline = std::chrono::steady_clock::now() + limit;
  Post([this, close_all = std::move(close_all), settled = std::move(settled), deadline] {
    while (settled && !settled() && std::chrono::steady_clock::now() < deadline) {
      RunPosted();
      if (Progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (settled && !settled()) {
      TIERFS_LOG(kWarning,
                 "peer transport: shutting down while a peer may still be connecting to this node");
    }
    close_all();
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    // Closes and sends complete through progress; give them until the deadline.
    CloseDeferred();
    while (pending_ops_ > 0 && std::chrono::steady_clock::now() < deadline) {
      RunPosted();
      CloseDeferred();
      if (Progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // The watches on reply endpoints stay open until those close: closed
    // now, whatever the time (a worker is not destroyed with them open).
    CloseWatched();
    const auto closes = std::max(deadline, std::chrono::steady_clock::now()) + kWatchCloses;
    while ((pending_ops_ > 0 || !watched_.empty()) && std::chrono::steady_clock::now() < closes) {
      RunPosted();
      CloseDeferred();
      if (Progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (pending_ops_ > 0) {
      TIERFS_LOG(kWarning, "peer transport: {} operations still pending at shutdown", pending_ops_);
    }
    quit_.store(true);
  });
  // The thread ends by the deadline, unless UCX aborted on it (contained:
  // it never runs again) or a UCX call hangs.
  const auto give_up = deadline + std::chrono::seconds(2);
  while (!exited_.load() && !wedged_.load() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!exited_.load()) {
    if (wedged_.load()) ucx_abort::ReportWedged();
    TIERFS_LOG(kWarning, "peer transport: {}: its UCX worker is left as it is",
               wedged_.load() ? "UCX failed on its thread" : "its thread is stuck in UCX");
    thread_.detach();
    abandoned_ = true;
    MutexLock lock(mu_);
    stopping_ = true;
    posted_.clear();  // never run: they would call UCX
    return;
  }
  thread_.join();
  RunPosted();  // what was posted meanwhile is dropped by each owner's Stop
}

void UcxWorker::RunPosted() {
  std::vector<std::function<void()>> run;
  {
    MutexLock lock(mu_);
    run.swap(posted_);
  }
  for (auto& fn : run) fn();
}

unsigned UcxWorker::Progress() {
  InUcx in(&wedged_);
  return ucp_worker_progress(worker_);
}

void UcxWorker::Loop() {
  while (!quit_.load()) {
    while (Progress() != 0) {
    }
    RunPosted();
    if (quit_.load()) break;
    if (tick_) tick_();
    CloseDeferred();
    if (Progress() != 0) continue;
    ucs_status_t armed;
    {
      InUcx in(&wedged_);
      armed = ucp_worker_arm(worker_);
    }
    if (armed == UCS_ERR_BUSY) continue;
    struct epoll_event events[2];
    int n = ::epoll_wait(epoll_fd_, events, 2, static_cast<int>(options_.tick.count()));
    if (n > 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
    }
  }
  exited_.store(true);
}

Result<ucp_ep_h> UcxWorker::Connect(const std::string& address) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  p.address = reinterpret_cast<const ucp_address_t*>(address.data());
  return CreateEndpoint(&p);
}

// Every endpoint reports a failed peer (UCP_ERR_HANDLING_MODE_PEER): its
// requests then complete with an error instead of waiting for ever.
Result<ucp_ep_h> UcxWorker::CreateEndpoint(ucp_ep_params_t* p) {
  p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p->err_handler.cb = &UcxWorker::OnEndpointError;
  p->err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  ucs_status_t s;
  {
    InUcx in(&wedged_);
    s = ucp_ep_create(worker_, p, &ep);
  }
  if (s != UCS_OK) return Status::Error(EIO, ucs_status_string(s));
  own_[ep] = nullptr;
  return ep;
}

void UcxWorker::Close(ucp_ep_h ep) { to_close_.push_back(ep); }

void UcxWorker::CloseDeferred() {
  std::vector<ucp_ep_h> eps;
  eps.swap(to_close_);
  for (ucp_ep_h ep : eps) CloseNow(ep);
}

void UcxWorker::CloseNow(ucp_ep_h ep) {
  ReleaseWatch(ep);
  auto* op = new Op{this, {}, nullptr};
  ucp_request_param_t p = SendParams(UCP_EP_CLOSE_FLAG_FORCE, op);
  ucs_status_ptr_t request;
  {
    InUcx in(&wedged_);
    request = ucp_ep_close_nbx(ep, &p);
  }
  Track(request, op);
}

// Parameters of a send or close completing through OnSendDone with `op`.
ucp_request_param_t UcxWorker::SendParams(uint32_t flags, Op* op) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.flags = flags;
  p.cb.send = &UcxWorker::OnSendDone;
  p.user_data = op;
  return p;
}

void UcxWorker::Send(ucp_ep_h ep, unsigned id, const WireHeader& header, size_t header_size,
                     const void* data, size_t size, uint32_t flags, Completion done) {
  auto* op = new Op{this, header, std::move(done)};
  ucp_request_param_t p = SendParams(flags, op);
  ucs_status_ptr_t request;
  {
    InUcx in(&wedged_);
    request = ucp_am_send_nbx(ep, id, op->header.data(), header_size, data, size, &p);
  }
  Track(request, op);
}

ucs_status_t UcxWorker::ReceiveBody(void* descriptor, void* buf, size_t size, Completion done) {
  auto* op = new Op{this, {}, std::move(done)};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &UcxWorker::OnReceiveDone;
  p.user_data = op;
  ucs_status_ptr_t request;
  {
    InUcx in(&wedged_);
    request = ucp_am_recv_data_nbx(worker_, descriptor, buf, size, &p);
  }
  return Track(request, op) ? UCS_INPROGRESS : UCS_OK;
}

bool UcxWorker::Track(ucs_status_ptr_t request, Op* op) {
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    Completion done = std::move(op->done);
    delete op;
    if (done) done(request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
    return false;
  }
  ++pending_ops_;
  return true;
}

ucs_status_t UcxWorker::OnAm(void* arg, const void* header, size_t header_size, void* data,
                             size_t size, const ucp_am_recv_param_t* param) {
  InUcx ours(nullptr);
  return static_cast<Handler*>(arg)->fn(header, header_size, data, size, param);
}

void UcxWorker::OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  InUcx ours(nullptr);
  auto* self = static_cast<UcxWorker*>(arg);
  if (self->on_error_) self->on_error_(ep, status);
}

void UcxWorker::OnSendDone(void* request, ucs_status_t status, void* user) {
  InUcx ours(nullptr);
  auto* op = static_cast<Op*>(user);
  UcxWorker* self = op->self;
  const bool watch = op->watch;
  if (watch)
    self->WatchEnded(op->ep);
  else
    --self->pending_ops_;
  Completion done = std::move(op->done);
  delete op;
  ucp_request_free(request);
  // A watch's owner is going once the worker stops (its endpoints are
  // destroyed with the worker, ending the watches).
  if (done && !(watch && self->quit_.load())) done(status);
}

void UcxWorker::OnReceiveDone(void* request, ucs_status_t status, size_t, void* user) {
  OnSendDone(request, status, user);
}

}  // namespace tierfs
