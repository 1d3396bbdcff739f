// Declaring an epoch's read order to a tierfs mount (-o prefetch=order), as
// a training script does with tools/python/tierfs_hint.py: the epoch's files,
// relative to the mount root, one per line, appended to ROOT/.tierfs/order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

class OrderHint {
 public:
  explicit OrderHint(std::string root);

  // Appends files[order[0]], files[order[1]], ... (paths below the root,
  // written relative to it, each ending in '\n') to ROOT/.tierfs/order in one
  // open (O_APPEND, never O_CREAT), one write and one close. Returns the
  // number of lines written, or -1 after a failure: the first failure of each
  // errno is reported on stderr, and after ENOENT, ENOTDIR, EACCES, EPERM or
  // EROFS (no hint can ever work there) later calls return -1 at once.
  int64_t Declare(const std::vector<std::string>& files, const std::vector<size_t>& order);

  bool disabled() const { return disabled_; }
  const std::string& path() const { return path_; }

 private:
  void Fail(int error);

  std::string root_;  // with a trailing '/'
  std::string path_;  // ROOT/.tierfs/order
  bool disabled_ = false;
  std::vector<int> warned_;  // errnos already reported
};

}  // namespace bench
