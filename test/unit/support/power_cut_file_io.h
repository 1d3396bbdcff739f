// PowerCutFileIo: a FileIo for tests that knows what a power cut would take
// back. It forwards to the real file system and remembers what is not yet
// durable: a file's bytes past its last fdatasync, and names made by a
// rename in a directory not fsynced since. Cut() then undoes exactly that,
// as the worst a power cut may leave (the kernel may have written more;
// never less): renames are reverted, newest first, and each file is cut
// back to its synced length. kill -9 loses nothing of this; a power cut can.
//
// Scope: what a directory tier and its journal do on their hot path
// (create, write, fdatasync, rename, sync_dir); unlinks and hole punches are
// not undone (a punch that reached the disk while the journal line saying
// why did not is the case recovery must catch), nor are bytes written with
// pwrite inside a file's length (the tier syncs them before it journals
// them). Thread-safe.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tiering/io/file_io.h"

namespace tierfs::testing {

class PowerCutFileIo final : public FileIoWrapper {
 public:
  explicit PowerCutFileIo(std::shared_ptr<FileIo> target) : FileIoWrapper(std::move(target)) {}

  int open(const std::string& path, int flags, mode_t mode,
           std::unique_ptr<LocalFile>* out) override {
    std::unique_ptr<LocalFile> file;
    int err = target()->open(path, flags, mode, &file);
    if (err < 0) return err;
    if (flags & (O_WRONLY | O_RDWR)) {
      struct stat st {};
      target()->stat(path, &st);
      std::lock_guard lock(mu_);
      // A file that existed keeps what it had; a new or truncated one had nothing durable.
      const bool fresh = (flags & O_TRUNC) || (synced_.count(path) == 0 && (flags & O_CREAT));
      if (fresh || synced_.count(path) == 0) synced_[path] = fresh ? 0 : st.st_size;
      file = std::make_unique<File>(std::move(file), this, path);
    }
    *out = std::move(file);
    return 0;
  }
  int rename(const std::string& from, const std::string& to) override {
    int err = target()->rename(from, to);
    if (err < 0) return err;
    std::lock_guard lock(mu_);
    renames_.push_back({from, to});
    auto it = synced_.find(from);
    if (it != synced_.end()) {
      synced_[to] = it->second;
      synced_.erase(it);
    }
    return 0;
  }
  int sync_dir(const std::string& dir) override {
    int err = target()->sync_dir(dir);
    if (err < 0) return err;
    std::lock_guard lock(mu_);
    std::erase_if(renames_, [&](const Rename& r) { return Dir(r.to) == dir; });
    return 0;
  }

  // Undoes what was not durable, as a power cut at this moment may. Returns
  // how many renames and files were taken back.
  size_t Cut() {
    std::lock_guard lock(mu_);
    size_t undone = 0;
    for (auto it = renames_.rbegin(); it != renames_.rend(); ++it) {
      if (target()->rename(it->to, it->from) == 0) {
        ++undone;
        auto s = synced_.find(it->to);
        if (s != synced_.end()) {
          synced_[it->from] = s->second;
          synced_.erase(s);
        }
      }
    }
    renames_.clear();
    for (const auto& [path, length] : synced_) {
      struct stat st {};
      if (target()->stat(path, &st) == 0 && static_cast<uint64_t>(st.st_size) > length) {
        if (::truncate(path.c_str(), static_cast<off_t>(length)) == 0) ++undone;
      }
    }
    return undone;
  }

 private:
  struct Rename {
    std::string from, to;
  };
  static std::string Dir(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
  }
  // A file whose fdatasync makes its current length durable.
  class File final : public LocalFileWrapper {
   public:
    File(std::unique_ptr<LocalFile> f, PowerCutFileIo* io, std::string path)
        : LocalFileWrapper(std::move(f)), io_(io), path_(std::move(path)) {}
    int fdatasync() override {
      int err = target()->fdatasync();
      if (err == 0) io_->Synced(path_);
      return err;
    }

   private:
    PowerCutFileIo* io_;
    const std::string path_;  // as opened: a file renamed since is found by its new name
  };
  void Synced(const std::string& opened_as) {
    std::lock_guard lock(mu_);
    // The file may have been renamed since it was opened: follow its renames.
    std::string path = opened_as;
    for (const Rename& r : renames_) {
      if (r.from == path) path = r.to;
    }
    struct stat st {};
    if (target()->stat(path, &st) == 0) synced_[path] = static_cast<uint64_t>(st.st_size);
  }

  std::mutex mu_;                           // guards the rest. A leaf lock.
  std::map<std::string, uint64_t> synced_;  // durable length, by current name
  std::vector<Rename> renames_;             // not yet made durable, oldest first
};

}  // namespace tierfs::testing
