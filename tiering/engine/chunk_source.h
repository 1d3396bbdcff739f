// ChunkSource: where the bytes of a chunk that no tier of this node holds
// come from. With peers, a chunk another live node homes is fetched from that
// node (it reads SOURCE for the whole job); a home that fails is counted by
// the peers and SOURCE is read instead, for the rest of that chunk too.
// Without peers, or for a chunk this node homes, SOURCE.
//
// The one "home, then SOURCE" decision: the promoter copies through it and
// the read path forwards through it, so both fall back alike. A fetch from
// a home that has not begun to answer within its hedge time is raced
// with SOURCE (ChunkHomes::Fetch): a stalled home costs a reader that time,
// not a peer_timeout.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "tiering/namespace/chunk_homes.h"
#include "tiering/namespace/chunk_key.h"
#include "tiering/source/source_reader.h"

namespace tierfs {

// Whom a read or a promotion serves, which decides where its bytes may come
// from when no tier here holds them.
enum class Serving {
  // This node (a reader of the mount, a planner): from the chunk's home if
  // another node homes it, else from SOURCE.
  kThisNode,
  // A peer that asked this node, its home as far as the peer knows: from
  // SOURCE only, never from yet another peer.
  kPeer,
};

// Where the bytes of a chunk no tier here holds are fetched from: SOURCE,
// or the link to the peer that homes the chunk (ChunkHomes's number for it).
class HomeLink {
 public:
  static constexpr HomeLink Source() { return HomeLink(-1); }
  // ChunkHomes's answer for a chunk's home: a link, or -1 for this node.
  static constexpr HomeLink FromHomes(int link) { return HomeLink(link < 0 ? -1 : link); }
  bool is_source() const { return link_ < 0; }
  // The peer link. REQUIRES: !is_source().
  int link() const { return link_; }
  bool operator==(const HomeLink&) const = default;

 private:
  explicit constexpr HomeLink(int link) : link_(link) {}
  int link_;
};

class ChunkSource {
 public:
  // `source` and `peers` (which may be null: no peers) must outlive this.
  ChunkSource(SourceReader* source, uint64_t chunk_size, ChunkHomes* peers = nullptr)
      : reader_(source), chunk_size_(chunk_size), peers_(peers) {}

  // The link to the peer that homes `key`, or SOURCE when this node does
  // (or there are no peers).
  HomeLink Home(ChunkKey key) const {
    return peers_ != nullptr ? HomeLink::FromHomes(peers_->Home(key)) : HomeLink::Source();
  }
  // Where a miss on `key` that serves `serving` gets its bytes: Home(key) for this
  // node, SOURCE for a peer.
  HomeLink HomeFor(ChunkKey key, Serving serving) const {
    return serving == Serving::kThisNode ? Home(key) : HomeLink::Source();
  }
  bool HomedHere(ChunkKey key) const { return Home(key).is_source(); }

  // Reads [off, off+n) of chunk `key` (off within the chunk) into `buf`,
  // from `*home`, or from SOURCE when that is SOURCE or the peer does not
  // deliver all n bytes; then *home becomes SOURCE, so a caller reading a
  // chunk piece by piece goes on from SOURCE. The count (short only at
  // SOURCE's EOF) or -errno.
  ssize_t Read(ChunkKey key, uint64_t off, size_t n, char* buf, HomeLink* home);
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
    HomeLink home = HomeLink::Source();
    uint64_t length = 0;  // the chunk's
    HomeLink offer_to = HomeLink::Source();
  };
  ssize_t ReadForCopy(ChunkKey key, uint64_t off, size_t n, char* buf, Route* route);
  // Offers the peer at `to` the whole chunk `key` (n bytes at `data`),
  // without waiting. Chunks above kMaxOffer bytes are not offered, nor
  // anything to SOURCE.
  void Offer(ChunkKey key, const char* data, size_t n, HomeLink to);
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
    return reader_->Read(node, off, n, buf);
  }
  // Asks `key`'s home, if another node, to promote it now (look-ahead for
  // a chunk this node has no room to copy). True if there is no such home
  // or it answered.
  bool AskHome(ChunkKey key);

  bool has_peers() const { return peers_ != nullptr; }
  uint64_t chunk_size() const { return chunk_size_; }

 private:
  // A hedge for a fetch of [off, off+n) of `key`: the same bytes from SOURCE.
  std::function<ssize_t(char*)> Hedge(ChunkKey key, uint64_t off, size_t n);

  SourceReader* const reader_;
  const uint64_t chunk_size_;
  ChunkHomes* const peers_;
  std::atomic<uint64_t> offer_held_{0};  // bytes of OfferBuffers alive
};

}  // namespace tierfs
