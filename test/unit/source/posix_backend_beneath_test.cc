// PosixBackend resolves every SOURCE path strictly beneath SOURCE's root:
// a directory swapped for a symlink after the scan (to /etc, or anywhere
// outside) is never followed, whatever the component.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/io/backend.h"
#include "tiering/namespace/namespace.h"
#include "tiering/source/source_reader.h"

namespace tierfs {
namespace {

TEST_CASE("Regression: a symlink in an intermediate SOURCE directory is not followed",
          "[posix_backend]") {
  testing::TempTree source, outside;
  source.Mkdir("a");
  source.Mkdir("a/b");
  source.Write("a/b/f", "dataset bytes");
  source.Write("a/top", "t");
  outside.Mkdir("b");
  outside.Write("b/f", "a secret of another user");
  outside.Write("top", "s");
  auto backend = RequireOk(NewPosixBackend(source.root()));
  auto ns = RequireOk(ScanNamespace(backend.get(), ScanOptions{}));
  SourceReader reader(backend.get(), ns.get(), 16);
  const NodeId f = *ns->Resolve("a/b/f");

  // After the scan, a user swaps "a" for a symlink to a tree of theirs (or /etc).
  namespace fs = std::filesystem;
  fs::rename(source.Abs("a"), source.Abs("a.old"));
  fs::create_directory_symlink(outside.root(), source.Abs("a"));

  std::unique_ptr<SourceFile> file;
  CHECK(backend->open("a/b/f", &file) == -ELOOP);
  CHECK(backend->open("a/top", &file) == -ELOOP);
  struct stat st;
  // A symlink where a directory was: ELOOP, or ENOTDIR for a directory open.
  auto refused = [](int e) { return e == -ELOOP || e == -ENOTDIR; };
  CHECK(refused(backend->stat("a/top", &st)));
  CHECK(refused(backend->stat("a/b", &st)));
  std::vector<DirEntry> entries;
  CHECK(refused(backend->list("a/b", &entries)));
  std::string target;
  CHECK(refused(backend->readlink("a/b/f", &target)));
  char buf[64];
  CHECK(reader.Read(f, 0, sizeof buf, buf) == -EIO);  // never the other file's bytes

  // The root itself and paths without a symlink still work.
  CHECK(backend->stat("", &st) == 0);
  CHECK(backend->open("a.old/b/f", &file) == 0);
  CHECK(backend->stat("a", &st) == 0);  // the link itself, not followed
  CHECK(S_ISLNK(st.st_mode));
}

// A PosixBackend over `source`'s root.
std::unique_ptr<Backend> BackendOver(const testing::TempTree& source) {
  return RequireOk(NewPosixBackend(source.root()));
}

// The bytes of `rel` as the backend opens it, or "" if it cannot.
std::string ReadVia(Backend* backend, const std::string& rel, int* err) {
  std::unique_ptr<SourceFile> file;
  *err = backend->open(rel, &file);
  if (*err < 0) return "";
  char buf[256];
  ssize_t n = file->pread(buf, sizeof buf, 0);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

TEST_CASE("A SOURCE directory kept open never leads outside SOURCE", "[posix_backend]") {
  testing::TempTree source, outside;
  source.Mkdir("a");
  source.Mkdir("a/b");
  source.Write("a/b/f", "dataset bytes");
  outside.Mkdir("b");
  outside.Write("b/f", "a secret of another user");
  auto backend = BackendOver(source);
  int err = 0;
  CHECK(ReadVia(backend.get(), "a/b/f", &err) == "dataset bytes");  // "a/b" is kept open now

  // "a" swapped for a symlink to another tree: the directory kept open is
  // the old "a/b" itself, wherever it went; never the symlink's target.
  namespace fs = std::filesystem;
  fs::rename(source.Abs("a"), source.Abs("a.old"));
  fs::create_directory_symlink(outside.root(), source.Abs("a"));
  CHECK(ReadVia(backend.get(), "a/b/f", &err) == "dataset bytes");
  // Once the old directory is gone, the path is walked from the root again:
  // the symlink is refused.
  fs::remove_all(source.Abs("a.old"));
  CHECK(ReadVia(backend.get(), "a/b/f", &err).empty());
  CHECK(err == -ELOOP);
  CHECK(ReadVia(backend.get(), "a/b/f", &err).empty());  // and stays refused
  CHECK(err == -ELOOP);
}

TEST_CASE("A SOURCE directory replaced since it was kept open is looked up again",
          "[posix_backend]") {
  testing::TempTree source;
  source.Mkdir("c");
  source.Write("c/f", "old");
  auto backend = BackendOver(source);
  int err = 0;
  CHECK(ReadVia(backend.get(), "c/f", &err) == "old");
  std::filesystem::remove_all(source.Abs("c"));
  source.Mkdir("c");
  source.Write("c/f", "new");
  source.Write("c/g", "added");
  CHECK(ReadVia(backend.get(), "c/f", &err) == "new");
  CHECK(ReadVia(backend.get(), "c/g", &err) == "added");
  CHECK(ReadVia(backend.get(), "c/missing", &err).empty());
  CHECK(err == -ENOENT);
}

TEST_CASE("An open file's attributes come from the open (no extra round trip)", "[posix_backend]") {
  testing::TempTree source;
  source.Mkdir("d");
  source.Write("d/f", "twelve bytes");
  auto backend = BackendOver(source);
  std::unique_ptr<SourceFile> file;
  REQUIRE(backend->open("d/f", &file) == 0);
  struct stat got {
  }, want{};
  REQUIRE(file->fstat(&got) == 0);
  REQUIRE(::stat(source.Abs("d/f").c_str(), &want) == 0);
  CHECK(got.st_ino == want.st_ino);
  CHECK(got.st_dev == want.st_dev);
  CHECK(got.st_size == 12);
  CHECK(S_ISREG(got.st_mode));
  CHECK(got.st_mtim.tv_sec == want.st_mtim.tv_sec);
  CHECK(got.st_mtim.tv_nsec == want.st_mtim.tv_nsec);
  CHECK(got.st_ctim.tv_nsec == want.st_ctim.tv_nsec);
}

}  // namespace
}  // namespace tierfs
