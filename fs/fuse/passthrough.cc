#include "fs/fuse/passthrough.h"

#include <fmt/format.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

// The kernel's passthrough interface (include/uapi/linux/fuse.h, 7.40);
// Debian 12's header is 7.38.
struct BackingMap {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kBackingOpen = _IOW(229, 1, BackingMap);
constexpr unsigned long kBackingClose = _IOW(229, 2, uint32_t);

bool HasCapSysAdmin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

// The running kernel's major and minor version, or {0, 0}.
std::pair<int, int> KernelVersion(std::string* release) {
  struct utsname u;
  if (::uname(&u) != 0) return {0, 0};
  *release = u.release;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return {0, 0};
  return {major, minor};
}

}  // namespace

std::string PassthroughUnavailable(PassthroughWant want) {
  if (want == PassthroughWant::kOff) return "passthrough=off";
  std::string release;
  auto [major, minor] = KernelVersion(&release);
  if (major < 6 || (major == 6 && minor < 9)) {
    return fmt::format("the kernel ({}) has no FUSE passthrough (Linux 6.9 or later has)", release);
  }
  if (!HasCapSysAdmin()) {
    return "the daemon lacks CAP_SYS_ADMIN (a user's daemon): warm reads go through the daemon "
           "and the page cache";
  }
  return "";
}

void PassthroughOpens::Configure(PassthroughWant want, std::string why_not) {
  want_ = want;
  why_not_ = std::move(why_not);
}

void PassthroughOpens::AtInit(bool offered, int dev_fd) {
  if (!wanted()) return;
  device_.dev_fd = dev_fd;
  if (!offered) {
    refused_.store(true, std::memory_order_release);
    return;
  }
  active_.store(true, std::memory_order_release);
}

std::string PassthroughOpens::why_not() const {
  if (active()) return "";
  if (!why_not_.empty()) return why_not_;
  if (refused_.load(std::memory_order_acquire)) {
    return "the kernel did not offer FUSE_PASSTHROUGH at INIT";
  }
  return "not negotiated yet";
}

int PassthroughOpens::FuseDevice::Open(int fd) {
  BackingMap map{fd, 0, 0};
  const int id = ::ioctl(dev_fd, kBackingOpen, &map);
  if (id < 0) return -errno;
  return id > 0 ? id : -EIO;  // the kernel's ids start at 1
}

int PassthroughOpens::FuseDevice::Close(int32_t id) {
  uint32_t arg = static_cast<uint32_t>(id);
  return ::ioctl(dev_fd, kBackingClose, &arg) == 0 ? 0 : -errno;
}

int PassthroughOpens::Register(int fd) {
  const int id = registry_->Open(fd);
  ::close(fd);
  if (id < 0) {
    if (register_failed_.fetch_add(1, std::memory_order_relaxed) < 10) {
      TIERFS_LOG(kWarning, "passthrough: cannot register a backing file: {}", std::strerror(-id));
    }
    return id;
  }
  backing_files_.fetch_add(1, std::memory_order_relaxed);
  registrations_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void PassthroughOpens::Unregister(int32_t id) {
  const int err = registry_->Close(id);
  if (err < 0) {
    TIERFS_LOG(kWarning, "passthrough: cannot release backing file {}: {}", id,
               std::strerror(-err));
  }
  backing_files_.fetch_sub(1, std::memory_order_relaxed);
}

int PassthroughOpens::CachedOpen(fuse_ino_t ino, InodeOpens& e, int err) {
  if (paged_.size() < kMaxPaged) paged_.insert(ino);  // first: it may throw
  ++e.cached;
  cached_opens_.fetch_add(1, std::memory_order_relaxed);
  cached_now_.fetch_add(1, std::memory_order_relaxed);
  return err;
}

int PassthroughOpens::PassOpen(fuse_ino_t ino, InodeOpens& e, uint64_t token, bool* first) {
  if (e.passed > 0 || e.cached > 0) {  // another open came first
    files_->Unpin(ino, token);
    if (e.passed == 0) {
      busy_.fetch_add(1, std::memory_order_relaxed);
      return CachedOpen(ino, e, -EBUSY);  // the kernel refuses passthrough meanwhile
    }
    ++e.passed;
    passed_opens_.fetch_add(1, std::memory_order_relaxed);
    return e.backing_id;
  }
  if (e.idle) {
    idle_.erase(e.idle_at);
    e.idle = false;
  }
  if (e.backing_id >= 0 && (e.token != token || e.removed)) {  // another file now
    Unregister(e.backing_id);
    e.backing_id = -1;
  }
  if (e.backing_id >= 0) {
    reused_.fetch_add(1, std::memory_order_relaxed);
  } else {
    int fd = files_->Open(ino, token);
    int id = fd < 0 ? fd : Register(fd);
    if (id < 0) {
      files_->Unpin(ino, token);
      return CachedOpen(ino, e, id);
    }
    e.backing_id = id;
    e.token = token;
    e.removed = false;
  }
  e.passed = 1;
  *first = true;
  passed_opens_.fetch_add(1, std::memory_order_relaxed);
  return e.backing_id;
}

int PassthroughOpens::Open(fuse_ino_t ino, bool* first) {
  *first = false;
  {
    MutexLock lock(mu_);
    TakeRemovals();
    auto it = opens_.find(ino);
    if (it != opens_.end() && it->second.passed > 0) {
      ++it->second.passed;  // the same backing file: the kernel refuses another
      passed_opens_.fetch_add(1, std::memory_order_relaxed);
      return it->second.backing_id;
    }
    if (it != opens_.end() && it->second.cached > 0) {
      busy_.fetch_add(1, std::memory_order_relaxed);
      return CachedOpen(ino, it->second, -EBUSY);  // the kernel refuses passthrough meanwhile
    }
  }
  uint64_t token = 0;
  // Outside the lock: it looks at every chunk of the file.
  const int pinned = active() && files_ != nullptr ? files_->Pin(ino, &token) : -ENOTSUP;
  MutexLock lock(mu_);
  InodeOpens& e = opens_[ino];
  if (pinned < 0) {
    if (e.passed > 0) {  // another open came first, with a backing file
      ++e.passed;
      passed_opens_.fetch_add(1, std::memory_order_relaxed);
      return e.backing_id;
    }
    return CachedOpen(ino, e, e.cached > 0 ? -EBUSY : pinned);
  }
  return PassOpen(ino, e, token, first);
}

void PassthroughOpens::Removed(fuse_ino_t ino) {
  MutexLock lock(removed_mu_);
  if (removed_.size() < kMaxPaged) removed_.push_back(ino);
  any_removed_.store(true, std::memory_order_release);
}

void PassthroughOpens::TakeRemovals() {
  if (!any_removed_.load(std::memory_order_acquire)) return;
  std::vector<fuse_ino_t> removed;
  {
    MutexLock lock(removed_mu_);
    removed.swap(removed_);
    any_removed_.store(false, std::memory_order_release);
  }
  for (fuse_ino_t ino : removed) {
    auto it = opens_.find(ino);
    if (it == opens_.end() || it->second.backing_id < 0) continue;
    it->second.removed = true;
    if (it->second.passed == 0) LetGo(it);
  }
}

void PassthroughOpens::LetGo(Opens::iterator it) {
  InodeOpens& e = it->second;
  if (e.idle) {
    idle_.erase(e.idle_at);
    e.idle = false;
  }
  if (e.backing_id >= 0) Unregister(e.backing_id);
  e.backing_id = -1;
  if (e.passed == 0 && e.cached == 0) opens_.erase(it);
}

bool PassthroughOpens::Release(fuse_ino_t ino, bool passthrough) {
  MutexLock lock(mu_);
  TakeRemovals();
  auto it = opens_.find(ino);
  if (it == opens_.end()) return false;
  InodeOpens& e = it->second;
  bool last_cached = false;
  if (passthrough && e.passed > 0 && --e.passed == 0) {
    files_->Unpin(ino, e.token);
    if (e.removed || max_idle_ == 0) {
      LetGo(it);
      return false;
    }
    // Kept registered for the next open; the least recently opened goes.
    idle_.push_front(ino);
    e.idle = true;
    e.idle_at = idle_.begin();
    if (idle_.size() > max_idle_) LetGo(opens_.find(idle_.back()));
    return false;
  }
  if (!passthrough && e.cached > 0) {
    last_cached = --e.cached == 0;
    cached_now_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (e.passed == 0 && e.cached == 0 && e.backing_id < 0) opens_.erase(it);
  return last_cached;
}

bool PassthroughOpens::TakePaged(fuse_ino_t ino) {
  MutexLock lock(mu_);
  return paged_.erase(ino) > 0;
}

namespace {

// The administrator's setting for huge pages in shared memory, the
// bracketed word of shmem_enabled ("never", "advise", ...), or "" if this
// kernel has none. The RAM tier's memory files ask for them (advise): with
// "never", passthrough reads of large files copy from 4 KiB pages.
std::string ShmemHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string line;
  if (!std::getline(in, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close != std::string::npos && close > open
             ? line.substr(open + 1, close - open - 1)
             : "";
}

}  // namespace

void PassthroughOpens::VisitCounters(CounterVisitor& v) const {
  v.BeginGroup("passthrough");
  v.Flag("active", active(),
         {"1 if files wholly in one tier file are read by the kernel from that file (FUSE "
          "passthrough)."});
  v.Note("why_not", why_not());
  v.Text("shmem_huge_pages", ShmemHugePages(), "passthrough_shmem_huge_pages");
  v.Text("memory_files", memory_files_, "passthrough_memory_files");
  v.Counter("opens", passed_opens_.load(std::memory_order_relaxed),
            {"Opens answered in passthrough mode: their reads never reach the daemon."});
  v.Counter("opened_bytes", opened_bytes_.load(std::memory_order_relaxed),
            {"Sizes of the files opened in passthrough mode, added up at each open (the kernel "
             "reads them from the tier without the daemon: tier hits do not count them).",
             Unit::kBytes, "opened"});
  v.Counter("cached_opens", cached_opens_.load(std::memory_order_relaxed),
            {"Opens answered without passthrough (the file was not wholly in one tier file)."});
  v.Counter("busy", busy_.load(std::memory_order_relaxed),
            {"Opens of a resident file answered without passthrough because the file was open "
             "without it."});
  v.Counter("cache_drops", cache_drops_.load(std::memory_order_relaxed),
            {"Files whose page cache in the mount was dropped because a tier file holds them "
             "(so their bytes are not held twice)."});
  v.Counter("register_failures", register_failed_.load(std::memory_order_relaxed),
            {"Backing files the kernel refused to register."});
  v.Gauge("cached_open_files", static_cast<double>(cached_now_.load(std::memory_order_relaxed)),
          {"Files open now without passthrough (not yet released by the kernel)."});
  v.Counter("registrations", registrations_.load(std::memory_order_relaxed),
            {"Backing files registered with the kernel (an open of the tier file and an ioctl "
             "each)."});
  v.Counter("reused_registrations", reused_.load(std::memory_order_relaxed),
            {"Passthrough opens that found their file's backing file registered still (no open "
             "of a tier file, no ioctl)."});
  v.Gauge("backing_files", static_cast<double>(backing_files_.load(std::memory_order_relaxed)),
          {"Backing files registered now: one per file open in passthrough mode, and those kept "
           "for closed files still whole in their tier."});
  v.EndGroup();
}

}  // namespace tierfs
