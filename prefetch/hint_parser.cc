#include "prefetch/hint_parser.h"

namespace tierfs {

HintParser::HintParser(const Namespace* ns, std::string mountpoint, bool directories)
    : ns_(ns), mountpoint_(std::move(mountpoint)), directories_(directories) {}

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

void HintParser::FlushTails(std::chrono::steady_clock::duration age, Result* out) {
  auto now = std::chrono::steady_clock::now();
  for (auto it = tails_.begin(); it != tails_.end();) {
    if (age.count() == 0 || now - it->second.last >= age) {
      EndTail(it->second, out);
      it = tails_.erase(it);
    } else {
      ++it;
    }
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
