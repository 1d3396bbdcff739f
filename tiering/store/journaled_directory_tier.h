// The directory tier (OpenDirectoryTier): one sparse file per SOURCE file
// under <path>/data, named f<seq>, as long as the SOURCE file, each chunk
// at its own offset. Internal to tiering/store: directory_tier.cc opens it,
// journaled_directory_tier.cc stores, reads and removes chunks,
// directory_tier_recovery.cc reuses a tier after a restart.
//
// Publication: pwrite the chunk's range, fdatasync, then a journal line
// naming the range (so the journal names only complete, durable ranges).
// Removal: the chunk leaves the index, a journal line says so, then its
// range is punched (fallocate PUNCH_HOLE), or, when the file holds no
// other chunk, the file is unlinked. Durability in batches: after every
// kSyncBatch publishes, or the first publish kSyncAge after the last
// batch, data/ and the journal are synced, so a power cut loses at most
// the chunks published since the last batch; recovery never serves a
// wrong byte either way. Reads keep their tier files open (OpenTierFiles,
// bounded); a file leaves it as it is unlinked. Every file access goes
// through the tier's FileIo, but the backing files handed to the kernel
// (OpenBacking).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tiering/base/mutex.h"
#include "tiering/io/file_io.h"
#include "tiering/store/chunk_ranges.h"
#include "tiering/store/open_tier_files.h"
#include "tiering/store/tier.h"
#include "tiering/store/tier_journal.h"

namespace tierfs::directory_tier {

// One tier file, data/f<seq>: the chunks of one SOURCE file held in this
// tier, at their own offsets, holes elsewhere. Its ranges are punched by
// ChunkRanges (Free) when their chunks are let go, or at the last unpin.
struct TierFile final : ChunkRanges {
  TierFile(FileIo* io, std::string path, uint64_t seq, uint64_t size)
      : io(io), path(std::move(path)), seq(seq), size(size) {}
  FileIo* const io;
  const std::string path;
  const uint64_t seq;   // in its name; the backing file's token
  const uint64_t size;  // the SOURCE file's size
  // Guarded by JournaledDirectoryTier::mu_:
  uint64_t resident = 0;  // bytes of its published chunks
  uint32_t chunks = 0;    // its published chunks
  uint32_t writers = 0;   // chunks being written into it

 private:
  void Free(uint64_t offset, uint64_t length) override;
};

// The file name of tier file `seq` ("f<seq>"), and the seq a name holds,
// written as the tier writes it (decimal, no leading zero, below
// TierJournal::kSeqLimit); nullopt for any other name.
inline std::string NameOf(uint64_t seq) { return fmt::format("f{}", seq); }
std::optional<uint64_t> SeqOfName(std::string_view name);

// Deletes the journal of the tier at `path`, then every file in its data/.
// Best effort: what cannot be deleted is named by no journal record. Returns
// how many data files were deleted.
uint64_t EmptyTierDirectory(FileIo* io, const std::string& path);

class JournaledDirectoryTier final : public DirectoryTier {
 public:
  // Keeps at most `open_files` tier files open for reading.
  JournaledDirectoryTier(std::shared_ptr<FileIo> io, std::string name, std::string path,
                         uint64_t budget, std::unique_ptr<FileLock> lock, size_t open_files)
      : DirectoryTier(std::move(name), Kind::kDirectory, budget),
        io_(std::move(io)),
        path_(std::move(path)),
        data_(path_ + "/data"),
        lock_(std::move(lock)),
        journal_(io_.get(), path_ + "/journal"),
        open_files_(io_.get(), open_files) {}
  ~JournaledDirectoryTier() override {
    if (unsynced_.load() > 0) SyncNow();
  }

  const std::string& path() const override { return path_; }
  size_t open_files() const override { return open_files_.size(); }
  size_t kept_descriptors() const override { return open_files_.capacity(); }
  int NoteHolder(std::string_view text) override { return lock_ ? lock_->Note(text) : 0; }

  using DirectoryTier::Recover;
  int Recover(const std::string& source, const Acceptor& accept,
              std::vector<ChunkKey>* kept) override;
  int BeginStore(ChunkKey key, const ChunkOrigin& origin,
                 std::unique_ptr<ChunkWriter>* out) override;
  int Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) override;
  uint64_t Remove(ChunkKey key) override;
  int PinBacking(NodeId id, uint64_t size, uint64_t* token) override;
  void UnpinBacking(NodeId id, uint64_t token) override;
  int OpenBacking(NodeId id, uint64_t token) override;
  size_t chunks() const override {
    ReaderMutexLock lock(mu_);
    return index_.size();
  }
  // Due once the journal holds more than twice as many lines as there are
  // chunks (and at least kCompactAfter): eviction churn must not grow it
  // without bound. Maintain compacts it (the store's reclaimer runs it).
  bool maintenance_due() const override { return JournalLong(); }
  void Maintain() override { CompactJournalIfLong(); }

  // Where a stored chunk is: its tier file, its journal record number (a
  // chunk stored again gets another; 0 until published) and its range's
  // generation in the file.
  struct Entry {
    std::shared_ptr<TierFile> file;
    uint64_t record = 0;
    uint64_t gen = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  // How a writer ended.
  enum class End { kPublished, kFailed, kUnwritten };
  // Called by a writer when it is done with entry.file. kPublished: the
  // chunk gets its record number and is served from now on, and its journal
  // record is appended (if the journal cannot record it, the chunk is served
  // this mount and a restart drops it). kFailed: the writer's range is
  // punched. Either failure unlinks the file if it holds nothing else.
  void Finish(ChunkKey key, const ChunkOrigin& origin, Entry entry, End end);
  // A new record number (also the numbers of tier files: one counter).
  uint64_t NextSeq() { return next_seq_.fetch_add(1); }

 private:
  using Files = std::unordered_map<NodeId, std::shared_ptr<TierFile>>;
  // The tier file of node `id`, a writer counted in it, created (sparse,
  // `size` bytes) if there is none: 0 or -errno.
  int TakeFile(NodeId id, uint64_t size, std::shared_ptr<TierFile>* out);
  // Takes a tier file that holds, writes and pins nothing out of files_;
  // returns it (to be unlinked after the lock), or null.
  std::shared_ptr<TierFile> DropIfEmpty(Files::iterator it) REQUIRES(mu_);
  // Drops `file` from files_ if it is still node `id`'s and empty, then unlinks it.
  void UnlinkIfEmpty(NodeId id, const std::shared_ptr<TierFile>& file);
  // Unlinks a tier file DropIfEmpty took out of files_, and closes its read
  // descriptor (once its readers are done): none holds its blocks.
  void Unlink(const TierFile& gone);
  // Whether `key` is still stored as `record`.
  bool Stored(ChunkKey key, uint64_t record) const;
  // Recovery failed with `err`: forget and delete everything, take nothing more.
  int GiveUp(const char* what, int err);
  // Recovery of one tier file: keeps each of its records (by `recs`) that
  // `accept` takes and whose range is whole, and punches the rest. Adds what it keeps to the
  // arguments; false if it keeps nothing (the caller unlinks it).
  bool RecoverFile(uint64_t seq, const std::vector<uint64_t>& recs,
                   const TierJournal::Entries& recorded, const Acceptor& accept,
                   std::unordered_map<ChunkKey, Entry, ChunkKeyHash>* index, Files* files,
                   TierJournal::Entries* kept, std::vector<ChunkKey>* keys);
  std::string PathOf(uint64_t seq) const { return data_ + "/" + NameOf(seq); }

  // Syncs data/ and the journal now: the publishes so far survive a power cut.
  void SyncNow();
  // One publisher at a time syncs, when a batch is full or old.
  void SyncBatchIfDue();
  // Whether the journal is long (maintenance_due), and its rewrite with the
  // live chunks' records if it is.
  bool JournalLong() const {
    return journal_.records() > std::max<uint64_t>(kCompactAfter, 2 * chunks());
  }
  void CompactJournalIfLong();
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static constexpr uint64_t kSyncBatch = 64;
  static constexpr int64_t kSyncAgeNs = 1'000'000'000;
  static constexpr uint64_t kCompactAfter = 4096;

  const std::shared_ptr<FileIo> io_;
  const std::string path_, data_;
  const std::unique_ptr<FileLock> lock_;  // one daemon per tier directory
  TierJournal journal_;
  OpenTierFiles open_files_;  // read descriptors, by tier file seq
  std::string source_id_;     // the SOURCE identity; set by Recover, before any other use
  std::atomic<bool> compacting_{false};
  std::atomic<uint64_t> unsynced_{0};  // publishes since the last sync
  std::atomic<int64_t> last_sync_ns_{NowNs()};
  std::atomic<bool> syncing_{false};
  std::atomic<uint64_t> next_seq_{1};
  // Guards index_, files_, and each TierFile's resident, chunks and writers.
  // Never held across file I/O; takes a TierFile's ChunkRanges::mu_ under
  // it (pinned(), Pin), which may wait for a punch.
  mutable SharedMutex mu_;
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index_ GUARDED_BY(mu_);
  Files files_ GUARDED_BY(mu_);  // by node: the tier file of each file with chunks here
};

}  // namespace tierfs::directory_tier
