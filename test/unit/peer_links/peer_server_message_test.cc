// PeerServer after an honest handshake, against messages played by the
// test (RawPeer): altered, replayed, under another session's key or naming
// none, garbage and large bodies, junk on the TCP port; a range larger than
// the server's byte budget; an asker whose deadline passes while the home
// works. Each is refused or dropped and counted, and the server keeps
// serving an honest peer. Hellos refused are in peer_server_refusal_test.cc,
// the fixture in peer_server_refusal_fixture.h.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "munge_daemon.h"
#include "peer_fixture.h"
#include "peer_server_refusal_fixture.h"
#include "raw_peer.h"

namespace tierfs {
namespace {

using namespace testing;

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
  // Its own timer, or the home's kBusy sent at the same deadline, whichever
  // comes first (a loaded host wakes the asker late).
  const ssize_t r =
      s.a->client().Fetch(0, Ref("f", 3 * kChunk, 1, kChunk), buf.data(), start + 300ms);
  CHECK((r == -ETIMEDOUT || r == -EBUSY));
  CHECK(Clock::now() - start < 500ms);
  // The home gave up at the same deadline: its thread is free well before
  // its own promotion wait (10 s) would have ended.
  CHECK(Within(2s, [&] { return s.counters().expired == 1; }));
  s.provider.Release();
}

}  // namespace
}  // namespace tierfs
