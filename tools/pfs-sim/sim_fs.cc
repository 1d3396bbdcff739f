#include "sim_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace pfssim {
namespace {

constexpr const char* kControlDirName = ".pfs-sim";
constexpr const char* kStatsName = "stats";

int64_t MsToNs(double ms) { return static_cast<int64_t>(ms * 1e6); }

SimFs* Self(fuse_req_t req) { return static_cast<SimFs*>(fuse_req_userdata(req)); }

struct FileHandle {
  int fd;
  std::string path;  // relative to the root, for fault decisions
};

struct DirEntry {
  std::string name;
  fuse_ino_t ino;
  mode_t type;
};

std::string Join(const std::string& dir, const char* name) {
  return dir.empty() ? std::string(name) : dir + "/" + name;
}

// Runs a handler body; exceptions never cross into libfuse.
template <typename Body>
void Guard(fuse_req_t req, Body&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (...) {
    fuse_reply_err(req, EIO);
  }
}

}  // namespace

SimFs::SimFs(std::string source_root, const SimParams& params)
    : source_root_(std::move(source_root)),
      params_(params),
      faults_(params),
      meta_pool_(params.meta_parallel, MsToNs(params.meta_ms), 0, 0),
      data_pool_(params.parallel, MsToNs(params.read_ms), params.stream_mbps * 1e6,
                 params.total_mbps * 1e6),
      paths_{"", "", "", ""} {  // 0 unused, 1 root, 2 and 3 control files
  inos_[""] = FUSE_ROOT_ID;
}

void SimFs::Start() { scheduler_ = std::make_unique<ReplyScheduler>(); }

void SimFs::Stop() {
  if (scheduler_) scheduler_->Stop();
}

std::string SimFs::StatsJson() const {
  return "{\"params\": " + ParamsToJson(params_) + ", \"ops\": " + counters_.ToJson() + "}\n";
}

bool SimFs::PathOf(fuse_ino_t ino, std::string& path) const {
  std::lock_guard<std::mutex> lock(inodes_mu_);
  if (ino == 0 || ino >= paths_.size() || ino == kControlDirIno || ino == kStatsIno) return false;
  path = paths_[ino];
  return true;
}

fuse_ino_t SimFs::InoOf(const std::string& path) {
  std::lock_guard<std::mutex> lock(inodes_mu_);
  auto [it, inserted] = inos_.try_emplace(path, paths_.size());
  if (inserted) paths_.push_back(path);
  return it->second;
}

void SimFs::Forget(fuse_ino_t ino) {
  if (params_.renumber == 0) return;
  std::lock_guard<std::mutex> lock(inodes_mu_);
  if (ino == 0 || ino >= paths_.size() || ino == kControlDirIno || ino == kStatsIno) return;
  auto it = inos_.find(paths_[ino]);
  if (it != inos_.end() && it->second == ino) inos_.erase(it);  // the next lookup numbers it anew
}

void SimFs::AfterMeta(std::function<void()> reply) {
  scheduler_->At(meta_pool_.Book(NowNs(), 0), std::move(reply));
}

void SimFs::ControlAttr(fuse_ino_t ino, struct stat& st) const {
  std::memset(&st, 0, sizeof st);
  st.st_ino = ino;
  st.st_mode = ino == kControlDirIno ? (S_IFDIR | 0555) : (S_IFREG | 0444);
  st.st_nlink = ino == kControlDirIno ? 2 : 1;
  st.st_size = 0;  // generated at open; direct_io reads ignore the size
}

void SimFs::Init(fuse_conn_info* conn) {
  // max_write also sets max_pages, which bounds every direct-io read request.
  conn->max_write = params_.max_request;
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

void SimFs::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof e);
  if ((parent == FUSE_ROOT_ID && std::strcmp(name, kControlDirName) == 0) ||
      (parent == kControlDirIno && std::strcmp(name, kStatsName) == 0)) {
    e.ino = parent == FUSE_ROOT_ID ? kControlDirIno : kStatsIno;
    ControlAttr(e.ino, e.attr);
    fuse_reply_entry(req, &e);
    return;
  }
  if (parent == kControlDirIno) return (void)fuse_reply_err(req, ENOENT);
  std::string dir;
  if (!PathOf(parent, dir)) return (void)fuse_reply_err(req, ENOENT);
  OpCounters::Bump(counters_.lookups);
  counters_.LookupBegins();
  const std::string path = Join(dir, name);
  if (lstat(SourcePath(path).c_str(), &e.attr) != 0) {
    const int err = errno;
    return AfterMeta([this, req, err] {
      counters_.LookupEnds();
      fuse_reply_err(req, err);
    });
  }
  e.ino = InoOf(path);
  e.attr.st_ino = e.ino;
  e.entry_timeout = params_.entry_timeout;
  e.attr_timeout = params_.attr_timeout;
  AfterMeta([this, req, e] {
    counters_.LookupEnds();
    fuse_reply_entry(req, &e);
  });
}

void SimFs::Getattr(fuse_req_t req, fuse_ino_t ino) {
  struct stat st;
  if (ino == kControlDirIno || ino == kStatsIno) {
    ControlAttr(ino, st);
    return (void)fuse_reply_attr(req, &st, 0);
  }
  std::string path;
  if (!PathOf(ino, path)) return (void)fuse_reply_err(req, ENOENT);
  OpCounters::Bump(counters_.getattrs);
  if (lstat(SourcePath(path).c_str(), &st) != 0) {
    const int err = errno;
    return AfterMeta([req, err] { fuse_reply_err(req, err); });
  }
  st.st_ino = ino;
  const double timeout = params_.attr_timeout;
  AfterMeta([req, st, timeout] { fuse_reply_attr(req, &st, timeout); });
}

void SimFs::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  fi->direct_io = 1;
  fi->keep_cache = 0;
  if (ino == kStatsIno) {
    fi->fh = reinterpret_cast<uint64_t>(new std::string(StatsJson()));
    return (void)fuse_reply_open(req, fi);
  }
  std::string path;
  if (!PathOf(ino, path)) return (void)fuse_reply_err(req, ENOENT);
  OpCounters::Bump(counters_.opens);
  const int fd = open(SourcePath(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return AfterMeta([req, err] { fuse_reply_err(req, err); });
  }
  fi->fh = reinterpret_cast<uint64_t>(new FileHandle{fd, path});
  const fuse_file_info reply_fi = *fi;
  AfterMeta([req, reply_fi] { fuse_reply_open(req, &reply_fi); });
}

void SimFs::Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  if (ino == kStatsIno) {
    // Reply from a copy: once the kernel has the bytes the reader may close
    // and RELEASE (on another thread) free the snapshot, while writev's
    // sanitizer interceptor still reads the buffer after the call returns.
    const auto* text = reinterpret_cast<const std::string*>(fi->fh);
    const size_t start = std::min(text->size(), static_cast<size_t>(off));
    const std::string part = text->substr(start, size);
    return (void)fuse_reply_buf(req, part.data(), part.size());
  }
  const auto* file = reinterpret_cast<const FileHandle*>(fi->fh);
  // Not zeroed: pread fills what is replied. Zeroing (and faulting in) a
  // fresh buffer per read cost pfs-sim 60% of its CPU, and with 2 cores it
  // could not serve its own model's rate (small-fits: 2.3 s against a
  // 0.77 s floor for any number of readers).
  std::shared_ptr<char[]> buf(new char[size]);
  const ssize_t n = pread(file->fd, buf.get(), size, off);
  if (n < 0) {
    OpCounters::Bump(counters_.source_errors);
    return (void)fuse_reply_err(req, errno);
  }
  if (n == 0) {
    // At or past the end: a PFS client knows the size and sends no request.
    OpCounters::Bump(counters_.eof_reads);
    return (void)fuse_reply_buf(req, nullptr, 0);
  }
  OpCounters::Bump(counters_.reads);
  const uint64_t offset = static_cast<uint64_t>(off);
  int64_t stall_ns = 0;
  if (faults_.StallsRead(file->path, offset)) {
    OpCounters::Bump(counters_.stalls);
    stall_ns = MsToNs(params_.stall_ms);
  }
  if (faults_.FailsRead(file->path, offset)) {
    OpCounters::Bump(counters_.read_errors);
    return scheduler_->At(data_pool_.Book(NowNs(), 0, stall_ns),
                          [req] { fuse_reply_err(req, EIO); });
  }
  OpCounters::Bump(counters_.read_bytes, static_cast<uint64_t>(n));
  const int64_t done = data_pool_.Book(NowNs(), static_cast<uint64_t>(n), stall_ns);
  scheduler_->At(done, [req, buf, n] { fuse_reply_buf(req, buf.get(), static_cast<size_t>(n)); });
}

void SimFs::Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino == kStatsIno) {
    delete reinterpret_cast<std::string*>(fi->fh);
  } else {
    OpCounters::Bump(counters_.releases);
    auto* file = reinterpret_cast<FileHandle*>(fi->fh);
    close(file->fd);
    delete file;
  }
  fuse_reply_err(req, 0);
}

void SimFs::Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto entries = std::make_unique<std::vector<DirEntry>>();
  if (ino == kControlDirIno) {
    entries->push_back(DirEntry{kStatsName, kStatsIno, S_IFREG});
    fi->fh = reinterpret_cast<uint64_t>(entries.release());
    return (void)fuse_reply_open(req, fi);
  }
  std::string path;
  if (!PathOf(ino, path)) return (void)fuse_reply_err(req, ENOENT);
  OpCounters::Bump(counters_.opendirs);
  if (faults_.FailsOpendir(path)) return AfterMeta([req] { fuse_reply_err(req, EIO); });
  DIR* dir = opendir(SourcePath(path).c_str());
  if (dir == nullptr) {
    const int err = errno;
    return AfterMeta([req, err] { fuse_reply_err(req, err); });
  }
  while (const dirent* d = readdir(dir)) {
    if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
    const mode_t type = d->d_type == DT_DIR ? S_IFDIR : d->d_type == DT_LNK ? S_IFLNK : S_IFREG;
    entries->push_back(DirEntry{d->d_name, InoOf(Join(path, d->d_name)), type});
  }
  closedir(dir);
  fi->fh = reinterpret_cast<uint64_t>(entries.release());
  const fuse_file_info reply_fi = *fi;
  AfterMeta([req, reply_fi] { fuse_reply_open(req, &reply_fi); });
}

void SimFs::Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  const auto* entries = reinterpret_cast<const std::vector<DirEntry>*>(fi->fh);
  auto buf = std::make_shared<std::vector<char>>(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < entries->size(); ++i) {
    struct stat st;
    std::memset(&st, 0, sizeof st);
    st.st_ino = (*entries)[i].ino;
    st.st_mode = (*entries)[i].type;
    const size_t need =
        fuse_add_direntry(req, buf->data() + used, size - used, (*entries)[i].name.c_str(), &st,
                          static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  if (ino == kControlDirIno) return (void)fuse_reply_buf(req, buf->data(), used);
  OpCounters::Bump(counters_.readdirs);
  AfterMeta([req, buf, used] { fuse_reply_buf(req, buf->data(), used); });
}

void SimFs::Releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<std::vector<DirEntry>*>(fi->fh);
  fuse_reply_err(req, 0);
}

void SimFs::Readlink(fuse_req_t req, fuse_ino_t ino) {
  std::string path;
  if (!PathOf(ino, path)) return (void)fuse_reply_err(req, ENOENT);
  OpCounters::Bump(counters_.getattrs);
  char target[4096];
  const ssize_t n = readlink(SourcePath(path).c_str(), target, sizeof target - 1);
  if (n < 0) return (void)fuse_reply_err(req, errno);
  const std::string text(target, static_cast<size_t>(n));
  AfterMeta([req, text] { fuse_reply_readlink(req, text.c_str()); });
}

void SimFs::Statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv;
  if (statvfs(source_root_.c_str(), &sv) != 0) return (void)fuse_reply_err(req, errno);
  OpCounters::Bump(counters_.statfs);
  AfterMeta([req, sv] { fuse_reply_statfs(req, &sv); });
}

const fuse_lowlevel_ops& SimFs::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof o);
    o.init = [](void* userdata, fuse_conn_info* conn) {
      static_cast<SimFs*>(userdata)->Init(conn);
    };
    o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) {
      Guard(r, [&] { Self(r)->Lookup(r, p, n); });
    };
    o.forget = [](fuse_req_t r, fuse_ino_t i, uint64_t) {
      OpCounters::Bump(Self(r)->counters().forgets);
      Self(r)->Forget(i);
      fuse_reply_none(r);
    };
    o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info*) {
      Guard(r, [&] { Self(r)->Getattr(r, i); });
    };
    o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Open(r, i, f); });
    };
    o.read = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Read(r, i, s, off, f); });
    };
    o.release = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { Self(r)->Release(r, i, f); };
    o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Opendir(r, i, f); });
    };
    o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* f) {
      Guard(r, [&] { Self(r)->Readdir(r, i, s, off, f); });
    };
    o.releasedir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      Self(r)->Releasedir(r, i, f);
    };
    o.readlink = [](fuse_req_t r, fuse_ino_t i) { Guard(r, [&] { Self(r)->Readlink(r, i); }); };
    o.statfs = [](fuse_req_t r, fuse_ino_t i) { Guard(r, [&] { Self(r)->Statfs(r, i); }); };
    return o;
  }();
  return ops;
}

}  // namespace pfssim
