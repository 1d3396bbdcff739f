// FsContext and the JSON of .tierfs/stats.
#include <fmt/format.h>

#include "fs/filesystem.h"
#include "tierfs/version.h"

namespace tierfs {

FsContext::FsContext(const Namespace* ns, SourceReader* reader, TieredStore* store,
                     const SourceCounters* source, FsTimeouts timeouts, uid_t owner, gid_t group)
    : ns_(ns),
      reader_(reader),
      store_(store),
      source_(source),
      timeouts_(timeouts),
      started_(std::chrono::steady_clock::now()),
      control_(static_cast<uint64_t>(ns->size()) + 1, owner, group, ControlFiles()) {}

std::vector<ControlFile> FsContext::ControlFiles() {
  Prefetcher* p = &store_->prefetcher();
  return {
      {"stats", [this] { return StatsJson(); }, nullptr, nullptr},
      {"order", [] { return std::string(); },
       [p](uint64_t w, uint64_t off, std::string_view d) { return p->WriteOrder(w, off, d); },
       [p] { p->ClearOrder(); }},
      {"stage", [] { return std::string(); },
       [p](uint64_t w, uint64_t off, std::string_view d) { return p->WriteStage(w, off, d); },
       nullptr},
      {"prefetch", [p] { return p->ModeText(); },
       [p](uint64_t, uint64_t, std::string_view d) { return p->WriteMode(d); }, nullptr},
  };
}

std::string FsContext::StatsJson() {
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const SourceCounters& s = *source_;
  const RequestCounters& r = requests_;
  const OpenFileCache& f = reader_->open_files();
  double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string out = fmt::format(
      "{{\n"
      "  \"version\": \"{}\",\n"
      "  \"uptime_seconds\": {:.3f},\n"
      "  \"namespace\": {{\"files\": {}, \"directories\": {}, \"symlinks\": {}, "
      "\"skipped\": {}, \"file_bytes\": {}, \"memory_bytes\": {}}},\n",
      TIERFS_VERSION, uptime, ns_->file_count(), ns_->dir_count(), ns_->symlink_count(),
      ns_->skipped_count(), ns_->total_file_bytes(), ns_->memory_bytes());
  out += fmt::format(
      "  \"source\": {{\"meta_ops\": {}, \"stats\": {}, \"lists\": {}, \"readlinks\": {}, "
      "\"statfs\": {}, \"opens\": {}, \"reads\": {}, \"read_bytes\": {}, \"errors\": {}, "
      "\"failed_reads\": {}}},\n",
      s.meta_ops(), load(s.stats), load(s.lists), load(s.readlinks), load(s.statfs), load(s.opens),
      load(s.reads), load(s.read_bytes), load(s.errors), reader_->failed_reads());
  out += fmt::format(
      "  \"requests\": {{\"lookup\": {}, \"getattr\": {}, \"readdir\": {}, \"readlink\": {}, "
      "\"read\": {}, \"read_bytes\": {}, \"statfs\": {}, \"xattr\": {}, "
      "\"rejected_writes\": {}, \"errors\": {},\n    \"read_latency\": {}}},\n",
      load(r.lookup), load(r.getattr), load(r.readdir), load(r.readlink), load(r.read),
      load(r.read_bytes), load(r.statfs), load(r.xattr), load(r.rejected_writes), load(r.errors),
      r.read_latency.Json());
  out += store_->StatsJson();
  out += fmt::format(
      "  \"open_files\": {{\"open\": {}, \"capacity\": {}, \"hits\": {}, \"misses\": {}, "
      "\"evictions\": {}}}\n}}\n",
      f.open_files(), f.capacity(), f.hits(), f.misses(), f.evictions());
  return out;
}

}  // namespace tierfs
