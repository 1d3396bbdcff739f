// Status and Result: the cold path's one error shape.
#include "tiering/base/status.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace tierfs {
namespace {

TEST_CASE("Status is ok or an errno with a message", "[status]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.code() == 0);
  CHECK(ok.message().empty());
  CHECK(ok.ToString() == "ok");
  CHECK(ok.Context("tier '/t'").ok());

  Status e = Status::Error(ENOSPC, "tier '/t': no room for the index");
  CHECK_FALSE(e.ok());
  CHECK(e.code() == ENOSPC);
  CHECK(e.ToString() == "tier '/t': no room for the index");
  Status c = e.Context("mount");
  CHECK(c.code() == ENOSPC);
  CHECK(c.message() == "mount: tier '/t': no room for the index");

  // An error is never ok, whatever code it was given.
  CHECK(Status::Error(0, "x").code() == EIO);
  CHECK(Status::Error(-5, "x").code() == EIO);

  Status f = Status::FromErrno(EACCES, "cannot open '/t/lock'");
  CHECK(f.code() == EACCES);
  CHECK(f.message() == "cannot open '/t/lock': Permission denied");
}

TEST_CASE("Result holds a value or the Status saying why not", "[status]") {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  REQUIRE(r.ok());
  CHECK(r.status().ok());
  CHECK(**r == 7);
  std::unique_ptr<int> taken = std::move(r).value();
  CHECK(*taken == 7);

  Result<std::string> bad(Status::Error(ENOENT, "no such tier"));
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().code() == ENOENT);
  CHECK(bad.status().message() == "no such tier");

  // A Result made of an ok Status has no value: it must still say it failed.
  Result<int> odd(Status::Ok());
  CHECK_FALSE(odd.ok());
  CHECK_FALSE(odd.status().ok());
}

}  // namespace
}  // namespace tierfs
