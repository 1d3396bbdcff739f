// Peers in one process for the peer tests: a ChunkProvider of pattern
// bytes that can be made to stall, a node (PeerAuth + PeerServer +
// PeerClient) over UCX on loopback, and a raw UCX endpoint that sends
// whatever bytes a test wants.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "munge_daemon.h"
#include "tiering/peers/client/peer_client.h"
#include "tiering/peers/client/rendezvous.h"
#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/server/peer_server.h"
#include "tiering/peers/transport/ucx_options.h"

namespace tierfs::testing {

using namespace std::chrono_literals;

inline constexpr char kJob[] = "job-42";

// UCX transports for the tests: TCP on loopback unless TIERFS_TEST_UCX_TLS
// says otherwise.
inline UcxOptions TestUcx() {
  const char* tls = std::getenv("TIERFS_TEST_UCX_TLS");
  return UcxOptions{tls != nullptr ? tls : "tcp", "", "", std::chrono::milliseconds(20)};
}

// Byte `off` of the file at `path`: what every provider serves for it.
inline char PatternByte(uint64_t seed, uint64_t off) {
  return static_cast<char>((seed >> ((off & 7) * 8)) + off * 131 + (off >> 11));
}
inline void FillPattern(std::string_view path, uint64_t off, char* dst, size_t n) {
  uint64_t seed = ChunkHash(path, 0);
  for (size_t i = 0; i < n; ++i) dst[i] = PatternByte(seed, off + i);
}
inline bool IsPattern(std::string_view path, uint64_t off, const char* src, size_t n) {
  uint64_t seed = ChunkHash(path, 0);
  for (size_t i = 0; i < n; ++i) {
    if (src[i] != PatternByte(seed, off + i)) return false;
  }
  return true;
}

inline constexpr int64_t kMtime = 1000, kCtime = 2000;
inline constexpr uint64_t kIno = 77;

// A reference to chunk `chunk` of `path` as PatternProvider::Add describes
// it by default.
inline ChunkRef Ref(std::string_view path, uint64_t size, uint32_t chunk, uint64_t chunk_size) {
  return ChunkRef{path, size, kMtime, kCtime, kIno, chunk_size, chunk};
}

// Serves pattern bytes for the files it was given, written into the
// server's scratch buffer or (held) into memory it keeps alive with a hold;
// Stall() makes every call wait until Release() (at most 10 s, or the
// asker's deadline unless stall_past_deadline).
class PatternProvider : public ChunkProvider {
 public:
  explicit PatternProvider(uint64_t chunk_size) : chunk_size_(chunk_size) {}
  void Add(const std::string& path, uint64_t size, int64_t mtime_ns = kMtime,
           int64_t ctime_ns = kCtime, uint64_t ino = kIno) {
    files_[path] = {size, mtime_ns, ctime_ns, ino};
  }
  void Stall() {
    std::lock_guard lock(mu_);
    stalled_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      stalled_ = false;
    }
    cv_.notify_all();
  }
  int ReadChunk(const ChunkRef& ref, Deadline deadline, ChunkBytes* out) override {
    calls++;
    {
      std::unique_lock lock(mu_);
      const auto limit = std::chrono::steady_clock::now() + 10s;
      if (!cv_.wait_until(lock, stall_past_deadline ? limit : std::min(deadline, limit),
                          [&] { return !stalled_; })) {
        return -ETIMEDOUT;
      }
    }
    if (int err = Check(ref); err < 0) return err;
    if (!held) {
      FillPattern(ref.path, ref.file_offset(), out->scratch, ref.length());
      out->data = out->scratch;
      return 0;
    }
    auto copy = std::make_shared<std::vector<char>>(ref.length());  // as a RAM tier holds it
    FillPattern(ref.path, ref.file_offset(), copy->data(), copy->size());
    out->data = copy->data();
    out->hold = copy;
    return 0;
  }
  // A stalled read that outlives the asker's deadline (a hung disk): the
  // server then answers nothing rather than busy at that deadline, which on
  // a loaded host may reach the asker before its own timeout fires.
  bool stall_past_deadline = false;
  // Holds(): `holds` for a file it has (held unless a test says otherwise).
  Residence Holds(const ChunkRef& ref) override {
    {
      std::lock_guard lock(mu_);
      holds_thread_ = std::this_thread::get_id();  // the server's progress thread
    }
    if (int err = Check(ref); err < 0) {
      return err == -ENOENT ? Residence::kNoSuchFile : Residence::kStale;
    }
    return holds.load() ? Residence::kHeld : Residence::kNotHeld;
  }
  // Adopt(): counts the chunk, and whether its bytes are the file's.
  int Adopt(const ChunkRef& ref, const char* data) override {
    {
      std::lock_guard lock(mu_);
      adopt_threads_.insert(std::this_thread::get_id());
    }
    if (int err = Check(ref); err < 0) return err;
    if (IsPattern(ref.path, ref.offset(), data, ref.chunk_length())) adopted_intact++;
    adopted++;  // last: a test that sees it sees adopted_intact too
    return 0;
  }
  // The thread the last Holds() ran on, and every thread an Adopt() ran on.
  std::thread::id holds_thread() {
    std::lock_guard lock(mu_);
    return holds_thread_;
  }
  std::set<std::thread::id> adopt_threads() {
    std::lock_guard lock(mu_);
    return adopt_threads_;
  }
  std::atomic<bool> holds{true};
  std::atomic<int> adopted{0}, adopted_intact{0};
  bool held = false;  // serve from memory of its own (a hold), not the scratch buffer
  std::atomic<int> calls{0};

 private:
  struct File {
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
    uint64_t ino;
  };
  // 0, or what a provider answers for a ref that names no file of its own.
  int Check(const ChunkRef& ref) const {
    auto it = files_.find(std::string(ref.path));
    if (it == files_.end()) return -ENOENT;
    const File& f = it->second;
    if (FileIdentity{f.size, f.mtime_ns, f.ctime_ns, f.ino} != ref.file()) {
      return -ESTALE;
    }
    return ref.chunk_size != chunk_size_ ? -EINVAL : 0;
  }
  const uint64_t chunk_size_;
  std::map<std::string, File> files_;  // set up before serving
  std::mutex mu_;  // guards stalled_, holds_thread_, adopt_threads_. A leaf lock.
  std::condition_variable cv_;
  bool stalled_ = false;
  std::thread::id holds_thread_;
  std::set<std::thread::id> adopt_threads_;
};

// True if UCX peers can run in this test program; else says why the test
// is skipped. Under ThreadSanitizer, UCX's memory hooks crash exiting
// threads: main.cc turns them off (UCX_MEM_MMAP_HOOK_MODE=none) unless the
// environment says otherwise.
inline bool PeersCanRun() {
#if defined(__SANITIZE_THREAD__)
  const char* mode = std::getenv("UCX_MEM_MMAP_HOOK_MODE");
  if (mode == nullptr || std::string_view(mode) != "none") {
    WARN(
        "skipped under ThreadSanitizer unless UCX_MEM_MMAP_HOOK_MODE=none "
        "(UCX's memory hooks crash exiting threads)");
    return false;
  }
#endif
  return MungedRunning();
}

// 127.0.0.1:`port`.
inline sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

// A plain TCP connection to 127.0.0.1:`port` (blocking).
inline int DialLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a = Loopback(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// A TCP port that was free a moment ago (for a node that starts late),
// below the ephemeral range: UCX's TCP transport listens on ephemeral ports
// of its own, and one of those must not take the port a late node wants.
inline uint16_t FreePort() {
  unsigned low = 32768;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%u", &low) != 1) low = 32768;
    std::fclose(f);
  }
  const unsigned first = low > 21024 ? low - 20000 : 1024;
  std::random_device seed;
  std::mt19937 rng(seed());
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto port = static_cast<uint16_t>(first + rng() % (low - first));
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return port;
  }
  FAIL("no free port below the ephemeral range");
  return 0;
}

inline PeerIdentity Identity(const std::string& name, const std::string& job = kJob) {
  return PeerIdentity{job, name, ::geteuid(), ::getegid()};
}

// A full handshake of `auth` with the door on 127.0.0.1:`port`, addressed
// to `server`, within 5 s: the session the door handed out.
inline ClientSession DoorHandshake(const PeerAuth& auth, uint16_t port,
                                   const std::string& server = "b") {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  Result<int> fd = ConnectTcp("127.0.0.1", port, deadline);
  INFO(fd.status().message());
  REQUIRE(fd.ok());
  Result<ClientSession> made = RunClientHandshake(*fd, auth, server, deadline);
  ::close(*fd);
  INFO(made.status().message());
  REQUIRE(made.ok());
  return std::move(made).value();
}

// One node: its server (on loopback) and its client of the others.
class TestNode {
 public:
  TestNode(const std::string& name, ChunkProvider* provider, uint64_t chunk_size, uint16_t port = 0,
           PeerServerOptions server = {})
      : auth_(Identity(name), MungeDaemon::Get()->socket()) {
    server.listen_host = "127.0.0.1";
    server.port = port;
    server.chunk_size = chunk_size;
    server.ucx = TestUcx();
    auto made = PeerServer::Make(&auth_, provider, server);
    INFO(made.status().message());
    REQUIRE(made.ok());
    server_ = std::move(made).value();
  }
  void StartServer() {
    Status s = server_->Start();
    INFO(s.message());
    REQUIRE(s.ok());
  }
  void StartClient(std::vector<PeerAddress> peers, PeerClientOptions options = {}) {
    options.peers = std::move(peers);
    options.ucx = TestUcx();
    options.connect_at_start = connect_at_start;
    if (options.retry_max == 5000ms) options.retry_max = 400ms;
    auto made = PeerClient::Make(&auth_, options);
    INFO(made.status().message());
    REQUIRE(made.ok());
    client_ = std::move(made).value();
    client_->Start();
  }
  // StartClient connects to every peer at once unless this is false (on first need).
  bool connect_at_start = true;
  PeerAddress address() const { return {auth_.self().name, "127.0.0.1", server_->port()}; }
  uint16_t port() const { return server_->port(); }
  PeerServer& server() { return *server_; }
  PeerClient& client() { return *client_; }
  PeerAuth& auth() { return auth_; }

 private:
  PeerAuth auth_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<PeerClient> client_;
};

// Under ThreadSanitizer every memory access costs many times more (checking
// an 8 MiB pattern takes most of a second): a time bound would measure the
// sanitizer, not the code. So there, bounds that say how fast something is
// are not checked (kTimed), and waits for something to happen at all
// (Within) last kSlowdown times as long; the code still runs, for the
// races the sanitizer looks for.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTimed = false;
inline constexpr int kSlowdown = 10;
#else
inline constexpr bool kTimed = true;
inline constexpr int kSlowdown = 1;
#endif

// Polls `done` every millisecond until `limit` (kSlowdown times it under
// ThreadSanitizer); its last answer.
template <typename F>
bool Within(std::chrono::milliseconds limit, F done) {
  auto end = std::chrono::steady_clock::now() + limit * kSlowdown;
  while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
  return done();
}

}  // namespace tierfs::testing
