#include "tiering/peers/server/peer_door_sources.h"

#include <algorithm>
#include <cmath>

namespace tierfs {
namespace {

// The recent connections' count decays as e^(-t / kDecay).
constexpr double kDecaySeconds = 2.0;
// Below this a count is forgotten (with no place held, the source is dropped).
constexpr double kForgotten = 0.05;

}  // namespace

double DoorSources::Decayed(const State& s, Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - s.seen).count();
  return dt <= 0 ? s.recent : s.recent * std::exp(-dt / kDecaySeconds);
}

unsigned DoorSources::BitsFor(double recent) const {
  if (recent <= kFreeConnections) return 0;
  unsigned bits = 8;
  for (double over = recent / (2 * kFreeConnections); over > 1 && bits < options_.max_bits;
       over /= 2) {
    bits += 2;
  }
  return std::min(bits, options_.max_bits);
}

// The count stops at twice the one that asks the most work: a flood keeps
// its address at the most work while it lasts, and that address (which may
// be a shared login node's) is asked less within about 1.4 s of its end, not
// after as many halvings as the flood was long.
double DoorSources::RecentCap() const {
  const int steps = std::max(0, (static_cast<int>(options_.max_bits) - 8) / 2);
  return 2 * kFreeConnections * std::ldexp(1.0, steps);
}

unsigned DoorSources::Arrived(Source source, Clock::time_point now, bool* started) {
  State& s = sources_[source.key()];
  s.recent = std::min(Decayed(s, now) + 1, RecentCap());
  s.seen = now;
  const unsigned bits = BitsFor(s.recent);
  if (started != nullptr) *started = bits > 0 && !s.asked;
  s.asked = bits > 0;
  return bits;
}

bool DoorSources::SourceFull(Source source) const {
  auto it = sources_.find(source.key());
  return it != sources_.end() && it->second.places >= options_.max_per_source;
}

DoorSources::Source DoorSources::Heaviest(bool reserved) const {
  Source heaviest{0, reserved};
  size_t most = 0;
  for (const auto& [key, s] : sources_) {
    if ((key & 1) == (reserved ? 1u : 0u) && s.places > most) {
      most = s.places;
      heaviest.address = static_cast<uint32_t>(key >> 1);
    }
  }
  return heaviest;
}

void DoorSources::Hold(Source source) {
  sources_[source.key()].places++;
  pending_[source.reserved]++;
}

void DoorSources::Release(Source source) {
  auto it = sources_.find(source.key());
  if (it == sources_.end() || it->second.places == 0) return;
  it->second.places--;
  pending_[source.reserved]--;
}

void DoorSources::Wait(Source source, HelloTicket ticket) {
  State& s = sources_[source.key()];
  s.waiting.push_back(ticket);
  ++waiting_;
  if (!s.in_turn) {
    s.in_turn = true;
    turns_[source.reserved].push_back(source.key());
  }
}

void DoorSources::Forget(Source source, uint64_t conn) {
  auto it = sources_.find(source.key());
  if (it == sources_.end()) return;
  auto& q = it->second.waiting;
  auto t =
      std::find_if(q.begin(), q.end(), [conn](const HelloTicket& x) { return x.conn == conn; });
  if (t == q.end()) return;
  q.erase(t);
  --waiting_;
}

bool DoorSources::Next(HelloTicket* ticket, bool* reserved) {
  while (!turns_[0].empty() || !turns_[1].empty()) {
    // When both classes have hellos waiting, reserved ports get
    // kReservedTurns turns for each of the other class's.
    const bool both = !turns_[0].empty() && !turns_[1].empty();
    const bool r = both ? reserved_run_ < kReservedTurns : !turns_[1].empty();
    reserved_run_ = r ? std::min(reserved_run_ + 1, kReservedTurns) : 0;
    const uint64_t key = turns_[r].front();
    turns_[r].pop_front();
    auto it = sources_.find(key);
    if (it == sources_.end()) continue;
    State& s = it->second;
    if (s.waiting.empty()) {  // its hellos were closed meanwhile
      s.in_turn = false;
      continue;
    }
    *ticket = s.waiting.front();
    *reserved = r;
    s.waiting.pop_front();
    --waiting_;
    if (s.waiting.empty()) {
      s.in_turn = false;
    } else {
      turns_[r].push_back(key);  // its next hello waits for the next turn
    }
    return true;
  }
  return false;
}

unsigned DoorSources::Prune(Clock::time_point now) {
  unsigned most = 0;
  for (auto it = sources_.begin(); it != sources_.end();) {
    State& s = it->second;
    s.recent = Decayed(s, now);
    s.seen = now;
    if (s.places == 0 && s.waiting.empty() && !s.in_turn && s.recent < kForgotten) {
      it = sources_.erase(it);
    } else {
      s.asked = BitsFor(s.recent) > 0;
      most = std::max(most, BitsFor(s.recent));
      ++it;
    }
  }
  return most;
}

}  // namespace tierfs
