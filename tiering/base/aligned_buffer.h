// AlignedBuffer: a growable, page-aligned byte buffer. Reads into it from a
// file system that uses direct I/O (a PFS client, or FUSE with direct_io)
// arrive as whole requests: an unaligned 1 MiB buffer is split into two.
#pragma once

#include <cstdlib>
#include <memory>
#include <new>

namespace tierfs {

class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 4096;
  // A buffer of at least `size` bytes; contents are not kept when it grows.
  char* Get(size_t size) {
    if (size > size_) {
      void* p = nullptr;
      size_t rounded = (size + kAlign - 1) / kAlign * kAlign;
      if (::posix_memalign(&p, kAlign, rounded) != 0) throw std::bad_alloc();
      data_.reset(static_cast<char*>(p));
      size_ = rounded;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
};

}  // namespace tierfs
