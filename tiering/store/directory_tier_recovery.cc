// The directory tier after a restart (journaled_directory_tier.h): which
// chunks of its tier files are reused, and the journal kept short.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_set>

#include "tiering/base/log.h"
#include "tiering/base/mutex.h"
#include "tiering/store/journaled_directory_tier.h"

namespace tierfs::directory_tier {
namespace {

// Whether [off, off+length) of `file` holds no hole. A removal's punch may
// have reached the disk while its journal line did not: such a range reads
// as zeros and must never be served.
bool Whole(LocalFile* file, uint64_t off, uint64_t length) {
  if (length == 0) return true;
  const int64_t hole = file->seek_hole(off);
  return hole >= 0 && static_cast<uint64_t>(hole) >= off + length;
}

}  // namespace

int JournaledDirectoryTier::Recover(const std::string& source, const Acceptor& accept,
                                    std::vector<ChunkKey>* keys) {
  keys->clear();
  source_id_ = source;
  TierJournal::Entries recorded;
  bool foreign = false;
  if (int err = journal_.Load(source_id_, &recorded, &foreign); err < 0) {
    TIERFS_LOG(kWarning, "tier {}: cannot read its journal ({}): nothing is reused", path_,
               std::strerror(-err));
  } else if (foreign) {
    TIERFS_LOG(kWarning,
               "tier {}: its journal is of another SOURCE or an older tierfs: its copies are "
               "removed, none is reused (this SOURCE: {})",
               path_, source_id_);
  }
  // No new tier file or record may take a number that a record or a file
  // already has.
  uint64_t max_seq = 0;
  std::map<uint64_t, std::vector<uint64_t>> records_of;  // tier file -> its records, newest first
  for (auto it = recorded.rbegin(); it != recorded.rend(); ++it) {
    max_seq = std::max({max_seq, it->first, it->second.file});
    records_of[it->second.file].push_back(it->first);
  }
  std::vector<std::string> names;
  if (int err = io_->list(data_, &names); err < 0) return GiveUp("cannot list data/", err);
  TierJournal::Entries kept;
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index;
  Files files;
  uint64_t removed = 0;
  for (const auto& name : names) {
    std::optional<uint64_t> seq = SeqOfName(name);
    if (seq) max_seq = std::max(max_seq, *seq);
    auto it = seq ? records_of.find(*seq) : records_of.end();
    if (it == records_of.end() ||
        !RecoverFile(*seq, it->second, recorded, accept, &index, &files, &kept, keys)) {
      removed += io_->unlink(data_ + "/" + name) == 0;  // unknown, or nothing of it kept
    }
  }
  next_seq_ = max_seq + 1;  // max_seq < kSeqLimit: no wrap
  const size_t reused_files = files.size();
  {
    WriterMutexLock lock(mu_);
    index_ = std::move(index);
    files_ = std::move(files);
  }
  if (int err = journal_.Rewrite(source_id_, kept); err < 0) {
    keys->clear();
    return GiveUp("cannot rewrite its journal", err);
  }
  TIERFS_LOG(kInfo, "tier '{}': reused {} chunks ({} bytes) in {} files, removed {} files", path_,
             keys->size(), used(), reused_files, removed);
  return 0;
}

bool JournaledDirectoryTier::RecoverFile(uint64_t seq, const std::vector<uint64_t>& recs,
                                         const TierJournal::Entries& recorded,
                                         const Acceptor& accept,
                                         std::unordered_map<ChunkKey, Entry, ChunkKeyHash>* index,
                                         Files* files, TierJournal::Entries* kept,
                                         std::vector<ChunkKey>* keys) {
  const std::string path = PathOf(seq);
  struct stat st;
  std::unique_ptr<LocalFile> file;
  if (io_->lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
      io_->open(path, O_WRONLY | O_NOFOLLOW, 0, &file) != 0) {
    return false;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto tier_file = std::make_shared<TierFile>(io_.get(), path, seq, size);
  std::optional<NodeId> node;  // the one file its chunks are of
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint64_t rec : recs) {
    const ChunkOrigin& o = recorded.at(rec).origin;
    if (o.file_size != size || o.offset > size || o.length > size - o.offset) continue;
    if (!Whole(file.get(), o.offset, o.length)) continue;
    std::optional<ChunkKey> key = accept(o);
    if (!key || (node ? key->node != *node : files->count(key->node) > 0)) continue;
    if (index->count(*key) || !Reserve(o.length)) continue;  // a second copy, or over budget
    node = key->node;
    (*index)[*key] = Entry{tier_file, rec, tier_file->Take(key->chunk), o.offset, o.length};
    tier_file->resident += o.length;
    ++tier_file->chunks;
    (*kept)[rec] = recorded.at(rec);
    keys->push_back(*key);
    ranges.emplace_back(o.offset, o.length);
  }
  if (!node) return false;
  // What no kept chunk covers may hold a chunk half-written at a crash, or
  // one removed whose punch did not reach the disk: freed now.
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  int err = 0;
  for (const auto& [offset, length] : ranges) {
    if (offset > at && err == 0) err = file->punch_hole(at, offset - at);
    at = std::max(at, offset + length);
  }
  if (at < size && err == 0) err = file->punch_hole(at, size - at);
  if (err < 0) {  // never served (in no chunk's range); a writer overwrites a range whole
    TIERFS_LOG(kWarning, "tier file {}: cannot free what no chunk holds: {}", path,
               std::strerror(-err));
  }
  (*files)[*node] = std::move(tier_file);
  return true;
}

void JournaledDirectoryTier::CompactJournalIfLong() {
  if (!JournalLong()) return;
  if (compacting_.exchange(true)) return;  // another thread is at it
  std::unordered_set<uint64_t> records;
  uint64_t newer;  // chunks published from here on are kept whatever the snapshot says
  {
    ReaderMutexLock lock(mu_);
    newer = next_seq_.load();
    for (const auto& [key, entry] : index_) records.insert(entry.record);
  }
  int err = journal_.Compact(source_id_,
                             [&](uint64_t rec) { return rec >= newer || records.count(rec); });
  if (err < 0) {
    TIERFS_LOG(kWarning, "tier {}: cannot compact its journal: {}", path_, std::strerror(-err));
  }
  compacting_ = false;
}

int JournaledDirectoryTier::GiveUp(const char* what, int err) {
  {
    WriterMutexLock lock(mu_);
    index_.clear();
    files_.clear();
  }
  uint64_t removed = EmptyTierDirectory(io_.get(), path_);
  open_files_.ForgetAll();
  Release(used());
  MarkFull();  // limit 0: no promotion comes here this mount
  TIERFS_LOG(kError, "tier {} ({}): {}: {}; removed {} files, unused until the next mount", name(),
             path_, what, std::strerror(-err), removed);
  return err;
}

}  // namespace tierfs::directory_tier
