// PeerChunkReader: what this node serves to its peers (the ChunkProvider of
// its PeerServer). A chunk is looked up by path in this node's snapshot,
// checked against the asker's identity (size, mtime, ctime, inode), and read through the local
// read path only (ReadPath::ReadLocal): from a tier, from a promotion in
// flight, or promoted from SOURCE first, since the asker believes this node
// is the chunk's home and a job should read each chunk from SOURCE once.
// Never from another peer: a request is answered by the node asked.
#pragma once

#include "tiering/engine/read_path.h"
#include "tiering/namespace/namespace.h"
#include "tiering/peers/server/chunk_provider.h"

namespace tierfs {

class PeerChunkReader : public ChunkProvider {
 public:
  PeerChunkReader(const Namespace* ns, ReadPath* reads) : ns_(ns), reads_(reads) {}
  int ReadChunk(const ChunkRef& ref, Deadline deadline, ChunkBytes* out) override;
  Residence Holds(const ChunkRef& ref) override;
  int Adopt(const ChunkRef& ref, const char* data) override;

 private:
  // The file `ref` names, if this node's snapshot describes it alike
  // (size, mtime, ctime, inode): its id; else why not.
  struct FoundFile {
    NodeId id = 0;
    int err = 0;  // 0 (found), -ENOENT or -ESTALE
  };
  FoundFile Find(const ChunkRef& ref) const;
  const Namespace* const ns_;
  ReadPath* const reads_;
};

}  // namespace tierfs
