// TieringConfig: the tiers, promotion, prefetching and the peers as the
// mount's options give them (-o ram=, tier=, policy=, prefetch=, peers=,
// ...). A leaf: the option parser and its fuzz target read it without the
// engine; Engine (engine.h) is built from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "prefetch/planners/prefetch_config.h"
#include "tiering/base/status.h"
#include "tiering/peers/config/job_peers_config.h"

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

}  // namespace tierfs
