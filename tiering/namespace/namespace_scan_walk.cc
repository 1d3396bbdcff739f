// The walk of the parallel namespace scan: a pool of threads (an Executor) lists SOURCE's
// directories (on a PFS each listing and stat is a metadata round trip, so
// parallelism is what makes the scan fast) into a ScanDir tree.
// The pool's width (jobs run at once = metadata requests in flight) is fixed,
// or tuned while scanning: a HillClimber on the metadata operations per
// second, every ScanOptions::tune_period_s while jobs are waiting.
// With a previous snapshot, a directory whose mtime and ctime are unchanged is
// not listed again: its entries are taken from the snapshot.
// ScanNamespace, and the snapshot laid out breadth-first from the tree, are
// in namespace_scan.cc; what both share in namespace_scan_internal.h.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>

#include "tiering/base/log.h"
#include "tiering/namespace/namespace_scan_internal.h"

namespace tierfs {
namespace scan_internal {
namespace {

// Entries of one directory stat()ed by one thread at a time: large
// directories (ImageNet's hold ~1,300 files) are spread over the pool.
constexpr size_t kStatChunk = 64;
// A wider scan must gain this much to be kept: more requests in flight that
// only hide the client's own gaps (a few percent) are not worth a shared
// metadata server's queue.
constexpr double kScanTuneTolerance = 0.10;

bool Kept(const struct stat& st) {
  return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode);
}

}  // namespace

// A directory's names, being stat()ed in chunks by several threads.
struct ParallelScanner::ScanListing {
  Job job;  // the directory's
  std::unique_ptr<SourceDir> source;
  std::vector<std::string> names;  // sorted
  std::vector<struct stat> st;     // st[i], err[i]: lstat of names[i]
  std::vector<int> err;
  std::atomic<size_t> chunks_left{0};
};

ParallelScanner::ParallelScanner(Backend* backend, const ScanOptions& options, ScanReport* report)
    : backend_(backend),
      tuned_(options.threads == 0),
      climber_(kScanTuneMin, kScanTuneMax, options.tune_start, kScanTuneTolerance),
      previous_(options.previous),
      changed_(options.changed),
      racy_after_ns_(options.racy_after_ns),
      period_(options.tune_period_s),
      report_(report),
      pool_(tuned_ ? climber_.value() : options.threads, std::numeric_limits<size_t>::max(),
            "scan") {}

int ParallelScanner::Run(ScanDir* root, Node* root_node) {
  int err =
      ScanOne({root, "", previous_ ? kRootNode : kNoNode, root_node, true, nullptr, 0, 0}, false);
  if (err < 0) return err;
  report_->width = pool_.threads();
  report_->peak_width = pool_.threads();
  pool_.Start();
  if (tuned_) {
    Tune();
  } else {
    MutexLock lock(mu_);
    done_cv_.Wait(mu_, [this]() REQUIRES(mu_) { return Done(); });
  }
  pool_.Shutdown();  // nothing is queued: the threads end
  return failed_.load() ? -ENOMEM : 0;
}

// Every period while the scan runs: the operations per second at the
// current width step the climber, which sets the next width (the pool
// grows to it; beyond a narrower width its threads wait). A period in
// which the queue ran dry says nothing about the width (the tree, not the
// PFS, limited it).
void ParallelScanner::Tune() {
  const auto period = std::chrono::duration<double>(period_);
  uint64_t last_ops = report_->meta_ops();
  auto last = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  while (!done_cv_.WaitFor(mu_, period, [this]() REQUIRES(mu_) { return Done(); })) {
    auto now = std::chrono::steady_clock::now();
    uint64_t ops = report_->meta_ops();
    double rate =
        static_cast<double>(ops - last_ops) / std::chrono::duration<double>(now - last).count();
    last_ops = ops;
    last = now;
    if (starved_.exchange(false)) continue;
    const unsigned was = pool_.active_limit();
    const unsigned next = climber_.Step(rate);
    report_->width = next;
    report_->peak_width = std::max<unsigned>(report_->peak_width, next);
    report_->tune_steps++;
    lock.Unlock();
    TIERFS_LOG(kDebug, "scan: {:.0f} metadata operations/s at width {}, next {}", rate, was, next);
    pool_.Grow(next);
    pool_.SetActiveLimit(next);
    lock.Lock();
  }
}

void ParallelScanner::Submit(Job job, Executor::Place place) {
  {
    MutexLock lock(mu_);
    ++outstanding_;
  }
  auto run = [this, job = std::move(job)]() mutable { Work(job); };
  // Refused only once the pool stops, which it does after the last job.
  if (!pool_.Submit(Executor::Lane::kForeground, Executor::Job{run}, place)) run();
}

void ParallelScanner::Work(Job& job) {
  if (pool_.queued(Executor::Lane::kForeground) == 0) starved_.store(true);
  try {
    ScanDir* dir = job.dir;
    if (job.listing) {
      StatChunk(job);
    } else if (ScanOne(std::move(job), true) < 0) {
      dir->skipped++;
    }
  } catch (...) {  // out of memory: the scan fails, it does not show a part of a directory
    TIERFS_LOG(kError, "scan: {}", DescribeCurrentException());
    failed_.store(true);
  }
  bool done;
  {
    MutexLock lock(mu_);
    done = --outstanding_ == 0;  // the jobs this one queued count already
  }
  if (done) done_cv_.NotifyAll();
}

// Whether directory `job` may be taken from previous_: it was there and its
// mtime and ctime (which any entry added, removed or renamed changes) did
// not move. Stats it first when its attributes are not fresh.
bool ParallelScanner::Unchanged(Job& job) {
  if (job.old == kNoNode) return false;
  // Known unchanged: no stat. Known changed: stat it all the same, so the
  // new snapshot records its new times (else it would look changed forever).
  if (!job.fresh && changed_ != nullptr && !(*changed_)[job.old]) return true;
  if (!job.fresh) {
    struct stat st;
    report_->stats++;
    if (backend_->stat(job.path, &st) < 0 || !S_ISDIR(st.st_mode)) return false;
    // Its attributes; the tree fields stay the parent's.
    Node fresh = NodeOf(st, backend_->stable_inodes());
    fresh.name_off = job.self->name_off;
    fresh.name_len = job.self->name_len;
    fresh.first_child = job.self->first_child;
    fresh.child_count = job.self->child_count;
    *job.self = fresh;
  }
  const Node& was = previous_->node(job.old);
  return S_ISDIR(job.self->mode) && was.mtime_ns == job.self->mtime_ns &&
         was.ctime_ns == job.self->ctime_ns && was.ctime_ns < racy_after_ns_ &&
         was.mtime_ns < racy_after_ns_;
}

// Lists one directory (or copies it from previous_) and queues its
// subdirectories. `log`: log a failure (the root's is the caller's, fatal).
int ParallelScanner::ScanOne(Job job,
                             bool log) {  // NOLINT: copied, it may be kept in a ScanListing
  ScanDir* dir = job.dir;
  std::vector<Job> jobs;
  ScanDir* done = dir;  // complete when this returns (not when its stats are queued)
  if (Unchanged(job)) {
    report_->dirs_reused++;
    auto [begin, end] = previous_->Children(job.old);
    dir->nodes.reserve(end - begin);
    for (NodeId c = begin; c < end; ++c) {
      const Node& n = previous_->node(c);
      AddEntry(dir, n, previous_->name(c),
               S_ISLNK(n.mode) ? previous_->link_target(c) : std::string_view());
    }
    for (size_t i = 0; i < dir->nodes.size(); ++i) {
      if (!S_ISDIR(dir->nodes[i].mode)) continue;
      jobs.push_back(SubdirJob(job, dir, i, begin + static_cast<NodeId>(i), false));
    }
  } else {
    std::unique_ptr<SourceDir> source_dir;
    report_->lists++;
    int err = backend_->open_dir(job.path, &source_dir);
    if (err < 0 && log) {
      TIERFS_LOG(kWarning, "cannot list '{}' on SOURCE: {}; it is shown empty", job.path,
                 std::strerror(-err));
    }
    if (err < 0) return err;
    report_->dirs_listed++;
    auto listing = std::make_shared<ScanListing>();
    listing->names = source_dir->names();
    std::sort(listing->names.begin(), listing->names.end());
    listing->source = std::move(source_dir);
    const size_t n = listing->names.size();
    listing->st.resize(n);
    listing->err.resize(n);
    const size_t chunks = (n + kStatChunk - 1) / kStatChunk;
    if (chunks <= 1) {
      StatRange(*listing, 0, n);
      Finish(job, *listing, &jobs);
    } else {
      // A large directory: its entries are stat()ed by every scan thread,
      // kStatChunk at a time; the last chunk done finishes the directory.
      // The chunks go to the queue's front: the directories listed
      // before them wait, so few listings are held at once and the pool
      // does the same mix of work all along (what the tuner measures).
      listing->chunks_left = chunks;
      listing->job = std::move(job);
      done = nullptr;
      for (size_t c = chunks; c-- > 0;) {
        Job chunk;
        chunk.listing = listing;
        chunk.begin = c * kStatChunk;
        chunk.end = std::min(n, chunk.begin + kStatChunk);
        Submit(std::move(chunk), Executor::Place::kFirst);
      }
    }
  }
  Queue(done, &jobs);
  return 0;
}

// Stat chunk `job` of a listing; the last one finishes the directory.
void ParallelScanner::StatChunk(const Job& job) {
  ScanListing& l = *job.listing;
  StatRange(l, job.begin, job.end);
  if (l.chunks_left.fetch_sub(1) != 1) return;
  std::vector<Job> jobs;
  Finish(l.job, l, &jobs);
  Queue(l.job.dir, &jobs);
}

void ParallelScanner::StatRange(ScanListing& l, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    report_->stats++;
    l.err[i] = l.source->lstat(l.names[i], &l.st[i]);
  }
}

// Turns a stat()ed listing into the directory's entries and queues `jobs`
// for its subdirectories.
void ParallelScanner::Finish(const Job& job, ScanListing& l, std::vector<Job>* jobs) {
  ScanDir* dir = job.dir;
  dir->nodes.reserve(l.names.size());
  for (size_t i = 0; i < l.names.size(); ++i) {
    if (l.err[i] == -ENOENT) continue;  // removed while listing
    if (l.err[i] < 0 || !Kept(l.st[i])) {
      dir->skipped++;
      continue;
    }
    std::string target;
    if (S_ISLNK(l.st[i].st_mode)) {
      report_->readlinks++;
      if (backend_->readlink(Child(job.path, l.names[i]), &target) < 0) target.clear();
    }
    AddEntry(dir, NodeOf(l.st[i], backend_->stable_inodes()), l.names[i], target);
  }
  for (size_t i = 0; i < dir->nodes.size(); ++i) {
    if (!S_ISDIR(dir->nodes[i].mode)) continue;
    NodeId old = kNoNode;
    if (job.old != kNoNode) {
      auto o = previous_->Lookup(job.old, Name(*dir, i));
      if (o && S_ISDIR(previous_->node(*o).mode)) old = *o;
    }
    jobs->push_back(SubdirJob(job, dir, i, old, true));
  }
  l.source.reset();  // closes the directory
  l.names = {};
  l.st = {};
}

// Counts `dir` (complete, or null) and queues `jobs` behind the others.
void ParallelScanner::Queue(ScanDir* dir, std::vector<Job>* jobs) {
  if (dir != nullptr) {
    report_->entries += dir->nodes.size();
    dir->names.shrink_to_fit();
    dir->targets.shrink_to_fit();
  }
  for (auto& j : *jobs) Submit(std::move(j), Executor::Place::kLast);
}

std::string ParallelScanner::Child(const std::string& path, std::string_view name) {
  return path.empty() ? std::string(name) : path + "/" + std::string(name);
}
std::string_view ParallelScanner::Name(const ScanDir& dir, size_t i) {
  return std::string_view(dir.names).substr(dir.nodes[i].name_off, dir.nodes[i].name_len);
}

void ParallelScanner::AddEntry(ScanDir* dir, Node n, std::string_view name,
                               std::string_view target) {
  n.name_off = static_cast<uint32_t>(dir->names.size());
  n.name_len = static_cast<uint32_t>(name.size());
  dir->names += name;
  n.first_child = n.child_count = 0;
  if (S_ISLNK(n.mode)) {
    n.first_child = static_cast<uint32_t>(dir->targets.size());
    n.child_count = static_cast<uint32_t>(target.size());
    dir->targets += target;
  } else if (S_ISDIR(n.mode)) {
    n.first_child = static_cast<uint32_t>(dir->subdirs.size());
    dir->subdirs.push_back(std::make_unique<ScanDir>());
  }
  dir->nodes.push_back(n);
}

ParallelScanner::Job ParallelScanner::SubdirJob(const Job& parent, ScanDir* dir, size_t i,
                                                NodeId old, bool fresh) {
  Node* self = &dir->nodes[i];
  return {dir->subdirs[self->first_child].get(),
          Child(parent.path, Name(*dir, i)),
          old,
          self,
          fresh,
          nullptr,
          0,
          0};
}

}  // namespace scan_internal
}  // namespace tierfs
