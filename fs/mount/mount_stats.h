// MountStats: the root of the daemon's figures, owned by the mount. One
// walk (CounterVisitor) in the layout of .tierfs/stats and /metrics: the
// mount's identity and uptime, then each part's own figures (the FUSE
// adapter's session and requests, the snapshot, SOURCE, the store, the
// peers, the open files, the log). .tierfs/stats adds the reader's own
// "you" group; /metrics is one text for everyone.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <string>

#include "fs/fuse/filesystem.h"
#include "fs/peers/peer_service.h"
#include "prefetch/assembly/engine.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/io/counting_backend.h"
#include "tiering/namespace/namespace.h"
#include "tiering/source/source_reader.h"

namespace tierfs {

// What the walk reads. Pointers outlive the MountStats; `permissions` may be
// null (the snapshot's mode bits decide opens).
struct MountStatsParts {
  const FsContext* fs = nullptr;
  const Namespace* ns = nullptr;
  const SourceCounters* source = nullptr;
  const SourceReader* reader = nullptr;
  const SourcePermissions* permissions = nullptr;
  const Engine* engine = nullptr;
  // What this mount serves and where: labels that tell two mounts apart.
  std::string source_path, mount_path;
};

class MountStats {
 public:
  explicit MountStats(MountStatsParts parts)
      : parts_(std::move(parts)), started_(std::chrono::steady_clock::now()) {}

  // The peer front door, for its figures: it starts after the daemon forks
  // (null: this node does not serve). Any thread.
  void set_peer_service(const PeerService* s) { peer_service_.store(s); }

  // Every figure of the daemon: the node's totals, which every user may see.
  void VisitCounters(CounterVisitor& v) const;
  // The JSON text of .tierfs/stats as `reader` sees it: the totals and her
  // "you" group (ControlDir::kListing: the totals only).
  std::string Json(uid_t reader) const;
  // The Prometheus text of /metrics: the totals only, no user named.
  std::string Prometheus() const;

 private:
  const MountStatsParts parts_;
  const std::chrono::steady_clock::time_point started_;
  std::atomic<const PeerService*> peer_service_{nullptr};
};

}  // namespace tierfs
