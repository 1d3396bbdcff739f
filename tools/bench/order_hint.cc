#include "order_hint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

namespace bench {

OrderHint::OrderHint(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  path_ = root_ + "/.tierfs/order";
  root_ += '/';
}

int64_t OrderHint::Declare(const std::vector<std::string>& files,
                           const std::vector<size_t>& order) {
  if (disabled_) return -1;
  // As tierfs_hint.HintedSampler does: "//epoch", then the epoch's paths
  // (the daemon then knows an epoch the page cache served is past).
  std::string text = "//epoch\n";
  int64_t lines = 0;
  for (size_t index : order) {
    const std::string& path = files.at(index);
    const bool under = path.size() > root_.size() && path.compare(0, root_.size(), root_) == 0;
    text += std::string_view(path).substr(under ? root_.size() : 0);
    text += '\n';
    ++lines;
  }
  const int fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    Fail(errno);
    return -1;
  }
  // One write() for the whole epoch; a short write (never seen on tierfs,
  // which takes any size) is completed rather than reported.
  size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    Fail(error);
    return -1;
  }
  return lines;
}

void OrderHint::Fail(int error) {
  const bool permanent =
      error == ENOENT || error == ENOTDIR || error == EACCES || error == EPERM || error == EROFS;
  if (permanent) disabled_ = true;
  if (std::find(warned_.begin(), warned_.end(), error) != warned_.end()) return;
  warned_.push_back(error);
  const char* why = error == ENOENT || error == ENOTDIR
                        ? "no such file: not a tierfs mount, or a tierfs without order hints"
                        : std::strerror(error);
  fmt::print(stderr, "tierfs-bench: warning: cannot declare the read order to {}: {}{}\n", path_,
             why, permanent ? "; going on without hints" : "");
}

}  // namespace bench
