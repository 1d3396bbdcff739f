#include "fs/fuse/parallel_dirops.h"

#include <linux/fuse.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

namespace tierfs {
namespace {

// An INIT request as the kernel writes it, offering `flags` (and `flags2`,
// the upper half of the 64-bit flags, which need FUSE_INIT_EXT).
std::vector<char> InitRequest(uint64_t unique, uint32_t flags, uint32_t flags2 = 0) {
  fuse_in_header in{};
  fuse_init_in init{};
  in.len = sizeof in + sizeof init;
  in.opcode = FUSE_INIT;
  in.unique = unique;
  init.major = FUSE_KERNEL_VERSION;
  init.minor = FUSE_KERNEL_MINOR_VERSION;
  init.flags = flags;
  init.flags2 = flags2;
  std::vector<char> msg(sizeof in + sizeof init);
  std::memcpy(msg.data(), &in, sizeof in);
  std::memcpy(msg.data() + sizeof in, &init, sizeof init);
  return msg;
}

// A pipe standing in for /dev/fuse: what the patch sends, read back.
struct Wire {
  int fds[2] = {-1, -1};
  Wire() { REQUIRE(::pipe(fds) == 0); }
  ~Wire() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // Sends a reply of header + `body` through `patch`, as libfuse does (two
  // iovecs), and returns the bytes that reached the other end.
  std::vector<char> Send(InitReplyPatch& patch, uint64_t unique, int32_t error, const void* body,
                         size_t body_len) {
    fuse_out_header out{};
    out.len = static_cast<uint32_t>(sizeof out + body_len);
    out.error = error;
    out.unique = unique;
    iovec iov[2] = {{&out, sizeof out}, {const_cast<void*>(body), body_len}};
    REQUIRE(patch.Writev(fds[1], iov, body_len > 0 ? 2 : 1) == static_cast<ssize_t>(out.len));
    std::vector<char> got(out.len);
    REQUIRE(::read(fds[0], got.data(), got.size()) == static_cast<ssize_t>(got.size()));
    return got;
  }
};

fuse_init_out InitOf(const std::vector<char>& reply) {
  fuse_init_out init;
  REQUIRE(reply.size() >= sizeof(fuse_out_header) + sizeof init);
  std::memcpy(&init, reply.data() + sizeof(fuse_out_header), sizeof init);
  return init;
}

uint32_t FlagsOf(const std::vector<char>& reply) { return InitOf(reply).flags; }

constexpr uint32_t kInitExt = 1u << 30;              // FUSE_INIT_EXT
constexpr uint32_t kPassthrough2 = 1u << (37 - 32);  // FUSE_PASSTHROUGH in flags2

TEST_CASE("the INIT reply gains FUSE_PARALLEL_DIROPS when the kernel offered it",
          "[parallel_dirops]") {
  InitReplyPatch patch;
  Wire wire;
  auto request = InitRequest(42, FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS);
  patch.OnRequest(request.data(), request.size());
  fuse_init_out init{};
  init.major = FUSE_KERNEL_VERSION;
  init.flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES;
  init.max_write = 1 << 20;
  auto reply = wire.Send(patch, 42, 0, &init, sizeof init);
  CHECK(FlagsOf(reply) == (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_PARALLEL_DIROPS));
  CHECK(patch.negotiated());
  // Everything but the flags is sent as libfuse made it.
  fuse_init_out sent;
  std::memcpy(&sent, reply.data() + sizeof(fuse_out_header), sizeof sent);
  CHECK(sent.max_write == 1u << 20);
  CHECK(sent.major == FUSE_KERNEL_VERSION);
}

TEST_CASE("the INIT reply is left alone when the kernel did not offer parallel dirops",
          "[parallel_dirops]") {
  InitReplyPatch patch;
  Wire wire;
  auto request = InitRequest(7, FUSE_ASYNC_READ);
  patch.OnRequest(request.data(), request.size());
  fuse_init_out init{};
  init.flags = FUSE_ASYNC_READ;
  CHECK(FlagsOf(wire.Send(patch, 7, 0, &init, sizeof init)) == FUSE_ASYNC_READ);
  CHECK_FALSE(patch.negotiated());
}

TEST_CASE("other replies and a failed INIT pass through unchanged", "[parallel_dirops]") {
  InitReplyPatch patch;
  Wire wire;
  // Before any INIT: a reply is sent as is.
  fuse_init_out look_alike{};
  look_alike.flags = 1;
  CHECK(FlagsOf(wire.Send(patch, 5, 0, &look_alike, sizeof look_alike)) == 1);
  auto request = InitRequest(9, FUSE_PARALLEL_DIROPS);
  patch.OnRequest(request.data(), request.size());
  // A reply to another request with the same shape is not touched.
  CHECK(FlagsOf(wire.Send(patch, 10, 0, &look_alike, sizeof look_alike)) == 1);
  // The INIT failed (an error reply has no body): nothing is added.
  auto failed = wire.Send(patch, 9, -EPROTO, nullptr, 0);
  CHECK(failed.size() == sizeof(fuse_out_header));
  CHECK_FALSE(patch.negotiated());
  // After the INIT reply nothing more is watched, even a second INIT.
  auto again = InitRequest(11, FUSE_PARALLEL_DIROPS);
  patch.OnRequest(again.data(), again.size());
  CHECK(FlagsOf(wire.Send(patch, 11, 0, &look_alike, sizeof look_alike)) == 1);
}

TEST_CASE("a short or foreign request is not taken for INIT", "[parallel_dirops]") {
  InitReplyPatch patch;
  Wire wire;
  auto request = InitRequest(3, FUSE_PARALLEL_DIROPS);
  patch.OnRequest(request.data(), sizeof(fuse_in_header) + 4);  // cut before the flags
  fuse_in_header lookup{};
  lookup.opcode = FUSE_LOOKUP;
  lookup.unique = 3;
  std::vector<char> buf(sizeof lookup + sizeof(fuse_init_in));
  std::memcpy(buf.data(), &lookup, sizeof lookup);
  patch.OnRequest(buf.data(), buf.size());
  fuse_init_out init{};
  CHECK(FlagsOf(wire.Send(patch, 3, 0, &init, sizeof init)) == 0);
  CHECK_FALSE(patch.negotiated());
}

TEST_CASE("the INIT reply asks for passthrough when wanted and offered", "[parallel_dirops]") {
  fuse_init_out init{};
  init.flags = FUSE_ASYNC_READ | FUSE_MAX_PAGES;
  init.max_pages = 256;
  SECTION("wanted and offered: FUSE_INIT_EXT, the flags2 bit, max_stack_depth 1") {
    InitReplyPatch patch;
    Wire wire;
    patch.WantPassthrough(true);
    auto request = InitRequest(4, FUSE_ASYNC_READ | kInitExt, kPassthrough2);
    patch.OnRequest(request.data(), request.size());
    CHECK(patch.passthrough_offered());
    fuse_init_out sent = InitOf(wire.Send(patch, 4, 0, &init, sizeof init));
    CHECK(sent.flags == (FUSE_ASYNC_READ | FUSE_MAX_PAGES | kInitExt));
    CHECK(sent.flags2 == kPassthrough2);
    CHECK(sent.unused[0] == 1);  // max_stack_depth
    CHECK(patch.passthrough_negotiated());
    CHECK(patch.max_pages_replied() == 256);
  }
  SECTION("not offered (no FUSE_INIT_EXT, or no flag): left alone") {
    for (auto [flags, flags2] : {std::pair{uint32_t{FUSE_ASYNC_READ}, kPassthrough2},
                                 std::pair{FUSE_ASYNC_READ | kInitExt, 0u}}) {
      InitReplyPatch patch;
      Wire wire;
      patch.WantPassthrough(true);
      auto request = InitRequest(4, flags, flags2);
      patch.OnRequest(request.data(), request.size());
      CHECK_FALSE(patch.passthrough_offered());
      fuse_init_out sent = InitOf(wire.Send(patch, 4, 0, &init, sizeof init));
      CHECK(sent.flags2 == 0);
      CHECK(sent.unused[0] == 0);
      CHECK_FALSE(patch.passthrough_negotiated());
    }
  }
  SECTION("offered, not wanted: left alone") {
    InitReplyPatch patch;
    Wire wire;
    auto request = InitRequest(4, kInitExt, kPassthrough2);
    patch.OnRequest(request.data(), request.size());
    fuse_init_out sent = InitOf(wire.Send(patch, 4, 0, &init, sizeof init));
    CHECK(sent.flags == (FUSE_ASYNC_READ | FUSE_MAX_PAGES));
    CHECK(sent.flags2 == 0);
    CHECK_FALSE(patch.passthrough_negotiated());
  }
  SECTION("max_pages raised to the limit given, never lowered") {
    for (auto [limit, want] : {std::pair{4096, 4096}, std::pair{16, 256}, std::pair{0, 256}}) {
      InitReplyPatch patch;
      Wire wire;
      patch.SetMaxPages(static_cast<uint16_t>(limit));
      auto request = InitRequest(4, FUSE_MAX_PAGES);
      patch.OnRequest(request.data(), request.size());
      CHECK(InitOf(wire.Send(patch, 4, 0, &init, sizeof init)).max_pages == want);
      CHECK(patch.max_pages_replied() == want);
    }
  }
}

TEST_CASE("an OPEN reply announced on this thread carries the backing id", "[parallel_dirops]") {
  InitReplyPatch patch;
  Wire wire;
  fuse_open_out open{};
  open.fh = 2;
  open.open_flags = FOPEN_KEEP_CACHE;
  InitReplyPatch::PassThroughNextOpen(17);
  auto sent = wire.Send(patch, 30, 0, &open, sizeof open);
  fuse_open_out got;
  std::memcpy(&got, sent.data() + sizeof(fuse_out_header), sizeof got);
  CHECK(got.fh == 2);
  CHECK(got.open_flags == (1u << 7));  // FOPEN_PASSTHROUGH alone: not with keep_cache
  CHECK(got.padding == 17);            // backing_id since protocol 7.40
  // Once only: the next reply of the same shape is sent as written.
  sent = wire.Send(patch, 31, 0, &open, sizeof open);
  std::memcpy(&got, sent.data() + sizeof(fuse_out_header), sizeof got);
  CHECK(got.open_flags == FOPEN_KEEP_CACHE);
  CHECK(got.padding == 0);
  // Cleared by the handler after its reply: nothing is patched.
  InitReplyPatch::PassThroughNextOpen(5);
  InitReplyPatch::PassThroughNextOpen(-1);
  sent = wire.Send(patch, 32, 0, &open, sizeof open);
  std::memcpy(&got, sent.data() + sizeof(fuse_out_header), sizeof got);
  CHECK(got.padding == 0);
}

}  // namespace
}  // namespace tierfs
