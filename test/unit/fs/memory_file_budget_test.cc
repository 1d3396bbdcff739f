// The RAM tier's memory files and the open-file limit: what a mount lets
// the RAM tier keep leaves room for every other descriptor it may keep
// (SOURCE's open files and directories, a directory tier's read files, the
// reserve for the rest), so that no cache filling up makes another's open
// fail with EMFILE.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <vector>

#include "fs/fuse/passthrough_backing.h"
#include "temp_tree.h"
#include "tiering/io/backend.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using testing::TempTree;

TEST_CASE("memory files fit the open-file limit beside what SOURCE and the tiers keep open",
          "[passthrough]") {
  rlimit was{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &was) == 0);
  if (was.rlim_max < 16384) {
    WARN("skipped: RLIMIT_NOFILE's hard limit is below 16384");
    return;
  }
  // A limit at which SOURCE keeps its most directories (4,096: an eighth)
  // and a directory tier its most read files (256).
  rlimit raised{65536, was.rlim_max};
  if (raised.rlim_max < raised.rlim_cur) raised.rlim_cur = raised.rlim_max;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &raised) == 0);
  TempTree source_dir, tier_dir;
  Result<std::unique_ptr<Backend>> source = NewPosixBackend(source_dir.root());
  REQUIRE(source.ok());
  Result<std::unique_ptr<DirectoryTier>> tier = OpenDirectoryTier("d", tier_dir.root(), 1 << 20,
                                                                  /*reset=*/false);
  REQUIRE(tier.ok());
  const uint64_t limit = raised.rlim_cur;
  const uint64_t max_open = limit / 2;  // the default max_open_files
  const uint64_t budget =
      MemoryFileBudget(limit, max_open, **source, std::vector<Tier*>{tier->get()});
  const uint64_t dirs = (*source)->kept_descriptors();
  const uint64_t tier_files = (*tier)->kept_descriptors();
  INFO("limit " << limit << ", SOURCE files " << max_open << ", directories " << dirs
                << ", tier files " << tier_files << ", memory files " << budget);
  CHECK(dirs == std::min<uint64_t>(limit / 8, 4096));
  CHECK(tier_files == std::min<uint64_t>(limit / 32, 256));
  CHECK(budget > 0);
  CHECK(max_open + dirs + tier_files + budget + kReservedDescriptors <= limit);
  // Nothing left: no memory files (passthrough then opens SOURCE's files).
  CHECK(MemoryFileBudget(limit, limit - 1000, **source, std::vector<Tier*>{tier->get()}) == 0);
  ::setrlimit(RLIMIT_NOFILE, &was);
}

}  // namespace
}  // namespace tierfs
