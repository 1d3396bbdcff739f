// Tiers: places that hold promoted copies of SOURCE's bytes, fastest first
// (RAM, node-local NVMe, /dev/shm). Data is stored per chunk: a file smaller
// than the chunk size is one chunk.
//
// Budgets are hard limits: bytes are reserved before a chunk is written and
// a reservation that does not fit is refused.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tiering/base/status.h"
#include "tiering/namespace/chunk_key.h"
#include "tiering/namespace/file_identity.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

class FileIo;

// What a stored chunk is a copy of; directory tiers persist it so a restart
// can tell a valid copy (same SOURCE size and mtime) from a stale one.
struct ChunkOrigin {
  std::string path;  // relative to SOURCE
  uint64_t file_size = 0;
  int64_t mtime_ns = 0;
  uint32_t chunk = 0;
  uint64_t length = 0;   // bytes in this chunk
  int64_t ctime_ns = 0;  // a rewrite that keeps size and mtime (cp -p) still moves ctime
  uint64_t ino = 0;
  uint64_t offset = 0;  // where the chunk starts in the file

  // The version of the file the copy was made from.
  FileIdentity file() const { return {file_size, mtime_ns, ctime_ns, ino}; }
};

// Streams one chunk into a tier. Nothing is visible to readers until Commit.
class ChunkWriter {
 public:
  virtual ~ChunkWriter() = default;
  // 0 or -errno. After an error the chunk is incomplete: a directory tier's
  // writer has then aborted itself, and Commit returns the same error.
  virtual int Append(const char* data, size_t n) = 0;
  virtual int Commit() = 0;  // 0 or -errno (then aborted)
  virtual void Abort() = 0;  // idempotent; also done by the destructor
  // Where the bytes appended so far can be read while the chunk is being
  // written (they never move, and *hold keeps them alive past Commit or
  // Abort), or nullptr when this tier cannot serve them before Commit.
  virtual const char* Contents(std::shared_ptr<const void>* /*hold*/) { return nullptr; }
};

// Bytes read from a tier: `data` points into `scratch` or into tier memory
// kept alive by `hold`.
struct TierRead {
  const char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> hold;
};

class Tier {
 public:
  enum class Kind { kMemory, kDirectory };
  Tier(std::string name, Kind kind, uint64_t budget)
      : name_(std::move(name)), kind_(kind), budget_(budget) {}
  virtual ~Tier() = default;

  const std::string& name() const { return name_; }
  Kind kind() const { return kind_; }
  uint64_t budget() const { return budget_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // The budget in force: lowered to what is used when the device filled up
  // before the budget did (ENOSPC), so no more promotions are tried there.
  uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  void MarkFull() { limit_.store(used(), std::memory_order_relaxed); }

  // Reserves `n` bytes of the budget, leaving at least `keep_free` bytes of
  // it free; false (nothing reserved) if they do not fit.
  bool Reserve(uint64_t n, uint64_t keep_free = 0);
  void Release(uint64_t n);

  // Starts storing chunk `key` of `origin.length` bytes, already reserved.
  // Returns 0 with the writer in *out, or -errno (*out untouched).
  virtual int BeginStore(ChunkKey key, const ChunkOrigin& origin,
                         std::unique_ptr<ChunkWriter>* out) = 0;
  // Reads [off, off+n) of a stored chunk. Returns 0 or -errno (-ENOENT if the
  // chunk is not stored). Thread-safe; concurrent with Remove.
  virtual int Read(ChunkKey key, uint64_t off, size_t n, char* scratch, TierRead* out) = 0;
  // Drops a stored chunk; returns its length (0 if absent). The caller
  // releases the budget.
  virtual uint64_t Remove(ChunkKey key) = 0;
  virtual size_t chunks() const = 0;

  // FUSE passthrough's backing files: the kernel reads a file from a tier
  // file that holds all of it at its own offsets. PinBacking: if this tier
  // holds all `size` bytes of file `id` in one such file, 0 with *token
  // naming that file (a later file of the same node gets another token),
  // and the file is pinned: until UnpinBacking, removing its chunks frees
  // no byte of it (a kernel reading it must never see a hole). -ENOENT if
  // not all of it is held, -EOPNOTSUPP if this tier keeps it in no such
  // file. A pin is cheap: no file is opened.
  virtual int PinBacking(NodeId /*id*/, uint64_t /*size*/, uint64_t* /*token*/) {
    return -EOPNOTSUPP;
  }
  virtual void UnpinBacking(NodeId /*id*/, uint64_t /*token*/) {}
  // A new read-only descriptor of the backing file `token` of file `id`
  // (pinned by the caller), or -errno. The caller closes it.
  virtual int OpenBacking(NodeId /*id*/, uint64_t /*token*/) { return -EOPNOTSUPP; }
  // A memory tier keeps each file in one memory file that PinBacking can
  // hand out, at most `max_files` files at a time (each holds a file
  // descriptor; beyond that, heap memory per chunk): an unnamed file in
  // `huge_fs` (NewHugePageMemoryFs; the tier keeps a descriptor of its own)
  // if it is open, else a memfd. Other tiers ignore it.
  // REQUIRES: before the first BeginStore.
  virtual void UseMemoryFiles(uint64_t /*max_files*/, int /*huge_fs*/ = -1) {}
  // `removed` is called with a chunk's node after each Remove that dropped
  // a chunk (outside the tier's locks): holders of backing files let go of
  // them. REQUIRES: before the first BeginStore.
  void OnRemoved(std::function<void(NodeId)> removed) { removed_ = std::move(removed); }
  // True if a commit waits for a device (a directory tier's fdatasync and
  // rename): a reader that copies a chunk it missed should not wait for it.
  virtual bool slow_commit() const { return false; }
  // True when the tier has upkeep to do (a directory tier's journal grown
  // long): the store runs Maintain on its reclaimer's thread. Cheap.
  virtual bool maintenance_due() const { return false; }
  // Does the upkeep, if due. Thread-safe; device I/O: not for a reader's thread.
  virtual void Maintain() {}
  // Descriptors it may keep open at most besides its memory files (a
  // directory tier's files kept open for reading).
  virtual size_t kept_descriptors() const { return 0; }

  // Counters of reads served.
  void CountHit(size_t bytes) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    bytes_served_.fetch_add(bytes, std::memory_order_relaxed);
  }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t bytes_served() const { return bytes_served_.load(std::memory_order_relaxed); }

 protected:
  void NoteRemoved(NodeId id) const {
    if (removed_) removed_(id);
  }

 private:
  std::function<void(NodeId)> removed_;
  const std::string name_;
  const Kind kind_;
  const uint64_t budget_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> limit_{budget_};
  std::atomic<uint64_t> hits_{0}, bytes_served_{0};
};

std::unique_ptr<Tier> NewMemoryTier(std::string name, uint64_t budget);

// A tmpfs of this daemon's own, mounted nowhere, that gives its files huge
// pages within their size whatever the node's setting for shared memory
// (shmem_enabled) short of "deny": a descriptor of its root, or -errno
// (-EPERM without CAP_SYS_ADMIN). Reads of large files from huge pages
// copy from 2 MiB folios, not 4 KiB pages. The caller closes it.
int NewHugePageMemoryFs();

// A tier in a directory (node-local NVMe, /dev/shm): one sparse file per
// SOURCE file, each chunk at its own offset. A chunk is written, flushed,
// then recorded in a journal, so a crash leaves only complete copies named;
// a removed chunk's range is punched (a hole). Recover() must run before use.
class DirectoryTier : public Tier {
 public:
  bool slow_commit() const override { return true; }
  using Tier::Tier;
  // Decides whether a recovered chunk is still a valid copy, and under which key.
  using Acceptor = std::function<std::optional<ChunkKey>(const ChunkOrigin&)>;
  // Reuses the complete chunks that `accept` takes (their keys in *kept) and
  // removes the rest (stale, incomplete, unknown files), then rewrites the
  // journal to name only the kept ones. Returns 0, or -errno when the tier
  // could not be listed or its journal not rewritten: then nothing is kept,
  // the tier has deleted what it could (journal first), and its limit is 0,
  // so it takes no chunk this mount. (A journal naming deleted files must
  // never meet new files under the same numbers.)
  // `source` identifies the SOURCE the tier holds copies of (it is written in
  // the journal): a tier of another SOURCE, or one written by an older
  // tierfs, keeps nothing.
  // REQUIRES: called once, before any other use of the tier.
  virtual int Recover(const std::string& source, const Acceptor& accept,
                      std::vector<ChunkKey>* kept) = 0;
  // The same for tests, with no SOURCE identity.
  int Recover(const Acceptor& accept, std::vector<ChunkKey>* kept) {
    return Recover(std::string(), accept, kept);
  }
  // The same, for callers that need only the keys: a failed recovery leaves
  // the tier empty and unused whether or not the caller looks.
  std::vector<ChunkKey> Recover(const Acceptor& accept);
  virtual const std::string& path() const = 0;
  // Tier files held open for reading now (at most 256; fewer under a low
  // open-file limit).
  virtual size_t open_files() const = 0;
  // Writes who holds the tier into its lock file (see LockHolder): a second
  // daemon names this one instead of waiting for it. 0 or -errno.
  virtual int NoteHolder(std::string_view text) = 0;
};

// Why `path` cannot be this daemon's tier (ok if it can). A root daemon must
// not serve bytes another user planted, nor write where another user points
// it: the tier is a real directory (not a symlink: ELOOP) owned by the
// daemon's euid and writable by no one else, and every directory above it is
// owned by root or the euid and writable by others only with the sticky bit
// (as /tmp), so no one else can rename the tier away and put theirs in its
// place (EACCES, the message says which rule). The mount checks it before
// the scan; OpenDirectoryTier again when it opens the tier.
Status UnsafeTierDirectory(std::string path);

// Opens (creating) a directory tier under `path`, doing all its file I/O
// through `io`. `reset` empties it first. Fails with a message when the path
// is unusable (the errno of what failed; EACCES: others could change it) or
// in use by another tierfs (EBUSY). A tier in use is waited for up to
// `lock_wait` (a daemon unmounted a moment ago may still be finishing its
// promotions).
Result<std::unique_ptr<DirectoryTier>> OpenDirectoryTier(
    std::shared_ptr<FileIo> io, std::string name, const std::string& path, uint64_t budget,
    bool reset, std::chrono::milliseconds lock_wait = std::chrono::milliseconds(0));
// The same over the local file system (NewPosixFileIo()).
Result<std::unique_ptr<DirectoryTier>> OpenDirectoryTier(
    std::string name, const std::string& path, uint64_t budget, bool reset,
    std::chrono::milliseconds lock_wait = std::chrono::milliseconds(0));

}  // namespace tierfs
