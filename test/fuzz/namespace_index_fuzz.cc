// Fuzz target: LoadIndex, the loader of a saved namespace index, a file a
// job may control (index=FILE). A file of random bytes stops at the
// checksums, so the input is the tree instead: the target builds a Namespace
// from it without checking anything, saves it with WriteIndex (right
// checksums, as a hostile user who rewrites the file would) and loads it
// back, which must then refuse every tree that CheckLayout refuses. Damage
// to the header and checksums is covered by namespace_index_test's random
// flips; this target covers the tree's layout and the accessors.
//
// Input: byte 0 flags (bit 0: the totals are in the input, else they are
// counted from the nodes; bit 1: load without an expected SOURCE), bytes
// 1-2 the name arena's length (little-endian), the arena, then with bit 0
// five uint64 totals (file_bytes, files, dirs, symlinks, skipped), then the
// nodes, sizeof(Node) bytes each, as they lie in memory.
//
// It aborts when a loaded index differs from what was saved, when a refusal
// has no message, or when an accessor of a loaded namespace misbehaves:
// every node's Path resolves back to it, every child is found by Lookup in
// its parent, names and symlink targets lie in the arena.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test/fuzz/fuzz_temp_dir.h"
#include "tiering/base/log.h"
#include "tiering/namespace/namespace.h"
#include "tiering/namespace/namespace_index.h"

namespace tierfs {
namespace {

using fuzzing::FuzzTempDir;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "namespace_index_fuzz: %s\n", what.c_str());
  std::abort();
}

// Reads `n` bytes at *pos (fewer at the end of the input).
std::string_view Take(const uint8_t* data, size_t size, size_t* pos, size_t n) {
  n = std::min(n, size - *pos);
  std::string_view out(reinterpret_cast<const char*>(data) + *pos, n);
  *pos += n;
  return out;
}

NamespaceTotals Count(const std::vector<Node>& nodes) {
  NamespaceTotals t;
  for (const Node& n : nodes) {
    if (S_ISREG(n.mode)) {
      t.files++;
      t.file_bytes += n.size;
    }
    t.dirs += S_ISDIR(n.mode);
    t.symlinks += S_ISLNK(n.mode);
  }
  return t;
}

void CheckAccessors(const Namespace& ns) {
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& n = ns.node(id);
    std::string_view name = ns.name(id);
    if (name.data() < ns.arena().data() ||
        name.data() + name.size() > ns.arena().data() + ns.arena().size()) {
      Fail("a name outside the arena");
    }
    std::string path = ns.Path(id);
    std::optional<NodeId> resolved = ns.Resolve(path);
    if (!resolved || *resolved != id) Fail("Path does not resolve back: " + path);
    if (id != kRootNode) {
      std::optional<NodeId> found = ns.Lookup(n.parent, name);
      if (!found || *found != id) Fail("Lookup misses a child in its parent");
    }
    auto [begin, end] = ns.Children(id);
    if (begin > end || end > ns.size()) Fail("children outside the node array");
    if (S_ISLNK(n.mode)) {
      std::string_view target = ns.link_target(id);
      if (target.data() + target.size() > ns.arena().data() + ns.arena().size()) {
        Fail("a symlink target outside the arena");
      }
    }
    struct stat st;
    ns.Fill(id, 1, &st);
  }
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierfs;
  static FuzzTempDir dir;
  static const std::string index = dir.root() + "/namespace.index";
  static bool once = (Log::SetLevel(kError), true);
  (void)once;
  if (size < 3) return 0;

  size_t pos = 0;
  const uint8_t flags = data[pos++];
  const size_t arena_len = data[1] | size_t{data[2]} << 8;
  pos += 2;
  std::string arena(Take(data, size, &pos, arena_len));
  NamespaceTotals given;
  if ((flags & 1) != 0) {
    uint64_t t[5] = {};
    std::string_view raw = Take(data, size, &pos, sizeof(t));
    std::memcpy(t, raw.data(), raw.size());
    given = {t[0], t[1], t[2], t[3], t[4]};
  }
  std::vector<Node> nodes((size - pos) / sizeof(Node));
  if (nodes.empty()) return 0;
  std::memcpy(nodes.data(), data + pos, nodes.size() * sizeof(Node));
  const NamespaceTotals totals = (flags & 1) != 0 ? given : Count(nodes);

  struct statvfs vfs {};
  Namespace saved(nodes, arena, totals, vfs, nullptr);
  const SourceIdentity source{"/source", 1, 2};
  if (Status written = WriteIndex(saved, source, 0, index); !written.ok()) {
    Fail("WriteIndex failed: " + written.message());
  }
  Result<std::unique_ptr<Namespace>> opened =
      LoadIndex(index, (flags & 2) != 0 ? nullptr : &source);
  if (!opened.ok()) {
    if (opened.status().message().empty()) Fail("a refused index without a message");
    return 0;
  }
  std::unique_ptr<Namespace> loaded = std::move(opened).value();
  if (loaded->size() != nodes.size() || loaded->arena() != arena ||
      std::memcmp(loaded->nodes().data(), nodes.data(), nodes.size() * sizeof(Node)) != 0) {
    Fail("the loaded index differs from the saved one");
  }
  CheckAccessors(*loaded);
  return 0;
}
