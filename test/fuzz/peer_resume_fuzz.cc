// Fuzz target: session resumption (session_resumption.h), what a door and
// a client read from the network for it, against a store holding one
// ticket (a fixed secret, filed for "a"):
//   first byte % 3 == 0: the rest is a frame as the door reads it after a
//       greeting: decoded as a Resume (and checked against the store) and
//       as a Resumed answer (opened under a fixed key);
//   == 1: a real Resume of the ticket, its names taken from the input
//       (bytes 3.., split at byte 1 and 2), altered at the byte the input's
//       next byte picks (0: not altered), checked against the store;
//   == 2: a real Resumed answer with the input as the worker's address,
//       altered at one byte.
// It aborts on any breach of:
//   - a Resume the door decodes re-encodes to its bytes;
//   - nothing the input makes verifies against the store, and nothing it
//     makes opens under a key it does not know;
//   - an altered Resume or answer is refused, an unaltered one accepted
//     once (then refused as a replay), with keys both sides agree on.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tiering/peers/secure/session_resumption.h"

namespace tierfs {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "peer_resume_fuzz: %s\n", what);
  std::abort();
}

PeerKey Fixed(uint8_t seed) {
  PeerKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 37 + seed);
  return k;
}
PeerNonce Greeting() {
  PeerNonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(i + 1);
  return n;
}
const PeerIdentity kServer{"job-1", "b", 0, 0};

ResumeTicket Ticket() {
  return TicketOf(Fixed(11), std::chrono::steady_clock::now() + std::chrono::hours(1));
}

void Raw(std::string_view f) {
  TicketStore store;
  store.Issue(Fixed(11), "a");
  ResumeRequest r;
  if (DecodeResumeFrame(f, &r)) {
    if (!IsResumeFrame(f)) Fail("a Resume without its magic decoded");
    if (EncodeResumeFrame(r) != f) Fail("a Resume does not re-encode to its bytes");
    if (!store.Resume(kServer, Greeting(), f, r).refusal) Fail("a Resume from the input verified");
  }
  std::optional<ResumeRefusal> refusal;
  PeerKey server_key;
  uint64_t session = 0;
  std::string address;
  if (DecodeResumedFrame(f, &refusal, &server_key) && !refusal &&
      OpenResumedFrame(f, Fixed(3), &session, &address)) {
    Fail("a Resumed answer opened under a key it did not know");
  }
}

void Made(std::string_view in) {
  if (in.size() < 3) return;
  const size_t cut1 = static_cast<uint8_t>(in[0]), cut2 = static_cast<uint8_t>(in[1]);
  const size_t flip = static_cast<uint8_t>(in[2]);
  std::string_view names = in.substr(3);
  const std::string job(names.substr(0, std::min(cut1, names.size())));
  names.remove_prefix(job.size());
  const std::string from(names.substr(0, std::min(cut2, names.size())));
  const std::string to(names.substr(from.size()));
  TicketStore store;
  store.Issue(Fixed(11), from);
  const ResumeTicket ticket = Ticket();
  ResumeAttempt a;
  if (!StartResume(ticket, Greeting(), flip, PeerIdentity{job, from, 0, 0}, to, &a)) return;
  std::string frame = a.frame;
  if (flip != 0) frame[flip % frame.size()] ^= 0x10;
  ResumeRequest r;
  if (!DecodeResumeFrame(frame, &r)) return;  // a length byte altered
  const PeerIdentity server{job, to, 0, 0};
  TicketStore::Resumed s = store.Resume(server, Greeting(), frame, r);
  if (flip != 0 && !s.refusal) Fail("an altered Resume verified");
  if (flip != 0) return;
  if (s.refusal) Fail("a real Resume was refused");
  SessionKeys mine;
  if (!ResumedKeys(ticket, Greeting(), a, s.server_key, &mine) || mine.send != s.keys.recv ||
      mine.recv != s.keys.send || mine.resume != s.keys.resume) {
    Fail("the two sides' keys differ");
  }
  if (store.Resume(server, Greeting(), frame, r).refusal != ResumeRefusal::kReplayed) {
    Fail("a spent ticket resumed again");
  }
}

void Answer(std::string_view in) {
  if (in.size() < 2 || in.size() - 1 > 4096) return;
  const std::string address(in.substr(1));
  std::string f = EncodeResumedFrame(std::nullopt, Fixed(5), 77, Fixed(6), address);
  uint64_t session = 0;
  std::string got;
  if (!OpenResumedFrame(f, Fixed(6), &session, &got) || session != 77 || got != address) {
    Fail("a Resumed answer does not open to its bytes");
  }
  f[static_cast<uint8_t>(in[0]) % f.size()] ^= 0x20;
  if (OpenResumedFrame(f, Fixed(6), &session, &got)) Fail("an altered Resumed answer opened");
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 9000) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      tierfs::Raw(in);
      break;
    case 1:
      tierfs::Made(in);
      break;
    default:
      tierfs::Answer(in);
      break;
  }
  return 0;
}
