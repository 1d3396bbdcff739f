// The door's admission puzzle. Checking a hello costs the door a round
// trip to munged, and a user on a peer's host can send well-formed hellos
// (a credential of her own, made once and replayed) faster than munged
// answers, keeping the real peer from that address out. Under such a
// flood the door's greeting asks for work: a number whose SHA-256 with the
// greeting's nonce starts with `bits` zero bits, checked with one hash
// before the hello may wait for munged. A real peer pays it once per
// connection (2^bits hashes: a few ms at 16 bits); a flood pays it per
// hello. With no flood, bits is 0 and a hello costs nothing more.
#pragma once

#include <chrono>
#include <cstdint>

#include "tiering/peers/secure/peer_auth.h"

namespace tierfs {

inline constexpr unsigned kMaxPuzzleBits = 20;

// True if `solution` solves the puzzle of `nonce` at `bits` (always at 0).
bool PuzzleSolved(const PeerNonce& nonce, uint64_t solution, unsigned bits);
// A solution, found by `deadline`; false if none was (or libcrypto failed).
bool SolvePuzzle(const PeerNonce& nonce, unsigned bits,
                 std::chrono::steady_clock::time_point deadline, uint64_t* solution);

}  // namespace tierfs
