// FsCredentials: a switch of a thread's file-system credentials, there and
// back, leaves the process not dumpable even where the kernel's reset on a
// credential change would make it dumpable (fs.suid_dumpable = 2).
#include "tiering/io/fs_credentials.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/backend.h"

namespace tierfs {
namespace {

constexpr char kSuidDumpable[] = "/proc/sys/fs/suid_dumpable";

// fs.suid_dumpable set to a value while alive, then put back.
class SuidDumpable {
 public:
  explicit SuidDumpable(const std::string& value) {
    std::ifstream in(kSuidDumpable);
    if (!(in >> saved_)) return;
    set_ = Write(value);
  }
  ~SuidDumpable() {
    if (set_) Write(saved_);
  }
  bool set() const { return set_; }

 private:
  static bool Write(const std::string& value) {
    std::ofstream out(kSuidDumpable);
    out << value << '\n';
    out.close();
    return static_cast<bool>(out);
  }
  std::string saved_;
  bool set_ = false;
};

// The process not dumpable, as the daemon makes itself; dumpable again after.
struct Undumpable {
  Undumpable() { ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
  ~Undumpable() { ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); }
};

TEST_CASE("Regression: a permission check as a caller leaves a root daemon not dumpable",
          "[fs_credentials]") {
  if (::geteuid() != 0) {
    WARN("skipped: only root switches to a caller's credentials");
    return;
  }
  SuidDumpable two("2");
  if (!two.set()) {
    WARN("skipped: " << kSuidDumpable << " cannot be written");
    return;
  }
  testing::TempTree source;
  source.Write("f", "another user's bytes");
  auto backend = RequireOk(NewPosixBackend(source.root()));
  Undumpable daemon;
  REQUIRE(::prctl(PR_GET_DUMPABLE) == 0);

  const AccessCaller nobody{65534, 65534, {65534}};
  const int r = backend->access_as("f", nobody, R_OK);  // as SourcePermissions asks
  CHECK((r == 0 || r == -EACCES));
  CHECK(::prctl(PR_GET_DUMPABLE) == 0);

  {
    FsCredentials as(65534, 65534, {65534});
    REQUIRE(as.status().ok());
    CHECK(static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) == 65534);
    CHECK(::prctl(PR_GET_DUMPABLE) == 0);
  }
  CHECK(static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) == 0);
  CHECK(::prctl(PR_GET_DUMPABLE) == 0);
}

}  // namespace
}  // namespace tierfs
