// The RAM tier: each chunk is one heap buffer. Reads reply straight from it
// (no copy); a chunk removed while being read stays alive until the reply.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using Buffer = std::vector<char>;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Faults in the whole pages of a fresh buffer with one call: a cold epoch
// fills the tier with fresh memory, and a page fault per 4 KiB (on a
// virtual machine, each a trip through the hypervisor) cost the promotion
// threads more than the copies. Best effort: an older kernel says EINVAL and
// the pages fault in as they are written.
void Prefault(char* data, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (n < 16 * page) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

class MemoryTier final : public Tier {
 public:
  MemoryTier(std::string name, uint64_t budget) : Tier(std::move(name), Kind::kMemory, budget) {}

  int BeginStore(ChunkKey key, const ChunkOrigin& origin,
                 std::unique_ptr<ChunkWriter>* out) override;

  int Read(ChunkKey key, uint64_t off, size_t n, char*, TierRead* out) override {
    std::shared_ptr<const Buffer> buf;
    {
      std::shared_lock lock(mu_);
      auto it = chunks_.find(key);
      if (it == chunks_.end()) return -ENOENT;
      buf = it->second;
    }
    out->size = off >= buf->size() ? 0 : std::min<size_t>(n, buf->size() - off);
    out->data = buf->data() + std::min<size_t>(off, buf->size());
    out->hold = std::move(buf);
    return 0;
  }

  uint64_t Remove(ChunkKey key) override {
    std::shared_ptr<const Buffer> dropped;  // freed after the lock is released
    std::unique_lock lock(mu_);
    auto it = chunks_.find(key);
    if (it == chunks_.end()) return 0;
    dropped = std::move(it->second);
    chunks_.erase(it);
    return dropped->size();
  }

  size_t chunks() const override {
    std::shared_lock lock(mu_);
    return chunks_.size();
  }

  void Publish(ChunkKey key, std::shared_ptr<const Buffer> buf) {
    std::unique_lock lock(mu_);
    chunks_[key] = std::move(buf);
  }

 private:
  mutable std::shared_mutex mu_;  // guards chunks_; a leaf lock
  std::unordered_map<ChunkKey, std::shared_ptr<const Buffer>, ChunkKeyHash> chunks_;
};

class MemoryWriter final : public ChunkWriter {
 public:
  MemoryWriter(MemoryTier* tier, ChunkKey key, uint64_t length)
      : tier_(tier), key_(key), length_(length), buf_(std::make_shared<Buffer>()) {
    buf_->reserve(length);
    Prefault(buf_->data(), length);
  }
  int Append(const char* data, size_t n) override {
    if (!buf_ || buf_->size() + n > length_) return -EOVERFLOW;  // more than was reserved
    buf_->insert(buf_->end(), data, data + n);
    return 0;
  }
  int Commit() override {
    if (!buf_ || buf_->size() != length_) {  // incomplete
      Abort();
      return -EIO;
    }
    tier_->Publish(key_, std::move(buf_));
    return 0;
  }
  void Abort() override { buf_.reset(); }
  // The buffer was reserved whole: appending never moves its bytes.
  const char* Contents(std::shared_ptr<const void>* hold) override {
    if (!buf_) return nullptr;
    *hold = buf_;
    return buf_->data();
  }

 private:
  MemoryTier* const tier_;
  const ChunkKey key_;
  const uint64_t length_;
  std::shared_ptr<Buffer> buf_;
};

int MemoryTier::BeginStore(ChunkKey key, const ChunkOrigin& origin,
                           std::unique_ptr<ChunkWriter>* out) {
  try {
    *out = std::make_unique<MemoryWriter>(this, key, origin.length);
    return 0;
  } catch (const std::bad_alloc&) {
    return -ENOMEM;
  }
}

}  // namespace

std::unique_ptr<Tier> NewMemoryTier(std::string name, uint64_t budget) {
  return std::make_unique<MemoryTier>(std::move(name), budget);
}

}  // namespace tierfs
