// System calls shared by the POSIX backend and the POSIX FileIo, each turning
// errno into -errno once, next to the call, and retrying EINTR.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>

namespace tierfs {

inline int PosixError() { return -errno; }

// Reads up to n bytes at off, looping over short reads. Returns the byte
// count (short only at EOF) or -errno.
inline ssize_t PreadFull(int fd, void* buf, size_t n, uint64_t off) {
  size_t done = 0;
  char* p = static_cast<char*>(buf);
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return PosixError();
    }
    if (r == 0) break;  // EOF
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

// Calls visit(name) (returning 0 or -errno) for each entry of `dir` but "."
// and "..", stopping at the first error. Returns 0 or -errno (from readdir or
// from visit).
template <typename Visit>
int ForEachEntry(DIR* dir, Visit visit) {
  while (true) {
    errno = 0;
    struct dirent* de = ::readdir(dir);
    if (de == nullptr) return errno != 0 ? PosixError() : 0;
    std::string_view name(de->d_name);
    if (name == "." || name == "..") continue;
    if (int err = visit(de->d_name); err < 0) return err;
  }
}

}  // namespace tierfs
