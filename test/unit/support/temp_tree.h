// TempTree: a real directory tree under /tmp for tests, removed with
// everything in it when the TempTree goes away. Paths are relative to root().
// Every helper REQUIREs success (a failed setup is a failed test).
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

namespace tierfs::testing {

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/tierfs-unit-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    root_ = tmpl;
  }
  ~TempTree() {
    ::nftw(
        root_.c_str(),
        [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 64,
        FTW_DEPTH | FTW_PHYS);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& root() const { return root_; }
  std::string Abs(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }

  void Mkdir(const std::string& rel) const { REQUIRE(::mkdir(Abs(rel).c_str(), 0755) == 0); }
  void Write(const std::string& rel, const std::string& data) const {
    int fd = ::open(Abs(rel).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    REQUIRE(::close(fd) == 0);
  }
  void Symlink(const std::string& target, const std::string& rel) const {
    REQUIRE(::symlink(target.c_str(), Abs(rel).c_str()) == 0);
  }
  void Mkfifo(const std::string& rel) const { REQUIRE(::mkfifo(Abs(rel).c_str(), 0644) == 0); }
  void Remove(const std::string& rel) const { REQUIRE(::unlink(Abs(rel).c_str()) == 0); }
  void Truncate(const std::string& rel, off_t size) const {
    REQUIRE(::truncate(Abs(rel).c_str(), size) == 0);
  }
  struct stat Lstat(const std::string& rel) const {
    struct stat st;
    REQUIRE(::lstat(Abs(rel).c_str(), &st) == 0);
    return st;
  }

 private:
  std::string root_;
};

// Bytes that differ between files and offsets, so a misplaced read shows.
inline std::string PatternBytes(size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 31 + seed * 7 + i / 251) & 0xff);
  return s;
}

}  // namespace tierfs::testing
