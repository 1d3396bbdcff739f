// MountFailure, ExitStatus, SourceBlame and PathBlame: whose a failed mount
// is, said by its exit status (the Slurm prolog acts on it: the job's
// SOURCE, MOUNTPOINT or tier paths are not the node's failure; SOURCE's file
// system failing is).
#include "fs/mount/mount_failure.h"

#include <catch2/catch.hpp>

namespace tierfs {
namespace {

TEST_CASE("Each party a failed mount is blamed on has its own exit status", "[mount]") {
  CHECK(ExitStatus(Blame::kNone) == 0);
  CHECK(ExitStatus(Blame::kMachine) == 1);
  CHECK(ExitStatus(Blame::kCommandLine) == 2);
  CHECK(ExitStatus(Blame::kSource) == 3);
  CHECK(ExitStatus(Blame::kMountpoint) == 4);
  CHECK(ExitStatus(Blame::kPath) == 5);
  CHECK(ExitStatus(Blame::kSourceIo) == 6);
}

TEST_CASE("SOURCE's I/O-class errors are its file system's failure, the rest SOURCE's", "[mount]") {
  for (int code : {EIO, ESTALE, ETIMEDOUT, ENOTCONN, EHOSTDOWN, EHOSTUNREACH, ECONNABORTED,
                   ECONNRESET, ENOLINK, EREMOTEIO}) {
    INFO(code);
    CHECK(SourceBlame(code) == Blame::kSourceIo);
  }
  for (int code : {EACCES, EPERM, ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG, EINVAL, 0}) {
    INFO(code);
    CHECK(SourceBlame(code) == Blame::kSource);
  }
  const MountFailure f = SourceFailure(Status::Error(EIO, "cannot list SOURCE"));
  CHECK(f.blame == Blame::kSourceIo);
  CHECK(ExitStatus(f.blame) == 6);
  CHECK(SourceFailure(Status::Error(ENOENT, "x")).blame == Blame::kSource);
  CHECK_FALSE(SourceFailure(Status::Ok()));
}

TEST_CASE("A tier or index directory's state is the path's failure, its device the machine's",
          "[mount]") {
  for (int code : {ENOENT, ENOTDIR, ELOOP, EACCES, EPERM, EROFS, ENOSPC, EDQUOT, EBUSY}) {
    INFO(code);
    CHECK(PathBlame(code) == Blame::kPath);
  }
  CHECK(PathBlame(EINVAL) == Blame::kCommandLine);
  CHECK(PathBlame(EIO) == Blame::kMachine);
  CHECK(PathBlame(ENOMEM) == Blame::kMachine);
}

TEST_CASE("Blamed is no failure for an ok Status, else the Status's message", "[mount]") {
  CHECK_FALSE(Blamed(Blame::kSource, Status::Ok()));
  const MountFailure f = Blamed(Blame::kMountpoint, Status::Error(EACCES, "'/m' is not yours"));
  REQUIRE(f);
  CHECK(f.blame == Blame::kMountpoint);
  CHECK(f.message == "'/m' is not yours");
  CHECK_FALSE(MountFailure{});
}

}  // namespace
}  // namespace tierfs
