#include "tiering/store/memory_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include "tiering/store/tier.h"

namespace tierfs {
namespace memory_files {
namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Asks for huge pages for a range of at least one huge page: the kernel
// (and passthrough readers) then copies from 2 MiB folios instead of 4 KiB
// pages. Only where the administrator allows it for shared memory
// (/sys/kernel/mm/transparent_hugepage/shmem_enabled "advise", or
// "within_size" / "always" without asking); elsewhere a no-op.
void AskHugePages(void* addr, uint64_t length) {
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  if (length >= kHuge) ::madvise(addr, length, MADV_HUGEPAGE);
}

}  // namespace

void Prefault(char* data, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (n < 16 * page) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

MemFile::~MemFile() {
  if (fd >= 0) ::close(fd);
  files->fetch_sub(1, std::memory_order_relaxed);
}

void MemFile::Free(uint64_t offset, uint64_t length) {
  ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
              static_cast<off_t>(length));
}

MemChunk::~MemChunk() {
  if (file) file->LetGo(chunk, gen, offset, size);
}

Mapping::~Mapping() { ::munmap(addr, length); }

// A memory file of `size` bytes, none allocated: 0 with *fd, or -errno.
// In `huge_fs` (NewHugePageMemoryFs) if it is open: an unnamed file there;
// else a memfd, whose growing and shrinking are sealed off. Either way no
// one but this daemon and the kernel (for passthrough) holds a descriptor.
int NewMemoryFile(uint64_t size, int huge_fs, int* fd) {
  int f = huge_fs >= 0 ? ::openat(huge_fs, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)
                       : ::memfd_create("tierfs-file", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (f < 0) return -errno;
  if (::ftruncate(f, static_cast<off_t>(size)) != 0 ||
      (huge_fs < 0 && ::fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)) {
    int err = -errno;
    ::close(f);
    return err;
  }
  *fd = f;
  return 0;
}

// Maps [offset, offset+length) of memory file `fd` for writing, its pages
// allocated (so the tier never fails for want of memory half-way): 0 with
// *map, or -errno. `by_file`: allocated through the file (fallocate), which
// a tmpfs with huge pages gives whole 2 MiB folios wherever the file's size
// covers them; a mapping's faults would not (its address is not aligned).
int MapRange(int fd, uint64_t offset, uint64_t length, bool by_file,
             std::shared_ptr<Mapping>* map) {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t skip = offset % page, span = skip + length;
  if (by_file && ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                             static_cast<off_t>(length)) != 0) {
    return -errno;
  }
  void* addr = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      static_cast<off_t>(offset - skip));
  if (addr == MAP_FAILED) return -errno;
  ::madvise(addr, span, MADV_DONTDUMP);  // users' bytes stay out of a core
  int err = 0;
  if (AskHugePages(addr, span), ::madvise(addr, span, MADV_POPULATE_WRITE) != 0) {
    // Before Linux 5.14 (EINVAL) allocate without mapping; a failure is
    // the want of memory.
    err = errno == EINVAL && ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                                         static_cast<off_t>(length)) == 0
              ? 0
              : -errno;
  }
  if (err == 0) {
    try {
      *map = std::make_shared<Mapping>(static_cast<char*>(addr), span, skip);
      return 0;
    } catch (const std::bad_alloc&) {
      err = -ENOMEM;
    }
  }
  ::munmap(addr, span);
  return err;
}

}  // namespace memory_files

int NewHugePageMemoryFs() {
  int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) return -errno;
  int mnt = -1;
  if (::fsconfig(fs, FSCONFIG_SET_STRING, "huge", "within_size", 0) == 0 &&
      ::fsconfig(fs, FSCONFIG_SET_STRING, "size", "0", 0) == 0 &&  // the tier's budget bounds it
      ::fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) == 0 &&
      ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) == 0) {
    mnt = ::fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  }
  const int err = mnt < 0 ? -errno : 0;
  ::close(fs);
  return mnt < 0 ? err : mnt;
}

}  // namespace tierfs
