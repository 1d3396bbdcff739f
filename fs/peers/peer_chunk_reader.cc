#include "fs/peers/peer_chunk_reader.h"

#include <sys/stat.h>

#include <cerrno>

#include "tiering/namespace/file_identity.h"

namespace tierfs {

PeerChunkReader::FoundFile PeerChunkReader::Find(const ChunkRef& ref) const {
  auto id = ns_->Resolve(ref.path);
  if (!id || !S_ISREG(ns_->node(*id).mode)) return {0, -ENOENT};
  const Node& node = ns_->node(*id);
  // Another identity: the asker's snapshot and ours differ; neither
  // version's bytes may be passed off as the other's.
  if (FileIdentity::Of(node) != ref.file()) return {0, -ESTALE};
  return {*id, 0};
}

Residence PeerChunkReader::Holds(const ChunkRef& ref) {
  const FoundFile f = Find(ref);
  if (f.err != 0) return f.err == -ENOENT ? Residence::kNoSuchFile : Residence::kStale;
  return reads_->Holds(f.id, ref.chunk) ? Residence::kHeld : Residence::kNotHeld;
}

int PeerChunkReader::Adopt(const ChunkRef& ref, const char* data) {
  const FoundFile f = Find(ref);
  if (f.err != 0) return f.err;
  return reads_->Adopt(f.id, ref.chunk, data, ref.chunk_length());
}

int PeerChunkReader::ReadChunk(const ChunkRef& ref, Deadline deadline, ChunkBytes* out) {
  const FoundFile f = Find(ref);
  if (f.err != 0) return f.err;
  const uint64_t want = ref.length();
  TierRead got;
  ssize_t n = reads_->ReadLocal(f.id, ref.file_offset(), want, out->scratch, &got, deadline);
  if (n < 0) return static_cast<int>(n);
  if (static_cast<uint64_t>(n) != want) return -EIO;  // SOURCE shrank under us
  out->data = got.data;
  out->hold = std::move(got.hold);
  return 0;
}

}  // namespace tierfs
