// Fuzz target: recovery of a directory tier whose journal holds arbitrary
// bytes (a torn, damaged or planted <tier>/journal).
//
// Each input becomes the journal of a tier directory beside a fixed set of
// data files; the tier is opened and recovered through the public API
// (OpenDirectoryTier, DirectoryTier::Recover), never by the record layout.
// Then what recovery promises is checked, and any breach aborts:
//   - Recover succeeds (the directory is ours and writable) and keeps each key
//     once, within the budget, and every kept chunk reads back whole;
//   - data/ holds only tier files with a kept chunk (the rest was removed);
//   - a second recovery from the rewritten journal keeps the same chunks;
//   - a chunk stored after recovery takes a new file: the kept ones still
//     read the same bytes.
// Every file access goes through a FileIo that aborts on a path outside the
// fuzzer's temporary directory.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test/fuzz/fuzz_temp_dir.h"
#include "tiering/base/log.h"
#include "tiering/io/file_io.h"
#include "tiering/store/tier.h"

namespace tierfs {
namespace {

using fuzzing::FuzzTempDir;

constexpr uint64_t kBudget = 8;  // bytes: some journals name more than fits
// The SOURCE identity the tier is recovered for, shaped as the daemon's
// ("PATH ino N"): a journal of another one keeps nothing.
const std::string kSource = "/data/set ino 42";

// The data files every input starts with: name -> contents. Records that
// name tier files f1..f4 or f10 with their size and a range inside find
// complete bytes; f01, the .tmp, the old-format c1 and the stray file are
// never tier files.
const std::map<std::string, std::string>& DataFiles() {
  static const std::map<std::string, std::string> files = {
      {"f1", "a"},  {"f2", "bb"},     {"f3", "ccc"}, {"f4", "dddd"}, {"f10", ""},
      {"f01", "x"}, {"f2.tmp", "yy"}, {"c1", "a"},   {"stray", "z"}};
  return files;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "tier_journal_fuzz: %s\n", what.c_str());
  std::abort();
}

// The local file system, refusing (loudly) any path outside the temp dir.
class ConfinedFileIo final : public FileIoWrapper {
 public:
  explicit ConfinedFileIo(const FuzzTempDir* dir)
      : FileIoWrapper(std::shared_ptr<FileIo>(NewPosixFileIo())), dir_(dir) {}
  int open(const std::string& p, int flags, mode_t mode, std::unique_ptr<LocalFile>* out) override {
    return target()->open(Check(p), flags, mode, out);
  }
  int rename(const std::string& from, const std::string& to) override {
    return target()->rename(Check(from), Check(to));
  }
  int unlink(const std::string& p) override { return target()->unlink(Check(p)); }
  int mkdir(const std::string& p, mode_t mode) override { return target()->mkdir(Check(p), mode); }
  int list(const std::string& p, std::vector<std::string>* names) override {
    return target()->list(Check(p), names);
  }
  int stat(const std::string& p, struct stat* st) override { return target()->stat(Check(p), st); }
  int lstat(const std::string& p, struct stat* st) override {
    return target()->lstat(Check(p), st);
  }
  int access(const std::string& p, int mode) override { return target()->access(Check(p), mode); }
  int lock(const std::string& p, std::unique_ptr<FileLock>* out) override {
    return target()->lock(Check(p), out);
  }

 private:
  const std::string& Check(const std::string& path) const {
    if (!dir_->Contains(path)) Fail("file access outside the temporary directory: " + path);
    return path;
  }
  const FuzzTempDir* const dir_;
};

void WriteFile(const std::string& path, const void* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wbe");
  if (f == nullptr || std::fwrite(data, 1, n, f) != n || std::fclose(f) != 0) {
    Fail("cannot write " + path);
  }
}

// Takes any origin but those whose path begins with "stale"; paths that hash
// alike (and the same chunk) share a key, so second copies occur.
std::optional<ChunkKey> Accept(const ChunkOrigin& o) {
  if (o.path.rfind("stale", 0) == 0) return std::nullopt;
  uint32_t h = 2166136261u;
  for (unsigned char c : o.path) h = (h ^ c) * 16777619u;
  return ChunkKey{h % 4, o.chunk};
}

struct Recovered {
  std::set<std::pair<NodeId, uint32_t>> keys;
  uint64_t used = 0;
};

Recovered RecoverOnce(const std::shared_ptr<FileIo>& io, const std::string& path,
                      std::unique_ptr<DirectoryTier>* tier) {
  Result<std::unique_ptr<DirectoryTier>> opened =
      OpenDirectoryTier(io, "fuzz", path, kBudget, false);
  if (!opened.ok()) Fail("cannot open the tier: " + opened.status().message());
  *tier = std::move(opened).value();
  std::vector<ChunkKey> kept;
  if (int err = (*tier)->Recover(kSource, Accept, &kept); err != 0) Fail("Recover failed");
  Recovered r;
  for (const ChunkKey& k : kept) {
    if (!r.keys.insert({k.node, k.chunk}).second) Fail("a key was kept twice");
  }
  r.used = (*tier)->used();
  if (r.used > kBudget) Fail("recovery went over the budget");
  if ((*tier)->chunks() != kept.size()) Fail("chunks() differs from the kept keys");
  // Each kept chunk reads back whole; their lengths add up to used().
  uint64_t total = 0;
  for (const ChunkKey& k : kept) {
    char scratch[16];
    TierRead read;
    if ((*tier)->Read(k, 0, sizeof(scratch), scratch, &read) != 0)
      Fail("a kept chunk is unreadable");
    total += read.size;
  }
  if (total != r.used) Fail("the kept chunks' bytes differ from used()");
  std::vector<std::string> names;
  if (io->list(path + "/data", &names) != 0 || names.size() > kept.size()) {
    Fail("data/ holds other files than those of the kept chunks");
  }
  return r;
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierfs;
  static FuzzTempDir dir;
  static const std::shared_ptr<FileIo> io = std::make_shared<ConfinedFileIo>(&dir);
  static const std::string tier_path = dir.root() + "/tier";
  static bool once = [] {
    Log::SetLevel(kError);
    if (::mkdir(tier_path.c_str(), 0700) != 0) Fail("cannot create the tier directory");
    return true;
  }();
  (void)once;

  // A fresh tier directory: the data files, and the input as its journal.
  FuzzTempDir::RemoveBelow(tier_path, false);
  if (::mkdir((tier_path + "/data").c_str(), 0700) != 0) Fail("cannot create data/");
  for (const auto& [name, contents] : DataFiles()) {
    WriteFile(tier_path + "/data/" + name, contents.data(), contents.size());
  }
  WriteFile(tier_path + "/journal", data, size);

  std::unique_ptr<DirectoryTier> tier;
  Recovered first = RecoverOnce(io, tier_path, &tier);
  tier.reset();  // unlocks
  Recovered second = RecoverOnce(io, tier_path, &tier);
  if (second.keys != first.keys || second.used != first.used) {
    Fail("a second recovery kept other chunks than the first");
  }

  // What each kept chunk holds now, then a new chunk, then the same again.
  auto read_all = [&] {
    std::map<std::pair<NodeId, uint32_t>, std::string> bytes;
    for (const auto& [node, chunk] : first.keys) {
      char scratch[16];
      TierRead read;
      if (tier->Read(ChunkKey{node, chunk}, 0, sizeof(scratch), scratch, &read) != 0) {
        Fail("a kept chunk became unreadable");
      }
      bytes[{node, chunk}] = std::string(read.data, read.size);
    }
    return bytes;
  };
  auto before = read_all();
  const ChunkKey fresh{100, 0};
  const std::string payload = "new";
  if (tier->Reserve(payload.size())) {
    std::unique_ptr<ChunkWriter> writer;
    ChunkOrigin origin;
    origin.path = "fresh";
    origin.file_size = origin.length = payload.size();
    if (tier->BeginStore(fresh, origin, &writer) != 0) Fail("BeginStore failed after recovery");
    if (writer->Append(payload.data(), payload.size()) != 0 || writer->Commit() != 0) {
      Fail("storing a chunk after recovery failed");
    }
    char scratch[16];
    TierRead read;
    if (tier->Read(fresh, 0, sizeof(scratch), scratch, &read) != 0 ||
        std::string(read.data, read.size) != payload) {
      Fail("the new chunk does not read back");
    }
  }
  if (read_all() != before) Fail("storing a new chunk changed a kept one");
  return 0;
}
