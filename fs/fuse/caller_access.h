// CallerAccess: whether a caller could reach a node through this mount, as
// its opens are decided: the snapshot's mode bits (what the kernel checks
// with default_permissions, or the daemon itself on a mount without it) on
// the node and search permission on every directory above it; then, with
// permissions=source, SOURCE asked as the caller (SourcePermissions).
//
// It is what the writers of .tierfs/stage and .tierfs/order may name
// (HintAccess): a path a writer could not open is not in the mount for it.
// Thread-safe once the session runs.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include "fs/fuse/source_permissions.h"
#include "prefetch/planners/hint_parser.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

class CallerAccess final : public HintAccess {
 public:
  explicit CallerAccess(const Namespace* ns) : ns_(ns) {}

  // With `p` (null: none), SOURCE has the last word. REQUIRES: before the
  // session starts; `p` outlives this.
  void set_source_permissions(SourcePermissions* p) { permissions_ = p; }

  // Whether the mode bits of the snapshot let `uid` (primary group `gid`;
  // `in_group(g)` says whether it is also in group g, asked only when a
  // group decides) do `mask` (R_OK, W_OK, X_OK) on node `id` and search
  // every directory above it. Root may do everything.
  template <typename InGroup>
  static bool ModeAllows(const Namespace& ns, uid_t uid, gid_t gid, InGroup&& in_group, NodeId id,
                         int mask) {
    if (uid == 0) return true;
    auto allowed = [&](const Node& n, int want) {
      unsigned bits = n.mode & 07;
      if (n.uid == uid) {
        bits = (n.mode >> 6) & 07;
      } else if (((n.mode >> 3) & 07) != bits && (n.gid == gid || in_group(n.gid))) {
        bits = (n.mode >> 3) & 07;  // the group class differs from others, and is the caller's
      }
      return (bits & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
    };
    if (!allowed(ns.node(id), mask)) return false;
    for (NodeId d = id; d != kRootNode;) {
      d = ns.node(d).parent;
      if (!allowed(ns.node(d), X_OK)) return false;
    }
    return true;
  }

  // A regular file `caller` could open for reading, a directory it could
  // list and search, anything else in a directory it could search.
  bool MayName(const AccessCaller& caller, NodeId id) override;

 private:
  bool Allows(const AccessCaller& caller, NodeId id, int mask);

  const Namespace* const ns_;
  SourcePermissions* permissions_ = nullptr;
};

}  // namespace tierfs
