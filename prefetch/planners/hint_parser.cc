#include "prefetch/planners/hint_parser.h"

#include <fmt/format.h>

#include <algorithm>

namespace tierfs {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` (0: none).
size_t Utf8Length(std::string_view s) {
  const auto b = static_cast<unsigned char>(s[0]);
  const size_t n = b > 0xf4 ? 0 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
  if (n == 0 || n > s.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) return 0;
  }
  const auto b1 = static_cast<unsigned char>(s[1]);
  if ((b == 0xe0 && b1 < 0xa0) || (b == 0xed && b1 >= 0xa0) || (b == 0xf0 && b1 < 0x90) ||
      (b == 0xf4 && b1 >= 0x90)) {
    return 0;  // overlong, a surrogate, or beyond U+10FFFF
  }
  return n;
}

}  // namespace

std::string HintParser::Shown(std::string_view line) {
  std::string out;
  out.reserve(std::min(line.size(), kMaxShown) + 3);
  size_t i = 0;
  while (i < line.size() && i < kMaxShown) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      size_t end = i + 1;  // the run of printable ASCII, at once
      while (end < line.size() && end < kMaxShown && line[end] >= 0x20 && line[end] < 0x7f &&
             line[end] != '\\') {
        ++end;
      }
      out.append(line.substr(i, end - i));
      i = end;
    } else if (size_t n = c >= 0x80 ? Utf8Length(line.substr(i)) : 0; n > 0) {
      out.append(line.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  if (i < line.size()) out += "...";
  return out;
}

HintParser::HintParser(const Namespace* ns, std::string mountpoint, bool directories,
                       bool directives)
    : ns_(ns),
      mountpoint_(std::move(mountpoint)),
      directories_(directories),
      directives_(directives) {}

void HintParser::Feed(const HintWriter& writer, uint64_t offset, std::string_view data,
                      Result* out) {
  out->uid = writer.caller.uid;
  std::vector<Line> lines;
  Split(writer, offset, data, &lines);
  ResolveAll(lines, out);
}

void HintParser::ResolveAll(const std::vector<Line>& lines, Result* out) {
  for (const Line& line : lines) {
    out->uid = line.caller.uid;
    if (auto rejected = Resolve(line, out)) Note(line, std::move(*rejected));
  }
}

void HintParser::Split(const HintWriter& writer, uint64_t offset, std::string_view data,
                       std::vector<Line>* lines) {
  auto now = std::chrono::steady_clock::now();
  auto it = tails_.find(writer.id);
  // The writer started anew (or is someone else now, with the same thread
  // id): its old line was complete, and was its old caller's.
  const bool anew = it != tails_.end() &&
                    (it->second.next_offset != offset || it->second.caller != writer.caller);
  if (anew) EndTail(writer.id, it->second, lines);
  if (it == tails_.end()) {
    if (tails_.size() >= kMaxWriters) {  // forget the stalest writer
      auto oldest = tails_.begin();
      for (auto t = tails_.begin(); t != tails_.end(); ++t) {
        if (t->second.last < oldest->second.last) oldest = t;
      }
      EndTail(oldest->first, oldest->second, lines);
      tails_.erase(oldest);
    }
    it = tails_.emplace(writer.id, Tail{}).first;
    it->second.caller = writer.caller;
    it->second.stream = next_stream_++;
  }
  Tail& tail = it->second;
  if (anew) {  // a new stream of writes
    tail.has_rejected = false;
    tail.caller = writer.caller;
    tail.stream = next_stream_++;
  }
  tail.next_offset = offset + data.size();
  tail.last = now;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    std::string_view piece = data.substr(0, nl);
    if (!tail.overlong) {
      if (tail.text.size() + piece.size() > kMaxLine) {
        tail.overlong = true;  // keep nothing more of this line than what is shown
        tail.text.append(piece.substr(0, kMaxShown + 1));
        tail.text.resize(std::min(tail.text.size(), kMaxShown + 1));
        tail.text.shrink_to_fit();
      } else {
        tail.text.append(piece);
      }
    }
    if (nl == std::string_view::npos) break;
    EndTail(writer.id, tail, lines);
    data.remove_prefix(nl + 1);
  }
  if (tail.text.empty() && !tail.overlong) tail.text.shrink_to_fit();
}

void HintParser::TakeTails(std::chrono::steady_clock::duration age,
                           std::map<uint64_t, std::vector<Line>>* by_writer) {
  auto now = std::chrono::steady_clock::now();
  for (auto it = tails_.begin(); it != tails_.end();) {
    if (age.count() == 0 || now - it->second.last >= age) {
      EndTail(it->first, it->second, &(*by_writer)[it->first]);
      it = tails_.erase(it);
    } else {
      ++it;
    }
  }
}

void HintParser::FlushTails(std::chrono::steady_clock::duration age,
                            std::map<uint64_t, Result>* by_writer) {
  std::map<uint64_t, std::vector<Line>> lines;
  TakeTails(age, &lines);
  for (const auto& [writer, l] : lines) ResolveAll(l, &(*by_writer)[writer]);
}

void HintParser::FlushTails(std::chrono::steady_clock::duration age, Result* out) {
  std::map<uint64_t, Result> by_writer;
  FlushTails(age, &by_writer);
  for (auto& [writer, r] : by_writer) {
    for (Mark& m : r.marks) {
      m.at += out->files.size();
      out->marks.push_back(std::move(m));
    }
    out->files.insert(out->files.end(), r.files.begin(), r.files.end());
    out->valid += r.valid;
    out->directives += r.directives;
    out->rejected += r.rejected;
  }
}

void HintParser::EndTail(uint64_t writer, Tail& tail, std::vector<Line>* lines) {
  lines->push_back(Line{std::move(tail.text), tail.overlong, tail.caller, writer, tail.stream});
  tail.text.clear();
  tail.overlong = false;
}

std::optional<HintParser::Rejection> HintParser::Resolve(const Line& line, Result* out) const {
  if (line.overlong) {
    out->rejected++;
    return Rejection{Shown(line.text), fmt::format("longer than {} bytes", kMaxLine)};
  }
  return ResolveLine(line.text, line.caller, out);
}

void HintParser::Note(const Line& line, Rejection rejection) {
  auto it = tails_.find(line.writer);
  const bool tail_here = it != tails_.end() && it->second.stream == line.stream;
  const bool first = tail_here ? !it->second.has_rejected : line.stream != last_rejected_stream_;
  if (!first) return;
  if (tail_here) it->second.has_rejected = true;
  last_rejected_ = std::move(rejection);
  last_rejected_stream_ = line.stream;
}

std::optional<HintParser::Rejection> HintParser::ResolveLine(std::string_view line,
                                                             const AccessCaller& caller,
                                                             Result* out) const {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return std::nullopt;
  const std::string_view whole = line;
  auto reject = [&](std::string reason) {
    out->rejected++;
    return Rejection{Shown(whole), std::move(reason)};
  };
  if (line.find('\0') != std::string_view::npos) return reject("holds a NUL byte");
  if (line.substr(0, 2) == "//") {
    auto rejected = ResolveDirective(line.substr(2), out);
    if (rejected) rejected->line = Shown(line);
    return rejected;
  }
  if (line.front() == '/') {
    std::string_view mp = mountpoint_;
    if (mp.empty() || line.substr(0, mp.size()) != mp ||
        (line.size() > mp.size() && line[mp.size()] != '/')) {
      return reject(mp.empty() ? "an absolute path (write it relative to the mount)"
                               : fmt::format("an absolute path outside the mount ({})", mp));
    }
    line.remove_prefix(mp.size());
  }
  // Resolve() refuses ".." components, so nothing escapes the mount. What
  // the writer may not reach is not in the mount, as far as it may know.
  auto id = ns_->Resolve(line);
  if (id && !MayName(caller, *id)) id.reset();
  if (!id) {
    const bool climbs = line == ".." || line.substr(0, 3) == "../" ||
                        line.find("/../") != std::string_view::npos ||
                        (line.size() >= 3 && line.substr(line.size() - 3) == "/..");
    return reject(climbs ? "climbs with '..' (paths are relative to the mount's root)"
                         : "not in the mount (paths are relative to its root)");
  }
  const Node& n = ns_->node(*id);
  if (S_ISREG(n.mode)) {
    out->files.push_back(*id);
  } else if (S_ISDIR(n.mode) && directories_) {
    AddTree(*id, caller, out);
  } else {
    return reject(S_ISDIR(n.mode) ? "a directory (name its files)" : "not a regular file");
  }
  out->valid++;
  return std::nullopt;
}

void HintParser::VisitRejected(CounterVisitor& v) const {
  if (!last_rejected_) return;
  v.BeginGroup("last_rejected");
  if (show_lines_) v.Note("line", last_rejected_->line);
  v.Note("reason", last_rejected_->reason);
  v.EndGroup();
}

std::optional<HintParser::Rejection> HintParser::ResolveDirective(std::string_view d,
                                                                  Result* out) const {
  auto name_ok = [](std::string_view name) {
    if (name.empty() || name.size() > kMaxStreamName) return false;
    for (char c : name) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == ':' || c == '-';
      if (!ok) return false;
    }
    return true;
  };
  auto reject = [&](std::string reason) {
    out->rejected++;
    return Rejection{std::string(), std::move(reason)};  // the caller shows the line
  };
  if (!directives_) return reject("'//' begins a directive, and this file takes none");
  if (d == "epoch") {
    out->marks.push_back(Mark{out->files.size(), Mark::Kind::kEpoch, {}});
  } else if (d.substr(0, 7) == "stream " && name_ok(d.substr(7))) {
    out->marks.push_back(Mark{out->files.size(), Mark::Kind::kStream, std::string(d.substr(7))});
  } else if (d.substr(0, 7) == "stream ") {
    return reject(fmt::format("a stream name is 1-{} of [A-Za-z0-9._:-]", kMaxStreamName));
  } else {
    return reject("an unknown directive (//stream NAME, //epoch)");
  }
  out->valid++;
  out->directives++;
  return std::nullopt;
}

void HintParser::AddTree(NodeId dir, const AccessCaller& caller, Result* out) const {
  std::vector<NodeId> stack{dir};
  while (!stack.empty()) {
    NodeId d = stack.back();
    stack.pop_back();
    auto [begin, end] = ns_->Children(d);
    for (NodeId c = begin; c < end; ++c) {
      const uint32_t mode = ns_->node(c).mode;
      if (!(S_ISREG(mode) || S_ISDIR(mode)) || !MayName(caller, c)) continue;
      if (S_ISREG(mode)) out->files.push_back(c);
      if (S_ISDIR(mode)) stack.push_back(c);
    }
  }
}

}  // namespace tierfs
