// The parallel namespace scan: a pool of threads lists SOURCE's directories
// (on a PFS each listing and stat is a metadata round trip, so parallelism is
// what makes the scan fast), then one thread lays the result out breadth-first.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "tiering/log.h"
#include "tiering/namespace.h"

namespace tierfs {
namespace {

// One scanned directory: its kept entries (sorted by name) and, aligned with
// them, symlink targets and scanned subdirectories.
struct ScanDir {
  std::vector<DirEntry> entries;
  std::vector<std::string> targets;
  std::vector<std::unique_ptr<ScanDir>> subdirs;
  uint64_t skipped = 0;
};

bool Kept(const struct stat& st) {
  return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode);
}

class ParallelScanner {
 public:
  ParallelScanner(Backend* backend, unsigned threads)
      : backend_(backend), threads_(std::max(1u, threads)) {}

  // Scans the tree below `root`; returns -errno if the root cannot be listed.
  int Run(ScanDir* root) {
    int err = ScanOne(root, "", /*report=*/false);
    if (err < 0) return err;
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads_; ++i) pool.emplace_back([this] { Work(); });
    for (auto& t : pool) t.join();
    return 0;
  }

 private:
  struct Job {
    ScanDir* dir;
    std::string path;
  };

  void Work() {
    while (true) {
      Job job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty() || active_ == 0; });
        if (queue_.empty()) return;  // nothing queued and nobody can add more
        job = std::move(queue_.front());
        queue_.pop_front();
        ++active_;
      }
      if (ScanOne(job.dir, job.path, /*report=*/true) < 0) job.dir->skipped++;
      {
        std::lock_guard lock(mu_);
        --active_;
      }
      cv_.notify_all();
    }
  }

  // Lists one directory and queues its subdirectories. `report`: log a
  // failure (the root's is reported by the caller, as fatal).
  int ScanOne(ScanDir* dir, const std::string& path, bool report) {
    std::vector<DirEntry> entries;
    int err = backend_->list(path, &entries);
    if (err < 0 && report) {
      TIERFS_LOG(kWarning, "cannot list '{}' on SOURCE: {}; it is shown empty", path,
                 std::strerror(-err));
    }
    if (err < 0) return err;
    std::sort(entries.begin(), entries.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    for (auto& e : entries) {
      if (!Kept(e.st)) {
        dir->skipped++;
        continue;
      }
      dir->entries.push_back(std::move(e));
    }
    dir->targets.resize(dir->entries.size());
    dir->subdirs.resize(dir->entries.size());
    std::vector<Job> jobs;
    for (size_t i = 0; i < dir->entries.size(); ++i) {
      const DirEntry& e = dir->entries[i];
      std::string child = path.empty() ? e.name : path + "/" + e.name;
      if (S_ISDIR(e.st.st_mode)) {
        dir->subdirs[i] = std::make_unique<ScanDir>();
        jobs.push_back({dir->subdirs[i].get(), std::move(child)});
      } else if (S_ISLNK(e.st.st_mode)) {
        if (backend_->readlink(child, &dir->targets[i]) < 0) dir->targets[i].clear();
      }
    }
    if (!jobs.empty()) {
      std::lock_guard lock(mu_);
      for (auto& j : jobs) queue_.push_back(std::move(j));
    }
    cv_.notify_all();
    return 0;
  }

  Backend* const backend_;
  const unsigned threads_;
  std::mutex mu_;  // guards queue_ and active_; a leaf lock
  std::condition_variable cv_;
  std::deque<Job> queue_;
  unsigned active_ = 0;  // jobs being scanned now
};

}  // namespace

// Lays a scanned tree out as a Namespace. Friend of Namespace.
class NamespaceBuilder {
 public:
  static std::unique_ptr<Namespace> Build(const struct stat& root_st, ScanDir* root,
                                          const struct statvfs& fs_stats) {
    auto ns = std::make_unique<Namespace>();
    ns->fs_stats_ = fs_stats;
    ns->nodes_.push_back(MakeNode(*ns, root_st, kRootNode, ""));
    ns->dir_count_ = 1;
    std::deque<std::pair<NodeId, ScanDir*>> queue{{kRootNode, root}};
    while (!queue.empty()) {
      auto [id, dir] = queue.front();
      queue.pop_front();
      ns->skipped_count_ += dir->skipped;
      ns->nodes_[id].first_child = static_cast<uint32_t>(ns->nodes_.size());
      ns->nodes_[id].child_count = static_cast<uint32_t>(dir->entries.size());
      for (size_t i = 0; i < dir->entries.size(); ++i) {
        const DirEntry& e = dir->entries[i];
        NodeId child = static_cast<NodeId>(ns->nodes_.size());
        ns->nodes_.push_back(MakeNode(*ns, e.st, id, e.name));
        if (S_ISDIR(e.st.st_mode)) {
          ns->dir_count_++;
          queue.emplace_back(child, dir->subdirs[i].get());
        } else if (S_ISLNK(e.st.st_mode)) {
          ns->symlink_count_++;
          Node& n = ns->nodes_[child];
          n.first_child = static_cast<uint32_t>(ns->arena_.size());
          n.child_count = static_cast<uint32_t>(dir->targets[i].size());
          ns->arena_ += dir->targets[i];
        } else {
          ns->file_count_++;
          ns->total_file_bytes_ += static_cast<uint64_t>(e.st.st_size);
        }
      }
      dir->entries = {};  // free as we go: the scan result may be large
    }
    ns->nodes_.shrink_to_fit();
    ns->arena_.shrink_to_fit();
    return ns;
  }

 private:
  static int64_t Nanos(const struct timespec& ts) {
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  static Node MakeNode(Namespace& ns, const struct stat& st, NodeId parent, std::string_view name) {
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
    n.parent = parent;
    n.name_off = static_cast<uint32_t>(ns.arena_.size());
    n.name_len = static_cast<uint32_t>(name.size());
    ns.arena_ += name;
    return n;
  }
};

std::unique_ptr<Namespace> ScanNamespace(Backend* backend, const ScanOptions& options,
                                         std::string* error) {
  struct stat root_st;
  int err = backend->stat("", &root_st);
  if (err == 0 && !S_ISDIR(root_st.st_mode)) err = -ENOTDIR;
  if (err < 0) {
    *error = std::string("cannot scan SOURCE: ") + std::strerror(-err);
    return nullptr;
  }
  ScanDir root;
  ParallelScanner scanner(backend, options.threads);
  err = scanner.Run(&root);
  if (err < 0) {
    *error = std::string("cannot list SOURCE: ") + std::strerror(-err);
    return nullptr;
  }
  struct statvfs fs_stats {};
  if (backend->statfs(&fs_stats) < 0) fs_stats = {};
  return NamespaceBuilder::Build(root_st, &root, fs_stats);
}

}  // namespace tierfs
