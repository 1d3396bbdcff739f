// HookedTierIo: a FileIo for directory tier tests that runs a test's code at
// two points of a tier read, to force an interleaving: `after_open` once,
// just after a tier file (a path with "/data/f") is opened read-only (the
// open succeeded, the tier has not seen the file yet), and `in_read` once,
// inside a pread of a tier file (the chunk looked up, its bytes not yet
// read). Each hook is cleared before it runs. Not thread-safe: one reader.
#pragma once

#include <fcntl.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "tiering/io/file_io.h"
#include "wrapping_file_io.h"

namespace tierfs::testing {

class HookedTierIo final : public WrappingFileIo {
 public:
  HookedTierIo() : WrappingFileIo(NewPosixFileIo()) {}
  std::function<void()> after_open, in_read;

  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    int r = WrappingFileIo::open(path, flags, mode, out);
    const bool tier_read = (flags & O_ACCMODE) == O_RDONLY && path.find("/data/f") != path.npos;
    if (r == 0 && tier_read) {
      if (auto hook = std::exchange(after_open, nullptr)) hook();
    }
    return r;
  }

 private:
  std::unique_ptr<LocalFile> Wrap(std::unique_ptr<LocalFile> file) override {
    return std::make_unique<File>(this, std::move(file));
  }
  class File final : public LocalFileWrapper {
   public:
    File(HookedTierIo* io, std::unique_ptr<LocalFile> f)
        : LocalFileWrapper(std::move(f)), io_(io) {}
    ssize_t pread(void* buf, size_t n, uint64_t off) override {
      if (auto hook = std::exchange(io_->in_read, nullptr)) hook();
      return target()->pread(buf, n, off);
    }

   private:
    HookedTierIo* const io_;
  };
};

}  // namespace tierfs::testing
