#include "prefetch/tiered_store.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "tiering/log.h"

namespace tierfs {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::unique_ptr<TieredStore> TieredStore::Open(const TieringConfig& config, const Namespace* ns,
                                               SourceReader* source, dev_t source_dev,
                                               std::string* error) {
  std::unique_ptr<TieredStore> store(new TieredStore());
  store->ns_ = ns;
  store->config_ = config;
  if (!config.enabled()) {
    if (config.prefetch.mode != PrefetchMode::kOnAccess) {
      *error = fmt::format("prefetch={} needs a tier to promote into (ram= or tier=)",
                           PrefetchModeName(config.prefetch.mode));
      return nullptr;
    }
    store->read_path_ =
        std::make_unique<ReadPath>(ns, source, nullptr, std::vector<Tier*>{}, nullptr, nullptr);
    // Hints are still parsed and counted, so helpers work against any mount.
    store->prefetcher_ = std::make_unique<Prefetcher>(config.prefetch, ns, nullptr, nullptr,
                                                      nullptr, nullptr, nullptr);
    return store;
  }
  if (config.ram > 0) {
    store->owned_.push_back(NewMemoryTier("ram", config.ram));
    store->paths_.push_back("");
  }
  for (size_t i = 0; i < config.dirs.size(); ++i) {
    const auto& spec = config.dirs[i];
    auto tier =
        OpenDirectoryTier(fmt::format("dir{}", i), spec.path, spec.budget, config.reset, error);
    if (!tier) return nullptr;
    struct stat st;
    if (::stat(spec.path.c_str(), &st) == 0 && st.st_dev == source_dev) {
      TIERFS_LOG(kWarning,
                 "tier {} is on the same file system as SOURCE: copying there cannot make "
                 "reads faster",
                 spec.path);
    }
    store->paths_.push_back(spec.path);
    store->owned_.push_back(std::move(tier));
  }
  for (auto& t : store->owned_) store->tiers_.push_back(t.get());
  if (store->tiers_.size() > static_cast<size_t>(Catalog::kMaxTiers)) {
    *error = fmt::format("at most {} tiers", Catalog::kMaxTiers);
    return nullptr;
  }
  store->catalog_ = std::make_unique<Catalog>(*ns, config.chunk_size);
  TieredStore* raw = store.get();
  Evictor evict = [raw](ChunkKey key, int tier) { return raw->promoter_->Evict(key, tier); };
  if (config.policy == "first-fit") {
    // First-fit that turns into Belady eviction once an order is declared.
    auto next_use = [raw](NodeId id) {
      return raw->prefetcher_ ? raw->prefetcher_->NextUse(id)
                              : NextUses{OrderPlan::kNever, OrderPlan::kNever};
    };
    auto clairvoyant = NewClairvoyantPolicy(store->tiers_, evict, store->catalog_.get(), next_use);
    store->clairvoyant_ = clairvoyant.get();
    store->policy_ = std::move(clairvoyant);
  } else {
    store->policy_ = NewPlacementPolicy(config.policy, store->tiers_, evict);
  }
  if (!store->policy_) {
    *error = fmt::format("unknown policy '{}'", config.policy);
    return nullptr;
  }
  // Reuse what directory tiers kept from an earlier mount: complete copies
  // whose SOURCE file still has the recorded size and mtime.
  for (size_t i = 0; i < store->tiers_.size(); ++i) {
    if (store->tiers_[i]->kind() != Tier::Kind::kDirectory) continue;
    auto* dir = static_cast<DirectoryTier*>(store->tiers_[i]);
    Catalog* catalog = store->catalog_.get();
    auto kept = dir->Recover([ns, catalog](const ChunkOrigin& o) -> std::optional<ChunkKey> {
      auto id = ns->Resolve(o.path);
      if (!id || !S_ISREG(ns->node(*id).mode)) return std::nullopt;
      const Node& n = ns->node(*id);
      if (n.size != o.file_size || n.mtime_ns != o.mtime_ns) return std::nullopt;  // stale
      if (o.chunk >= catalog->chunks(*id) || catalog->length(*id, o.chunk) != o.length) {
        return std::nullopt;  // chunked with another chunk size
      }
      return ChunkKey{*id, o.chunk};
    });
    for (ChunkKey key : kept) {
      if (store->catalog_->TryBegin(key)) {
        store->catalog_->Publish(key, static_cast<int>(i));
        store->policy_->Published(key, static_cast<int>(i));
      }
    }
  }
  store->executor_ = std::make_unique<Executor>(config.promote_threads, config.promote_queue);
  store->promoter_ =
      std::make_unique<Promoter>(ns, store->catalog_.get(), store->tiers_, store->policy_.get(),
                                 source, store->executor_.get());
  store->read_path_ = std::make_unique<ReadPath>(ns, source, store->catalog_.get(), store->tiers_,
                                                 store->policy_.get(), store->promoter_.get());
  PrefetchConfig prefetch = config.prefetch;
  uint64_t tier_bytes = 0;
  for (const Tier* t : store->tiers_) tier_bytes += t->budget();
  prefetch.max_lookahead_bytes = std::max<uint64_t>(tier_bytes / 4, 1);
  store->prefetcher_ = std::make_unique<Prefetcher>(
      prefetch, ns, store->catalog_.get(), store->promoter_.get(), store->executor_.get(),
      store->clairvoyant_, &store->read_path_->counters());
  store->read_path_->SetObserver(store->prefetcher_.get());
  return store;
}

TieredStore::~TieredStore() { Shutdown(); }

void TieredStore::Start() {
  if (executor_) executor_->Start();
  if (prefetcher_) prefetcher_->Start();
}

void TieredStore::Shutdown() {
  if (read_path_) read_path_->SetObserver(nullptr);
  if (prefetcher_) prefetcher_->Shutdown();
  if (executor_) executor_->Shutdown();
}

std::string TieredStore::StatsJson() const {
  const ReadCounters& r = read_path_->counters();
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  std::string out = "  \"tiers\": [";
  std::vector<uint64_t> chunks =
      catalog_ ? catalog_->ResidentChunksPerTier(static_cast<int>(tiers_.size()))
               : std::vector<uint64_t>{};
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const Tier* t = tiers_[i];
    out += fmt::format(
        "{}\n    {{\"name\": \"{}\", \"kind\": \"{}\", \"path\": {}, \"budget\": {}, "
        "\"limit\": {}, \"used\": {}, \"chunks\": {}, \"hits\": {}, \"bytes_served\": {}}}",
        i ? "," : "", t->name(), t->kind() == Tier::Kind::kMemory ? "memory" : "directory",
        JsonString(paths_[i]), t->budget(), t->limit(), t->used(), chunks[i], t->hits(),
        t->bytes_served());
  }
  out += tiers_.empty() ? "],\n" : "\n  ],\n";
  out += fmt::format(
      "  \"reads\": {{\"from_tiers\": {}, \"from_source\": {}, \"source_bytes\": {}, "
      "\"waits\": {}, \"tier_errors\": {}}},\n",
      load(r.tier_reads), load(r.source_reads), load(r.source_bytes), load(r.waits),
      load(r.tier_errors));
  if (promoter_) {
    const PromotionCounters& p = promoter_->counters();
    out += fmt::format(
        "  \"promotions\": {{\"policy\": \"{}\", \"chunk_size\": {}, \"threads\": {}, "
        "\"queued_foreground\": {}, \"queued_lookahead\": {}, \"queued_background\": {}, "
        "\"running\": {}, "
        "\"requested\": {}, \"done\": {}, \"failed\": {}, \"rejected\": {}, \"no_room\": {}, "
        "\"evicted\": {}, \"bytes\": {}, \"files_resident\": {}}},\n",
        policy_->name(), config_.chunk_size, executor_->threads(),
        executor_->queued(Executor::Lane::kForeground),
        executor_->queued(Executor::Lane::kLookahead),
        executor_->queued(Executor::Lane::kBackground), executor_->running(), load(p.requested),
        load(p.done), load(p.failed), load(p.rejected), load(p.no_room), policy_->evictions(),
        load(p.bytes), catalog_->FullyResidentFiles());
  }
  out += prefetcher_->StatsJson();
  return out;
}

}  // namespace tierfs
