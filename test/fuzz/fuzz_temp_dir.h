// FuzzTempDir: the one directory a fuzz target may create files in. It lies
// under $TIERFS_FUZZ_TMP (tools/fuzz sets it), else /dev/shm (no disk I/O:
// the targets fsync every iteration), else /tmp, and is removed with
// everything in it at exit. A target that crashes leaves it behind, inside
// the directory tools/fuzz removes.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace tierfs::fuzzing {

class FuzzTempDir {
 public:
  FuzzTempDir() {
    std::string parent = "/tmp";
    if (const char* env = std::getenv("TIERFS_FUZZ_TMP"); env != nullptr && *env != '\0') {
      parent = env;
    } else if (::access("/dev/shm", W_OK | X_OK) == 0) {
      parent = "/dev/shm";
    }
    std::string tmpl = parent + "/tierfs-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror(("fuzz: mkdtemp " + tmpl).c_str());
      std::abort();
    }
    root_ = tmpl;
  }
  ~FuzzTempDir() { RemoveBelow(root_, true); }
  FuzzTempDir(const FuzzTempDir&) = delete;
  FuzzTempDir& operator=(const FuzzTempDir&) = delete;

  const std::string& root() const { return root_; }

  // Deletes everything below `dir` (and `dir` itself with `self`), never
  // following a symlink. REQUIRES: `dir` is root() or below it.
  static void RemoveBelow(const std::string& dir, bool self) {
    std::error_code ec;
    if (self) {
      std::filesystem::remove_all(dir, ec);
      return;
    }
    std::vector<std::filesystem::path> entries;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      entries.push_back(entry.path());
    }
    for (const auto& path : entries) std::filesystem::remove_all(path, ec);
  }

  // Whether `path` lies strictly below root() (textually: ".." is refused).
  bool Contains(const std::string& path) const {
    return path.size() > root_.size() + 1 && path.compare(0, root_.size(), root_) == 0 &&
           path[root_.size()] == '/' && path.find("/..") == std::string::npos;
  }

 private:
  std::string root_;
};

}  // namespace tierfs::fuzzing
