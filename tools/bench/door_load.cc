// tierfs-door-load: a load test of one peer door (PeerDoor, real sockets on
// loopback; MUNGE replaced by a fake whose checks take --check-us on the
// door's side, door_load_sim.h). A flood from one address starts first
// (--flood-threads connections at once, each a hello of another user's,
// every puzzle solved); then --peers honest peers, each from an address of
// its own, connect at random moments within --window-ms, running the real
// client handshake and retrying like a client would. Prints the honest
// peers' time to a session (p50/p99/max), their CPU and the puzzle work
// asked of them (and what that makes for a node that reaches that many
// doors), the flooder's share of the checks and the door's counters.
//
// Exits 1 unless every honest peer got a session at its first attempt, the
// puzzle work asked of honest peers stays under 5% of a core for a node's
// first second, the median honest hello waits through at most
// --max-flood-turns of the flooder's checks (4: round robin gives it one turn
// per round, and the door runs 4 checks at once, which may begin while the
// hello is on its way to it; a shared queue of 16 made that 16),
// and the flood was real (it sent more hellos than all honest peers). Run it as root to have honest
// peer 0, on the flooder's node, connect from a reserved port. 2: bad arguments.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "door_load_sim.h"
#include "tiering/peers/secure/door_puzzle.h"

using namespace tierfs;
using namespace tierfs::door_load;

namespace {

struct Args {
  size_t peers = 1023;
  int window_ms = 1000;
  int flood_threads = 16;
  int flood_lead_ms = 1000;  // the flood runs alone this long first
  int check_us = 250;
  size_t workers = 64;
  int max_flood_turns = 4;  // its one turn, and those begun while the hello travels
  unsigned max_bits = 18;   // the door's max_puzzle_bits; 0: a flooder that solves any at once
};

int Usage(const char* why) {
  std::fprintf(stderr,
               "tierfs-door-load: %s\nusage: tierfs-door-load [--peers N] [--window-ms MS] "
               "[--flood-threads N] [--flood-lead-ms MS] [--check-us US] [--workers N] "
               "[--max-flood-turns N] [--max-bits N]\n",
               why);
  return 2;
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) return false;
    char* end = nullptr;
    const double v = std::strtod(argv[++i], &end);
    if (end == argv[i] || *end != '\0' || v < 0 || v > 1e6) return false;
    if (k == "--peers" && v >= 1 && v <= 4096) {
      a->peers = static_cast<size_t>(v);
    } else if (k == "--window-ms" && v >= 1) {
      a->window_ms = static_cast<int>(v);
    } else if (k == "--flood-threads" && v <= 256) {
      a->flood_threads = static_cast<int>(v);
    } else if (k == "--flood-lead-ms") {
      a->flood_lead_ms = static_cast<int>(v);
    } else if (k == "--check-us" && v <= 100000) {
      a->check_us = static_cast<int>(v);
    } else if (k == "--workers" && v >= 1 && v <= 1024) {
      a->workers = static_cast<size_t>(v);
    } else if (k == "--max-flood-turns" && v <= 1000) {
      a->max_flood_turns = static_cast<int>(v);
    } else if (k == "--max-bits" && v <= 20) {
      a->max_bits = static_cast<unsigned>(v);
    } else {
      return false;
    }
  }
  return true;
}

int64_t Pct(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// SHA-256 puzzle hashes per second on one core here (16 puzzles of 14 bits).
double HashRate() {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t hashes = 0, solution = 0;
  for (int i = 0; i < 16; ++i) {
    PeerNonce n = RandomNonce();
    SolvePuzzle(n, 14, t0 + std::chrono::seconds(10), &solution);
    hashes += solution + 1;
  }
  return static_cast<double>(hashes) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The door's listening socket on 127.0.0.1, any port; -1 on failure.
int Listen() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 256) != 0) {
    std::perror("tierfs-door-load: listen");
    return -1;
  }
  return fd;
}

uint16_t PortOf(int fd) {
  sockaddr_in a{};
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) return Usage("bad arguments");
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = std::max<rlim_t>(nofile.rlim_cur, std::min<rlim_t>(nofile.rlim_max, 8192));
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  const double hash_rate = HashRate();

  // The door's listening socket first, then the flooder's process (forked
  // before any thread), then the door on that socket.
  const int listener = Listen();
  if (listener < 0) return 1;
  auto* flood = static_cast<FloodStats*>(::mmap(nullptr, sizeof(FloodStats), PROT_READ | PROT_WRITE,
                                                MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (flood == MAP_FAILED) return 1;
  new (flood) FloodStats;
  const uint16_t port = PortOf(listener);
  const std::string hello = FlooderHello();
  const pid_t flooder = args.flood_threads > 0 ? ::fork() : -1;
  if (flooder == 0) {
    // Its CPU stands for another node's: the door and the peers come first.
    ::setpriority(PRIO_PROCESS, 0, 19);
    std::vector<std::thread> threads;
    for (int i = 0; i < args.flood_threads; ++i) {
      threads.emplace_back([&] { RunFlooder(flood, port, hello); });
    }
    for (auto& t : threads) t.join();
    ::_exit(0);
  }

  World world(args.peers);
  world.check_time = std::chrono::microseconds(args.check_us);
  PeerAuth door_auth(PeerIdentity{kJob, kDoorName, kJobUid, kJobUid}, FakeMunge(&world, true));
  PeerDoorOptions o;  // as the daemon's (fs/peers/peer_service.cc): a session each
  o.max_sessions = 1024;
  o.inherited_fd = listener;
  o.max_puzzle_bits = args.max_bits;
  PeerDoor door(&door_auth, o, "worker-address");
  if (Status s = door.Start(); !s.ok() || door.port() != port) {
    std::fprintf(stderr, "tierfs-door-load: the door would not listen: %s\n", s.message().c_str());
    flood->stop = true;
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(args.flood_lead_ms));

  // The storm: each peer starts at a random moment in the window.
  std::mt19937 rng(42);
  const auto t0 = Clock::now() + std::chrono::milliseconds(20);
  std::vector<Clock::time_point> starts(args.peers);
  for (auto& s : starts) s = t0 + std::chrono::microseconds(rng() % (args.window_ms * 1000));
  std::vector<size_t> order(args.peers);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return starts[a] < starts[b]; });
  std::vector<HonestResult> results(args.peers);
  std::atomic<size_t> next{0};
  const uint64_t checks0 = world.honest_checks + world.flood_checks;
  const uint64_t flood0 = world.flood_checks;
  std::vector<std::thread> workers;
  for (size_t w = 0; w < args.workers; ++w) {
    workers.emplace_back([&] {
      for (size_t k; (k = next++) < order.size();) {
        const size_t i = order[k];
        std::this_thread::sleep_until(starts[i]);
        results[i] =
            RunHonest(&world, &door, port, i, starts[i], starts[i] + std::chrono::seconds(10));
      }
    });
  }
  for (auto& t : workers) t.join();
  const auto storm = std::chrono::duration<double>(Clock::now() - t0).count();
  const uint64_t checks = world.honest_checks + world.flood_checks - checks0;
  const uint64_t flood_checks = world.flood_checks - flood0;
  flood->stop = true;
  if (flooder > 0) ::waitpid(flooder, nullptr, 0);
  const PeerDoorCounters& c = door.counters();

  std::vector<int64_t> to_session, cpu, waits, flood_turns;
  size_t ok = 0, first_try = 0;
  unsigned most_bits = 0;
  double hashes = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const HonestResult& r = results[i];
    ok += r.ok;
    first_try += r.ok && r.attempts == 1;
    to_session.push_back(r.to_session_us);
    cpu.push_back(r.cpu_us);
    waits.push_back(world.check_wait_us[i].load());
    if (r.ok) flood_turns.push_back(world.flood_in_wait[i].load());
    most_bits = std::max(most_bits, r.bits);
    hashes += r.hashes;
  }
  // A node of a job of peers + 1 nodes reaches `peers` doors like this one.
  const double node_hashes = hashes / static_cast<double>(args.peers) * 1023.0;
  const double node_puzzle_s = node_hashes / hash_rate;
  const double share = flood_checks == 0 ? 0.0 : double(flood_checks) / double(checks);
  const double contended =
      double(world.flood_checks_contended) /
      std::max(1.0, double(world.flood_checks_contended) + double(world.honest_checks));
  std::printf(
      "door load: %zu honest peers in %d ms, a flood of %d connections at once from one "
      "address; checks take %d us (x2 for a hello: its check and the answer)\n",
      args.peers, args.window_ms, args.flood_threads, args.check_us);
  std::printf(
      "honest: %zu/%zu got a session (%zu at the first attempt); time to session ms "
      "p50 %.1f p99 %.1f max %.1f\n",
      ok, args.peers, first_try, Pct(to_session, 0.5) / 1e3, Pct(to_session, 0.99) / 1e3,
      Pct(to_session, 1.0) / 1e3);
  std::printf(
      "honest: wait for the check ms p50 %.2f p99 %.2f max %.2f; CPU per peer us p50 %ld "
      "max %ld\n",
      Pct(waits, 0.5) / 1e3, Pct(waits, 0.99) / 1e3, Pct(waits, 1.0) / 1e3,
      static_cast<long>(Pct(cpu, 0.5)), static_cast<long>(Pct(cpu, 1.0)));
  std::printf(
      "honest: most work asked %u bits; puzzle hashes for a node reaching 1,023 doors: "
      "%.3g (%.3f CPU-s at %.2g hashes/s)\n",
      most_bits, node_hashes, node_puzzle_s, hash_rate);
  std::printf("honest peer 0 on the flooder's node (%s): %s, %.1f ms\n",
              results[0].reserved ? "reserved port" : "unreserved port, as a user's daemon",
              results[0].ok ? "in" : results[0].error.c_str(), results[0].to_session_us / 1e3);
  std::printf(
      "flood: %lu connections, %lu hellos, most work asked %u bits (%.3g hashes); "
      "%lu of %lu checks in the storm (%.1f%%); %.1f%% of the checks while an honest "
      "hello waited\n"
      "flood: its checks begun while one honest hello waited p50 %ld p99 %ld max %ld\n",
      (unsigned long)flood->connections, (unsigned long)flood->hellos, flood->bits.load(),
      double(flood->hashes), (unsigned long)flood_checks, (unsigned long)checks, 100 * share,
      100 * contended, static_cast<long>(Pct(flood_turns, 0.5)),
      static_cast<long>(Pct(flood_turns, 0.99)), static_cast<long>(Pct(flood_turns, 1.0)));
  std::printf(
      "door: busy %lu turned_away %lu evicted %lu timeouts %lu unsolved %lu"
      "; storm %.2f s\n",
      (unsigned long)c.busy, (unsigned long)c.turned_away, (unsigned long)c.evicted,
      (unsigned long)c.timeouts, (unsigned long)c.unsolved, storm);
  door.Stop();
  std::map<std::string, int> first_failures;
  for (const HonestResult& r : results) {
    if (!r.first_error.empty()) first_failures[r.first_error]++;
  }
  for (const auto& [why, n] : first_failures) {
    std::printf("honest first attempts that failed: %d: %s\n", n, why.c_str());
  }

  std::vector<std::string> failed;
  // Peer 0 shares the flooder's source unless it is root: a user's daemon
  // there is not promised a place (docs/OPERATIONS.md).
  const bool excused = !results[0].reserved;
  const size_t must = args.peers - (excused && !results[0].ok);
  const size_t must_first = args.peers - (excused && !(results[0].ok && results[0].attempts == 1));
  if (ok < must) failed.push_back("an honest peer got no session");
  if (first_try < must_first) failed.push_back("an honest peer needed more than one attempt");
  if (node_puzzle_s > 0.05) failed.push_back("honest peers were asked for too much work");
  if (Pct(flood_turns, 0.5) > args.max_flood_turns) {
    failed.push_back("the flooder took more than its turns");
  }
  if (flood->connections < args.peers && args.flood_threads > 0) {
    failed.push_back("the flood was too weak to test anything");
  }
  for (const auto& f : failed) std::printf("FAILED: %s\n", f.c_str());
  return failed.empty() ? 0 : 1;
}
