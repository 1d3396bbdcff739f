// Fuzz target: HintParser, the bytes jobs write to .tierfs/order (paths,
// "//stream NAME", "//epoch") and .tierfs/stage (paths, directories), fed
// as the Prefetcher feeds them, with the order results appended to a
// StreamPlanner as the Prefetcher does.
//
// The input is a script of write() calls. Each step is a 3-byte header and
// up to 255 bytes of data:
//   byte 0: the writer (a thread id), plus 256 if bit 0 of byte 1 is set (so
//           more than HintParser::kMaxWriters writers can occur);
//   byte 1: bit 1: the write is at offset 0 (a new open) instead of at the
//           writer's next offset; bit 2: after it, flush every unfinished
//           line (as truncating the order file does) and clear the planner;
//           bits 3-7 (r): the same write is made by the writers w, w+1, ...,
//           w + 16r, each '#' in the data replaced by the writer's number
//           (so that one step can exceed the bounds on writers and streams);
//           such a step writes at most kMaxFanOutBytes to the order parser
//           alone, and an input makes at most one extra write per 16 of its
//           bytes, kMaxExtraWriters in all (the fuzzer's time goes to many
//           inputs: when any input could make 300 writes, a 3-byte step did,
//           and the target ran about 400 inputs a second; steps of their own
//           also exceed the bounds, 3 bytes a writer);
//   byte 2: the data length (cut short by the end of the input).
// Every step feeds the same bytes to an order parser and a stage parser over
// a small namespace mounted at /mnt (built in memory, no file is touched).
// It aborts when a result breaks HintParser's contract: marks in order and
// within the files, only regular files of the namespace, stream names
// within the rules, no directive from the stage parser, no unfinished
// line left after a full flush, and every rejection shown with a reason, the
// line bounded, printable and valid UTF-8.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "prefetch/planners/stream_planner.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "hint_parser_fuzz: %s\n", what.c_str());
  std::abort();
}

// The namespace: alpha, beta, dir/{gamma, sub/delta, zeta}, empty/ and a
// symlink "link" -> alpha. Nodes in breadth-first order, siblings sorted.
std::unique_ptr<Namespace> SmallNamespace() {
  struct Spec {
    const char* name;
    uint32_t mode;
    NodeId parent, first_child, child_count;
  };
  const Spec specs[] = {
      {"", S_IFDIR | 0755, 0, 1, 5},       // 0 /
      {"alpha", S_IFREG | 0644, 0, 0, 0},  // 1
      {"beta", S_IFREG | 0644, 0, 0, 0},   // 2
      {"dir", S_IFDIR | 0755, 0, 6, 3},    // 3
      {"empty", S_IFDIR | 0755, 0, 9, 0},  // 4
      {"link", S_IFLNK | 0777, 0, 0, 0},   // 5 (target set below)
      {"gamma", S_IFREG | 0644, 3, 0, 0},  // 6
      {"sub", S_IFDIR | 0755, 3, 9, 1},    // 7
      {"zeta", S_IFREG | 0644, 3, 0, 0},   // 8
      {"delta", S_IFREG | 0644, 7, 0, 0},  // 9
  };
  auto arena = std::make_shared<std::string>();
  auto nodes = std::make_shared<std::vector<Node>>();
  NamespaceTotals totals;
  for (const Spec& s : specs) {
    Node n;
    n.mode = s.mode;
    n.parent = s.parent;
    n.name_off = static_cast<uint32_t>(arena->size());
    n.name_len = static_cast<uint32_t>(std::string_view(s.name).size());
    *arena += s.name;
    n.first_child = s.first_child;
    n.child_count = s.child_count;
    if (S_ISREG(s.mode)) {
      n.size = 1;
      totals.files++;
      totals.file_bytes += n.size;
    }
    totals.dirs += S_ISDIR(s.mode);
    totals.symlinks += S_ISLNK(s.mode);
    nodes->push_back(n);
  }
  (*nodes)[5].first_child = static_cast<uint32_t>(arena->size());
  (*nodes)[5].child_count = 5;
  *arena += "alpha";
  if (Status bad = CheckLayout(*nodes, *arena, totals); !bad.ok()) {
    Fail("the test namespace is inconsistent: " + bad.message());
  }
  struct Owner {
    std::shared_ptr<std::string> arena;
    std::shared_ptr<std::vector<Node>> nodes;
  };
  auto owner = std::make_shared<Owner>(Owner{arena, nodes});
  struct statvfs vfs {};
  return std::make_unique<Namespace>(*nodes, *arena, totals, vfs, owner);
}

bool StreamNameOk(const std::string& name) {
  if (name.empty() || name.size() > HintParser::kMaxStreamName) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void CheckResult(const Namespace& ns, const HintParser::Result& r, bool directives) {
  size_t at = 0;
  for (const HintParser::Mark& m : r.marks) {
    if (!directives) Fail("a directive from a parser that takes none");
    if (m.at < at || m.at > r.files.size()) Fail("a mark out of order or past the files");
    at = m.at;
    if (m.kind == HintParser::Mark::Kind::kStream && !StreamNameOk(m.stream)) {
      Fail("a stream name against the rules: " + m.stream);
    }
  }
  for (NodeId id : r.files) {
    if (!ns.valid(id) || !S_ISREG(ns.node(id).mode)) Fail("a result that is not a file");
  }
}

// A line shown to people (HintParser::Shown): bounded, no control
// character, valid UTF-8 (a JSON reader and a terminal take it as it is).
void CheckShown(const std::string& shown) {
  if (shown.size() > 4 * HintParser::kMaxShown + 3) Fail("a shown line longer than its bound");
  for (size_t i = 0; i < shown.size();) {
    const auto c = static_cast<unsigned char>(shown[i]);
    if (c < 0x20 || c == 0x7f) Fail("a control character in a shown line");
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
    if (c >= 0x80 && (c < 0xc2 || c > 0xf4)) Fail("a shown line that is not UTF-8");
    if (i + n > shown.size()) Fail("a shown line with a cut UTF-8 sequence");
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(shown[i + k]) & 0xc0) != 0x80) {
        Fail("a shown line that is not UTF-8");
      }
    }
    i += n;
  }
}

// A rejection counted is a rejection shown (the first of its stream of writes).
void CheckRejected(const HintParser& parser, const HintParser::Result& r) {
  if (r.rejected > 0 && !parser.last_rejected()) Fail("a rejected line and nothing shown");
  if (const auto& last = parser.last_rejected()) {
    CheckShown(last->line);
    if (last->reason.empty()) Fail("a rejection without a reason");
  }
}

}  // namespace
}  // namespace tierfs

// ASan keeps freed memory from reuse for a while to catch a use after free:
// 256 MiB by default, which made every input's allocations fresh pages
// (page faults were a tenth of the time). An input's own allocations are a
// few KiB: 16 MiB still holds every one of them.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=16"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierfs;
  static const std::unique_ptr<Namespace> ns = SmallNamespace();
  using Clock = std::chrono::steady_clock;
  HintParser order(ns.get(), "/mnt", false, true);
  HintParser stage(ns.get(), "/mnt", true, false);
  StreamPlanner planner(ns->size(), 64);
  std::map<uint64_t, uint64_t> next_offset;  // by writer

  auto append_order = [&](uint64_t writer, const HintParser::Result& r) {
    CheckResult(*ns, r, true);
    StreamPlanner::Appended appended;
    planner.Append(writer, r, &appended);
  };
  auto flush = [&] {
    std::map<uint64_t, HintParser::Result> late;  // as the Prefetcher's ticker
    order.FlushTails(Clock::duration::zero(), &late);
    for (const auto& [writer, r] : late) append_order(writer, r);
    HintParser::Result rest;  // as ClearOrder and the stage ticker
    stage.FlushTails(Clock::duration::zero(), &rest);
    CheckResult(*ns, rest, false);
    CheckRejected(stage, rest);
    HintParser::Result again;
    std::map<uint64_t, HintParser::Result> again_late;
    order.FlushTails(Clock::duration::zero(), &again);
    stage.FlushTails(Clock::duration::zero(), &again_late);
    if (!again.files.empty() || !again.marks.empty() || again.valid + again.rejected != 0 ||
        !again_late.empty()) {
      Fail("a line left after a full flush");
    }
  };

  // `also_stage`: the stage parser is fed too, and the bytes' Shown() checked
  // (not for a fan-out's copies: the same code over the same bytes).
  auto write = [&](uint64_t writer, bool reopen, std::string_view bytes, bool also_stage) {
    uint64_t off = reopen ? 0 : next_offset[writer];
    next_offset[writer] = off + bytes.size();
    HintParser::Result r;
    order.Feed(HintWriter{writer, {}}, off, bytes, &r);
    append_order(writer, r);
    CheckRejected(order, r);
    if (!also_stage) return;
    HintParser::Result s;
    stage.Feed(HintWriter{writer, {}}, off, bytes, &s);
    CheckResult(*ns, s, false);
    CheckRejected(stage, s);
    CheckShown(HintParser::Shown(bytes));
  };

  constexpr uint64_t kMaxExtraWriters = 300;  // more than kMaxWriters and kMaxStreams
  constexpr size_t kMaxFanOutBytes = 32;
  // An input pays for its extra writes with its own bytes, so that the work
  // per input grows with its length.
  const uint64_t extra_budget = std::min<uint64_t>(kMaxExtraWriters, size / 16);
  uint64_t extra_writers = 0;
  size_t pos = 0;
  while (pos + 3 <= size) {
    const uint64_t first = data[pos] + (data[pos + 1] & 1u) * 256;
    const bool reopen = (data[pos + 1] & 2u) != 0;
    const bool clear = (data[pos + 1] & 4u) != 0;
    const uint64_t repeat =
        std::min<uint64_t>((data[pos + 1] >> 3) * 16u, extra_budget - extra_writers);
    extra_writers += repeat;
    const size_t len = std::min<size_t>(data[pos + 2], size - pos - 3);
    std::string_view bytes(reinterpret_cast<const char*>(data + pos + 3), len);
    pos += 3 + len;
    if (repeat == 0) {
      write(first, reopen, bytes, true);
    } else {
      for (uint64_t writer = first; writer <= first + repeat; ++writer) {
        std::string text;
        for (char c : bytes.substr(0, kMaxFanOutBytes)) {
          text += c == '#' ? std::to_string(writer) : std::string(1, c);
        }
        write(writer, reopen, text, writer == first);
      }
    }
    if (clear) {
      flush();
      planner.Clear();
    }
  }
  flush();
  return 0;
}
