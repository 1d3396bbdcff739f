#include "fs/peers/peer_chunk_reader.h"

#include <sys/stat.h>

#include <cerrno>

namespace tierfs {

int64_t PeerChunkReader::Find(const ChunkRef& ref) const {
  auto id = ns_->Resolve(ref.path);
  if (!id || !S_ISREG(ns_->node(*id).mode)) return -ENOENT;
  const Node& node = ns_->node(*id);
  // Another identity: the asker's snapshot and ours differ (a rewrite that
  // kept size and mtime changes ctime and, mostly, the inode); neither
  // version's bytes may be passed off as the other's.
  if (node.size != ref.file_size || node.mtime_ns != ref.mtime_ns ||
      node.ctime_ns != ref.ctime_ns || node.ino != ref.ino) {
    return -ESTALE;
  }
  return static_cast<int64_t>(*id);
}

int PeerChunkReader::Holds(const ChunkRef& ref) {
  int64_t id = Find(ref);
  if (id < 0) return static_cast<int>(id);
  return reads_->Holds(static_cast<NodeId>(id), ref.chunk) ? 1 : 0;
}

int PeerChunkReader::Adopt(const ChunkRef& ref, const char* data) {
  int64_t id = Find(ref);
  if (id < 0) return static_cast<int>(id);
  return reads_->Adopt(static_cast<NodeId>(id), ref.chunk, data, ref.chunk_length());
}

int PeerChunkReader::ReadChunk(const ChunkRef& ref, Deadline deadline, ChunkBytes* out) {
  int64_t id = Find(ref);
  if (id < 0) return static_cast<int>(id);
  const uint64_t want = ref.length();
  TierRead got;
  ssize_t n = reads_->ReadLocal(static_cast<NodeId>(id), ref.file_offset(), want, out->scratch,
                                &got, deadline);
  if (n < 0) return static_cast<int>(n);
  if (static_cast<uint64_t>(n) != want) return -EIO;  // SOURCE shrank under us
  out->data = got.data;
  out->hold = std::move(got.hold);
  return 0;
}

}  // namespace tierfs
