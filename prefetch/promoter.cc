#include "prefetch/promoter.h"

#include <cerrno>
#include <cstring>

#include "tiering/aligned_buffer.h"
#include "tiering/log.h"

namespace tierfs {

Promoter::Promoter(const Namespace* ns, Catalog* catalog, std::vector<Tier*> tiers,
                   PlacementPolicy* policy, SourceReader* source, Executor* executor)
    : ns_(ns),
      catalog_(catalog),
      tiers_(std::move(tiers)),
      policy_(policy),
      source_(source),
      executor_(executor) {}

bool Promoter::Request(ChunkKey key, Executor::Lane lane) {
  if (catalog_->state(key) != Catalog::kOnSource) return false;  // cheap check first
  const uint64_t length = catalog_->length(key.node, key.chunk);
  if (length == 0 || !catalog_->TryBegin(key)) return false;
  int tier = policy_->Place(key, length);
  if (tier < 0) {
    counters_.no_room.fetch_add(1, std::memory_order_relaxed);
    catalog_->Abort(key);
    return false;
  }
  Executor::Job job{[this, key, tier] { Run(key, tier); },
                    [this, key, tier, length] {
                      tiers_[static_cast<size_t>(tier)]->Release(length);
                      policy_->Abandoned(key, tier);
                      catalog_->Abort(key);
                    }};
  if (!executor_->Submit(lane, std::move(job))) {
    counters_.rejected.fetch_add(1, std::memory_order_relaxed);
    tiers_[static_cast<size_t>(tier)]->Release(length);
    policy_->Abandoned(key, tier);
    catalog_->Abort(key);
    return false;
  }
  counters_.requested.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Promoter::Run(ChunkKey key, int tier_index) {
  Tier* tier = tiers_[static_cast<size_t>(tier_index)];
  const Node& node = ns_->node(key.node);
  ChunkOrigin origin{ns_->Path(key.node), node.size, node.mtime_ns, key.chunk,
                     catalog_->length(key.node, key.chunk)};
  std::unique_ptr<ChunkWriter> writer;
  int err = tier->BeginStore(key, origin, &writer);
  if (err < 0) return Fail(key, tier_index, "cannot start writing", err);
  thread_local AlignedBuffer aligned;
  char* buf;
  try {
    buf = aligned.Get(kReadSize);
  } catch (const std::bad_alloc&) {
    return Fail(key, tier_index, "no memory for the copy buffer", -ENOMEM);
  }
  const uint64_t start = static_cast<uint64_t>(key.chunk) * catalog_->chunk_size();
  for (uint64_t done = 0; done < origin.length;) {
    if (executor_->stopping()) return Fail(key, tier_index, "cancelled at shutdown", -ECANCELED);
    size_t want = static_cast<size_t>(std::min<uint64_t>(kReadSize, origin.length - done));
    ssize_t n = source_->Read(key.node, buf, want, start + done);
    if (n < 0) return Fail(key, tier_index, "SOURCE read failed", static_cast<int>(n));
    if (static_cast<size_t>(n) != want) return Fail(key, tier_index, "SOURCE read short", -EIO);
    if ((err = writer->Append(buf, want)) < 0) {
      return Fail(key, tier_index, "tier write failed", err);
    }
    done += want;
  }
  if ((err = writer->Commit()) < 0) return Fail(key, tier_index, "tier commit failed", err);
  catalog_->Publish(key, tier_index);
  policy_->Published(key, tier_index);
  counters_.done.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes.fetch_add(origin.length, std::memory_order_relaxed);
}

void Promoter::Fail(ChunkKey key, int tier_index, const char* what, int err) {
  Tier* tier = tiers_[static_cast<size_t>(tier_index)];
  tier->Release(catalog_->length(key.node, key.chunk));
  policy_->Abandoned(key, tier_index);
  if (err == -ENOSPC || err == -EDQUOT) {
    // The device filled before the budget did: stop placing there.
    tier->MarkFull();
    TIERFS_LOG(kWarning, "tier {} is full at {} bytes ({}); no more promotions go there",
               tier->name(), tier->used(), std::strerror(-err));
  }
  catalog_->Abort(key);
  uint64_t n = counters_.failed.fetch_add(1, std::memory_order_relaxed);
  if (err != -ECANCELED && (n < 10 || n % 1000 == 0)) {
    TIERFS_LOG(kWarning, "promotion of '{}' chunk {} to tier {} failed: {}: {}",
               ns_->Path(key.node), key.chunk, tier->name(), what, std::strerror(-err));
  }
}

uint64_t Promoter::Evict(ChunkKey key, int tier_index) {
  // Remove the data before the catalog says "on SOURCE": while the state is
  // still resident no new promotion of the key can start and store into the
  // tier under the same key. A reader that loses the race falls back to SOURCE.
  if (catalog_->state(key) != Catalog::kResidentBase + tier_index) return 0;
  Tier* tier = tiers_[static_cast<size_t>(tier_index)];
  uint64_t bytes = tier->Remove(key);
  catalog_->Evict(key, tier_index);
  tier->Release(bytes);
  return bytes;
}

}  // namespace tierfs
