#include "tiering/namespace/namespace_index.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <type_traits>
#include <vector>

#include "tiering/base/log.h"
#include "tiering/base/xxh64.h"

namespace tierfs {
namespace {

constexpr uint64_t kMagic = 0x5849534652454954;  // "TIERFSIX" read little-endian
constexpr size_t kHeaderSize = 8192;             // the node array starts page-aligned
constexpr uint64_t kMaxCopiedFile = uint64_t{64} << 30;
constexpr int kVfsFields = 11;

struct IndexHeader {
  uint64_t magic;
  uint32_t version, header_size, node_size, reserved0;
  uint64_t node_count, nodes_off, arena_size, arena_off, file_size;
  uint64_t nodes_checksum, arena_checksum;
  uint64_t root_dev, root_ino;
  int64_t created_ns;
  uint64_t file_bytes, files, dirs, symlinks, skipped;
  uint64_t vfs[kVfsFields];
  uint32_t path_len, reserved1;
  char path[4096];
  uint64_t header_checksum;  // XXH64 of this header with this field 0
};
static_assert(sizeof(IndexHeader) <= kHeaderSize);
static_assert(std::has_unique_object_representations_v<IndexHeader>, "no padding is written");
static_assert(std::has_unique_object_representations_v<Node>, "no padding is written");

void StatvfsTo(const struct statvfs& s, uint64_t* v) {
  const uint64_t f[kVfsFields] = {s.f_bsize,  s.f_frsize, s.f_blocks, s.f_bfree,
                                  s.f_bavail, s.f_files,  s.f_ffree,  s.f_favail,
                                  s.f_fsid,   s.f_flag,   s.f_namemax};
  std::memcpy(v, f, sizeof(f));
}
struct statvfs StatvfsFrom(const uint64_t* v) {
  struct statvfs s {};
  s.f_bsize = v[0];
  s.f_frsize = v[1];
  s.f_blocks = v[2];
  s.f_bfree = v[3];
  s.f_bavail = v[4];
  s.f_files = v[5];
  s.f_ffree = v[6];
  s.f_favail = v[7];
  s.f_fsid = v[8];
  s.f_flag = v[9];
  s.f_namemax = v[10];
  return s;
}

// XXH64 of the whole header block (padding included) with the checksum
// field taken as 0.
uint64_t HeaderChecksum(const char* block) {
  std::vector<char> copy(block, block + kHeaderSize);
  std::memset(copy.data() + offsetof(IndexHeader, header_checksum), 0, sizeof(uint64_t));
  return Xxh64(copy.data(), copy.size());
}

using Bytes = std::shared_ptr<const unsigned char>;

// The file's bytes, mapped or copied; the deleter frees them. The error
// says why not, for "index '...' refused: ".
Result<Bytes> ReadBytes(LocalFile* file, uint64_t size, bool map) {
  if (map) {
    Bytes mapped;
    if (int err = file->map(size, &mapped); err < 0) {
      return Status::FromErrno(-err, "cannot map it");
    }
    return mapped;
  }
  if (size > kMaxCopiedFile) return Status::Error(EFBIG, "too large to copy");
  // uint64_t storage: the node array inside needs 8-byte alignment.
  auto* words = new (std::nothrow) uint64_t[(size + 7) / 8];
  if (words == nullptr) return Status::Error(ENOMEM, "not enough memory to copy it");
  Bytes bytes(reinterpret_cast<const unsigned char*>(words),
              [words](const unsigned char*) { delete[] words; });
  auto* out = reinterpret_cast<char*>(words);
  for (uint64_t done = 0; done < size;) {
    ssize_t r = file->pread(out + done, std::min<uint64_t>(size - done, 1 << 20), done);
    if (r < 0) return Status::FromErrno(static_cast<int>(-r), "cannot read it");
    if (r == 0) return Status::Error(EUCLEAN, "it was truncated while being read");
    done += static_cast<uint64_t>(r);
  }
  return bytes;
}

// The header's internal consistency (not the body's): ok, EINVAL (not an
// index this tierfs reads) or EUCLEAN (damaged).
Status CheckHeader(const IndexHeader& h, const char* block, uint64_t actual_size) {
  auto corrupt = [](std::string what) { return Status::Error(EUCLEAN, std::move(what)); };
  if (h.magic != kMagic) {
    return Status::Error(EINVAL, __builtin_bswap64(h.magic) == kMagic
                                     ? "it was written on a machine of the other byte order"
                                     : "it is not a tierfs namespace index");
  }
  if (h.version != kIndexVersion) {
    return Status::Error(
        EINVAL,
        fmt::format("it is index format version {}; this tierfs reads version {} (rebuild it)",
                    h.version, kIndexVersion));
  }
  if (h.header_checksum != HeaderChecksum(block)) {
    return corrupt("its header is corrupted (checksum)");
  }
  if (h.header_size != kHeaderSize || h.node_size != sizeof(Node)) {
    return corrupt("its header does not match its version");
  }
  if (h.file_size != actual_size) {
    return corrupt(fmt::format("it is truncated or extended: {} bytes, its header says {}",
                               actual_size, h.file_size));
  }
  const uint64_t max_nodes = (h.file_size - kHeaderSize) / sizeof(Node);
  if (h.node_count == 0 || h.node_count > max_nodes || h.node_count > UINT32_MAX ||
      h.nodes_off != kHeaderSize || h.arena_off != h.nodes_off + h.node_count * sizeof(Node) ||
      h.arena_size > h.file_size - h.arena_off || h.arena_off + h.arena_size != h.file_size ||
      h.arena_size > UINT32_MAX) {
    return corrupt("its section offsets do not fit the file");
  }
  if (h.path_len == 0 || h.path_len >= sizeof(h.path)) {
    return corrupt("its SOURCE path is invalid");
  }
  return Status::Ok();
}

}  // namespace

int64_t RealtimeNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Status WriteIndex(const Namespace& ns, const SourceIdentity& source, int64_t created_ns,
                  const std::string& path, FileIo* io) {
  if (io == nullptr) io = DefaultFileIo().get();  // lives as long as the process
  if (ns.size() == 0) return Status::Error(EINVAL, "cannot save an empty namespace");
  auto header = std::make_unique<IndexHeader>();
  std::memset(header.get(), 0, sizeof(IndexHeader));
  IndexHeader& h = *header;
  if (source.path.empty() || source.path.size() >= sizeof(h.path)) {
    return Status::Error(source.path.empty() ? EINVAL : ENAMETOOLONG,
                         fmt::format("SOURCE path '{}' cannot be saved in an index", source.path));
  }
  std::span<const Node> nodes = ns.nodes();
  std::string_view arena = ns.arena();
  h.magic = kMagic;
  h.version = kIndexVersion;
  h.header_size = kHeaderSize;
  h.node_size = sizeof(Node);
  h.node_count = nodes.size();
  h.nodes_off = kHeaderSize;
  h.arena_off = kHeaderSize + nodes.size_bytes();
  h.arena_size = arena.size();
  h.file_size = h.arena_off + h.arena_size;
  h.nodes_checksum = Xxh64(nodes.data(), nodes.size_bytes());
  h.arena_checksum = Xxh64(arena.data(), arena.size());
  h.root_dev = source.dev;
  h.root_ino = source.root_ino;
  h.created_ns = created_ns;
  const NamespaceTotals& t = ns.totals();
  h.file_bytes = t.file_bytes;
  h.files = t.files;
  h.dirs = t.dirs;
  h.symlinks = t.symlinks;
  h.skipped = t.skipped;
  StatvfsTo(ns.fs_stats(), h.vfs);
  h.path_len = static_cast<uint32_t>(source.path.size());
  std::memcpy(h.path, source.path.data(), source.path.size());

  // A name of its own beside `path` (O_EXCL: nothing is followed or reused).
  static std::atomic<uint64_t> serial{0};
  std::string tmp;
  std::unique_ptr<LocalFile> file;
  int err = -EEXIST;
  for (int attempt = 0; attempt < 16 && err == -EEXIST; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), serial.fetch_add(1));
    err = io->open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600, &file);
  }
  if (err < 0) return Status::FromErrno(-err, fmt::format("cannot create '{}'", tmp));
  std::vector<char> head(kHeaderSize, 0);
  std::memcpy(head.data(), &h, sizeof(h));
  h.header_checksum = HeaderChecksum(head.data());
  std::memcpy(head.data(), &h, sizeof(h));
  err = WriteAll(file.get(), head.data(), head.size());
  if (err == 0) {
    err = WriteAll(file.get(), reinterpret_cast<const char*>(nodes.data()), nodes.size_bytes());
  }
  if (err == 0) err = WriteAll(file.get(), arena.data(), arena.size());
  if (err == 0) err = file->fdatasync();
  if (int closed = file->close(); closed < 0 && err == 0) err = closed;
  if (err == 0) err = io->rename(tmp, path);
  if (err < 0) {
    io->unlink(tmp);
    return Status::FromErrno(-err, fmt::format("cannot write index '{}'", path));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Namespace>> LoadIndex(const std::string& path,
                                             const SourceIdentity* expected, IndexInfo* info,
                                             FileIo* io) {
  if (io == nullptr) io = DefaultFileIo().get();  // lives as long as the process
  auto refuse = [&](const Status& why) {
    return why.Context(fmt::format("index '{}' refused", path));
  };
  std::unique_ptr<LocalFile> file;
  if (int err = io->open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, &file); err < 0) {
    return Status::FromErrno(-err, fmt::format("index '{}'", path));
  }
  struct stat st;
  if (int err = file->stat(&st); err < 0) {
    return Status::FromErrno(-err, fmt::format("index '{}' refused", path));
  }
  if (!S_ISREG(st.st_mode)) return refuse(Status::Error(EINVAL, "not a regular file"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize) {
    return refuse(Status::Error(EUCLEAN, fmt::format("it is truncated ({} bytes)", size)));
  }
  std::vector<char> block(kHeaderSize);
  if (ssize_t r = file->pread(block.data(), kHeaderSize, 0);
      r != static_cast<ssize_t>(kHeaderSize)) {
    return refuse(Status::Error(r < 0 ? static_cast<int>(-r) : EUCLEAN, "cannot read its header"));
  }
  auto header = std::make_unique<IndexHeader>();
  std::memcpy(header.get(), block.data(), sizeof(IndexHeader));
  const IndexHeader& h = *header;
  if (Status why = CheckHeader(h, block.data(), size); !why.ok()) return refuse(why);

  // Checks prove the file safe to read, not true: a file that another user
  // wrote or could have written might show a doctored tree of the same
  // SOURCE (swapped class names, hidden files). Only the daemon's own
  // files and root's are trusted.
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return refuse(
        Status::Error(EACCES, fmt::format("it belongs to uid {}: only this daemon's uid ({}) or "
                                          "root may write the index it trusts",
                                          st.st_uid, ::geteuid())));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return refuse(Status::Error(
        EACCES, fmt::format("it is writable by others (mode {:o})", st.st_mode & 07777)));
  }
  // A root-owned file read by another uid is copied: root could change it
  // under a mapping, which would bypass every check below.
  const bool map = st.st_uid == ::geteuid();
  Result<Bytes> read = ReadBytes(file.get(), size, map);
  if (!read.ok()) return refuse(read.status());
  Bytes bytes = std::move(read).value();
  std::span<const Node> nodes(reinterpret_cast<const Node*>(bytes.get() + h.nodes_off),
                              h.node_count);
  std::string_view arena(reinterpret_cast<const char*>(bytes.get() + h.arena_off), h.arena_size);
  if (Xxh64(nodes.data(), nodes.size_bytes()) != h.nodes_checksum ||
      Xxh64(arena.data(), arena.size()) != h.arena_checksum) {
    return refuse(Status::Error(EUCLEAN, "it is corrupted (checksum)"));
  }
  SourceIdentity source{std::string(h.path, h.path_len), h.root_dev, h.root_ino};
  if (expected != nullptr) {
    if (source.path != expected->path) {
      return refuse(Status::Error(
          ESTALE, fmt::format("it describes SOURCE '{}', not '{}'", source.path, expected->path)));
    }
    if (source.root_ino != expected->root_ino) {
      return refuse(Status::Error(
          ESTALE, fmt::format("SOURCE '{}' is another directory now (root inode {}, was {})",
                              expected->path, expected->root_ino, source.root_ino)));
    }
    if (source.dev != expected->dev) {
      TIERFS_LOG(kDebug, "index '{}': SOURCE's device is {}, was {} (another node or mount)", path,
                 expected->dev, source.dev);
    }
  }
  NamespaceTotals totals{h.file_bytes, h.files, h.dirs, h.symlinks, h.skipped};
  if (Status bad = CheckLayout(nodes, arena, totals); !bad.ok()) {
    return refuse(bad.Context("its tree is inconsistent"));
  }
  if (info != nullptr) *info = {source, h.created_ns, size, map};
  auto ns = std::make_unique<Namespace>(nodes, arena, totals, StatvfsFrom(h.vfs), std::move(bytes));
  ns->set_mapped(map);
  return ns;
}

}  // namespace tierfs
