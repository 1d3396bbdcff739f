// MountFailure and ExitStatus: whose a failed mount is, said by its exit
// status (the Slurm prolog acts on 3 and 4: the job's SOURCE or MOUNTPOINT,
// not the node).
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
