// The unit test runners' main. Under ThreadSanitizer, UCX (linked by the
// runners of peer, engine, planners and fs: TIERFS_TEST_LINKS_UCX) must not
// patch libc: libucm rewrites the entry of mmap, munmap, madvise and brk
// when it is loaded ("bistro" hooks, for its RDMA registration cache), and
// any thread that exits then crashes inside TSan's interceptors. libucm
// reads its options at load time, before main, so such a runner
// re-executes itself once with the hooks off. The core's runners (base, io,
// namespace, source, store) do not link UCX and run as they are.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

int main(int argc, char* argv[]) {
#if defined(__SANITIZE_THREAD__) && defined(TIERFS_TEST_LINKS_UCX)
  if (std::getenv("UCX_MEM_MMAP_HOOK_MODE") == nullptr) {
    ::setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 1);
    ::execv("/proc/self/exe", argv);  // returns only if it failed: run as we are
  }
#endif
  return Catch::Session().run(argc, argv);
}
