#include "prefetch/planners/hint_parser.h"

namespace tierfs {

HintParser::HintParser(const Namespace* ns, std::string mountpoint, bool directories,
                       bool directives)
    : ns_(ns),
      mountpoint_(std::move(mountpoint)),
      directories_(directories),
      directives_(directives) {}

void HintParser::Feed(uint64_t writer, uint64_t offset, std::string_view data, Result* out) {
  auto now = std::chrono::steady_clock::now();
  auto it = tails_.find(writer);
  if (it != tails_.end() && it->second.next_offset != offset) {
    EndTail(it->second, out);  // the writer started anew: its old line was complete
  }
  if (it == tails_.end()) {
    if (tails_.size() >= kMaxWriters) {  // forget the stalest writer
      auto oldest = tails_.begin();
      for (auto t = tails_.begin(); t != tails_.end(); ++t) {
        if (t->second.last < oldest->second.last) oldest = t;
      }
      EndTail(oldest->second, out);
      tails_.erase(oldest);
    }
    it = tails_.emplace(writer, Tail{}).first;
  }
  Tail& tail = it->second;
  tail.next_offset = offset + data.size();
  tail.last = now;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    std::string_view piece = data.substr(0, nl);
    if (!tail.overlong) {
      if (tail.text.size() + piece.size() > kMaxLine) {
        tail.overlong = true;  // keep nothing more of this line
        tail.text.clear();
      } else {
        tail.text.append(piece);
      }
    }
    if (nl == std::string_view::npos) break;
    EndTail(tail, out);
    data.remove_prefix(nl + 1);
  }
  if (tail.text.empty() && !tail.overlong) tail.text.shrink_to_fit();
}

void HintParser::FlushTails(std::chrono::steady_clock::duration age,
                            std::map<uint64_t, Result>* by_writer) {
  auto now = std::chrono::steady_clock::now();
  for (auto it = tails_.begin(); it != tails_.end();) {
    if (age.count() == 0 || now - it->second.last >= age) {
      EndTail(it->second, &(*by_writer)[it->first]);
      it = tails_.erase(it);
    } else {
      ++it;
    }
  }
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
    out->rejected += r.rejected;
  }
}

void HintParser::EndTail(Tail& tail, Result* out) {
  if (tail.overlong) {
    out->rejected++;
  } else {
    ResolveLine(tail.text, out);
  }
  tail.text.clear();
  tail.overlong = false;
}

void HintParser::ResolveLine(std::string_view line, Result* out) const {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  if (line.find('\0') != std::string_view::npos) {
    out->rejected++;
    return;
  }
  if (line.substr(0, 2) == "//") return ResolveDirective(line.substr(2), out);
  if (line.front() == '/') {
    std::string_view mp = mountpoint_;
    if (mp.empty() || line.substr(0, mp.size()) != mp ||
        (line.size() > mp.size() && line[mp.size()] != '/')) {
      out->rejected++;  // an absolute path outside the mount
      return;
    }
    line.remove_prefix(mp.size());
  }
  // Resolve() refuses ".." components, so nothing escapes the mount.
  auto id = ns_->Resolve(line);
  if (!id) {
    out->rejected++;
    return;
  }
  const Node& n = ns_->node(*id);
  if (S_ISREG(n.mode)) {
    out->files.push_back(*id);
  } else if (S_ISDIR(n.mode) && directories_) {
    AddTree(*id, out);
  } else {
    out->rejected++;
    return;
  }
  out->valid++;
}

void HintParser::ResolveDirective(std::string_view d, Result* out) const {
  auto name_ok = [](std::string_view name) {
    if (name.empty() || name.size() > kMaxStreamName) return false;
    for (char c : name) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == ':' || c == '-';
      if (!ok) return false;
    }
    return true;
  };
  if (directives_ && d == "epoch") {
    out->marks.push_back(Mark{out->files.size(), Mark::Kind::kEpoch, {}});
  } else if (directives_ && d.substr(0, 7) == "stream " && name_ok(d.substr(7))) {
    out->marks.push_back(Mark{out->files.size(), Mark::Kind::kStream, std::string(d.substr(7))});
  } else {
    out->rejected++;
    return;
  }
  out->valid++;
}

void HintParser::AddTree(NodeId dir, Result* out) const {
  std::vector<NodeId> stack{dir};
  while (!stack.empty()) {
    NodeId d = stack.back();
    stack.pop_back();
    auto [begin, end] = ns_->Children(d);
    for (NodeId c = begin; c < end; ++c) {
      if (S_ISREG(ns_->node(c).mode)) out->files.push_back(c);
      if (S_ISDIR(ns_->node(c).mode)) stack.push_back(c);
    }
  }
}

}  // namespace tierfs
