// TieredStore: assembles the promotion stack from the mount's options (the
// tiers and the ChunkStore over them, the executor, the promoter, the read
// path and the prefetcher), starts and stops it, and walks its counters.
// With no tier configured, reads go to SOURCE.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "prefetch/engine/executor.h"
#include "prefetch/engine/promoter.h"
#include "prefetch/engine/read_path.h"
#include "prefetch/planners/prefetcher.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/peer/job_peers.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

struct DirectoryTierSpec {
  std::string path;
  uint64_t budget = 0;
};

struct TieringConfig {
  uint64_t ram = 0;                     // RAM tier budget; 0 = no RAM tier
  std::vector<DirectoryTierSpec> dirs;  // directory tiers, fastest first
  // Which SOURCE this is ("PATH ino N"): directory tiers record it and keep
  // nothing from a mount of another SOURCE.
  std::string source_id;
  // How long a directory tier held by another daemon is waited for (one
  // unmounted a moment ago finishes its promotions first).
  unsigned lock_wait_s = 0;
  std::string policy = "next-use";
  // Threads of the promotion pool: the most SOURCE copies in flight. The
  // tuner starts at 8 and finds how many the PFS rewards.
  unsigned promote_threads = 32;
  size_t promote_queue = 4096;  // per lane
  // A reader's first access waits for one chunk: 8 MiB is a few tens of ms
  // from a PFS stream, while a shard's other chunks are copied in parallel.
  uint64_t chunk_size = 8ull << 20;
  bool reset = false;  // start directory tiers empty
  // The percent of the tiers' bytes each user but root may ask to stage
  // (stage_share=); 100: no limit.
  unsigned stage_share_percent = 100;
  PrefetchConfig prefetch;
  // The job's other nodes (-o peers=), which serve each other's chunks;
  // none when peers.peers is empty. Needs a tier.
  JobPeersConfig peers;
  bool enabled() const { return ram > 0 || !dirs.empty(); }
  bool peers_enabled() const { return !peers.peers.empty(); }
  // Without a tier, what needs one (peers=, a prefetch mode other than
  // on-access) is refused (EINVAL, naming it); ok otherwise. The one home
  // of the rule: the mount's early checks and Open both ask it.
  Status CheckNeedsTier() const;
};

class TieredStore {
 public:
  // Fails with a message for an unusable configuration (EINVAL) or a tier
  // that cannot start (OpenDirectoryTier's error).
  // `source_dev` is SOURCE's st_dev: a tier on the same device gets a warning.
  static Result<std::unique_ptr<TieredStore>> Open(const TieringConfig& config, const Namespace* ns,
                                                   SourceReader* source, dev_t source_dev);
  ~TieredStore();

  ReadPath& read_path() { return *read_path_; }
  Prefetcher& prefetcher() { return *prefetcher_; }
  // Null without tiers.
  ChunkStore* chunks() { return chunks_.get(); }
  // The job's peers as this node asks them; null without peers=. Built
  // here, not started: the peer service (fs/peers) starts and stops asking
  // and answering them.
  JobPeers* peers() { return peers_.get(); }
  const JobPeers* peers() const { return peers_.get(); }
  // Starts the promotion threads; call after the daemon has forked.
  void Start();
  // Stops promotions: queued ones are dropped, running ones cancelled.
  // Stop the peer service first.
  void Shutdown();
  // The "tiers", "reads", "promotions" and "prefetch" figures.
  void VisitCounters(CounterVisitor& v) const;

 private:
  TieredStore() = default;
  static Result<std::vector<std::unique_ptr<Tier>>> OpenTiers(const TieringConfig& config,
                                                              dev_t source_dev);
  TieringConfig config_;
  std::unique_ptr<ChunkStore> chunks_;
  bool shut_down_ = false;  // Shutdown ran (it may run again, from the destructor)
  std::unique_ptr<JobPeers> peers_;
  std::unique_ptr<ChunkSource> source_;  // home, then SOURCE
  std::unique_ptr<Executor> executor_;
  // The store's reclaimer runs on executor_'s background lane; no job runs
  // once Shutdown stopped the executor.
  std::unique_ptr<ExecutorLane> reclaim_lane_;
  std::unique_ptr<Promoter> promoter_;
  std::unique_ptr<ReadPath> read_path_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

}  // namespace tierfs
