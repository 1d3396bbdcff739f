#include "tiering/peers/client/job_peers.h"

#include <cerrno>
#include <cstring>

#include "tiering/base/log.h"
#include "tiering/peers/client/peer_client.h"

namespace tierfs {
namespace {

std::vector<std::string> Names(const std::vector<PeerEntry>& peers) {
  std::vector<std::string> names;
  for (const auto& p : peers) names.push_back(p.name);
  return names;
}

}  // namespace

JobPeers::JobPeers(JobPeersConfig config, const Namespace* ns)
    : config_(std::move(config)),
      ns_(ns),
      chunk_size_(config_.chunk_size),
      rendezvous_(Names(config_.peers)) {
  self_index_ = rendezvous_.Find(config_.self);
  int link = 0;
  for (size_t i = 0; i < rendezvous_.size(); ++i) {
    link_of_.push_back(static_cast<int>(i) == self_index_ ? -1 : link++);
  }
}

JobPeers::~JobPeers() { Stop(); }

Status JobPeers::Start(std::shared_ptr<const PeerNode> node) {
  Status s = StartAsking(std::move(node));
  if (!s.ok()) given_up_.store(true, std::memory_order_release);
  return s;
}

Status JobPeers::StartAsking(std::shared_ptr<const PeerNode> node) {
  if (self_index_ < 0) {
    return Status::Error(EINVAL, "this node ('" + config_.self + "') is not in the peer list");
  }
  if (node == nullptr) return Status::Error(EINVAL, "peers started without this node's identity");
  node_ = std::move(node);
  PeerClientOptions co;
  for (size_t i = 0; i < config_.peers.size(); ++i) {
    if (static_cast<int>(i) == self_index_) continue;
    const PeerEntry& p = config_.peers[i];
    co.peers.push_back(PeerAddress{p.name, p.host, p.port});
  }
  co.connect_timeout = config_.timeout;
  co.dead_after = config_.dead_after;
  co.grace = 6 * config_.dead_after;
  co.idle_close = config_.idle_close;
  co.max_connections = config_.max_connections;
  // A slow peer is skipped from a quarter of a fetch's deadline up to it.
  co.retry_min = std::max(std::chrono::milliseconds(50), config_.timeout / 4);
  co.retry_max = std::max(co.retry_min, std::min(config_.timeout, std::chrono::milliseconds(5000)));
  // A hedged fetch waits at most half its deadline before SOURCE is read too.
  co.hedge_max = std::clamp(config_.timeout / 2, co.hedge_min, std::chrono::milliseconds(500));
  co.source_port = config_.source_ports;
  if (std::string problem = SourcePortsProblemHere(config_.source_ports); !problem.empty()) {
    TIERFS_LOG(kWarning, "peers: {}", problem);
  }
  co.ucx.tls = config_.ucx_tls;
  co.ucx.net_devices = node_->net_device;
  co.ucx.contain_aborts = true;  // a UCX abort here ends the asking, not the daemon
  auto client = PeerClient::Make(node_->auth.get(), co);
  if (!client.ok()) return client.status();
  client_ = std::move(client).value();
  client_->Start();
  started_.store(true, std::memory_order_release);
  return Status::Ok();
}

void JobPeers::Stop() {
  given_up_.store(true, std::memory_order_release);
  started_.store(false, std::memory_order_release);  // nobody is asked from now on
  if (client_) client_->Stop();
}

bool JobPeers::transport_failed() const {
  return started_.load(std::memory_order_acquire) && client_->transport_failed();
}

Status JobPeers::RestartTransport() {
  if (!started_.load(std::memory_order_acquire)) return Status::Error(ESHUTDOWN, "not asking");
  return client_->RestartTransport();
}

void JobPeers::WedgeForTest() {
  if (started_.load(std::memory_order_acquire)) client_->WedgeForTest();
}

int JobPeers::Home(ChunkKey key) const {
  if (!started_.load(std::memory_order_acquire) || link_of_.size() < 2) return -1;
  const uint64_t hash = ChunkHash(ns_->Path(key.node), key.chunk);
  bool passed_over = false;
  int home = rendezvous_.Home(hash, [this, &passed_over](size_t i) {
    int link = link_of_[i];
    const bool live = link < 0 || !client_->dead(static_cast<size_t>(link));
    passed_over |= !live;
    return live;
  });
  if (passed_over) {
    // Its first choice is taken for gone: it is wanted, so probed on a
    // short timer, and its chunks come back as soon as it answers.
    const int first = rendezvous_.Home(hash);
    if (first >= 0 && link_of_[static_cast<size_t>(first)] >= 0)
      client_->Want(static_cast<size_t>(link_of_[static_cast<size_t>(first)]));
  }
  return home < 0 ? -1 : link_of_[static_cast<size_t>(home)];
}

ChunkRef JobPeers::Ref(ChunkKey key, const std::string& path, uint64_t off, size_t n) const {
  const Node& node = ns_->node(key.node);
  ChunkRef ref{path, node.size, node.mtime_ns, node.ctime_ns, node.ino, chunk_size_, key.chunk};
  if (off != 0 || n != ref.chunk_length()) {
    ref.range_off = off;
    ref.range_len = n;
  }
  return ref;
}

bool JobPeers::AskAhead(int link, ChunkKey key) {
  if (!started_.load(std::memory_order_acquire) || link < 0) return false;
  const std::string path = ns_->Path(key.node);
  ChunkRef ref = Ref(key, path, 0, 1);
  if (ref.chunk_length() == 0) return false;  // an empty file: nothing to promote
  char byte;
  ssize_t r = client_->Fetch(static_cast<size_t>(link), ref, &byte,
                             std::chrono::steady_clock::now() + config_.timeout);
  asked_ahead_.fetch_add(1, std::memory_order_relaxed);
  if (r == 1) return true;
  asked_ahead_failed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

ssize_t JobPeers::Fetch(int link, ChunkKey key, uint64_t off, size_t n, char* dest,
                        bool if_resident, const std::function<ssize_t(char*)>& source,
                        bool* from_source) {
  const std::string path = ns_->Path(key.node);
  const ChunkRef ref = Ref(key, path, off, n);
  ssize_t r = -EHOSTDOWN;
  PeerClient::Hedge hedge{source};
  if (started_.load(std::memory_order_acquire) && link >= 0) {
    r = client_->Fetch(static_cast<size_t>(link), ref, dest,
                       std::chrono::steady_clock::now() + config_.timeout,
                       if_resident ? kIfResident : 0, source ? &hedge : nullptr);
  }
  if (hedge.used) {  // SOURCE's bytes won the race
    hedged_.fetch_add(1, std::memory_order_relaxed);
    if (r > 0) hedge_bytes_.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
    if (from_source != nullptr) *from_source = true;
    return r;
  }
  if (r == static_cast<ssize_t>(n)) {
    fetched_chunks_.fetch_add(1, std::memory_order_relaxed);
    fetched_bytes_.fetch_add(n, std::memory_order_relaxed);
    return r;
  }
  if (if_resident && r == -ENODATA) {  // the home has none yet: not a failure
    read_here_.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  const uint64_t count = fallbacks_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (r >= 0) r = -EIO;  // a short answer (the client checks lengths: never)
  if (count <= 16 || (count & (count - 1)) == 0) {  // the first ones, then at powers of two
    TIERFS_LOG(kWarning, "peer fetch of '{}' chunk {} failed ({}); read from SOURCE ({} so far)",
               path, key.chunk, std::strerror(static_cast<int>(-r)), count);
  }
  return r;
}

bool JobPeers::Offer(int link, ChunkKey key, const char* data, size_t n) {
  if (!started_.load(std::memory_order_acquire) || link < 0) return false;
  const std::string path = ns_->Path(key.node);
  const ChunkRef ref = Ref(key, path, 0, n);
  if (ref.range_len != 0) return false;  // not the whole chunk
  if (!client_->Offer(static_cast<size_t>(link), ref, data)) return false;
  offered_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void JobPeers::VisitCounters(CounterVisitor& v) const {
  v.Text("self", config_.self, "peers_self");
  v.Gauge("size", static_cast<double>(rendezvous_.size()),
          {"Nodes of the job, this one included."});
  v.Counter("fetched_chunks", fetched_chunks_.load(std::memory_order_relaxed),
            {"Chunks fetched from other nodes of the job."});
  v.Counter("fetched_bytes", fetched_bytes_.load(std::memory_order_relaxed),
            {"Bytes fetched from other nodes of the job.", Unit::kBytes});
  // Every byte fetched from a peer is a byte this node did not read from SOURCE.
  v.Counter("source_bytes_saved", fetched_bytes_.load(std::memory_order_relaxed),
            {"Bytes not read from SOURCE because a peer had them.", Unit::kBytes, "source_saved"});
  v.Counter("source_fallbacks", fallbacks_.load(std::memory_order_relaxed),
            {"Fetches from a peer that failed and were read from SOURCE instead."});
  v.Counter("read_here", read_here_.load(std::memory_order_relaxed),
            {"Chunks the node that keeps them had no copy of yet: read from SOURCE here and "
             "offered to it."});
  v.Counter("offered", offered_.load(std::memory_order_relaxed),
            {"Chunks read from SOURCE here and offered to the node that keeps them."});
  v.Counter("hedged", hedged_.load(std::memory_order_relaxed),
            {"Fetches from a slow peer served by SOURCE, read too after the peer's hedge time."});
  v.Counter("hedge_source_bytes", hedge_bytes_.load(std::memory_order_relaxed),
            {"Bytes read from SOURCE by hedged fetches whose SOURCE read was used.", Unit::kBytes,
             "hedge_source"});
  v.Counter("asked_ahead", asked_ahead_.load(std::memory_order_relaxed),
            {"Chunks the node that keeps them was asked to promote ahead of the read."});
  v.Counter("asked_ahead_failed", asked_ahead_failed_.load(std::memory_order_relaxed),
            {"Requests to the node that keeps a chunk to promote it ahead that failed."});
  if (client_) {
    client_->VisitCounters(v);
  } else {
    v.Gauge("up", 0, kPeersUp);
    v.Gauge("down", static_cast<double>(link_of_.size() > 0 ? link_of_.size() - 1 : 0), kPeersDown);
  }
}

}  // namespace tierfs
