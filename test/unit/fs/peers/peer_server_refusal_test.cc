// PeerServer against hostile connections, each played by the test: junk on
// the peer port, hellos forged, misaddressed or made for another greeting,
// a hello captured by whoever held the port first and replayed to the real
// server, a flood of idle connections, forged and replayed messages after
// an honest handshake, a request for more bytes than the server may hold.
// Each is refused and counted, and the server keeps serving an honest peer.
#include <sys/mman.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <thread>

#include "peer_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChunk = 1 << 20;

// Server "b" and an honest client "a" of it.
struct Setup {
  explicit Setup(PeerServerOptions options = {}, uint64_t chunk = kChunk) : provider(chunk) {
    provider.Add("f", 3 * kChunk);
    b = std::make_unique<TestNode>("b", &provider, chunk, 0, options);
    b->StartServer();
    a = std::make_unique<TestNode>("a", &provider, chunk);
    a->StartClient({b->address()});
    REQUIRE(Within(5s, [&] { return a->client().up(0); }));
  }
  // The honest peer still gets its bytes.
  void HonestFetchWorks() {
    std::vector<char> buf(kChunk);
    CHECK(a->client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
          static_cast<ssize_t>(kChunk));
    CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  }
  const PeerServerCounters& counters() { return b->server().counters(); }
  const PeerDoorCounters& door() { return b->server().door(); }

  PatternProvider provider;
  std::unique_ptr<TestNode> b, a;
};

// A plain TCP connection to the door on `port`, with a 5 s receive timeout.
int Dial(uint16_t port) {
  int fd = DialLoopback(port);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads one frame (blocking, within the socket's timeout); "" if none.
std::string ReadFrameFrom(int fd) {
  uint8_t len[4];
  if (::recv(fd, len, 4, MSG_WAITALL) != 4) return "";
  size_t n = len[0] | len[1] << 8 | len[2] << 16 | static_cast<size_t>(len[3]) << 24;
  std::string f(n, '\0');
  if (n == 0 || n > kMaxFrame || ::recv(fd, f.data(), n, MSG_WAITALL) != static_cast<ssize_t>(n))
    return "";
  return f;
}

void WriteFrame(int fd, std::string_view payload) {
  std::string f = Framed(payload);
  REQUIRE(::send(fd, f.data(), f.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(f.size()));
}

// A hello credential for "b" from `as`, answering greeting `echo`.
std::string HelloCred(PeerAuth& as, const PeerNonce& echo, const std::string& to = "b") {
  PeerKeyPair keys;
  REQUIRE(NewPeerKeyPair(&keys));
  PeerClaim c{PeerClaim::kHello, RandomNonce(), echo, keys.pub, as.self().job, as.self().name, to};
  Result<std::string> cred = as.Make(c);
  REQUIRE(cred.ok());
  return *cred;
}

// The door's answer to `cred`, sent on a fresh connection: the refusal code
// (0: accepted), or -1 if the door closed without answering.
int32_t Answer(uint16_t port, const std::function<std::string(const PeerNonce&)>& cred) {
  int fd = Dial(port);
  PeerNonce greeting;
  std::string g = ReadFrameFrom(fd);
  REQUIRE(DecodeGreeting(g, &greeting));
  WriteFrame(fd, EncodeHelloFrame(cred(greeting)));
  std::string a = ReadFrameFrom(fd);
  ::close(fd);
  int32_t refusal = -1;
  std::string_view answer;
  if (!a.empty()) REQUIRE(DecodeAnswerFrame(a, &refusal, &answer));
  return refusal;
}

TEST_CASE("peer server: hellos that are forged, misaddressed or not for this greeting are refused",
          "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  uint16_t port = s.b->port();
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  PeerAuth other_job(Identity("x", "job-43"), MungeDaemon::Get()->socket());
  const auto denied = static_cast<int32_t>(WireError::kDenied);

  CHECK(Answer(port, [&](const PeerNonce& g) { return HelloCred(x, g); }) == 0);
  std::string once;
  CHECK(Answer(port, [&](const PeerNonce& g) { return once = HelloCred(x, g); }) == 0);
  CHECK(Answer(port, [&](const PeerNonce&) { return once; }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kReplayed) == 1);
  CHECK(Answer(port, [&](const PeerNonce& g) {
          std::string c = HelloCred(x, g);
          c[c.size() / 2] ^= 0x01;
          return c;
        }) == denied);
  CHECK(Answer(port, [](const PeerNonce&) { return std::string("hello, let me in"); }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kInvalid) == 2);
  CHECK(Answer(port, [&](const PeerNonce& g) { return HelloCred(other_job, g); }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kWrongJob) == 1);
  CHECK(Answer(port, [&](const PeerNonce& g) { return HelloCred(x, g, "c"); }) == denied);
  // Made for a greeting this door never sent: whoever asked for it was not us.
  CHECK(Answer(port, [&](const PeerNonce&) { return HelloCred(x, RandomNonce()); }) == denied);
  CHECK(s.b->server().refused(AuthVerdict::kWrongPeer) == 2);
  if (::geteuid() == 0) {
    CHECK(Answer(port, [&](const PeerNonce& g) {
            PeerClaim claim{PeerClaim::kHello, RandomNonce(), g, {}, kJob, "x", "b"};
            return CredentialAs(65534, claim);
          }) == denied);
    CHECK(s.b->server().refused(AuthVerdict::kWrongUser) == 1);
  } else {
    WARN("not tried without root: a hello made by another user");
  }
  CHECK(s.provider.calls == 0);
  CHECK(s.door().authenticated == 1);  // a's; the two accepted raw hellos never bound
  s.HonestFetchWorks();
}

TEST_CASE("peer server: a hello captured on a squatted port is worthless, the port is retried",
          "[peer]") {
  if (!PeersCanRun()) return;
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  // The attacker, another user on b's node, binds b's port before b starts.
  uint16_t port = FreePort();
  int squat = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(port);
  REQUIRE(::bind(squat, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(squat, 8) == 0);
  TestNode b("b", &provider, kChunk, port);
  b.StartServer();
  CHECK_FALSE(b.server().listening());
  TestNode a("a", &provider, kChunk);
  a.StartClient({{"b", "127.0.0.1", port}});

  // a dials b and meets the attacker, who greets it and keeps its hello.
  timeval tv{5, 0};
  ::setsockopt(squat, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int victim = ::accept(squat, nullptr, nullptr);
  REQUIRE(victim >= 0);
  ::setsockopt(victim, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  WriteFrame(victim, EncodeGreeting(RandomNonce()));
  std::string hello = ReadFrameFrom(victim);
  REQUIRE(!hello.empty());
  // Reset, not closed: a closed connection would hold the port in TIME_WAIT
  // for a minute, and b would only get it then.
  linger reset{1, 0};
  ::setsockopt(victim, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(victim);
  ::close(squat);

  // The real b gets the port at a retry, and refuses the captured hello.
  REQUIRE(Within(5s, [&] { return b.server().listening(); }));
  CHECK(b.server().door().listen_failures >= 1);
  int fd = Dial(port);
  PeerNonce greeting;
  REQUIRE(DecodeGreeting(ReadFrameFrom(fd), &greeting));
  std::string_view cred;
  REQUIRE(DecodeHelloFrame(hello, &cred));
  WriteFrame(fd, hello);
  std::string answer = ReadFrameFrom(fd);
  ::close(fd);
  int32_t refusal = 0;
  std::string_view answer_cred;
  REQUIRE(DecodeAnswerFrame(answer, &refusal, &answer_cred));
  CHECK(refusal == static_cast<int32_t>(WireError::kDenied));
  CHECK(b.server().refused(AuthVerdict::kWrongPeer) == 1);
  CHECK(provider.calls == 0);

  // a joins at its next try, and is served.
  REQUIRE(Within(10s, [&] { return a.client().up(0); }));
  std::vector<char> buf(kChunk);
  CHECK(a.client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
        static_cast<ssize_t>(kChunk));
  CHECK(IsPattern("f", kChunk, buf.data(), kChunk));
  CHECK(b.server().counters().connections == 1);
}

// One junk hello on a fresh connection to `port`, as fast as it goes: the
// greeting read, the hello sent, the connection closed. No Catch2 macros:
// it runs on the attacker's threads.
void JunkHello(uint16_t port, const std::string& cred) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a = Loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    uint8_t len[4];
    if (::recv(fd, len, 4, MSG_WAITALL) == 4) {
      size_t n = len[0] | len[1] << 8 | len[2] << 16 | static_cast<size_t>(len[3]) << 24;
      std::string g(n <= kMaxFrame ? n : 0, '\0');
      if (!g.empty() && ::recv(fd, g.data(), n, MSG_WAITALL) == static_cast<ssize_t>(n)) {
        std::string f = Framed(EncodeHelloFrame(cred));
        ::send(fd, f.data(), f.size(), MSG_NOSIGNAL);
      }
    }
  }
  ::close(fd);
}

// [serial]: ctest runs it alone (test/CMakeLists.txt): the flood takes
// what CPU there is, and the legitimate node's bound is for a node whose
// CPU only the attacker shares.
TEST_CASE("peer server: a flood of hellos from the peer's own address does not keep it out",
          "[peer][serial]") {
  if (!PeersCanRun()) return;
  // Another user on node a's host sends hellos as fast as it can, each a
  // well-formed credential of its own made once and replayed: every one
  // costs the door a check by munged, and fills its queue of checks.
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  PeerAuth mallory(Identity("mallory", "job-666"), MungeDaemon::Get()->socket());
  const std::string cred = HelloCred(mallory, RandomNonce());
  std::atomic<bool> stop{false};
  std::vector<std::thread> flood;
  for (int i = 0; i < 6; ++i) {
    flood.emplace_back([&] {
      while (!stop.load()) JunkHello(b.port(), cred);
    });
  }
  std::this_thread::sleep_for(1s);
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  options.source_port = SourcePort::kAny;  // as a daemon run as a user: no places of its own
  a.StartClient({b.address()}, options);
  unsigned bits = 0;  // the most work the door asked for meanwhile
  const auto asked = Clock::now();
  bool up = Within(8s, [&] {
    bits = std::max(bits, b.server().door().work_bits.load());
    return a.client().up(0);
  });
  const uint64_t busy = b.server().door().busy.load();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
  // The flood goes on for 2 s whenever the peer got in: what the door made
  // it pay is counted over that time, however short the wait was.
  std::this_thread::sleep_until(asked + 2s);
  INFO("up after " << took.count() << " ms; turned away " << b.server().door().turned_away);
  stop = true;
  for (auto& t : flood) t.join();
  CHECK(bits >= 8);  // the door asked for work while flooded
  // Calm for longer than the work takes to decay (2 bits a second): the
  // next connection is asked for none.
  std::this_thread::sleep_for(std::chrono::seconds(bits / 2 + 1));
  ::close(Dial(b.port()));
  CHECK(Within(2s, [&] { return b.server().door().work_bits.load() == 0; }));
  INFO("hellos not checked (busy): " << busy << ", connections " << b.server().door().connections);
  CHECK(up);
  CHECK(b.server().door().connections > 1000);  // the flood was on
  CHECK(b.server().door().unsolved > 1000);     // ... and paid for: turned away for one hash each
  if (up) {
    std::vector<char> buf(kChunk);
    CHECK(a.client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
          static_cast<ssize_t>(kChunk));
  }
}

TEST_CASE("peer server: 1,100 idle connections do not keep a node out", "[peer][serial]") {
  if (!PeersCanRun()) return;
  rlimit nofile{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &nofile) == 0);
  if (nofile.rlim_max < 4096) {
    WARN("skipped: RLIMIT_NOFILE's hard limit is below 4096");
    return;
  }
  rlimit raised{std::max<rlim_t>(nofile.rlim_cur, 4096), nofile.rlim_max};
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &raised) == 0);
  PatternProvider provider(kChunk);
  provider.Add("f", 3 * kChunk);
  TestNode b("b", &provider, kChunk);
  b.StartServer();
  std::vector<int> idle;
  for (int i = 0; i < 1100; ++i) {
    idle.push_back(DialLoopback(b.port()));
  }
  REQUIRE(Within(5s, [&] { return b.server().door().connections >= 1100; }));
  // A node joining now, the idle ones still open, is in within its timeout.
  TestNode a("a", &provider, kChunk);
  PeerClientOptions options;
  options.connect_timeout = 3000ms;
  options.source_port = SourcePort::kAny;  // as a daemon run as a user: no places of its own
  auto start = Clock::now();
  a.StartClient({b.address()}, options);
  CHECK(Within(3000ms, [&] { return a.client().up(0); }));
  CHECK(Clock::now() - start < 3500ms);
  // Evicted once old enough to be squatters, or turned away while younger.
  CHECK(b.server().door().evicted + b.server().door().turned_away >= 1100 - 64);
  std::vector<char> buf(kChunk);
  CHECK(a.client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), Clock::now() + 5s) ==
        static_cast<ssize_t>(kChunk));
  for (int fd : idle) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &nofile);
}

TEST_CASE("peer server: forged, replayed and unattributed messages after a handshake", "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  PeerAuth x(Identity("x"), MungeDaemon::Get()->socket());
  const ChunkRef ref = Ref("f", 3 * kChunk, 0, kChunk);
  const std::string path(ref.path);

  SECTION("a message with a wrong tag is refused; the session stays (anyone can name it)") {
    RawPeer raw;
    REQUIRE(raw.Handshake(x, s.b->port()) == HandshakeResult::kOk);
    WireHeader h;
    size_t n = EncodeRequest(raw.Next(1), ref, 5000, &h);
    std::string body = path;
    REQUIRE(SealWire(raw.session().keys.send, &h, n, path.data(), path.size(), body.data()));
    body[0] ^= 1;  // altered on the way
    raw.Send(h, n, body);
    // The session was never taken: a new session naming a bad tag is "stray".
    CHECK(Within(5s, [&] { return s.counters().stray == 1; }));
    // A correct first message takes the session; then one altered in the header.
    n = EncodeRequest(raw.Next(2), ref, 5000, &h);
    raw.SendSealed(h, n, path);
    REQUIRE(Within(5s, [&] { return raw.received().size() == 1; }));
    CHECK(raw.received()[0].m.type == MsgType::kData);
    n = EncodeRequest(raw.Next(3), ref, 5000, &h);
    std::string sealed = path;
    REQUIRE(SealWire(raw.session().keys.send, &h, n, path.data(), path.size(), sealed.data()));
    h[44] ^= 0x01;  // the file's mtime, changed under the tag
    raw.Send(h, n, sealed);
    CHECK(Within(5s, [&] { return s.counters().forged == 1; }));
    CHECK(s.provider.calls == 1);
    // The forger did not cut the session: its client is still answered.
    n = EncodeRequest(raw.Next(4), ref, 5000, &h);
    raw.SendSealed(h, n, path);
    REQUIRE(Within(5s, [&] { return raw.received().size() == 2; }));
    CHECK(raw.received()[1].m.type == MsgType::kData);
  }
  SECTION("a message played again is refused; the session stays") {
    RawPeer raw;
    REQUIRE(raw.Handshake(x, s.b->port()) == HandshakeResult::kOk);
    WireHeader h;
    size_t n = EncodeRequest(raw.Next(1), ref, 5000, &h);
    std::string sealed = path;
    REQUIRE(SealWire(raw.session().keys.send, &h, n, path.data(), path.size(), sealed.data()));
    raw.Send(h, n, sealed);
    REQUIRE(Within(5s, [&] { return raw.received().size() == 1; }));
    raw.Send(h, n, sealed);
    CHECK(Within(5s, [&] { return s.counters().replayed == 1; }));
    CHECK(s.provider.calls == 1);
    n = EncodeRequest(raw.Next(2), ref, 5000, &h);
    raw.SendSealed(h, n, path);
    REQUIRE(Within(5s, [&] { return raw.received().size() == 2; }));
    CHECK(raw.received()[1].m.type == MsgType::kData);
  }
  SECTION("a message under another session's key, or naming none, is dropped") {
    RawPeer raw;
    REQUIRE(raw.Handshake(x, s.b->port()) == HandshakeResult::kOk);
    WireHeader h;
    size_t n = EncodeRequest(WireIds{1, raw.session().session ^ 1, 2}, ref, 5000, &h);
    raw.SendSealed(h, n, path);
    PeerKey wrong{};
    n = EncodeRequest(raw.Next(1), ref, 5000, &h);
    raw.SendSealed(h, n, path, &wrong);
    CHECK(Within(5s, [&] { return s.counters().stray == 2; }));
    n = EncodeRequest(raw.Next(2), ref, 5000, &h);  // the session is still there to take
    raw.SendSealed(h, n, path);
    CHECK(Within(5s, [&] { return raw.received().size() == 1; }));
  }
  SECTION("garbage and large bodies are dropped unread") {
    RawPeer raw;
    REQUIRE(raw.Handshake(x, s.b->port()) == HandshakeResult::kOk);
    WireHeader h;
    size_t n = EncodeError(raw.Next(1), WireError::kIo, &h);
    WireHeader bad_magic = h, bad_version = h, bad_type = h;
    bad_magic[1] ^= 0x40;
    bad_version[4] = 9;
    bad_type[5] = 0;
    for (const WireHeader* bad : {&bad_magic, &bad_version, &bad_type, &h}) {  // h: not a request
      raw.Send(*bad, n, "");
    }
    CHECK(Within(5s, [&] { return s.counters().garbage == 4; }));
    CHECK(s.counters().bad_version == 1);
    n = EncodeRequest(raw.Next(2), ref, 5000, &h);
    raw.Send(h, n, std::string(256 << 10, 'x'), UCP_AM_SEND_FLAG_RNDV);
    CHECK(Within(5s, [&] { return s.counters().garbage == 5; }));
  }
  SECTION("junk on the TCP port") {
    for (size_t size : {1, 7, 4096, 65536}) {
      int fd = Dial(s.b->port());
      std::string junk(size, '\0');
      for (size_t i = 0; i < size; ++i) junk[i] = static_cast<char>(i * 131 + size + 0x80);
      ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);  // it may reset us midway
      std::this_thread::sleep_for(50ms);
      ::close(fd);
    }
    CHECK(Within(5s, [&] { return s.door().garbage >= 2; }));
  }
  s.HonestFetchWorks();
  CHECK(s.a->client().up(0));
  CHECK(s.a->client().counters(0).downs == 0);
}

TEST_CASE("peer server: a range larger than its byte budget is refused unallocated", "[peer]") {
  if (!PeersCanRun()) return;
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  PeerServerOptions options;
  options.max_bytes_in_flight = 64 << 20;
  options.max_bytes_per_connection = 64 << 20;
  Setup s(options, kGiB);
  s.provider.Add("big", 2 * kGiB);
  void* dest = ::mmap(nullptr, kGiB, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(dest != MAP_FAILED);
  ChunkRef one = Ref("big", 2 * kGiB, 1, kGiB);
  one.range_off = 5;
  one.range_len = 1;
  CHECK(s.a->client().Fetch(0, one, static_cast<char*>(dest), Clock::now() + 5s) == 1);
  CHECK(IsPattern("big", kGiB + 5, static_cast<char*>(dest), 1));
  CHECK(s.counters().peak_bytes_in_flight == 1);  // the range's size, not the chunk's
  ChunkRef whole = Ref("big", 2 * kGiB, 0, kGiB);
  CHECK(s.a->client().Fetch(0, whole, static_cast<char*>(dest), Clock::now() + 5s) == -EBUSY);
  CHECK(s.counters().peak_bytes_in_flight == 1);
  CHECK(s.provider.calls == 1);
  ::munmap(dest, kGiB);
}

TEST_CASE("peer server: the asker's deadline bounds the home's work", "[peer]") {
  if (!PeersCanRun()) return;
  Setup s;
  s.provider.Stall();  // a promotion that takes long
  std::vector<char> buf(kChunk);
  auto start = Clock::now();
  CHECK(s.a->client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), start + 300ms) ==
        -ETIMEDOUT);
  CHECK(Clock::now() - start < 500ms);
  // The home gave up at the same deadline: its thread is free well before
  // its own promotion wait (10 s) would have ended.
  CHECK(Within(2s, [&] { return s.counters().expired == 1; }));
  s.provider.Release();
}

}  // namespace
}  // namespace tierfs
