// A PeerTransport and a PeerDialer that a test drives by hand, for the
// tests of the client's connections and of PeerServer: nothing runs on a
// thread of its own. What is posted runs when the test calls RunPosted,
// the tick when it calls Tick, the handler on the messages it Delivers;
// dials wait until the test answers them; sends are recorded (their
// header decoded) and complete at once; watches end when the test ends
// them; endpoints are numbers. Not thread-safe: for an owner whose work on
// other threads (a server's pool) the test does not start.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tiering/peers/client/peer_dialer.h"
#include "tiering/peers/transport/peer_transport.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs::testing {

class FakePeerTransport final : public PeerTransport {
 public:
  struct Sent {
    PeerEndpoint endpoint;
    MsgType type;
    uint64_t request_id;
    uint32_t flags;
  };

  Status SetHandlers(Handler on_message, ErrorHandler on_error) override {
    if (!handlers_status.ok()) return handlers_status;
    on_message_ = std::move(on_message);
    on_error_ = std::move(on_error);
    return Status::Ok();
  }
  std::string Address() const override { return "fake-worker"; }
  void Start(std::function<void()> tick) override { tick_ = std::move(tick); }
  bool Post(std::function<void()> fn) override {
    if (stopped_) return false;
    posted_.push_back(std::move(fn));
    return true;
  }
  bool wedged() const override { return false; }
  void WedgeForTest() override {}
  void Abandon() override {}
  void Stop(std::function<void()> close_all, std::chrono::milliseconds,
            std::function<bool()>) override {
    if (stopped_) return;
    RunPosted();
    close_all();
    stopped_ = true;
  }

  Result<PeerEndpoint> Connect(const std::string& address) override {
    connected.push_back(address);
    if (refuse_connect) return Status::Error(ECONNREFUSED, "refused by the test");
    return reinterpret_cast<PeerEndpoint>(next_endpoint_++);
  }
  void Close(PeerEndpoint endpoint) override {
    closed.push_back(endpoint);
    if (on_close) on_close(endpoint);
  }
  void Send(PeerEndpoint endpoint, const WireHeader& header, size_t header_size, const void*,
            size_t size, uint32_t flags, Completion done) override {
    PeerMessage m;
    (void)DecodeHeader(header.data(), header_size, size, &m);
    sent.push_back(Sent{endpoint, m.type, m.request_id, flags});
    if (done) done(true);
  }
  Receipt Receive(const Message&, void*, size_t, Completion done) override {
    if (done) done(true);
    return Receipt::kDone;
  }
  void Watch(PeerEndpoint reply, WatchEnded ended) override {
    watches.push_back(Watched{reply, std::move(ended)});
  }

  // A message from a peer, to the handler.
  Receipt Deliver(const Message& m) { return on_message_(m); }
  // The owner's tick, as the progress thread runs it every round.
  void Tick() {
    if (tick_) tick_();
  }
  // Runs what was posted, and what that posts, in order; returns how many.
  size_t RunPosted() {
    size_t n = 0;
    while (!posted_.empty()) {
      auto fn = std::move(posted_.front());
      posted_.pop_front();
      fn();
      ++n;
    }
    return n;
  }
  // Messages of `type` sent so far.
  size_t Count(MsgType type) const {
    size_t n = 0;
    for (const auto& s : sent) n += s.type == type;
    return n;
  }
  bool Closed(PeerEndpoint endpoint) const {
    for (auto e : closed) {
      if (e == endpoint) return true;
    }
    return false;
  }

  struct Watched {
    PeerEndpoint endpoint;
    WatchEnded ended;  // the test runs it to end the watch
  };

  std::vector<std::string> connected;  // the addresses Connect was asked for
  std::vector<PeerEndpoint> closed;
  std::function<void(PeerEndpoint)> on_close;  // called by each Close, if set
  std::vector<Sent> sent;
  std::vector<Watched> watches;
  bool refuse_connect = false;
  Status handlers_status = Status::Ok();  // what SetHandlers answers

 private:
  Handler on_message_;
  ErrorHandler on_error_;
  std::function<void()> tick_;
  std::deque<std::function<void()>> posted_;
  uintptr_t next_endpoint_ = 1;
  bool stopped_ = false;
};

class FakePeerDialer final : public PeerDialer {
 public:
  struct Asked {
    DialRequest request;
    std::function<void(DialResult)> done;
  };

  bool Dial(DialRequest request, std::function<void(DialResult)> done) override {
    if (refuse) return false;
    dials.push_back(Asked{std::move(request), std::move(done)});
    return true;
  }
  void Shutdown() override {}

  // Answers dial `i`: a session `session` (its worker at "worker-<session>").
  void Succeed(size_t i, uint64_t session) {
    DialResult r;
    r.result = HandshakeResult::kOk;
    r.session.session = session;
    r.session.worker_address = "worker-" + std::to_string(session);
    dials.at(i).done(std::move(r));
  }
  // Answers dial `i` with failure `result`.
  void Fail(size_t i, HandshakeResult result) {
    DialResult r;
    r.result = result;
    r.error = "failed by the test";
    dials.at(i).done(std::move(r));
  }

  std::vector<Asked> dials;
  bool refuse = false;
};

}  // namespace tierfs::testing
