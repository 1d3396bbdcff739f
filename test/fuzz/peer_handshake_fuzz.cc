// Fuzz target: what reaches a peer connection from the network before and
// after authentication:
//   first byte % 4 == 0: bytes on the peer port, as the door reads them:
//       frames (FrameReader over a socket), each decoded as the frame the
//       door or the client expects next (greeting, hello, answer, bind,
//       bind answer under a fixed key);
//   == 1: a sealed message: the next byte is the header's size, then the
//       header, then the body; it is opened under a fixed key (a forgery
//       must never open), then sealed properly, altered at one byte the
//       input picks, and opened again;
//   == 2: sequence numbers (u64 each) for a ReplayWindow, checked against
//       a model: each is accepted once, never 0, never one too old to tell;
//   == 3: a sealed bind answer with the input as its address, altered at
//       one byte.
// It aborts on any breach of:
//   - a frame the door accepts re-encodes to its bytes (greeting, hello,
//     answer);
//   - nothing the input makes opens under a key it does not know;
//   - a sealed message or frame altered anywhere does not open, and opens
//     to its own bytes when it is not altered;
//   - the replay window agrees with its model.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "tiering/peers/secure/peer_handshake.h"
#include "tiering/peers/transport/peer_crypto.h"
#include "tiering/peers/transport/wire.h"

namespace tierfs {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "peer_handshake_fuzz: %s\n", what);
  std::abort();
}

PeerKey Key() {
  PeerKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 37 + 11);
  return k;
}

void Frames(std::string_view in) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  if (!in.empty()) {
    [[maybe_unused]] ssize_t n = ::send(fds[0], in.data(), in.size(), MSG_DONTWAIT);
  }
  ::shutdown(fds[0], SHUT_WR);
  FrameReader reader;
  for (int step = 0; step < 8; ++step) {
    FrameReader::Result r = reader.Feed(fds[1]);
    if (r != FrameReader::kDone) break;
    std::string_view f = reader.frame();
    if (f.empty() || f.size() > kMaxFrame) Fail("a frame out of bounds");
    PeerNonce nonce;
    std::string_view cred;
    int32_t refusal = 0;
    uint64_t session = 0;
    std::string address;
    unsigned bits = 0;
    uint64_t solution = 0;
    if (DecodeGreeting(f, &nonce, &bits) && EncodeGreeting(nonce, bits) != f)
      Fail("greeting re-encodes");
    if (DecodeHelloFrame(f, &cred, &solution) && EncodeHelloFrame(cred, solution) != f)
      Fail("hello re-encodes");
    if (DecodeAnswerFrame(f, &refusal, &cred) && EncodeAnswerFrame(refusal, cred) != f) {
      Fail("answer re-encodes");
    }
    if (DecodeBindFrame(f, Key())) Fail("a bind frame opened under a key it did not know");
    if (DecodeBindAnswerFrame(f, Key(), &session, &address)) Fail("a bind answer forged");
    reader.Reset();
  }
  ::close(fds[0]);
  ::close(fds[1]);
}

void Sealed(std::string_view in) {
  if (in.size() < 2) return;
  size_t flip = static_cast<uint8_t>(in[0]);
  size_t header_size = std::min<size_t>(static_cast<uint8_t>(in[1]), in.size() - 2);
  std::string_view header = in.substr(2, header_size);
  std::string body(in.substr(2 + header_size));
  PeerMessage m;
  if (DecodeHeader(header.data(), header.size(), body.size(), &m) != WireStatus::kOk) return;
  std::string out(body.size(), '\0');
  if (OpenWire(Key(), header.data(), header.size(), m.seq, body.data(), body.size(), out.data())) {
    Fail("a message from the input opened under a key it did not know");
  }
  WireHeader h{};
  std::memcpy(h.data(), header.data(), header.size());
  std::string sealed(body.size(), '\0');
  if (!SealWire(Key(), &h, header.size(), body.data(), body.size(), sealed.data())) return;
  if (!OpenWire(Key(), h.data(), header.size(), m.seq, sealed.data(), sealed.size(), out.data()) ||
      out != body) {
    Fail("a sealed message does not open to its bytes");
  }
  size_t total = header.size() + sealed.size();
  size_t at = flip % total;
  if (at < header.size())
    h[at] ^= 0x01;
  else
    sealed[at - header.size()] ^= 0x01;
  if (OpenWire(Key(), h.data(), header.size(), m.seq, sealed.data(), sealed.size(), out.data())) {
    Fail("an altered message opened");
  }
}

void Window(std::string_view in) {
  ReplayWindow w;
  std::set<uint64_t> seen;
  uint64_t highest = 0;
  for (size_t i = 0; i + 8 <= in.size(); i += 8) {
    uint64_t seq = 0;
    std::memcpy(&seq, in.data() + i, 8);
    seq %= 4096;  // small numbers, so that the window and repeats are reached
    bool model = seq != 0 && seen.count(seq) == 0 &&
                 (seq > highest || highest - seq < ReplayWindow::kWindow);
    if (w.Accept(seq) != model) Fail("the replay window disagrees with its model");
    if (model) {
      seen.insert(seq);
      highest = std::max(highest, seq);
    }
  }
}

void BindAnswer(std::string_view in) {
  if (in.size() < 2 || in.size() - 1 > kMaxWorkerAddress) return;
  std::string address(in.substr(1));
  std::string f = EncodeBindAnswerFrame(Key(), 99, address);
  uint64_t session = 0;
  std::string got;
  if (!DecodeBindAnswerFrame(f, Key(), &session, &got) || session != 99 || got != address) {
    Fail("a bind answer does not open to its bytes");
  }
  f[static_cast<uint8_t>(in[0]) % f.size()] ^= 0x20;
  if (DecodeBindAnswerFrame(f, Key(), &session, &got)) Fail("an altered bind answer opened");
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 70000) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      tierfs::Frames(in);
      break;
    case 1:
      tierfs::Sealed(in);
      break;
    case 2:
      tierfs::Window(in);
      break;
    default:
      tierfs::BindAnswer(in);
      break;
  }
  return 0;
}
