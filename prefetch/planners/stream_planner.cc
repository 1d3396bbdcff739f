#include "prefetch/planners/stream_planner.h"

#include <fmt/format.h>

#include <queue>
#include <unordered_set>

namespace tierfs {
namespace {

constexpr uint64_t kNever = NextUses::kNever;
constexpr uint64_t kStragglers = 64;  // look behind a cursor for files still unread

uint64_t Lead(uint64_t pos, uint64_t cursor) {
  if (pos == kNever) return kNever;
  return pos > cursor ? pos - cursor : 0;
}

// Names an occurrence across streams: its stream's serial and its position.
uint64_t OccurrenceId(uint64_t serial, uint64_t pos) {
  return (serial << 40) | (pos & ((1ull << 40) - 1));
}

}  // namespace

StreamPlanner::StreamPlanner(size_t nodes, size_t max_entries, NextUseTable* next_uses)
    : nodes_(nodes), max_entries_(max_entries), next_uses_(next_uses) {}

void StreamPlanner::PublishCursor(const Stream& s) {
  if (next_uses_) next_uses_->SetCursor(s.slot, s.plan.cursor());
}

// The same choice as NextUse, as (slot, position) pairs that count down as
// cursors move.
void StreamPlanner::Publish(const std::vector<NodeId>& ids) {
  for (NodeId id : ids) Publish(id);
}

void StreamPlanner::Publish(NodeId id) {
  if (!next_uses_) return;
  NextUseTable::Uses uses;
  const Stream* first = nullptr;
  uint64_t best = kNever, second = kNever;
  NextUseTable::Use second_use;
  for (const auto& [name, s] : streams_) {
    const uint64_t pos = s->plan.NextUse(id);
    const uint64_t lead = Lead(pos, s->plan.cursor());
    const auto slot = static_cast<uint8_t>(s->slot);
    if (lead < best) {
      second = best;
      second_use = uses.next;
      best = lead;
      uses.next = {pos, slot};
      uses.next_id = OccurrenceId(s->serial, pos);
      first = s.get();
    } else if (lead < second) {
      second = lead;
      second_use = {pos, slot};
    }
  }
  if (first) {
    const uint64_t following = first->plan.FollowingUse(id);
    uses.after = second < Lead(following, first->plan.cursor())
                     ? second_use
                     : NextUseTable::Use{following, static_cast<uint8_t>(first->slot)};
  }
  next_uses_->Set(id, uses);
}

void StreamPlanner::PendingFiles(const OrderPlan& plan, std::vector<NodeId>* out) {
  for (uint64_t p = plan.begin(); p < plan.size(); ++p) {
    if (plan.pending(p)) out->push_back(plan.at(p));
  }
}

void StreamPlanner::Drop(std::map<std::string, std::unique_ptr<Stream>>::iterator it,
                         std::vector<NodeId>* changed) {
  PendingFiles(it->second->plan, changed);
  streams_.erase(it);
}

void StreamPlanner::AssignSeries(Stream* stream, bool by_pid) const {
  std::vector<bool> taken(streams_.size() + 1);
  for (const auto& [name, s] : streams_) {
    if (s->slot < taken.size()) taken[s->slot] = true;
  }
  stream->slot = 0;
  while (taken[stream->slot]) stream->slot++;
  if (stream->slot >= kSeries) {
    stream->series = "other";
  } else if (!show_names_) {
    stream->series = fmt::format("stream-{}", stream->slot);
  } else {
    stream->series = by_pid ? fmt::format("process-{}", stream->slot) : stream->name;
  }
}

StreamPlanner::Stream* StreamPlanner::StreamFor(uint64_t writer, const std::string& name,
                                                Clock::time_point now,
                                                std::vector<NodeId>* changed) {
  std::string key = name;
  bool by_pid = false;
  if (key.empty()) {
    auto w = writer_stream_.find(writer);
    by_pid = w == writer_stream_.end();
    key = by_pid ? fmt::format("pid:{}", writer) : w->second;
  }
  auto it = streams_.find(key);
  if (it == streams_.end()) {
    if (streams_.size() >= kMaxStreams) {  // the least recently active one gives way
      auto oldest = streams_.begin();
      for (auto s = streams_.begin(); s != streams_.end(); ++s) {
        if (s->second->active < oldest->second->active) oldest = s;
      }
      Drop(oldest, changed);
      dropped_streams_++;
    }
    auto stream = std::unique_ptr<Stream>(new Stream{
        key, next_serial_++, OrderPlan(nodes_, max_entries_), 0, 0, 0, 0, 0, now, 0, {}});
    AssignSeries(stream.get(), by_pid);
    PublishCursor(*stream);
    it = streams_.emplace(key, std::move(stream)).first;
  }
  it->second->active = now;
  return it->second.get();
}

void StreamPlanner::Append(uint64_t writer, const HintParser::Result& r, Appended* out) {
  const auto now = Clock::now();
  Stream* stream = nullptr;
  size_t mark = 0;
  auto append = [&](size_t from, size_t to) {
    if (from >= to) return;
    if (!stream) stream = StreamFor(writer, "", now, &out->changed);
    std::vector<NodeId> files(r.files.begin() + static_cast<long>(from),
                              r.files.begin() + static_cast<long>(to));
    uint64_t held = 0;  // after StreamFor: it may have dropped a stream
    for (const auto& [name, s] : streams_) held += s->plan.size() - s->plan.begin();
    size_t room = held < max_entries_ ? max_entries_ - held : 0;
    if (files.size() > room) files.resize(room);
    size_t added = stream->plan.Append(files);
    out->files += added;
    out->dropped += (to - from) - added;
    dropped_entries_ += (to - from) - added;
    files.resize(added);
    out->changed.insert(out->changed.end(), files.begin(), files.end());
  };
  size_t done = 0;
  for (; mark < r.marks.size(); ++mark) {
    const HintParser::Mark& m = r.marks[mark];
    append(done, m.at);
    done = std::max(done, m.at);
    if (m.kind == HintParser::Mark::Kind::kStream) {
      if (writer_stream_.size() >= kMaxWriters && !writer_stream_.count(writer)) {
        writer_stream_.clear();  // writers fall back to their own streams
      }
      writer_stream_[writer] = m.stream;
      stream = StreamFor(writer, m.stream, now, &out->changed);
    } else {
      if (!stream) stream = StreamFor(writer, "", now, &out->changed);
      std::vector<NodeId> abandoned;
      PendingFiles(stream->plan, &abandoned);
      stream->abandoned += stream->plan.StartEpoch();
      stream->epochs++;
      PublishCursor(*stream);
      out->changed.insert(out->changed.end(), abandoned.begin(), abandoned.end());
    }
  }
  append(done, r.files.size());
  Publish(out->changed);
}

std::vector<NodeId> StreamPlanner::Clear() {
  std::vector<NodeId> changed;
  for (const auto& [name, s] : streams_) PendingFiles(s->plan, &changed);
  streams_.clear();
  writer_stream_.clear();
  Publish(changed);
  return changed;
}

bool StreamPlanner::Consume(NodeId id, bool hit, Clock::time_point now, uint64_t* occurrence) {
  Stream* best = nullptr;
  uint64_t best_lead = kNever;
  for (const auto& [name, s] : streams_) {
    uint64_t lead = Lead(s->plan.NextUse(id), s->plan.cursor());
    if (lead < best_lead) {
      best_lead = lead;
      best = s.get();
    }
  }
  if (!best) return false;
  if (occurrence) *occurrence = OccurrenceId(best->serial, best->plan.NextUse(id));
  best->plan.Consume(id);
  consumed_total_++;
  (hit ? best->hits : best->misses)++;
  best->active = now;
  PublishCursor(*best);
  Publish(id);
  return true;
}

NextUses StreamPlanner::NextUse(NodeId id) const {
  NextUses u;
  const Stream* first = nullptr;
  uint64_t second = kNever;  // the smallest head lead of the other streams
  for (const auto& [name, s] : streams_) {
    uint64_t pos = s->plan.NextUse(id);
    uint64_t lead = Lead(pos, s->plan.cursor());
    if (lead < u.next) {
      second = u.next;
      u.next = lead;
      u.next_id = OccurrenceId(s->serial, pos);
      first = s.get();
    } else if (lead < second) {
      second = lead;
    }
  }
  if (first) {
    u.after = std::min(second, Lead(first->plan.FollowingUse(id), first->plan.cursor()));
  }
  return u;
}

std::vector<NodeId> StreamPlanner::Lookahead(size_t window, uint64_t max_bytes,
                                             const ReadyFn& ready, const SizeFn& size,
                                             std::vector<NodeId>* changed, Clock::time_point now) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (now - it->second->active > kIdle) {
      std::vector<NodeId> dropped;
      Drop(it++, &dropped);
      dropped_streams_++;
      Publish(dropped);
      changed->insert(changed->end(), dropped.begin(), dropped.end());
    } else {
      ++it;
    }
  }
  // Per stream: its scan position, the candidate there, and its lead so far.
  struct Scan {
    Stream* s;
    uint64_t p;     // next position to look at
    uint64_t lead;  // resident (or chosen) files ahead of the cursor
    uint64_t steps;
    bool operator>(const Scan& o) const { return lead > o.lead; }
  };
  const uint64_t max_steps = 4 * static_cast<uint64_t>(window) + 2 * kStragglers;
  uint64_t bytes = 0;
  // Moves sc.p to its stream's next pending file that is not ready,
  // counting ready ones ahead of the cursor into its lead; false at the end.
  auto advance = [&](Scan& sc) {
    const OrderPlan& plan = sc.s->plan;
    for (; sc.p < plan.size() && sc.steps < max_steps; ++sc.p, ++sc.steps) {
      if (!plan.pending(sc.p)) continue;
      NodeId id = plan.at(sc.p);
      if (!ready(id)) return true;
      if (sc.p >= plan.cursor()) {
        sc.lead++;
        bytes += size(id);
      }
    }
    return false;
  };
  std::priority_queue<Scan, std::vector<Scan>, std::greater<Scan>> queue;
  for (const auto& [name, s] : streams_) {
    const OrderPlan& plan = s->plan;
    s->lead = 0;
    if (plan.outstanding() == 0) continue;
    uint64_t start =
        std::max(plan.begin(), plan.cursor() > kStragglers ? plan.cursor() - kStragglers : 0);
    Scan sc{s.get(), start, 0, 0};
    bool more = advance(sc);
    s->lead = sc.lead;
    if (more) queue.push(sc);
  }
  std::vector<NodeId> out;
  std::unordered_set<NodeId> chosen;
  while (!queue.empty() && out.size() < window) {
    Scan sc = queue.top();
    queue.pop();
    NodeId id = sc.s->plan.at(sc.p);
    if (chosen.insert(id).second) {
      if (bytes + size(id) > max_bytes && !out.empty()) break;
      bytes += size(id);
      out.push_back(id);
    }
    if (sc.p >= sc.s->plan.cursor()) sc.lead++;  // it will be resident in time
    sc.p++;
    sc.steps++;
    if (advance(sc)) queue.push(sc);
  }
  return out;
}

uint64_t StreamPlanner::min_lead() const {
  uint64_t lead = kNever;
  for (const auto& [name, s] : streams_) {
    if (s->plan.outstanding() > 0) lead = std::min(lead, s->lead);
  }
  return lead == kNever ? 0 : lead;
}

uint64_t StreamPlanner::declared() const {
  uint64_t n = 0;
  for (const auto& [name, s] : streams_) n += s->plan.size();
  return n;
}

uint64_t StreamPlanner::consumed() const {
  uint64_t n = 0;
  for (const auto& [name, s] : streams_) n += s->plan.consumed();
  return n;
}

void StreamPlanner::VisitCounters(CounterVisitor& v) const {
  uint64_t position = 0;
  for (const auto& [name, s] : streams_) position += s->plan.cursor();
  v.Gauge("declared", static_cast<double>(declared()),
          {"Files declared in the read order, all streams held.", Unit::kFiles});
  v.Gauge("position", static_cast<double>(position),
          {"Files of the declared order the readers are past, all streams held.", Unit::kFiles});
  v.Counter("consumed", consumed_total_, {"Reads matched to a declared stream."});
  v.Counter("dropped", dropped_entries_,
            {"Declared files dropped because the order held too many."});
  v.Gauge(
      "lead", static_cast<double>(min_lead()),
      {"The smallest lead of the streams: files resident ahead of their readers.", Unit::kFiles});
  v.Gauge("active_streams", static_cast<double>(streams_.size()), {"Declared streams held."});
  v.Counter("dropped_streams", dropped_streams_, {"Streams dropped to make room for a new one."});
  v.BeginList("streams", "stream");
  for (const auto& [name, s] : streams_) {
    const std::string shown = show_names_ ? name : fmt::format("stream-{}", s->slot);
    v.BeginItem({{"name", shown}}, s->series);
    v.Gauge("declared", static_cast<double>(s->plan.size()),
            {"Files declared in the stream.", Unit::kFiles});
    v.Gauge("position", static_cast<double>(s->plan.cursor()),
            {"Files of the stream its readers are past.", Unit::kFiles});
    v.Gauge("outstanding", static_cast<double>(s->plan.outstanding()),
            {"Files of the stream still to be read.", Unit::kFiles});
    v.Gauge("lead", static_cast<double>(s->lead),
            {"Files of the stream resident ahead of its readers.", Unit::kFiles});
    v.Counter("consumed", s->plan.consumed(), {"Reads matched to the stream."});
    v.Counter("lookahead_hits", s->hits,
              {"Reads of the stream served from a tier without waiting."});
    v.Counter("misses", s->misses, {"Reads of the stream that were not served from a tier."});
    v.Counter("epochs", s->epochs, {"Epochs the stream started."});
    v.Counter("abandoned", s->abandoned,
              {"Declared files of the stream left unread when a new epoch started."});
    v.EndItem();
  }
  v.EndList();
}

}  // namespace tierfs
