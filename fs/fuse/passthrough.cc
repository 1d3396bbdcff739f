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
#include <utility>

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

int PassthroughOpens::Open(fuse_ino_t ino, bool* first) {
  *first = false;
  Deferred later;
  Former former;
  int answer = 0;
  if (Begin(ino, &answer, &former, &later)) {
    uint64_t token = 0;
    int id = -EIO;
    try {
      id = Prepare(ino, &former, &token);
    } catch (...) {
      Abandon(ino);
      throw;
    }
    answer = Publish(ino, id, token, former, first, &later);
  }
  DoDeferred(later);
  return answer;
}

bool PassthroughOpens::Begin(fuse_ino_t ino, int* answer, Former* former, Deferred* later) {
  MutexLock lock(mu_);
  TakeRemovals(later);
  auto settled = [&]() REQUIRES(mu_) {
    auto it = opens_.find(ino);
    return it == opens_.end() || !it->second.registering;
  };
  if (!settled() &&
      !registered_.WaitUntil(mu_, std::chrono::steady_clock::now() + registering_wait_, settled)) {
    // Answered cached: the registering open then lets its backing file go.
    slow_registrations_.fetch_add(1, std::memory_order_relaxed);
    *answer = CachedOpen(ino, opens_[ino], -EBUSY);
    return false;
  }
  InodeOpens& e = opens_[ino];
  if (e.passed > 0) {
    ++e.passed;  // the same backing file: the kernel refuses another
    passed_opens_.fetch_add(1, std::memory_order_relaxed);
    *answer = e.backing_id;
    return false;
  }
  if (e.cached > 0) {
    busy_.fetch_add(1, std::memory_order_relaxed);
    *answer = CachedOpen(ino, e, -EBUSY);  // the kernel refuses passthrough meanwhile
    return false;
  }
  if (!active() || files_ == nullptr) {
    *answer = CachedOpen(ino, e, -ENOTSUP);
    return false;
  }
  // This open registers; the former registration is its own meanwhile.
  if (e.idle) {
    idle_.erase(e.idle_at);
    e.idle = false;
  }
  *former = Former{e.backing_id, e.token, e.removed};
  e.backing_id = -1;
  e.removed = false;
  e.registering = true;
  return true;
}

int PassthroughOpens::Prepare(fuse_ino_t ino, Former* former, uint64_t* token) {
  // Pin looks at every chunk of the file.
  const int pinned = files_->Pin(ino, token);
  if (pinned < 0) return pinned;  // the former registration stays, idle
  if (former->backing_id >= 0) {
    const int32_t id = std::exchange(former->backing_id, -1);
    if (former->token == *token && !former->removed) {
      reused_.fetch_add(1, std::memory_order_relaxed);
      return id;
    }
    Unregister(id);  // another file now
  }
  const int fd = files_->Open(ino, *token);
  const int id = fd < 0 ? fd : Register(fd);
  if (id < 0) files_->Unpin(ino, *token);
  return id;
}

int PassthroughOpens::Publish(fuse_ino_t ino, int id, uint64_t token, const Former& former,
                              bool* first, Deferred* later) {
  MutexLock lock(mu_);
  auto it = opens_.find(ino);  // a registering entry stays
  InodeOpens& e = it->second;
  e.registering = false;
  registered_.NotifyAll();
  if (id >= 0 && e.cached > 0) {
    // An open waited past its bound and was answered cached: the kernel
    // refuses passthrough while it lasts.
    later->unregister.push_back(id);
    later->unpin.emplace_back(ino, token);
    busy_.fetch_add(1, std::memory_order_relaxed);
    return CachedOpen(ino, e, -EBUSY);
  }
  if (id < 0) {
    const int answer = CachedOpen(ino, e, e.cached > 0 ? -EBUSY : id);
    if (former.backing_id >= 0) {  // not pinned: kept for a later open, as it was
      e.backing_id = former.backing_id;
      e.token = former.token;
      e.removed = e.removed || former.removed;
      Idle(it, later);  // the entry stays: it counts this open
    }
    return answer;
  }
  e.backing_id = id;
  e.token = token;
  e.passed = 1;
  *first = true;
  passed_opens_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void PassthroughOpens::Abandon(fuse_ino_t ino) {
  MutexLock lock(mu_);
  auto it = opens_.find(ino);
  it->second.registering = false;
  registered_.NotifyAll();
  ForgetUnused(it);
}

void PassthroughOpens::DoDeferred(const Deferred& later) {
  for (int32_t id : later.unregister) Unregister(id);
  for (const auto& [ino, token] : later.unpin) files_->Unpin(ino, token);
}

void PassthroughOpens::Removed(fuse_ino_t ino) {
  MutexLock lock(removed_mu_);
  if (removed_.size() < kMaxPaged) removed_.push_back(ino);
  any_removed_.store(true, std::memory_order_release);
}

void PassthroughOpens::TakeRemovals(Deferred* later) {
  if (!any_removed_.load(std::memory_order_acquire)) return;
  std::vector<fuse_ino_t> removed;
  {
    MutexLock lock(removed_mu_);
    removed.swap(removed_);
    any_removed_.store(false, std::memory_order_release);
  }
  for (fuse_ino_t ino : removed) {
    auto it = opens_.find(ino);
    if (it == opens_.end()) continue;
    InodeOpens& e = it->second;
    if (e.registering) {
      e.removed = true;  // its registration goes at its last close
    } else if (e.backing_id >= 0) {
      e.removed = true;
      if (e.passed == 0) LetGo(it, later);
    }
  }
}

void PassthroughOpens::LetGo(Opens::iterator it, Deferred* later) {
  InodeOpens& e = it->second;
  if (e.idle) {
    idle_.erase(e.idle_at);
    e.idle = false;
  }
  if (e.backing_id >= 0) later->unregister.push_back(e.backing_id);
  e.backing_id = -1;
  ForgetUnused(it);
}

void PassthroughOpens::ForgetUnused(Opens::iterator it) {
  const InodeOpens& e = it->second;
  if (e.passed == 0 && e.cached == 0 && e.backing_id < 0 && !e.registering) opens_.erase(it);
}

bool PassthroughOpens::Release(fuse_ino_t ino, bool passthrough) {
  Deferred later;
  bool last_cached = false;
  {
    MutexLock lock(mu_);
    TakeRemovals(&later);
    auto it = opens_.find(ino);
    if (it != opens_.end()) last_cached = Drop(it, passthrough, &later);
  }
  DoDeferred(later);
  return last_cached;
}

bool PassthroughOpens::Drop(Opens::iterator it, bool passthrough, Deferred* later) {
  const fuse_ino_t ino = it->first;
  InodeOpens& e = it->second;
  if (passthrough && e.passed > 0 && --e.passed == 0) {
    later->unpin.emplace_back(ino, e.token);
    Idle(it, later);
    return false;
  }
  bool last_cached = false;
  if (!passthrough && e.cached > 0) {
    last_cached = --e.cached == 0;
    cached_now_.fetch_sub(1, std::memory_order_relaxed);
  }
  ForgetUnused(it);
  return last_cached;
}

void PassthroughOpens::Idle(Opens::iterator it, Deferred* later) {
  InodeOpens& e = it->second;
  if (e.removed || max_idle_ == 0) {
    LetGo(it, later);
    return;
  }
  // Kept registered for the next open; the least recently opened goes.
  idle_.push_front(it->first);
  e.idle = true;
  e.idle_at = idle_.begin();
  if (idle_.size() > max_idle_) LetGo(opens_.find(idle_.back()), later);
}

bool PassthroughOpens::TakePaged(fuse_ino_t ino) {
  MutexLock lock(mu_);
  return paged_.erase(ino) > 0;
}

}  // namespace tierfs
