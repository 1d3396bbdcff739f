// RawPeer: a UCX endpoint that sends whatever messages a test wants, and
// records what it receives: a forger, a garbage sender, or a server that
// answers a request and then stops making progress mid-transfer.
#pragma once

#include <netinet/in.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "peer_fixture.h"
#include "tiering/peer/ucx_worker.h"
#include "tiering/peer/wire.h"

namespace tierfs::testing {

class RawPeer {
 public:
  struct Received {
    WireStatus status;
    PeerMessage m;
    std::string body;  // empty for a rendezvous body (dropped)
    bool rndv = false;
  };

  RawPeer() : ucx_(TestUcx()) {
    ucx_.SetAmHandler(kPeerAmId, [this](const void* h, size_t hn, void* d, size_t n,
                                        const ucp_am_recv_param_t* p) {
      Received r;
      r.rndv = p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
      r.status = DecodeHeader(h, hn, n, &r.m);
      if (!r.rndv && n > 0) r.body.assign(static_cast<const char*>(d), n);
      std::lock_guard lock(mu_);
      received_.push_back(std::move(r));
      return UcxWorker::Discard(p);
    });
    ucx_.SetEndpointErrorHandler([this](ucp_ep_h ep, ucs_status_t) {
      ucx_.Close(ep);
      std::lock_guard lock(mu_);
      if (ep == ep_) {
        ep_ = nullptr;
        closed_ = true;
      }
    });
    ucx_.Start(nullptr);
  }
  ~RawPeer() {
    ucx_.Stop(
        [this] {
          if (ep_ != nullptr) ucx_.Close(ep_);
        },
        std::chrono::milliseconds(1000));
  }

  void Connect(uint16_t port) {
    OnThread([&] {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      std::string error;
      ucp_ep_h ep = ucx_.Connect(reinterpret_cast<sockaddr*>(&a), sizeof a, &error);
      std::lock_guard lock(mu_);
      ep_ = ep;
    });
    REQUIRE(ep() != nullptr);
  }
  // Accepts connections on a free port; the latest is the one Send uses.
  uint16_t Listen() {
    int port = -1;
    OnThread([&] {
      std::string error;
      port = ucx_.Listen(
          "127.0.0.1", 0,
          [this](ucp_conn_request_h r) {
            std::string error;
            ucp_ep_h ep = ucx_.Accept(r, &error);
            std::lock_guard lock(mu_);
            ep_ = ep;
          },
          &error);
    });
    REQUIRE(port > 0);
    return static_cast<uint16_t>(port);
  }

  // Sends header bytes and a body; the reply flag unless `reply` is false.
  void Send(const WireHeader& h, size_t n, std::string body, bool reply = true,
            uint32_t flags = 0) {
    SendThenPause(h, n, std::move(body), flags | (reply ? UCP_AM_SEND_FLAG_REPLY : 0), 0ms);
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
        ucx_.Send(ep(), kPeerAmId, h, n, kept->data(), kept->size(), flags, [](ucs_status_t) {});
      }
      std::this_thread::sleep_for(pause);
    };
    if (pause.count() == 0)
      OnThread(send);
    else
      REQUIRE(ucx_.Post(send));
  }
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
    REQUIRE(ucx_.Post([&] {
      fn();
      std::lock_guard lock(m);
      done = true;
      cv.notify_all();
    }));
    std::unique_lock lock(m);
    REQUIRE(cv.wait_for(lock, 5s, [&] { return done; }));
  }

  UcxWorker ucx_;
  std::mutex mu_;  // guards the rest
  ucp_ep_h ep_ = nullptr;
  bool closed_ = false;
  std::vector<Received> received_;
  std::list<std::string> bodies_;  // alive until the sends are done
};

}  // namespace tierfs::testing
