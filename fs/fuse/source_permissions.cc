#include "fs/fuse/source_permissions.h"

#include <algorithm>
#include <cerrno>
#include <functional>
#include <vector>

#include "tiering/base/log_limiter.h"

namespace tierfs {
namespace {

// `who`'s supplementary groups as a set: sorted, each once, as bytes.
std::string GroupSet(const AccessCaller& who) {
  std::vector<gid_t> groups = who.groups;
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  return std::string(reinterpret_cast<const char*>(groups.data()), groups.size() * sizeof(gid_t));
}

}  // namespace

SourcePermissions::SourcePermissions(Backend* backend, const Namespace* ns,
                                     std::chrono::milliseconds ttl)
    : backend_(backend), ns_(ns), ttl_(ttl) {}

size_t SourcePermissions::KeyHash::operator()(const Key& k) const {
  uint64_t h = (uint64_t{k.uid} << 32) ^ k.gid;
  h = h * 0x9E3779B97F4A7C15ULL ^ (uint64_t{k.groups} << 40) ^ (uint64_t{k.node} << 4) ^
      static_cast<uint64_t>(k.mask);
  return std::hash<uint64_t>()(h * 0xC2B2AE3D27D4EB4FULL);
}

SourcePermissions::Key SourcePermissions::KeyOf(const AccessCaller& who, const std::string& groups,
                                                NodeId id, int mask) {
  auto it = group_sets_.find(groups);
  if (it == group_sets_.end()) {
    if (group_sets_.size() >= kMaxGroupSets) ForgetLocked();
    it = group_sets_.emplace(groups, static_cast<uint32_t>(group_sets_.size())).first;
  }
  return Key{who.uid, who.gid, it->second, id, mask};
}

void SourcePermissions::ForgetLocked() {
  cache_.clear();
  group_sets_.clear();
  generation_++;
}

int SourcePermissions::Check(const AccessCaller& who, NodeId id, int mask) {
  checks_.fetch_add(1, std::memory_order_relaxed);
  if (!who.groups_known) {
    denied_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t n = groups_unknown_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (LogSampled(n)) {
      TIERFS_LOG(kWarning,
                 "uid {} refused '{}': its groups cannot be read (a caller in another pid "
                 "namespace, or gone; {} so far)",
                 who.uid, ns_->Path(id), n);
    }
    return -EACCES;
  }
  const std::string groups = GroupSet(who);
  const auto now = std::chrono::steady_clock::now();
  uint64_t generation;
  {
    MutexLock lock(mu_);
    auto it = cache_.find(KeyOf(who, groups, id, mask));
    if (it != cache_.end() && (ttl_.count() == 0 || now - it->second.at < ttl_)) {
      if (it->second.result != 0) denied_.fetch_add(1, std::memory_order_relaxed);
      return it->second.result;
    }
    generation = generation_;
  }
  asked_.fetch_add(1, std::memory_order_relaxed);
  int r = backend_->access_as(ns_->Path(id), who, mask);
  if (r == -ENOSYS) return 0;  // cannot ask as another user: the kernel's check stands
  if (r != 0 && r != -EACCES && r != -EPERM) {
    // A reader chooses the path and how often: sampled.
    TIERFS_LOG_SAMPLED(kWarning, "permission of uid {} on '{}' could not be asked of SOURCE: {}",
                       who.uid, ns_->Path(id), r);
    r = -EACCES;  // unknown is no
  }
  if (r == -EPERM) r = -EACCES;
  if (r != 0) denied_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(mu_);
  if (generation != generation_) return r;  // asked before a revalidation: not kept
  if (cache_.size() >= kMaxEntries) ForgetLocked();
  cache_[KeyOf(who, groups, id, mask)] = Answer{r, now};
  return r;
}

void SourcePermissions::Revalidate() {
  revalidations_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(mu_);
  ForgetLocked();
}

void SourcePermissions::VisitCounters(CounterVisitor& v) const {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  v.BeginGroup("permissions");
  v.Text("decided_by", "source", "permissions_decided_by");
  v.Gauge("ttl_seconds", static_cast<double>(ttl_.count()) / 1000.0,
          {"How long SOURCE's answer on a caller's permission is kept (0: until revalidated).",
           Unit::kSeconds});
  v.Counter("checks", load(checks_), {"Permission checks made for callers."});
  v.Counter("asked_source", load(asked_), {"Permission checks that asked SOURCE."});
  v.Counter("denied", load(denied_), {"Permission checks that denied the caller."});
  v.Counter("groups_unknown", load(groups_unknown_),
            {"Callers refused because their supplementary groups could not be read."});
  v.Counter("revalidations", load(revalidations_),
            {"Writes to .tierfs/revalidate (forgetting SOURCE's permission answers)."});
  v.EndGroup();
}

}  // namespace tierfs
