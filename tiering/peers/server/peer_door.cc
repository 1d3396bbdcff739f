#include "tiering/peers/server/peer_door.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "tiering/base/log.h"
#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/server/peer_door_internal.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

// A connection this young is not evicted to make room (it may be doing the
// greeting's work).
constexpr std::chrono::milliseconds kYoung(500);

// Connections accepted at one turn of the loop, before the hellos that
// came meanwhile are read. A flood that refills the backlog as fast as the
// door turns its connections away must not keep it accepting: the young
// ones it admitted would hold their address's places, unread, and every
// newcomer from that address (a real peer on the flooder's node) would be
// turned away. The listening socket stays readable: the rest waits a turn.
constexpr size_t kAcceptBatch = 8;

// A source port below this one can be bound by root only (unless the
// peer's node lowered ip_unprivileged_port_start).
constexpr uint16_t kFirstUnreserved = 1024;

}  // namespace

PeerDoor::PeerDoor(const PeerAuth* auth, PeerDoorOptions options, std::string worker_address)
    : auth_(auth),
      options_(std::move(options)),
      checks_(2, kDoorChecksAtOnce, "peer door check"),
      sources_(DoorSources::Options{options_.max_per_address, options_.max_pending,
                                    std::min(options_.max_puzzle_bits, kMaxPuzzleBits)}),
      tickets_(options_.max_tickets, options_.ticket_lifetime),
      worker_address_(std::move(worker_address)) {}

PeerDoor::~PeerDoor() { Stop(); }

std::string PeerDoor::listen_error() const {
  MutexLock lock(mu_);
  return listen_error_;
}

// Ok when listening; EADDRINUSE when another process holds the port (worth
// retrying); another error otherwise.
Status PeerDoor::Bind() {
  int fd = options_.inherited_fd;
  if (fd < 0) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(options_.port);
    if (::inet_pton(AF_INET, options_.host.c_str(), &a.sin_addr) != 1) {
      return Status::Error(EINVAL,
                           fmt::format("cannot listen on {}:{}: \"{}\" is not an IPv4 address",
                                       options_.host, options_.port, options_.host));
    }
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 256) != 0) {
      int err = errno;
      if (fd >= 0) ::close(fd);
      return Status::FromErrno(err,
                               fmt::format("cannot listen on {}:{}", options_.host, options_.port));
    }
  } else if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "inherited listening socket");
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0 ||
      bound.sin_family != AF_INET) {
    ::close(fd);
    return Status::Error(EINVAL, "the listening socket is not an IPv4 TCP socket");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  listen_fd_ = fd;
  port_ = ntohs(bound.sin_port);
  listening_ = true;
  MutexLock lock(mu_);
  listen_error_.clear();
  return Status::Ok();
}

Status PeerDoor::Start() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::FromErrno(errno, "peer door");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  Status bound = Bind();
  if (!bound.ok() && bound.code() != EADDRINUSE) return bound;
  if (!bound.ok()) {  // someone holds the port: keep trying
    counters_.listen_failures++;
    backoff_ = options_.retry_min;
    retry_at_ = Clock::now() + backoff_;
    MutexLock lock(mu_);
    listen_error_ = bound.message();
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void PeerDoor::Stop() {
  if (thread_.joinable()) {
    quit_ = true;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  checks_.Shutdown();
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  listening_ = false;
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
}

void PeerDoor::Loop() {
  epoll_event events[64];
  while (!quit_.load()) {
    int n = ::epoll_wait(epoll_fd_, events, 64, 50);
    bool incoming = false;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
      } else if (fd == listen_fd_) {
        incoming = true;
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        OnReadable(*it->second);
      }
    }
    TakeChecked();
    Expire();
    // Last: the connections that spoke meanwhile have left their places.
    if (incoming) AcceptSome();
    if (!listening_.load() && Clock::now() >= retry_at_) {
      Status bound = Bind();
      if (bound.ok()) {
        TIERFS_LOG(kInfo, "peer service: now listening on {}:{}", options_.host, port_.load());
      } else {
        counters_.listen_failures++;
        if (LogSampled(counters_.listen_failures.load())) {
          TIERFS_LOG(kWarning, "peer service: {}; retrying in {} ms", bound.message(),
                     backoff_.count());
        }
        retry_at_ = Clock::now() + backoff_;
        backoff_ = std::min(backoff_ * 2, options_.retry_max);
        MutexLock lock(mu_);
        listen_error_ = bound.message();
      }
    }
  }
}

void PeerDoor::AcceptSome() {
  for (size_t i = 0; i < kAcceptBatch; ++i) {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: the backlog waits
    }
    counters_.connections++;
    const bool v4 = from.sin_family == AF_INET;
    const bool reserved = v4 && ntohs(from.sin_port) < kFirstUnreserved;
    if (reserved) counters_.reserved_port++;
    Admit(fd, Source{v4 ? ntohl(from.sin_addr.s_addr) : 0, reserved});
  }
}

void PeerDoor::TakeChecked() {
  std::vector<std::unique_ptr<Checked>> done;
  {
    MutexLock lock(mu_);
    done.swap(checked_);
  }
  for (auto& r : done) {
    --checks_pending_;
    OnChecked(*r);
  }
  Dispatch();
}

void PeerDoor::Admit(int fd, Source source) {
  const auto now = Clock::now();
  // Make room: the oldest connection of this source (or, when its class
  // is full, of the source of its class that holds the most places) that
  // has had kYoung to say something, first one that has not sent a hello
  // (an idle squatter's), then any. A young one (a real peer doing the
  // work a greeting asked for, amid a flood of short connections) is never
  // evicted: if all are young, the newcomer is turned away instead.
  bool started = false;
  const unsigned bits = sources_.Arrived(source, now, &started);
  auto evict_oldest = [this, now](Source from) {
    for (bool any : {false, true}) {
      for (auto& [fd, id] : order_) {
        auto c = conns_.find(fd);
        if (c == conns_.end() || c->second->id != id) continue;
        if (c->second->source.key() != from.key()) continue;
        if (now - (c->second->deadline - options_.handshake_timeout) < kYoung) break;  // by age
        if (!any && c->second->state != Conn::kAwaitHello) continue;
        counters_.evicted++;
        Close(fd);
        return true;
      }
    }
    return false;
  };
  if ((sources_.SourceFull(source) && !evict_oldest(source)) ||
      (sources_.ClassFull(source.reserved) && !evict_oldest(sources_.Heaviest(source.reserved)))) {
    counters_.turned_away++;
    ::close(fd);
    return;
  }
  // Drop closed fds from the front of the age list (it stays about conns_'s size).
  auto gone = [this](const std::pair<int, uint64_t>& e) {
    auto c = conns_.find(e.first);
    return c == conns_.end() || c->second->id != e.second;
  };
  while (!order_.empty() && gone(order_.front())) order_.pop_front();

  auto c = std::make_unique<Conn>();
  static std::atomic<uint64_t> next_id{1};
  c->fd = fd;
  c->id = next_id++;
  c->source = source;
  c->deadline = now + options_.handshake_timeout;
  c->nonce = RandomNonce();
  c->bits = bits;
  if (bits > 0) {
    counters_.work_asked++;
    if (bits > counters_.work_bits.load()) counters_.work_bits = bits;
    if (started && LogSampled(++puzzle_logs_)) {
      in_addr a{htonl(source.address)};
      char text[INET_ADDRSTRLEN] = "?";
      ::inet_ntop(AF_INET, &a, text, sizeof text);
      TIERFS_LOG(kInfo,
                 "peer service: {} opens connections fast (from {} ports): its greetings now ask "
                 "for work ({} bits, more while it goes on)",
                 text, source.reserved ? "reserved" : "unreserved", bits);
    }
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string greeting = Framed(EncodeGreeting(c->nonce, c->bits));
  // A fresh socket's buffer takes these few bytes at once.
  if (::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(greeting.size())) {
    ::close(fd);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  sources_.Hold(source);
  order_.emplace_back(fd, c->id);
  conns_[fd] = std::move(c);
}

void PeerDoor::Close(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  const Conn& c = *it->second;
  if (c.state == Conn::kWaiting) sources_.Forget(c.source, c.id);
  sources_.Release(c.source);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_.erase(it);
}

void PeerDoor::Expire() {
  auto now = Clock::now();
  std::vector<int> late;
  for (auto& [fd, c] : conns_) {
    if (now > c->deadline) late.push_back(fd);
  }
  for (int fd : late) {
    counters_.timeouts++;
    Close(fd);
  }
  if (now >= pruned_at_) {
    pruned_at_ = now + std::chrono::seconds(1);
    counters_.work_bits = sources_.Prune(now);
  }
  MutexLock lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now > it->second.expires) {
      counters_.expired_sessions++;
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

bool PeerDoor::Take(uint64_t id, const std::function<bool(const SessionKeys&)>& verify,
                    AcceptedSession* out) {
  MutexLock lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !verify(it->second.session.keys)) return false;
  *out = std::move(it->second.session);
  sessions_.erase(it);
  return true;
}

size_t PeerDoor::SessionsWaiting(Clock::time_point since) const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, w] : sessions_) n += w.expires - options_.session_ttl >= since;
  return n;
}

void PeerDoor::VisitCounters(CounterVisitor& v) const {
  const PeerDoorCounters& c = counters_;
  v.Flag("listening", listening_.load(), {"1 if the peer server's port is bound."});
  v.Note("listen_error", listen_error());  // free text: not a label of tierfs_info
  v.Counter("listen_failures", c.listen_failures, {"Binds of the peer port that failed."});
  v.Counter("connections", c.connections, {"Connections accepted on the peer port."});
  v.Counter("reserved_port", c.reserved_port,
            {"Connections from a port below 1024: a root daemon's, with places of their own."});
  v.Counter("evicted", c.evicted, {"Connections closed before their handshake to make room."});
  v.Counter("handshake_timeouts", c.timeouts, {"Connections without a handshake in time."});
  v.Counter("handshake_garbage", c.garbage,
            {"Handshake frames that did not decode or authenticate."});
  v.Counter("handshake_busy", c.busy, {"Handshakes not checked because too many came at once."});
  v.Counter(
      "handshake_turned_away", c.turned_away,
      {"Connections closed at once: the limits were full of connections too young to evict."});
  v.Counter("handshake_unsolved", c.unsolved,
            {"Handshakes refused unchecked: the work asked of them under a flood was not done."});
  v.Gauge("handshake_work_bits", counters_.work_bits.load(),
          {"The most work any one address is asked to do before its handshake is checked (0: "
           "none; raised for an address while it opens connections fast)."});
  v.Counter("handshake_work_asked", c.work_asked,
            {"Connections asked to do work first: their address opened connections fast."});
  v.Counter("handshake_checks", c.checks,
            {"Handshakes given to munged to check, each address in turn."});
  v.Counter("handshake_checks_reserved_port", c.reserved_checks,
            {"Of those, from a port below 1024: checked in turns of their own."});
  v.Counter("authenticated", c.authenticated,
            {"Handshakes that authenticated a peer with MUNGE credentials (full handshakes)."});
  VisitResumeCounters(v);
  v.Counter("expired_sessions", c.expired_sessions,
            {"Authenticated sessions that expired unused."});
  v.BeginGroup("refused");
  static constexpr std::pair<AuthVerdict, std::string_view> kRefused[] = {
      {AuthVerdict::kInvalid, "Handshakes refused: not a credential of this cluster's key."},
      {AuthVerdict::kExpired, "Handshakes refused: the credential had expired."},
      {AuthVerdict::kReplayed, "Handshakes refused: the credential was replayed."},
      {AuthVerdict::kWrongUser, "Handshakes refused: the credential was another user's."},
      {AuthVerdict::kWrongJob, "Handshakes refused: the credential was another job's."},
      {AuthVerdict::kWrongPeer, "Handshakes refused: the credential was for another node."},
      {AuthVerdict::kUnavailable, "Handshakes refused: munged did not answer."},
  };
  for (const auto& [r, help] : kRefused) {
    v.Counter(AuthVerdictKey(r), c.refused[static_cast<int>(r)], {help});
  }
  v.EndGroup();
}

}  // namespace tierfs