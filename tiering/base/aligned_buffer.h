// AlignedBuffer: a growable, page-aligned byte buffer. Reads into it from a
// file system that uses direct I/O (a PFS client, or FUSE with direct_io)
// arrive as whole requests: an unaligned 1 MiB buffer is split into two.
// Its bytes are left out of core dumps (UndumpedMemory).
#pragma once

#include "tiering/base/undumped_memory.h"

namespace tierfs {

class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 4096;
  // A buffer of at least `size` bytes; contents are not kept when it grows.
  char* Get(size_t size) {
    if (size > size_) {
      size_t rounded = (size + kAlign - 1) / kAlign * kAlign;
      data_.reset();  // the old one first: never both at once
      size_ = 0;
      data_ = MapUndumped(rounded);
      size_ = rounded;
    }
    return data_.get();
  }

 private:
  UndumpedMemory data_;
  size_t size_ = 0;
};

}  // namespace tierfs
