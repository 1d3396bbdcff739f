// PeerServer's answering of requests and offers: a request read and sealed
// on a pool thread and answered, an offer opened and adopted; the sessions
// themselves are peer_server.cc's.
#include <cerrno>
#include <cstring>

#include "tiering/peers/server/peer_server.h"
#include "tiering/peers/server/peer_server_internal.h"

namespace tierfs {
namespace {

using peer_server_internal::Clock;
using peer_server_internal::SessionCrypto;

}  // namespace

struct PeerServer::Job {
  uint64_t request_id = 0;
  uint64_t session = 0;
  uint64_t epoch = 0;  // the transport it was budgeted under
  std::string path;
  ChunkRef ref;  // ref.path views `path`
  std::string peer;
  Clock::time_point start, deadline;
  std::shared_ptr<SessionCrypto> crypto;
  BufferPool::Buffer buffer;   // scratch for the provider, ref.length() bytes
  const char* data = nullptr;  // the answer's bytes: in buffer, or held by hold
  std::shared_ptr<const void> hold;
  int result = 0;
  WireHeader header;  // a data answer's, sealed
  size_t header_size = 0;
};

// A kOffer being received and opened: its header, as it came, and, for a
// rendezvous transfer, its body (path, then bytes) in a buffer of the
// server's (an eager one is opened where UCX has it).
struct PeerServer::OfferJob {
  uint64_t session = 0;
  uint64_t epoch = 0;  // the transport it was budgeted under
  PeerMessage m;
  WireHeader header;
  size_t header_size = 0;
  BufferPool::Buffer body;
  uint64_t size = 0;  // of the body
};

void PeerServer::OnRequest(Connection& c, const PeerMessage& m, std::string_view path) {
  counters_.requests++;
  auto job = std::make_shared<Job>();
  job->request_id = m.request_id;
  job->session = c.session;
  job->epoch = epoch_;
  job->path.assign(path);
  job->ref = m.chunk;
  job->ref.path = job->path;
  if (!ValidChunkRef(job->ref)) {
    CutOff(c, "an invalid chunk reference");
    return;
  }
  const uint64_t length = job->ref.length();
  if (job->ref.chunk_size != options_.chunk_size) {
    counters_.errors++;
    SendError(c, m.request_id, WireError::kBadRequest);
    return;
  }
  if ((m.flags & kIfResident) != 0) {  // no work here for a chunk nobody here has
    if (const Residence r = provider_->Holds(job->ref); r != Residence::kHeld) {
      const bool not_held = r == Residence::kNotHeld;
      (not_held ? counters_.not_resident : counters_.errors)++;
      SendError(c, m.request_id,
                not_held ? WireError::kNotResident : WireErrorFromErrno(ResidenceErrno(r)));
      return;
    }
  }
  if (m.timeout_ms == 0 || !Reserve(c, length)) {
    counters_.busy++;
    SendError(c, m.request_id, WireError::kBusy);
    return;
  }
  job->peer = c.peer;
  job->crypto = c.crypto;
  job->start = Clock::now();
  job->deadline = job->start + std::chrono::milliseconds(m.timeout_ms);
  bool queued = pool_.Submit([this, job] { Run(job); });
  if (!queued) {
    Unreserve(c.session, length, epoch_);
    counters_.busy++;
    SendError(c, m.request_id, WireError::kBusy);
  }
}

bool PeerServer::Reserve(Connection& c, uint64_t bytes) {
  if (in_flight_ >= options_.max_in_flight || c.in_flight >= options_.max_per_connection ||
      counters_.bytes_in_flight.load() + bytes > options_.max_bytes_in_flight ||
      c.bytes + bytes > options_.max_bytes_per_connection) {
    return false;
  }
  ++in_flight_;
  ++c.in_flight;
  c.bytes += bytes;
  uint64_t held = counters_.bytes_in_flight += bytes;
  if (held > counters_.peak_bytes_in_flight.load()) counters_.peak_bytes_in_flight = held;
  return true;
}

void PeerServer::Unreserve(uint64_t session, uint64_t bytes, uint64_t epoch) {
  if (epoch != epoch_) return;
  --in_flight_;
  counters_.bytes_in_flight -= bytes;
  auto it = by_session_.find(session);
  if (it != by_session_.end()) {
    --it->second->in_flight;
    it->second->bytes -= bytes;
  }
}

PeerTransport::Receipt PeerServer::OnOffer(const PeerMessage& m, const PeerTransport::Message& in) {
  auto job = std::make_shared<OfferJob>();
  job->session = m.session;
  job->epoch = epoch_;
  job->m = m;
  std::memcpy(job->header.data(), in.header, in.header_size);
  job->header_size = in.header_size;
  job->size = in.size;
  if (!in.rendezvous) {
    // Here whole: opened as a request is (the first message of a session,
    // a reconnect right after a kNotResident answer, takes it), then kept
    // in place.
    const char* body = static_cast<const char*>(in.data);
    Connection* c = Open(m, in.reply, OfferOpener(*job, body), "an offer");
    if (c == nullptr) return PeerTransport::Receipt::kDone;
    if (!Reserve(*c, in.size)) {  // dropped: the offer is a favour, not a duty
      counters_.offers_refused++;
      return PeerTransport::Receipt::kDone;
    }
    AdoptOffer(*c, job, body);
    return PeerTransport::Receipt::kDone;
  }
  // A rendezvous body cannot be opened before it is received: only a
  // session that exists may be sent one, and it is budgeted first.
  auto it = by_session_.find(m.session);
  if (it == by_session_.end()) {
    counters_.stray++;
    return PeerTransport::Discard(in);
  }
  if (!Reserve(*it->second, in.size)) {  // dropped unread
    counters_.offers_refused++;
    return PeerTransport::Discard(in);
  }
  job->body = buffers_.Take(in.size);
  return transport()->Receive(in, job->body.get(), in.size, [this, job](bool ok) {
    auto release = [this, job] {
      Unreserve(job->session, job->size, job->epoch);
      buffers_.Give(std::move(job->body));
    };
    if (!ok) {
      counters_.offers_refused++;
      release();
      return;
    }
    if (by_session_.count(job->session) == 0) {  // cut off meanwhile
      release();
      return;
    }
    Connection* c = Open(job->m, nullptr, OfferOpener(*job, job->body.get()), "an offer");
    if (c == nullptr) {
      release();
      return;
    }
    AdoptOffer(*c, job, job->body.get());
  });
}

std::function<bool(const SessionKeys&)> PeerServer::OfferOpener(const OfferJob& job,
                                                                const char* body) {
  return [&job, body](const SessionKeys& keys) {
    return OpenWire(keys.recv, job.header.data(), job.header_size, job.m.seq, body, job.size,
                    nullptr);
  };
}

void PeerServer::AdoptOffer(Connection& c, const std::shared_ptr<OfferJob>& job, const char* body) {
  auto release = [this, job] {
    Unreserve(job->session, job->size, job->epoch);
    if (job->body.get() != nullptr) buffers_.Give(std::move(job->body));
  };
  ChunkRef ref = job->m.chunk;
  ref.path = std::string_view(body, job->m.path_len);
  if (!ValidChunkRef(ref)) {
    release();
    CutOff(c, "an offer of an invalid chunk reference");
    return;
  }
  counters_.offers++;
  if (ref.chunk_size != options_.chunk_size) {
    counters_.offers_refused++;
    release();
    return;
  }
  // On a pool thread: the claim and the copy into a tier may wait for a
  // device, which the progress thread must not. An eager body is UCX's only
  // until this returns: copied first.
  if (job->body.get() == nullptr) {
    job->body = buffers_.Take(job->size);
    std::memcpy(job->body.get(), body, job->size);
  }
  const bool queued = pool_.Submit([this, job] {
    ChunkRef adopt = job->m.chunk;
    adopt.path = std::string_view(job->body.get(), job->m.path_len);
    const int r = provider_->Adopt(adopt, job->body.get() + job->m.path_len);
    transport()->Post([this, job, r] {
      (r == 0 ? counters_.adopted : counters_.offers_refused)++;
      Unreserve(job->session, job->size, job->epoch);
      buffers_.Give(std::move(job->body));
    });
  });
  if (!queued) {  // the pool is full or stopping: the offer is a favour
    counters_.offers_refused++;
    release();
  }
}

// On a pool thread: reads and seals the bytes, then hands the answer back.
void PeerServer::Run(const std::shared_ptr<Job>& job) {
  const uint64_t length = job->ref.length();
  if (Clock::now() >= job->deadline) {
    job->result = -ETIMEDOUT;  // the asker has given up: no work for it
  } else {
    job->buffer = buffers_.Take(length == 0 ? 1 : length);
    ChunkBytes bytes;
    bytes.scratch = job->buffer.get();
    job->result = provider_->ReadChunk(job->ref, job->deadline, &bytes);
    if (job->result == 0 && bytes.data == nullptr) job->result = -EIO;
    if (job->result == 0) {
      // Sent from where the provider left the bytes (a RAM tier's own
      // memory, held until sent): the tag costs one read of them, no copy.
      WireIds ids{job->request_id, job->session, job->crypto->next_seq++};
      job->header_size = EncodeData(ids, length, &job->header);
      if (!SealWire(job->crypto->keys.send, &job->header, job->header_size, bytes.data, length,
                    nullptr)) {
        job->result = -EIO;
      }
      job->data = bytes.data;
      job->hold = std::move(bytes.hold);
    }
    if (job->data != job->buffer.get()) buffers_.Give(std::move(job->buffer));  // not sent from it
  }
  transport()->Post([this, job] { Answer(job->session, job); });
}

void PeerServer::Answer(uint64_t session, std::shared_ptr<Job> job) {
  const uint64_t length = job->ref.length();
  auto finish = [this, session, job, length](bool served) {
    Unreserve(session, length, job->epoch);
    if (auto it = by_session_.find(session); it != by_session_.end())
      it->second->sending.erase(job->request_id);
    if (served) {
      counters_.served_chunks++;
      counters_.served_bytes += length;
      CountServed(job->peer, length);
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - job->start);
      counters_.serve_latency.Record(static_cast<uint64_t>(us.count()));
    }
    buffers_.Give(std::move(job->buffer));
    job->hold.reset();
  };
  auto it = by_session_.find(session);
  if (it == by_session_.end()) {
    finish(false);
    return;
  }
  Connection& c = *it->second;
  if (c.ep == nullptr) {  // its client went: nowhere to answer
    finish(false);
    return;
  }
  if (job->result != 0) {
    if (job->result == -ETIMEDOUT) {
      counters_.expired++;
      SendError(c, job->request_id, WireError::kBusy);
    } else {
      counters_.errors++;
      SendError(c, job->request_id, WireErrorFromErrno(job->result));
    }
    finish(false);
    return;
  }
  c.sending[job->request_id] = Clock::now();
  transport()->Send(c.ep, job->header, job->header_size, job->data, length, 0,
                    [finish](bool ok) { finish(ok); });
}

void PeerServer::SendBare(Connection& c, MsgType type, uint64_t request_id) {
  if (c.ep == nullptr) return;  // its reply endpoint went (ReplyGone)
  WireHeader h;
  size_t n = EncodeBare(type, WireIds{request_id, c.session, c.crypto->next_seq++}, &h);
  if (!SealWire(c.crypto->keys.send, &h, n, nullptr, 0, nullptr)) return;
  transport()->Send(c.ep, h, n, nullptr, 0, 0, nullptr);
}

void PeerServer::SendError(Connection& c, uint64_t request_id, WireError error) {
  if (c.ep == nullptr) return;  // its reply endpoint went (ReplyGone)
  WireHeader h;
  size_t n = EncodeError(WireIds{request_id, c.session, c.crypto->next_seq++}, error, &h);
  if (!SealWire(c.crypto->keys.send, &h, n, nullptr, 0, nullptr)) return;
  transport()->Send(c.ep, h, n, nullptr, 0, 0, nullptr);
}

}  // namespace tierfs
