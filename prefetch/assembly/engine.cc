#include "prefetch/assembly/engine.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "tiering/base/log.h"

namespace tierfs {

Result<std::vector<std::unique_ptr<Tier>>> Engine::OpenTiers(const TieringConfig& config,
                                                             dev_t source_dev) {
  std::vector<std::unique_ptr<Tier>> tiers;
  if (config.ram > 0) tiers.push_back(NewMemoryTier("ram", config.ram));
  for (size_t i = 0; i < config.dirs.size(); ++i) {
    const auto& spec = config.dirs[i];
    auto tier = OpenDirectoryTier(fmt::format("dir{}", i), spec.path, spec.budget, config.reset,
                                  std::chrono::seconds(config.lock_wait_s));
    if (!tier.ok()) return tier.status();
    struct stat st;
    if (::stat(spec.path.c_str(), &st) == 0 && st.st_dev == source_dev) {
      TIERFS_LOG(kWarning, "tier {} is on SOURCE's file system: it cannot make reads faster",
                 spec.path);
    }
    tiers.push_back(std::move(tier).value());
  }
  if (tiers.size() > static_cast<size_t>(Catalog::kMaxTiers)) {
    return Status::Error(EINVAL, fmt::format("at most {} tiers", Catalog::kMaxTiers));
  }
  return tiers;
}

Result<std::unique_ptr<Engine>> Engine::Open(const TieringConfig& config, const Namespace* ns,
                                             SourceReader* source, dev_t source_dev) {
  std::unique_ptr<Engine> store(new Engine());
  store->config_ = config;
  if (Status needs = config.CheckNeedsTier(); !needs.ok()) return needs;
  if (!config.enabled()) {
    store->chunk_source_ = std::make_unique<ChunkSource>(source, config.chunk_size);
    store->read_path_ =
        std::make_unique<ReadPath>(ns, store->chunk_source_.get(), nullptr, nullptr);
    // Hints are still parsed and counted, so helpers work against any mount.
    store->prefetcher_ = std::make_unique<Prefetcher>(config.prefetch, PrefetcherParts{.ns = ns});
    return store;
  }
  Result<std::vector<std::unique_ptr<Tier>>> opened = OpenTiers(config, source_dev);
  if (!opened.ok()) return opened.status();
  std::vector<std::unique_ptr<Tier>> tiers = std::move(opened).value();
  // A file larger than every tier cannot be held: it is read from SOURCE
  // and gets no per-chunk state.
  uint64_t largest = 0;
  for (const auto& t : tiers) largest = std::max(largest, t->budget());
  auto catalog = std::make_unique<Catalog>(*ns, config.chunk_size, largest / config.chunk_size + 1);
  // The planner writes when files are needed next; the store owns the table.
  auto next_uses = std::make_unique<NextUseTable>(ns->size());
  // Only the next-use policy is clairvoyant: it reads the table and takes
  // the look-ahead window's size.
  std::unique_ptr<EvictionPolicy> policy;
  BeladyPolicy* belady = nullptr;
  if (IsNextUsePolicy(config.policy)) {
    auto next_use = NewBeladyPolicy(static_cast<int>(tiers.size()), catalog.get(), next_uses.get());
    belady = next_use.get();
    policy = std::move(next_use);
  } else {
    policy = NewEvictionPolicy(config.policy, static_cast<int>(tiers.size()), catalog.get());
  }
  if (!policy) {
    return Status::Error(EINVAL, fmt::format("unknown policy '{}'", config.policy));
  }
  // The pool is made before the store: the store's reclaimer evicts on a
  // pool thread (no thread runs before Start, after the fork), first of
  // all the jobs queued: the readers' claims wait for the room it makes,
  // and behind a stream of their commits it would make it too late (the
  // claims meanwhile answer "no room" and their chunks go uncached).
  store->executor_ = std::make_unique<Executor>(config.promote_threads, config.promote_queue);
  store->reclaim_lane_ = std::make_unique<ExecutorLane>(
      store->executor_.get(), Executor::Lane::kForeground, Executor::Place::kFirst);
  store->chunks_ =
      std::make_unique<ChunkStore>(ns, std::move(catalog), std::move(tiers), std::move(policy),
                                   std::move(next_uses), store->reclaim_lane_.get());
  store->chunks_->RecoverDirectoryTiers(config.source_id);
  if (config.peers_enabled()) {
    JobPeersConfig peers = config.peers;
    peers.chunk_size = config.chunk_size;
    store->peers_ = std::make_unique<JobPeers>(std::move(peers), ns);
  }
  store->chunk_source_ =
      std::make_unique<ChunkSource>(source, config.chunk_size, store->peers_.get());
  store->promoter_ = std::make_unique<Promoter>(store->chunks_.get(), store->chunk_source_.get(),
                                                store->executor_.get());
  store->read_path_ = std::make_unique<ReadPath>(ns, store->chunk_source_.get(),
                                                 store->chunks_.get(), store->promoter_.get());
  PrefetchConfig prefetch = config.prefetch;
  prefetch.max_lookahead_bytes = std::max<uint64_t>(store->chunks_->tier_bytes() / 4, 1);
  if (config.stage_share_percent < 100) {
    prefetch.stage_share_bytes =
        std::max<uint64_t>(store->chunks_->tier_bytes() / 100 * config.stage_share_percent, 1);
  }
  store->prefetcher_ = std::make_unique<Prefetcher>(
      prefetch, PrefetcherParts{.ns = ns,
                                .store = store->chunks_.get(),
                                .promoter = store->promoter_.get(),
                                .executor = store->executor_.get(),
                                .policy = belady,
                                .next_uses = &store->chunks_->next_uses(),
                                .reads = &store->read_path_->counters(),
                                .source = source});
  store->read_path_->SetObserver(store->prefetcher_.get());
  return store;
}

Engine::~Engine() { Shutdown(); }

namespace {
// What a directory tier's lock file says of its holder (LockHolder reads it).
std::string HolderNote(const TieringConfig& config, const char* state) {
  return fmt::format("pid={}\nmount={}\nstate={}\n", ::getpid(), config.prefetch.mountpoint, state);
}
}  // namespace

void Engine::Start() {
  // After the daemon forked: this pid serves the mount from now on.
  if (chunks_) chunks_->NoteTierHolder(HolderNote(config_, "mounted"));
  if (executor_) executor_->Start();
  if (prefetcher_) prefetcher_->Start();
}

void Engine::Shutdown() {
  // A daemon mounting the same tier now waits for this one to finish
  // instead of being refused.
  if (chunks_ && !shut_down_) chunks_->NoteTierHolder(HolderNote(config_, "stopping"));
  shut_down_ = true;
  // The peer service, which reads through the store, has stopped asking and
  // answering by now.
  if (read_path_) read_path_->SetObserver(nullptr);
  if (prefetcher_) prefetcher_->Shutdown();
  if (executor_) executor_->Shutdown();
}

void Engine::VisitCounters(CounterVisitor& v) const {
  if (chunks_) {
    chunks_->VisitTiers(v);
  } else {
    v.BeginList("tiers", "tier");
    v.EndList();
  }
  v.BeginGroup("reads");
  read_path_->VisitCounters(v);
  v.EndGroup();
  if (chunks_) {
    v.BeginGroup("promotions");
    v.Text("policy", chunks_->policy().name(), "promotions_policy");
    v.Gauge("chunk_size", static_cast<double>(config_.chunk_size),
            {"Size of the chunks files are promoted in.", Unit::kBytes});
    executor_->VisitCounters(v);
    promoter_->VisitCounters(v);
    chunks_->VisitPromotions(v);
    v.EndGroup();
  }
  v.BeginGroup("prefetch");
  prefetcher_->VisitCounters(v);
  v.EndGroup();
}

}  // namespace tierfs
