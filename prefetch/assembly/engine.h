// Engine: assembles the promotion stack from the mount's options (the
// tiers and the ChunkStore over them, the executor, the promoter, the read
// path and the prefetcher), starts and stops it, and walks its counters.
// With no tier configured, reads go to SOURCE.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "prefetch/assembly/tiering_config.h"
#include "prefetch/planners/prefetcher.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/engine/executor_lane.h"
#include "tiering/engine/promoter.h"
#include "tiering/engine/read_path.h"
#include "tiering/peers/client/job_peers.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

class Engine {
 public:
  // Fails with a message for an unusable configuration (EINVAL) or a tier
  // that cannot start (OpenDirectoryTier's error).
  // `source_dev` is SOURCE's st_dev: a tier on the same device gets a warning.
  static Result<std::unique_ptr<Engine>> Open(const TieringConfig& config, const Namespace* ns,
                                              SourceReader* source, dev_t source_dev);
  ~Engine();

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
  Engine() = default;
  static Result<std::vector<std::unique_ptr<Tier>>> OpenTiers(const TieringConfig& config,
                                                              dev_t source_dev);
  TieringConfig config_;
  std::unique_ptr<ChunkStore> chunks_;
  bool shut_down_ = false;  // Shutdown ran (it may run again, from the destructor)
  std::unique_ptr<JobPeers> peers_;
  std::unique_ptr<ChunkSource> chunk_source_;  // home, then SOURCE
  std::unique_ptr<Executor> executor_;
  // The store's reclaimer runs on executor_, first in its foreground lane;
  // no job runs once Shutdown stopped the executor.
  std::unique_ptr<ExecutorLane> reclaim_lane_;
  std::unique_ptr<Promoter> promoter_;
  std::unique_ptr<ReadPath> read_path_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

}  // namespace tierfs
