// The parallel namespace scan: a pool of threads lists SOURCE's directories
// (on a PFS each listing and stat is a metadata round trip, so parallelism is
// what makes the scan fast), then one thread lays the result out breadth-first.
// The pool's width (jobs run at once = metadata requests in flight) is fixed,
// or tuned while scanning: a HillClimber on the metadata operations per
// second, every ScanOptions::tune_period_s while jobs are waiting.
// With a previous snapshot, a directory whose mtime and ctime are unchanged is
// not listed again: its entries are taken from the snapshot.
#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "tiering/base/hill_climber.h"
#include "tiering/base/log.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {
namespace {

constexpr NodeId kNoNode = UINT32_MAX;
// Entries of one directory stat()ed by one thread at a time: large
// directories (ImageNet's hold ~1,300 files) are spread over the pool.
constexpr size_t kStatChunk = 64;
// A wider scan must gain this much to be kept: more requests in flight that
// only hide the client's own gaps (a few percent) are not worth a shared
// metadata server's queue.
constexpr double kScanTuneTolerance = 0.10;

// One scanned directory, compact: its kept entries as Nodes (sorted by name;
// name_off into `names`; a symlink's target at first_child into `targets`; a
// directory's ScanDir at first_child into `subdirs`).
struct ScanDir {
  std::vector<Node> nodes;
  std::string names, targets;
  std::vector<std::unique_ptr<ScanDir>> subdirs;
  uint64_t skipped = 0;
};

bool Kept(const struct stat& st) {
  return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode);
}

// A node's attributes from lstat (tree fields left for the builder). With
// unstable inode numbers (Backend::stable_inodes) the inode is left 0:
// unknown, never compared.
Node NodeOf(const struct stat& st, bool stable_inodes) {
  Node n;
  n.size = static_cast<uint64_t>(st.st_size);
  n.blocks = static_cast<uint64_t>(st.st_blocks);
  n.atime_ns = Nanos(st.st_atim);
  n.mtime_ns = Nanos(st.st_mtim);
  n.ctime_ns = Nanos(st.st_ctim);
  n.mode = st.st_mode;
  n.uid = st.st_uid;
  n.gid = st.st_gid;
  n.nlink = static_cast<uint32_t>(st.st_nlink);
  n.ino = stable_inodes ? static_cast<uint64_t>(st.st_ino) : 0;
  return n;
}

class ParallelScanner {
 public:
  ParallelScanner(Backend* backend, const ScanOptions& options, ScanReport* report)
      : backend_(backend),
        tuned_(options.threads == 0),
        climber_(kScanTuneMin, kScanTuneMax, options.tune_start, kScanTuneTolerance),
        previous_(options.previous),
        changed_(options.changed),
        racy_after_ns_(options.racy_after_ns),
        period_(options.tune_period_s),
        report_(report),
        width_(tuned_ ? climber_.value() : options.threads) {}

  // Scans the tree below the root, whose attributes are *root_node (from a
  // fresh stat); returns -errno if the root cannot be listed.
  int Run(ScanDir* root, Node* root_node) {
    int err =
        ScanOne({root, "", previous_ ? kRootNode : kNoNode, root_node, true, nullptr, 0, 0}, false);
    if (err < 0) return err;
    std::vector<std::thread> pool;
    auto grow = [&](unsigned width) {
      while (pool.size() < width) pool.emplace_back([this] { Work(); });
    };
    report_->width = width_;
    report_->peak_width = width_;
    grow(width_);
    if (tuned_) Tune(grow);
    for (auto& t : pool) t.join();
    return 0;
  }

 private:
  struct Listing;
  struct Job {
    ScanDir* dir = nullptr;
    std::string path;
    NodeId old = kNoNode;  // the directory in previous_, if it was there
    Node* self = nullptr;  // the directory's own node in its parent's ScanDir
    bool fresh = false;    // *self comes from a listing now, not from previous_
    // A chunk of a large directory's entries to stat, instead of a directory.
    std::shared_ptr<Listing> listing;
    size_t begin = 0, end = 0;
  };

  bool Done() const { return queue_.empty() && active_ == 0; }  // REQUIRES: mu_ held

  // Every period while the scan runs: the operations per second at the
  // current width step the climber, which sets the next width (threads are
  // added as it grows; beyond it they wait). A period in which the queue ran
  // dry says nothing about the width (the tree, not the PFS, limited it).
  template <typename Grow>
  void Tune(Grow& grow) {
    const auto period = std::chrono::duration<double>(period_);
    uint64_t last_ops = report_->meta_ops();
    auto last = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_);
    while (!tune_cv_.wait_for(lock, period, [this] { return Done(); })) {
      auto now = std::chrono::steady_clock::now();
      uint64_t ops = report_->meta_ops();
      double rate =
          static_cast<double>(ops - last_ops) / std::chrono::duration<double>(now - last).count();
      last_ops = ops;
      last = now;
      if (starved_) {
        starved_ = false;
        continue;
      }
      const unsigned was = width_;
      const unsigned next = width_ = climber_.Step(rate);
      report_->width = next;
      report_->peak_width = std::max<unsigned>(report_->peak_width, next);
      report_->tune_steps++;
      lock.unlock();
      TIERFS_LOG(kDebug, "scan: {:.0f} metadata operations/s at width {}, next {}", rate, was,
                 next);
      grow(next);
      cv_.notify_all();
      lock.lock();
    }
  }

  void Work() {
    while (true) {
      Job job;
      {
        std::unique_lock lock(mu_);
        // At most width_ jobs at once; a thread beyond it waits.
        cv_.wait(lock, [this] { return Done() || (!queue_.empty() && active_ < width_); });
        if (Done()) return;  // nothing queued and nobody can add more
        job = std::move(queue_.front());
        queue_.pop_front();
        ++active_;
        if (queue_.empty()) starved_ = true;
      }
      if (job.listing) {
        StatChunk(job);
      } else if (ScanOne(job, true) < 0) {
        job.dir->skipped++;
      }
      bool done;
      {
        std::lock_guard lock(mu_);
        --active_;
        done = Done();
      }
      // One waiter may take the freed place (not all: the threads parked
      // beyond the width would wake for nothing at every job).
      if (done) {
        cv_.notify_all();
        tune_cv_.notify_all();
      } else {
        cv_.notify_one();
      }
    }
  }

  // Whether directory `job` may be taken from previous_: it was there and its
  // mtime and ctime (which any entry added, removed or renamed changes) did
  // not move. Stats it first when its attributes are not fresh.
  bool Unchanged(Job& job) {
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
  int ScanOne(Job job, bool log) {  // NOLINT: copied, it may be kept in a Listing
    ScanDir* dir = job.dir;
    std::vector<Job> jobs;
    ScanDir* done = dir;  // complete when this returns (not when its stats are queued)
    size_t chunks_queued = 0;
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
      auto listing = std::make_shared<Listing>();
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
        std::lock_guard lock(mu_);
        for (size_t c = chunks; c-- > 0;) {
          Job chunk;
          chunk.listing = listing;
          chunk.begin = c * kStatChunk;
          chunk.end = std::min(n, chunk.begin + kStatChunk);
          queue_.push_front(std::move(chunk));
        }
        chunks_queued = chunks;
      }
    }
    Queue(done, &jobs, chunks_queued);
    return 0;
  }

  // A directory's names, being stat()ed in chunks by several threads.
  struct Listing {
    Job job;  // the directory's
    std::unique_ptr<SourceDir> source;
    std::vector<std::string> names;  // sorted
    std::vector<struct stat> st;     // st[i], err[i]: lstat of names[i]
    std::vector<int> err;
    std::atomic<size_t> chunks_left{0};
  };

  // Stat chunk `job` of a listing; the last one finishes the directory.
  void StatChunk(const Job& job) {
    Listing& l = *job.listing;
    StatRange(l, job.begin, job.end);
    if (l.chunks_left.fetch_sub(1) != 1) return;
    std::vector<Job> jobs;
    Finish(l.job, l, &jobs);
    Queue(l.job.dir, &jobs);
  }

  void StatRange(Listing& l, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      report_->stats++;
      l.err[i] = l.source->lstat(l.names[i], &l.st[i]);
    }
  }

  // Turns a stat()ed listing into the directory's entries and queues `jobs`
  // for its subdirectories.
  void Finish(const Job& job, Listing& l, std::vector<Job>* jobs) {
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

  // Queues `jobs` and wakes a worker for each of them and for `queued`
  // jobs the caller has queued itself. REQUIRES: mu_ not held.
  void Queue(ScanDir* dir, std::vector<Job>* jobs, size_t queued = 0) {
    if (dir != nullptr) {
      report_->entries += dir->nodes.size();
      dir->names.shrink_to_fit();
      dir->targets.shrink_to_fit();
    }
    if (!jobs->empty()) {
      std::lock_guard lock(mu_);
      for (auto& j : *jobs) queue_.push_back(std::move(j));
    }
    for (size_t i = jobs->size() + queued; i-- > 0;) cv_.notify_one();
  }

  static std::string Child(const std::string& path, std::string_view name) {
    return path.empty() ? std::string(name) : path + "/" + std::string(name);
  }
  static std::string_view Name(const ScanDir& dir, size_t i) {
    return std::string_view(dir.names).substr(dir.nodes[i].name_off, dir.nodes[i].name_len);
  }

  static void AddEntry(ScanDir* dir, Node n, std::string_view name, std::string_view target) {
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

  static Job SubdirJob(const Job& parent, ScanDir* dir, size_t i, NodeId old, bool fresh) {
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

  Backend* const backend_;
  const bool tuned_;
  HillClimber climber_;  // used by Tune's thread only
  const Namespace* const previous_;
  const std::vector<bool>* const changed_;
  const int64_t racy_after_ns_;
  const double period_;
  ScanReport* const report_;
  std::mutex mu_;                    // guards queue_, active_, width_ and starved_; a leaf lock
  std::condition_variable cv_;       // workers: a job was queued or a place freed
  std::condition_variable tune_cv_;  // Tune: the scan is done
  std::deque<Job> queue_;
  unsigned active_ = 0;   // jobs being scanned now
  unsigned width_;        // the most jobs scanned at once
  bool starved_ = false;  // the queue ran dry since the last tuning step
};

// The scanned tree laid out breadth-first into one node array and one arena.
// Fails (EOVERFLOW) when the tree does not fit the 32-bit node ids and arena
// offsets.
Result<std::unique_ptr<Namespace>> Build(const Node& root_node, ScanDir* root,
                                         const struct statvfs& fs_stats, uint64_t max_arena) {
  struct Storage {
    std::vector<Node> nodes;
    std::string arena;
  };
  // Sizes first, so the arrays are allocated once at their final size.
  size_t node_count = 1, arena_size = 0;
  {
    std::vector<ScanDir*> stack{root};
    while (!stack.empty()) {
      ScanDir* d = stack.back();
      stack.pop_back();
      node_count += d->nodes.size();
      arena_size += d->names.size() + d->targets.size();
      for (auto& s : d->subdirs) stack.push_back(s.get());
    }
  }
  // Offsets are 32 bits (Node is saved as is): a bigger tree would wrap them
  // silently and serve one entry's name as another's.
  if (arena_size > max_arena || node_count >= kNoNode) {
    return Status::Error(
        EOVERFLOW,
        fmt::format(
            "SOURCE is too large for one mount: {} entries with {} bytes of names and symlink "
            "targets (at most {} entries and {} bytes); mount a subdirectory",
            node_count, arena_size, kNoNode - 1, max_arena));
  }
  auto storage = std::make_shared<Storage>();
  std::vector<Node>& nodes = storage->nodes;
  std::string& arena = storage->arena;
  nodes.reserve(node_count);
  arena.reserve(arena_size);
  NamespaceTotals totals;
  nodes.push_back(root_node);
  nodes[0].parent = kRootNode;
  nodes[0].name_off = nodes[0].name_len = 0;
  totals.dirs = 1;
  std::deque<std::pair<NodeId, ScanDir*>> queue{{kRootNode, root}};
  while (!queue.empty()) {
    auto [id, dir] = queue.front();
    queue.pop_front();
    totals.skipped += dir->skipped;
    nodes[id].first_child = static_cast<uint32_t>(nodes.size());
    nodes[id].child_count = static_cast<uint32_t>(dir->nodes.size());
    for (const Node& e : dir->nodes) {
      NodeId child = static_cast<NodeId>(nodes.size());
      Node n = e;
      n.parent = id;
      n.name_off = static_cast<uint32_t>(arena.size());
      arena.append(dir->names, e.name_off, e.name_len);
      if (S_ISDIR(n.mode)) {
        totals.dirs++;
        queue.emplace_back(child, dir->subdirs[e.first_child].get());
      } else if (S_ISLNK(n.mode)) {
        totals.symlinks++;
        n.first_child = static_cast<uint32_t>(arena.size());
        arena.append(dir->targets, e.first_child, e.child_count);
      } else {
        totals.files++;
        totals.file_bytes += n.size;
      }
      nodes.push_back(n);
    }
    dir->nodes = {};  // free as we go: the scan result may be large
    dir->names = {};
    dir->targets = {};
  }
  std::span<const Node> node_span(storage->nodes);
  std::string_view arena_view(storage->arena);
  return std::make_unique<Namespace>(node_span, arena_view, totals, fs_stats, std::move(storage));
}

}  // namespace

Result<std::unique_ptr<Namespace>> ScanNamespace(Backend* backend, const ScanOptions& options,
                                                 ScanReport* report) {
  ScanReport local;
  if (report == nullptr) report = &local;
  struct stat root_st;
  report->stats++;
  int err = backend->stat("", &root_st);
  if (err == 0 && !S_ISDIR(root_st.st_mode)) err = -ENOTDIR;
  if (err < 0) return Status::FromErrno(-err, "cannot scan SOURCE");
  Node root_node = NodeOf(root_st, backend->stable_inodes());
  // The scan's temporary tree (`root`) is gone when this returns.
  auto scan = [&]() -> Result<std::unique_ptr<Namespace>> {
    ScanDir root;
    ParallelScanner scanner(backend, options, report);
    if (int listed = scanner.Run(&root, &root_node); listed < 0) {
      return Status::FromErrno(-listed, "cannot list SOURCE");
    }
    struct statvfs fs_stats {};
    if (backend->statfs(&fs_stats) < 0) fs_stats = {};
    return Build(root_node, &root, fs_stats,
                 std::min<uint64_t>(options.max_arena_bytes, UINT32_MAX));
  };
  Result<std::unique_ptr<Namespace>> ns = scan();
  // The scan's temporary trees were spread over the scan threads' malloc
  // arenas: hand the freed pages back, or they stay in the daemon's RSS.
  ::malloc_trim(0);
  return ns;
}

}  // namespace tierfs
