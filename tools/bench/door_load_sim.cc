#include "door_load_sim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "tiering/peers/secure/door_puzzle.h"
#include "tiering/peers/secure/peer_handshake.h"

namespace tierfs::door_load {
namespace {

// A fake credential: "LOAD", who made it ('j': the job's user, 'o':
// another user), the payload in the clear.
constexpr std::string_view kMagic = "LOAD";

std::string Cred(uid_t uid, std::string_view payload) {
  std::string cred(kMagic);
  cred += uid == kJobUid ? 'j' : 'o';
  cred += payload;
  return cred;
}

// The honest peer a hello's payload names ("p<index>"), or -1.
long PeerOf(std::string_view payload, size_t peers) {
  PeerClaim claim;
  if (!DecodeClaim(payload, &claim) || claim.from.size() < 2 || claim.from[0] != 'p') return -1;
  long i = std::strtol(claim.from.c_str() + 1, nullptr, 10);
  return i >= 0 && static_cast<size_t>(i) < peers ? i : -1;
}

class FakeMungeImpl final : public Credentials {
 public:
  FakeMungeImpl(World* world, bool door) : world_(world), door_(door) {}
  Result<std::string> Encode(std::string_view payload, uid_t, int) const override {
    if (door_) {
      std::this_thread::sleep_for(world_->check_time);  // the answer's credential
    } else if (long p = PeerOf(payload, world_->pending.size()); p >= 0) {
      world_->sent_at[static_cast<size_t>(p)] = world_->Now();  // an honest hello, sent now
      world_->flood_at_send[static_cast<size_t>(p)] = world_->flood_checks.load();
      if (world_->pending[static_cast<size_t>(p)].exchange(1) == 0) world_->honest_waiting++;
    }
    return Cred(kJobUid, payload);
  }
  Decoded Decode(std::string_view cred) const override {
    Decoded d;
    if (cred.size() <= kMagic.size() || !cred.starts_with(kMagic)) {
      d.detail = "not a fake credential";
      return d;
    }
    d.verdict = AuthVerdict::kOk;
    d.uid = d.gid = cred[kMagic.size()] == 'j' ? kJobUid : kOtherUid;
    d.payload = cred.substr(kMagic.size() + 1);
    if (!door_) return d;
    if (d.uid != kJobUid) {
      world_->flood_checks++;
      if (world_->honest_waiting.load() > 0) world_->flood_checks_contended++;
    } else if (long p = PeerOf(d.payload, world_->pending.size()); p >= 0) {
      world_->honest_checks++;
      const auto i = static_cast<size_t>(p);
      world_->check_wait_us[i] = (world_->Now() - world_->sent_at[i].load()) / 1000;
      world_->flood_in_wait[i] =
          static_cast<int64_t>(world_->flood_checks.load() - world_->flood_at_send[i].load());
      world_->Done(i);
    }
    std::this_thread::sleep_for(world_->check_time);
    return d;
  }

 private:
  World* const world_;
  const bool door_;
};

sockaddr_in Address(uint32_t host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(host);
  a.sin_port = htons(port);
  return a;
}

// A socket bound to `from` (a port below 1024 when `reserved`) and
// connected to the door. -1 if not.
int Dial(uint32_t from, bool reserved, uint16_t port, std::mt19937* rng) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  bool bound = false;
  for (int i = 0; i < 16 && !bound; ++i) {
    sockaddr_in a = Address(from, reserved ? static_cast<uint16_t>(600 + (*rng)() % 424) : 0);
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (!reserved) break;
  }
  sockaddr_in to = Address(INADDR_LOOPBACK, port);
  if (!bound || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads the greeting's puzzle bits without taking the greeting off the
// socket (the real handshake reads it next).
bool PeekBits(int fd, Clock::time_point deadline, unsigned* bits) {
  uint8_t buf[4 + kMaxFrame];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 4) {
      size_t len = buf[0] | buf[1] << 8 | buf[2] << 16 | size_t{buf[3]} << 24;
      if (len <= kMaxFrame && static_cast<size_t>(n) >= 4 + len) {
        PeerNonce nonce;
        return DecodeGreeting(std::string_view(reinterpret_cast<char*>(buf) + 4, len), &nonce,
                              bits);
      }
    } else if (n == 0 || (n < 0 && errno != EAGAIN)) {
      return false;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

int64_t ThreadCpuUs() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000 + t.tv_nsec / 1000;
}

}  // namespace

void World::Done(size_t peer) {
  if (pending[peer].exchange(0) == 1) honest_waiting--;
}

std::unique_ptr<const Credentials> FakeMunge(World* world, bool door) {
  return std::make_unique<FakeMungeImpl>(world, door);
}

PeerIdentity PeerId(size_t index) {
  return PeerIdentity{kJob, "p" + std::to_string(index), kJobUid, kJobUid};
}

std::string FlooderHello() {
  PeerClaim claim{PeerClaim::kHello, RandomNonce(), RandomNonce(), PeerKey{}, kJob,
                  kFlooderName,      kDoorName};
  std::string payload = EncodeClaim(claim);
  return Cred(kOtherUid, payload);  // made by another user of the node
}

uint32_t HonestAddress(size_t index) {
  if (index == 0) return kFlooderAddress;
  return 0x7f0a0000 | static_cast<uint32_t>(index / 250) << 8 |
         static_cast<uint32_t>(index % 250 + 1);
}

HonestResult RunHonest(World* world, PeerDoor* door, uint16_t port, size_t index,
                       Clock::time_point start, Clock::time_point give_up) {
  HonestResult r;
  std::mt19937 rng(static_cast<unsigned>(index * 7919 + 1));
  PeerAuth auth(PeerId(index), FakeMunge(world, false));
  r.reserved = index == 0 && ::geteuid() == 0;
  auto backoff = std::chrono::milliseconds(250);
  for (;;) {
    r.attempts++;
    const int64_t cpu0 = ThreadCpuUs();
    const auto deadline = std::min(give_up, Clock::now() + std::chrono::seconds(3));
    int fd = Dial(HonestAddress(index), r.reserved, port, &rng);
    unsigned bits = 0;
    if (fd >= 0 && PeekBits(fd, deadline, &bits)) {
      r.bits = std::max(r.bits, bits);
      if (bits > 0) r.hashes += static_cast<double>(uint64_t{1} << bits);
      Result<ClientSession> made = RunClientHandshake(fd, auth, kDoorName, deadline);
      if (made.ok()) {
        AcceptedSession s;
        r.ok = door->Take(
            made->session, [](const SessionKeys&) { return true; }, &s);
        if (!r.ok) r.error = "the door kept no session";
      } else {
        r.error = made.status().message();
      }
    } else {
      r.error = fd < 0 ? "cannot connect" : "no greeting";
    }
    if (fd >= 0) ::close(fd);
    r.cpu_us += ThreadCpuUs() - cpu0;
    world->Done(index);
    if (r.ok) break;
    if (r.attempts == 1) r.first_error = r.error;
    if (Clock::now() + backoff >= give_up) break;
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
  r.to_session_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return r;
}

void RunFlooder(FloodStats* stats, uint16_t port, const std::string& hello) {
  std::mt19937 rng(std::random_device{}());
  while (!stats->stop.load()) {
    int fd = Dial(kFlooderAddress, false, port, &rng);
    if (fd < 0) continue;
    stats->connections++;
    linger no_wait{1, 0};  // reset at close: no TIME_WAIT to run out of ports
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_wait, sizeof no_wait);
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    unsigned bits = 0;
    uint8_t head[4 + kMaxFrame];
    if (PeekBits(fd, deadline, &bits)) {
      ssize_t n = ::recv(fd, head, sizeof head, MSG_DONTWAIT);
      PeerNonce nonce;
      uint64_t solution = 0;
      if (n > 4 &&
          DecodeGreeting(std::string_view(reinterpret_cast<char*>(head) + 4, n - 4), &nonce) &&
          SolvePuzzle(nonce, bits, deadline, &solution)) {
        stats->bits = std::max(stats->bits.load(), bits);
        if (bits > 0) stats->hashes += uint64_t{1} << bits;
        std::string f = Framed(EncodeHelloFrame(hello, solution));
        if (::send(fd, f.data(), f.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(f.size())) {
          stats->hellos++;
          pollfd p{fd, POLLIN, 0};  // held until the door answers (refuses) or closes
          ::poll(&p, 1, 2000);
        }
      }
    }
    ::close(fd);
  }
}

}  // namespace tierfs::door_load
