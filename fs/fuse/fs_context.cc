// FsContext: its own figures (the session's; MountStats walks the daemon's)
// and the permission check of mounts without the kernel's (MayAccess).
#include <unistd.h>

#include <algorithm>

#include "fs/fuse/filesystem.h"
#include "tiering/base/log_limiter.h"
#include "tiering/namespace/namespace_freshness.h"

namespace tierfs {

FsContext::FsContext(FsParts parts)
    : parts_(std::move(parts)),
      ns_(parts_.ns),
      reader_(parts_.reader),
      engine_(parts_.engine),
      source_counters_(parts_.source),
      timeouts_(parts_.timeouts),
      access_(ns_),
      control_(static_cast<uint64_t>(ns_->size()) + 1, parts_.owner, parts_.group,
               ControlFiles(parts_.anyone_hints)),
      backing_(ns_, engine_->chunks()) {
  access_.set_source_permissions(parts_.source_permissions);
  engine_->prefetcher().set_hint_access(&access_);
  passthrough_.UseBackingFiles(&backing_);
}

FsContext::~FsContext() { engine_->prefetcher().set_hint_access(nullptr); }

std::vector<ControlFile> FsContext::ControlFiles(bool anyone_hints) {
  Prefetcher* p = &engine_->prefetcher();
  return {
      {"stats",
       [this](uid_t reader) {
         return parts_.stats ? parts_.stats(reader)
                             : std::string("{\"error\":\"no figures for this mount\"}\n");
       },
       nullptr, nullptr},
      // Each line written names files as its writer may (CallerAccess).
      {"order", [](uid_t) { return std::string(); },
       [p](const HintWriter& w, uint64_t off, std::string_view d) {
         return p->WriteOrder(w, off, d);
       },
       [p] { p->ClearOrder(); }, false, anyone_hints},
      {"stage", [](uid_t) { return std::string(); },
       [p](const HintWriter& w, uint64_t off, std::string_view d) {
         return p->WriteStage(w, off, d);
       },
       nullptr, false, anyone_hints},
      {"prefetch", [p](uid_t) { return p->ModeText(); },
       [p](const HintWriter&, uint64_t, std::string_view d) { return p->WriteMode(d); }, nullptr},
      // Any write forgets SOURCE's permission answers (permissions=source).
      {"revalidate", [](uid_t) { return std::string(); },
       [this](const HintWriter&, uint64_t, std::string_view d) {
         if (parts_.source_permissions != nullptr) parts_.source_permissions->Revalidate();
         return static_cast<ssize_t>(d.size());
       },
       nullptr},
      // One stat per directory and file of SOURCE: root's and the owner's.
      {"changes", [this](uid_t) { return ChangesJson(); }, nullptr, nullptr, true, false},
  };
}

std::string FsContext::ChangesJson() {
  if (parts_.changes_backend == nullptr)
    return "{\"error\":\"SOURCE is not known to this mount\"}\n";
  if (checking_.exchange(true)) return "{\"error\":\"busy: another check is running\"}\n";
  struct Done {
    std::atomic<bool>* flag;
    ~Done() { *flag = false; }  // also when the check throws (the handler answers that)
  } done{&checking_};
  const FreshnessReport report =
      CheckFreshness(parts_.changes_backend, *ns_, parts_.changes_threads);
  TIERFS_LOG_SAMPLED(kInfo,
                     "changes since the mount's snapshot: {} of {} files and {} of {} directories "
                     "changed, {} gone, {} errors ({:.2f} s)",
                     report.changed_files, report.checked_files, report.changed_dirs,
                     report.checked_dirs, report.missing, report.errors, report.seconds);
  for (const std::string& sample : report.samples) {
    TIERFS_LOG_SAMPLED(kInfo, "changed on SOURCE since the mount: {}", sample);
  }
  return FreshnessJson(report);
}

void RequestCounters::VisitCounters(CounterVisitor& v) const {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  v.Counter("lookup", load(lookup), {"LOOKUP requests answered."});
  v.Counter("getattr", load(getattr), {"GETATTR requests answered."});
  v.Counter("readdir", load(readdir), {"READDIR requests answered."});
  v.Counter("readlink", load(readlink), {"READLINK requests answered."});
  v.Counter("read", load(read), {"READ requests answered."});
  v.Counter("read_bytes", load(read_bytes), {"Bytes returned by READ requests.", Unit::kBytes});
  v.Counter("statfs", load(statfs), {"STATFS requests answered."});
  v.Counter("xattr", load(xattr), {"Extended attribute requests answered."});
  v.Counter("rejected_writes", load(rejected_writes),
            {"Requests refused because the mount is read-only."});
  v.Counter("errors", load(errors), {"Requests answered with an error."});
  v.Histogram("read_latency", read_latency, {"Time to answer a READ request."});
  by_uid.VisitCounters(v);
}

void FsContext::VisitSession(CounterVisitor& v) const {
  v.Flag("parallel_dirops", init_patch_.negotiated(),
         {"1 if the kernel runs the LOOKUPs of one directory in parallel."});
  v.Gauge("max_request_bytes", init_patch_.max_pages_replied() * 4096.0,
          {"The largest read request the kernel sends to the daemon.", Unit::kBytes});
  // Built before the control directory's lock is taken (it is a leaf).
  v.Gauge("control_snapshots", static_cast<double>(control_.held_snapshots()),
          {"Snapshots of .tierfs files held for their readers (bounded)."});
  passthrough_.VisitCounters(v);
}

void FsContext::VisitReader(CounterVisitor& v, uid_t reader) const {
  const ReadsByUid::UidReads mine = requests_.by_uid.Of(reader);
  v.BeginGroup("you");
  v.Counter("uid", reader, {"The reader of these figures."});
  v.Counter("reads", mine.reads, {"Data reads by the reader that returned bytes."});
  v.Counter("read_bytes", mine.bytes, {"Bytes returned to the reader.", Unit::kBytes});
  // False: beyond the first 1024 users, her reads are in requests.other_uid_*.
  v.Flag("counted", mine.own_row || requests_.by_uid.uids() < ReadsByUid::kMaxUids,
         {"Whether the reader's reads are counted apart."});
  v.EndGroup();
}

bool FsContext::InOneTierFile(NodeId id) {
  uint64_t token = 0;
  const fuse_ino_t ino = InoOf(id);
  if (backing_.Pin(ino, &token) < 0) return false;
  backing_.Unpin(ino, token);
  return true;
}

void FsContext::NotePassthroughOpen(NodeId id) {
  passthrough_.CountOpened(ns_->node(id).size);
  engine_->read_path().NoteReadElsewhere(id);
}

AccessCaller CallerOf(fuse_req_t req) {
  const fuse_ctx* caller = fuse_req_ctx(req);
  AccessCaller who{caller->uid, caller->gid, std::vector<gid_t>(64)};
  int n = fuse_req_getgroups(req, static_cast<int>(who.groups.size()), who.groups.data());
  if (n > static_cast<int>(who.groups.size())) {  // more than fitted: all of them
    who.groups.resize(static_cast<size_t>(n));
    n = fuse_req_getgroups(req, n, who.groups.data());
  }
  who.groups_known = n >= 0;  // -EIO: no /proc entry for its pid (exited, pid 0, ...)
  who.groups.resize(std::clamp(n, 0, static_cast<int>(who.groups.size())));
  return who;
}

bool FsContext::MayAccess(fuse_req_t req, NodeId id, int mask) const {
  const fuse_ctx* caller = fuse_req_ctx(req);
  gid_t groups[64];
  int ngroups = -2;  // fetched once, only if a group decides; -1: they cannot be read
  auto in_group = [&](gid_t g) {
    if (ngroups == -2) ngroups = std::clamp(fuse_req_getgroups(req, 64, groups), -1, 64);
    return std::find(groups, groups + std::max(ngroups, 0), g) != groups + std::max(ngroups, 0);
  };
  const bool allowed = CallerAccess::ModeAllows(*ns_, caller->uid, caller->gid, in_group, id, mask);
  return allowed && ngroups != -1;  // a group decided, and hers are unknown: no
}

}  // namespace tierfs
