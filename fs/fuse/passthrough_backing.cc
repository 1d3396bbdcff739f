#include "fs/fuse/passthrough_backing.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "tiering/base/log.h"
#include "tiering/io/backend.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {
namespace {

NodeId NodeOfIno(fuse_ino_t ino) { return static_cast<NodeId>(ino - 1); }

std::string Mib(uint64_t bytes) { return fmt::format("{:.0f} MiB", bytes / 1048576.0); }

}  // namespace

void UseTierFiles(ChunkStore* chunks, PassthroughOpens* opens, uint64_t max_files) {
  opens->KeepIdle(max_files);  // a registration holds its file, as a descriptor does
  int huge_fs = -1;
  for (Tier* t : chunks->tiers()) {
    if (t->kind() == Tier::Kind::kMemory && huge_fs == -1) {
      huge_fs = NewHugePageMemoryFs();
      if (huge_fs < 0) {
        TIERFS_LOG(kInfo, "the RAM tier's files are memfds (no tmpfs of its own: {})",
                   std::strerror(-huge_fs));
      }
    }
    t->UseMemoryFiles(max_files, huge_fs);
    t->OnRemoved([opens](NodeId id) { opens->Removed(static_cast<fuse_ino_t>(id) + 1); });
  }
  opens->NoteMemoryFiles(huge_fs >= 0 ? PassthroughOpens::kHugeTmpfs : PassthroughOpens::kMemfd);
  if (huge_fs >= 0) ::close(huge_fs);
}

uint64_t MemoryFileBudget(uint64_t fd_limit, uint64_t max_open, const Backend& source,
                          const std::vector<Tier*>& tiers) {
  uint64_t kept = max_open + kReservedDescriptors + source.kept_descriptors();
  for (const Tier* t : tiers) kept += t->kept_descriptors();
  return fd_limit > kept ? fd_limit - kept : 0;
}

uint64_t NodeMemory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

std::string PassthroughNotPaying(const Namespace& ns, const ChunkStore* chunks,
                                 uint64_t node_memory) {
  if (chunks == nullptr) return "no tiers to pass files through from";
  uint64_t data = 0, large = 0;
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& node = ns.node(id);
    if (!S_ISREG(node.mode)) continue;
    data += node.size;
    if (node.size >= kLargeFile) large += node.size;
  }
  uint64_t ram = 0;
  for (const Tier* t : chunks->tiers()) {
    if (t->kind() == Tier::Kind::kMemory) ram += t->budget();
  }
  const uint64_t held = std::min(ram, data);
  // Twice what the RAM tier holds, within half the node's memory.
  const bool fits_twice = node_memory > 0 && held <= node_memory / 4;
  if (2 * large >= data || !fits_twice) return "";
  if (ram == 0) {  // no RAM tier: only the small files' cost applies
    return fmt::format(
        "passthrough=auto: files under {} hold most of the data ({} of {}): opens cost nothing "
        "without it",
        Mib(kLargeFile), Mib(data - large), Mib(data));
  }
  return fmt::format(
      "passthrough=auto: files under {} hold most of the data ({} of {}) and the page cache can "
      "hold the RAM tier's {} a second time (the node has {}): opens cost nothing without it",
      Mib(kLargeFile), Mib(data - large), Mib(data), Mib(held), Mib(node_memory));
}

int TierBackingFiles::WholeIn(NodeId id) const {
  if (chunks_ == nullptr || id >= ns_->size()) return -EOPNOTSUPP;
  const Catalog& catalog = chunks_->catalog();
  const uint32_t n = catalog.chunks(id);
  if (n == 0) return -EOPNOTSUPP;  // empty, or too large to tier
  int tier = -1;
  for (uint32_t c = 0; c < n; ++c) {
    const uint8_t state = catalog.state(ChunkKey{id, c});
    if (!Catalog::IsResident(state)) return -ENOENT;
    if (tier >= 0 && Catalog::TierOf(state) != tier) return -ENOENT;
    tier = Catalog::TierOf(state);
  }
  return tier;
}

int TierBackingFiles::Pin(fuse_ino_t ino, uint64_t* token) {
  const NodeId id = NodeOfIno(ino);
  const int tier = WholeIn(id);
  if (tier < 0) return tier;
  uint64_t own = 0;
  const int err =
      chunks_->tiers()[static_cast<size_t>(tier)]->PinBacking(id, ns_->node(id).size, &own);
  if (err < 0) return err;
  *token = (static_cast<uint64_t>(tier) << kTierShift) | own;
  return 0;
}

void TierBackingFiles::Unpin(fuse_ino_t ino, uint64_t token) {
  const size_t tier = static_cast<size_t>(token >> kTierShift);
  const uint64_t own = token & ((uint64_t{1} << kTierShift) - 1);
  chunks_->tiers()[tier]->UnpinBacking(NodeOfIno(ino), own);
}

int TierBackingFiles::Open(fuse_ino_t ino, uint64_t token) {
  const size_t tier = static_cast<size_t>(token >> kTierShift);
  const uint64_t own = token & ((uint64_t{1} << kTierShift) - 1);
  return chunks_->tiers()[tier]->OpenBacking(NodeOfIno(ino), own);
}

}  // namespace tierfs
