// The unit test runner. Under ThreadSanitizer, UCX (linked for the peer
// tests) must not patch libc: libucm rewrites the entry of mmap, munmap,
// madvise and brk when it is loaded ("bistro" hooks, for its RDMA
// registration cache), and any thread that exits then crashes inside
// TSan's interceptors. libucm reads its options at load time, before
// main, so the runner re-executes itself once with the hooks off.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

int main(int argc, char* argv[]) {
#if defined(__SANITIZE_THREAD__)
  if (std::getenv("UCX_MEM_MMAP_HOOK_MODE") == nullptr) {
    ::setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 1);
    ::execv("/proc/self/exe", argv);  // returns only if it failed: run as we are
  }
#endif
  return Catch::Session().run(argc, argv);
}
