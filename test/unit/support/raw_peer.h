// RawPeer: a UCX worker of the test's own that sends whatever messages a
// test wants and records what it receives. As a client it runs the real
// handshake with any identity (then it can send sealed, forged or replayed
// requests); as a server it stands behind a real PeerDoor and answers a
// real client with whatever it likes: a forger, a garbage sender, or a
// server that stops making progress mid-transfer.
#pragma once

#include <netinet/in.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "peer_fixture.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/server/peer_door.h"
#include "tiering/peers/transport/ucx_worker.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs::testing {

class RawPeer {
 public:
  struct Received {
    WireStatus status;
    PeerMessage m;
    std::string header;
    std::string body;  // empty for a rendezvous body (dropped)
    bool rndv = false;
    ucp_ep_h reply = nullptr;
  };

  RawPeer() : ucx_(MakeUcx()) {
    Status handler = ucx_->SetAmHandler(kPeerAmId, [this](const void* h, size_t hn, void* d,
                                                          size_t n, const ucp_am_recv_param_t* p) {
      Received r;
      r.rndv = p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
      r.status = DecodeHeader(h, hn, n, &r.m);
      r.header.assign(static_cast<const char*>(h), hn);
      if (p->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) r.reply = p->reply_ep;
      if (!r.rndv && n > 0) r.body.assign(static_cast<const char*>(d), n);
      std::lock_guard lock(mu_);
      received_.push_back(std::move(r));
      return UcxWorker::Discard(p);
    });
    REQUIRE(handler.ok());
    ucx_->SetEndpointErrorHandler([this](ucp_ep_h ep, ucs_status_t) {
      std::lock_guard lock(mu_);
      if (ep == ep_) {
        ucx_->Close(ep);
        ep_ = nullptr;
        closed_ = true;
      }
    });
    ucx_->Start(nullptr);
  }
  ~RawPeer() { Vanish(/*quietly=*/false); }
  // Destroys its worker now, without closing its endpoint (`quietly`): as
  // a killed process's sockets are closed, its server told nothing.
  void Vanish(bool quietly = true) {
    if (door_) door_->Stop();
    if (ucx_ == nullptr) return;
    ucx_->Stop(
        [this, quietly] {
          if (ep_ != nullptr && !reply_ep_ && !quietly) ucx_->Close(ep_);
        },
        std::chrono::milliseconds(1000));
    ucx_.reset();
  }

  // --- As a client ---
  // The handshake with the door on `port` as `auth`, addressed to `server`;
  // on success an endpoint to the server's worker.
  HandshakeResult Handshake(const PeerAuth& auth, uint16_t port, const std::string& server = "b") {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    Result<int> fd = ConnectTcp("127.0.0.1", port, deadline);
    INFO(fd.status().message());
    REQUIRE(fd.ok());
    Result<ClientSession> made = RunClientHandshake(*fd, auth, server, deadline);
    ::close(*fd);
    if (made.ok()) {
      session_ = std::move(*made);
      ConnectTo(session_.worker_address);
    }
    return HandshakeFailure(made.status());
  }
  const ClientSession& session() const { return session_; }
  // Encodes ids for the next message of this session.
  WireIds Next(uint64_t request_id) { return WireIds{request_id, session_.session, next_seq_++}; }
  // Seals with this side's send key, then sends.
  void SendSealed(WireHeader h, size_t n, std::string body, const PeerKey* key = nullptr) {
    REQUIRE(SealWire(key != nullptr ? *key : session_.keys.send, &h, n, body.data(), body.size(),
                     body.data()));
    Send(h, n, std::move(body));
  }

  // --- As a server, posing as `name` ---
  // Listens with a real door; returns its port.
  uint16_t Serve(const std::string& name) {
    auth_ = std::make_unique<PeerAuth>(Identity(name), MungeDaemon::Get()->socket());
    PeerDoorOptions o;
    door_ = std::make_unique<PeerDoor>(auth_.get(), o, ucx_->Address());
    Status s = door_->Start();
    INFO(s.message());
    REQUIRE(s.ok());
    REQUIRE(door_->port() > 0);
    return door_->port();
  }
  // Takes the session the first received message names: later Sends go to
  // its reply endpoint.
  void Accept() {
    REQUIRE(Within(5s, [&] { return !received().empty(); }));
    Received first = received().front();
    REQUIRE(first.status == WireStatus::kOk);
    AcceptedSession s;
    std::string body = first.body;
    REQUIRE(door_->Take(
        first.m.session,
        [&](const SessionKeys& keys) {
          return OpenWire(keys.recv, first.header.data(), first.header.size(), first.m.seq,
                          body.data(), body.size(), body.data());
        },
        &s));
    session_.keys = s.keys;
    session_.session = s.id;
    std::lock_guard lock(mu_);
    ep_ = first.reply;
    reply_ep_ = true;
  }

  // Sends header bytes and a body as they are (as a client, with a reply endpoint).
  void Send(const WireHeader& h, size_t n, std::string body, uint32_t flags = 0) {
    SendThenPause(h, n, std::move(body), flags, 0ms);
  }
  // Sends, then blocks the progress thread for `pause` at once: a large
  // body's transfer starts and stalls.
  void SendThenPause(const WireHeader& h, size_t n, std::string body, uint32_t flags,
                     std::chrono::milliseconds pause) {
    const std::string* kept;
    {
      std::lock_guard lock(mu_);
      bodies_.push_back(std::move(body));
      kept = &bodies_.back();
    }
    auto send = [this, h, n, kept, flags, pause] {
      if (ep() != nullptr) {
        uint32_t f = flags | (reply_ep_ ? 0 : UCP_AM_SEND_FLAG_REPLY);
        ucx_->Send(ep(), kPeerAmId, h, n, kept->data(), kept->size(), f, [](ucs_status_t) {});
      }
      std::this_thread::sleep_for(pause);
    };
    if (pause.count() == 0)
      OnThread(send);
    else
      REQUIRE(ucx_->Post(send));
  }
  // Sends to the worker at `address` from now on.
  void ConnectTo(const std::string& address) {
    OnThread([&] {
      Result<ucp_ep_h> ep = ucx_->Connect(address);
      std::lock_guard lock(mu_);
      ep_ = ep.ok() ? *ep : nullptr;
    });
    REQUIRE(ep() != nullptr);
  }
  std::string address() const { return ucx_->Address(); }
  std::vector<Received> received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  bool closed() {
    std::lock_guard lock(mu_);
    return closed_;
  }
  ucp_ep_h ep() {
    std::lock_guard lock(mu_);
    return ep_;
  }

 private:
  // Runs `fn` on the progress thread and waits for it.
  template <typename F>
  void OnThread(F fn) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    REQUIRE(ucx_->Post([&] {
      fn();
      std::lock_guard lock(m);
      done = true;
      cv.notify_all();
    }));
    std::unique_lock lock(m);
    REQUIRE(cv.wait_for(lock, 5s, [&] { return done; }));
  }

  static std::unique_ptr<UcxWorker> MakeUcx() {
    auto made = UcxWorker::Make(TestUcx());
    INFO(made.status().message());
    REQUIRE(made.ok());
    return std::move(made).value();
  }
  std::unique_ptr<UcxWorker> ucx_;
  ClientSession session_;  // as a client; as a server, keys and id from the door
  uint64_t next_seq_ = 2;
  std::unique_ptr<PeerAuth> auth_;
  std::unique_ptr<PeerDoor> door_;
  std::mutex mu_;  // guards the rest
  ucp_ep_h ep_ = nullptr;
  std::atomic<bool> reply_ep_{false};  // ep_ is a client's reply endpoint: UCX's to close
  bool closed_ = false;
  std::vector<Received> received_;
  std::list<std::string> bodies_;  // alive until the sends are done
};

}  // namespace tierfs::testing
