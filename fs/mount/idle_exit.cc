#include "fs/mount/idle_exit.h"

#include <algorithm>
#include <vector>

#include "tiering/base/log.h"

namespace tierfs {
namespace {

using Clock = std::chrono::steady_clock;

// The whitespace-separated fields of one mountinfo line, in order.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string_view::npos) end = line.size();
    if (end > at) out.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// A mountinfo path with its \ooo escapes (space, tab, newline, backslash) undone.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        std::all_of(field.begin() + static_cast<long>(i) + 1,
                    field.begin() + static_cast<long>(i) + 4,
                    [](char c) { return c >= '0' && c <= '7'; })) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// Calls fn(fields) for every line of mountinfo.
template <typename Fn>
void ForEachMount(std::string_view mountinfo, Fn&& fn) {
  size_t at = 0;
  while (at < mountinfo.size()) {
    size_t end = mountinfo.find('\n', at);
    if (end == std::string_view::npos) end = mountinfo.size();
    std::vector<std::string_view> fields = Fields(mountinfo.substr(at, end - at));
    // id parent major:minor root mountpoint options [optional...] - type source super
    if (fields.size() >= 5) fn(fields);
    at = end + 1;
  }
}

}  // namespace

std::string MountDevice(std::string_view mountinfo, std::string_view path) {
  std::string device;
  ForEachMount(mountinfo, [&](const std::vector<std::string_view>& f) {
    auto dash = std::find(f.begin() + 5, f.end(), "-");
    if (dash == f.end() || dash + 1 == f.end()) return;
    const std::string_view type = *(dash + 1);
    const bool fuse = type == "fuse" || type.starts_with("fuse.");
    if (fuse && Unescape(f[4]) == path) device = std::string(f[2]);
  });
  return device;
}

size_t MountsOfDevice(std::string_view mountinfo, std::string_view device) {
  size_t n = 0;
  ForEachMount(mountinfo, [&](const std::vector<std::string_view>& f) { n += f[2] == device; });
  return n;
}

IdleExit::IdleExit(std::chrono::seconds idle, std::string device, Hooks hooks)
    : idle_(idle), device_(std::move(device)), hooks_(std::move(hooks)) {}

std::chrono::milliseconds IdleExit::Period(std::chrono::seconds idle) {
  const auto quarter = std::chrono::duration_cast<std::chrono::milliseconds>(idle) / 4;
  return std::clamp(quarter, std::chrono::milliseconds(100), std::chrono::milliseconds(5000));
}

void IdleExit::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void IdleExit::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void IdleExit::Run() {
  const auto period = Period(idle_);
  Clock::time_point idle_since = Clock::now();
  MutexLock lock(mu_);
  while (!cv_.WaitFor(mu_, period, [this]() REQUIRES(mu_) { return stop_; })) {
    lock.Unlock();
    const Clock::time_point now = Clock::now();
    // Unreadable, or our own mount not there (gone already): never leave on that.
    const size_t mounts = MountsOfDevice(hooks_.mountinfo(), device_);
    if (mounts != 1) idle_since = now;
    const Clock::time_point used{std::chrono::nanoseconds(hooks_.last_use_ns())};
    idle_since = std::max(idle_since, used);
    if (now - idle_since >= idle_) {
      TIERFS_LOG(kInfo, "no job has used this mount for {} s: unmounting",
                 std::chrono::duration_cast<std::chrono::seconds>(now - idle_since).count());
      left_ = true;
      hooks_.leave();
      return;
    }
    lock.Lock();
  }
}

}  // namespace tierfs
