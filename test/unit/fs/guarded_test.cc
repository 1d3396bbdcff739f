// RunGuarded, the catching half of Guarded: whatever a FUSE handler's body
// throws becomes an errno to reply, never an exception into libfuse (which
// would end the daemon).
#include <catch2/catch.hpp>
#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>

#include "fs/fuse/handler.h"

namespace tierfs {
namespace {

struct NotAStdException {
  int code;
};

TEST_CASE("RunGuarded returns 0 for a body that returns", "[guarded]") {
  bool ran = false;
  CHECK(RunGuarded("lookup", [&] { ran = true; }) == 0);
  CHECK(ran);
}

TEST_CASE("RunGuarded turns std::bad_alloc into ENOMEM", "[guarded]") {
  CHECK(RunGuarded("read", [] { throw std::bad_alloc(); }) == ENOMEM);
}

TEST_CASE("RunGuarded turns a std::exception into EIO", "[guarded]") {
  CHECK(RunGuarded("read", [] { throw std::runtime_error("broken"); }) == EIO);
  CHECK(RunGuarded("read", [] { throw std::out_of_range("far"); }) == EIO);
}

TEST_CASE("RunGuarded turns exceptions that are not std::exception into EIO", "[guarded]") {
  CHECK(RunGuarded("getattr", [] { throw 42; }) == EIO);
  CHECK(RunGuarded("getattr", [] { throw NotAStdException{7}; }) == EIO);
  CHECK(RunGuarded("getattr", [] { throw std::string("a string"); }) == EIO);
  CHECK(RunGuarded("getattr", [] { throw "a literal"; }) == EIO);
}

}  // namespace
}  // namespace tierfs
