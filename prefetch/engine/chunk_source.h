// ChunkSource: where the bytes of a chunk that no tier of this node holds
// come from. With peers, a chunk another live node homes is fetched from that
// node (it reads SOURCE for the whole job); a home that fails is counted by
// JobPeers and SOURCE is read instead, for the rest of that chunk too.
// Without peers, or for a chunk this node homes, SOURCE.
//
// The one "home, then SOURCE" decision: the promoter copies through it and
// the read path forwards through it, so both fall back alike.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "tiering/namespace/chunk_key.h"
#include "tiering/peer/job_peers.h"
#include "tiering/source/source_reader.h"

namespace tierfs {

class ChunkSource {
 public:
  static constexpr int kSource = -1;  // a "home" that is SOURCE itself

  // `source` and `peers` (which may be null: no peers) must outlive this.
  ChunkSource(SourceReader* source, uint64_t chunk_size, JobPeers* peers = nullptr)
      : source_(source), chunk_size_(chunk_size), peers_(peers) {}

  // The peer link that homes `key`, or kSource when this node does (or
  // there are no peers).
  int Home(ChunkKey key) const { return peers_ != nullptr ? peers_->Home(key) : kSource; }
  bool HomedHere(ChunkKey key) const { return Home(key) == kSource; }

  // Reads [off, off+n) of chunk `key` (off within the chunk) into `buf`,
  // from peer `*home`, or from SOURCE when *home is kSource or the peer
  // does not deliver all n bytes; then *home becomes kSource, so a caller
  // reading a chunk piece by piece goes on from SOURCE. The count (short
  // only at SOURCE's EOF) or -errno.
  ssize_t Read(ChunkKey key, uint64_t off, size_t n, char* buf, int* home);
  // How a promotion reads a chunk piece by piece: from `home` as Read
  // does, except that the first piece (off 0) asks a remote home for its
  // bytes only if it holds the chunk or is promoting it. If it has
  // neither, the chunk is read from SOURCE here, and `offer_to` names the
  // home, to be offered the whole chunk once read (Offer): the reader waits
  // for one round trip rather than for the home's SOURCE read and a transfer,
  // and the job still reads the chunk from SOURCE once.
  // A chunk above kMaxOffer is asked for plainly: its home reads it from
  // SOURCE and keeps it, as an offer that large would not fit a peer's
  // byte budget for one connection (at least 64 MiB) and the home would
  // never get it.
  struct Route {
    int home = kSource;
    uint64_t length = 0;  // the chunk's
    int offer_to = kSource;
  };
  ssize_t ReadForCopy(ChunkKey key, uint64_t off, size_t n, char* buf, Route* route);
  // Offers peer `link` the whole chunk `key` (n bytes at `data`), without
  // waiting. Chunks above kMaxOffer bytes are not offered.
  void Offer(ChunkKey key, const char* data, size_t n, int link);
  static constexpr uint64_t kMaxOffer = uint64_t{32} << 20;

  // Memory a promotion keeps a chunk of several pieces in for its offer:
  // at most kMaxOfferHeld bytes for all promotions at once (beyond, or for
  // a chunk above kMaxOffer, data() is null and the chunk is not offered).
  class OfferBuffer {
   public:
    OfferBuffer() = default;
    OfferBuffer(OfferBuffer&& o) noexcept { *this = std::move(o); }
    OfferBuffer& operator=(OfferBuffer&& o) noexcept;
    ~OfferBuffer() { Release(); }
    char* data() const { return bytes_.get(); }

   private:
    friend class ChunkSource;
    void Release();
    std::atomic<uint64_t>* held_ = nullptr;
    uint64_t size_ = 0;
    std::unique_ptr<char[]> bytes_;
  };
  OfferBuffer TakeOfferBuffer(uint64_t n);
  static constexpr uint64_t kMaxOfferHeld = uint64_t{128} << 20;

  // Reads up to n bytes of file `node` at file offset `off` from SOURCE.
  ssize_t ReadFile(NodeId node, uint64_t off, size_t n, char* buf) {
    return source_->Read(node, buf, n, off);
  }
  // Asks `key`'s home, if another node, to promote it now (look-ahead for
  // a chunk this node has no room to copy). True if there is no such home
  // or it answered.
  bool AskHome(ChunkKey key);

  bool has_peers() const { return peers_ != nullptr; }
  uint64_t chunk_size() const { return chunk_size_; }

 private:
  SourceReader* const source_;
  const uint64_t chunk_size_;
  JobPeers* const peers_;
  std::atomic<uint64_t> offer_held_{0};  // bytes of OfferBuffers alive
};

}  // namespace tierfs
