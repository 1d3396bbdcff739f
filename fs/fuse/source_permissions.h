// SourcePermissions: whether a caller may open a file of the mount, as
// SOURCE decides it for that caller. A root daemon with allow_other serves
// every user of the node; the kernel's check (default_permissions) sees only
// the mode bits of the snapshot, not ACLs (POSIX or NFSv4) nor a chmod made
// since the scan. So each open of a file or directory is also asked of
// SOURCE, as the caller (Backend::access_as: the path walked and the file
// checked with the caller's file-system ids), and the answer is kept per
// caller and file: for `ttl`, or until Revalidate() (written to
// .tierfs/revalidate) when `ttl` is 0. A chmod or ACL change on SOURCE
// thus takes effect for a caller at the first open after its answer
// expires.
//
// A caller is everything the answer depended on: uid, gid and the set of
// supplementary groups (an ACL entry may refuse a group), so the same uid
// in other groups is asked anew.
//
// Thread-safe; the cache is bounded (kMaxEntries answers, kMaxGroupSets
// distinct sets of groups; both forgotten wholesale when either is full:
// the next opens ask SOURCE again).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"
#include "tiering/io/backend.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

class SourcePermissions {
 public:
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxGroupSets = 1 << 12;
  // `ttl` 0: answers are kept until Revalidate.
  SourcePermissions(Backend* backend, const Namespace* ns, std::chrono::milliseconds ttl);

  // 0 if `who` may do `mask` on node `id`, else -EACCES (or SOURCE's
  // -errno). Asks SOURCE unless a kept answer says. A caller whose groups
  // are unknown is refused (-EACCES), counted and logged (sampled): an ACL
  // entry that refuses one of her groups could not be applied.
  int Check(const AccessCaller& who, NodeId id, int mask);
  // Forgets every answer: the next open of each caller asks SOURCE.
  void Revalidate();

  // The "permissions" group: checks, asked of SOURCE, denied, groups unknown.
  void VisitCounters(CounterVisitor& v) const;

 private:
  struct Key {
    uid_t uid;
    gid_t gid;
    uint32_t groups;  // the caller's set of supplementary groups, by its id in group_sets_
    NodeId node;
    int mask;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Answer {
    int result;
    std::chrono::steady_clock::time_point at;
  };

  // The key of `who`'s answer for `mask` on `id`, its set of groups given
  // as GroupSet(who).
  Key KeyOf(const AccessCaller& who, const std::string& groups, NodeId id, int mask) REQUIRES(mu_);
  // Forgets every answer and set of groups.
  void ForgetLocked() REQUIRES(mu_);

  Backend* const backend_;
  const Namespace* const ns_;
  const std::chrono::milliseconds ttl_;
  Mutex mu_;  // guards the rest. A leaf lock: SOURCE is asked outside it.
  std::unordered_map<Key, Answer, KeyHash> cache_ GUARDED_BY(mu_);
  // Each set of supplementary groups seen (sorted, without repeats, as the
  // bytes of its gids) and its id: a key holds the id, the whole set is
  // compared here (no two sets share an id).
  std::unordered_map<std::string, uint32_t> group_sets_ GUARDED_BY(mu_);
  // Bumped when everything is forgotten: an answer asked before is
  // returned to its caller but not kept (its key's ids may be reused).
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> checks_{0}, asked_{0}, denied_{0}, revalidations_{0}, groups_unknown_{0};
};

}  // namespace tierfs
