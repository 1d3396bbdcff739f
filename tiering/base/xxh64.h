#pragma once
// XXH64 (seed 0), the 64-bit xxHash: the saved index's checksums and the
// peers' rendezvous hashes. Both are contracts (files on disk, nodes of one
// job computing alike), so the function must never change.
#include <cstddef>
#include <cstdint>

namespace tierfs {

uint64_t Xxh64(const void* data, size_t size);

}  // namespace tierfs
