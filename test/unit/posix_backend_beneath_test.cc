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
  int err = 0;
  auto backend = NewPosixBackend(source.root(), &err);
  REQUIRE(backend != nullptr);
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
  CHECK(reader.Read(f, buf, sizeof buf, 0) == -EIO);  // never the other file's bytes

  // The root itself and paths without a symlink still work.
  CHECK(backend->stat("", &st) == 0);
  CHECK(backend->open("a.old/b/f", &file) == 0);
  CHECK(backend->stat("a", &st) == 0);  // the link itself, not followed
  CHECK(S_ISLNK(st.st_mode));
}

}  // namespace
}  // namespace tierfs
