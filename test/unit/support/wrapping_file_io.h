// WrappingFileIo: a FileIo for tests that forwards to a real one and hands
// out every file it opens wrapped (Wrap: a LocalFileWrapper subclass that
// changes what a test needs, e.g. a pread that runs a hook, a write that
// waits for company).
#pragma once

#include <memory>
#include <string>

#include "tiering/io/file_io.h"

namespace tierfs::testing {

class WrappingFileIo : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    std::unique_ptr<LocalFile> file;
    int r = target()->open(path, flags, mode, &file);
    if (r == 0) *out = Wrap(std::move(file));
    return r;
  }

 protected:
  virtual std::unique_ptr<LocalFile> Wrap(std::unique_ptr<LocalFile> file) = 0;
};

}  // namespace tierfs::testing
