// HintParser, what a line names: absolute paths only below the mountpoint
// (none without one), no '..', no NUL byte, symlink or unknown name,
// directories expanded for stage and rejected for order, and what the
// writer may not reach taken for a name not in the mount; the reason given
// for a rejected line, shown bounded and printable, and the first one of the
// latest stream of writes kept. How lines are cut from writes is tested in
// hint_parser_test.cc; the dataset both use is in hint_parser_fixture.h.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hint_parser_fixture.h"
#include "prefetch/planners/hint_parser.h"
#include "tiering/base/counter_visitor.h"

namespace tierfs {
namespace {

using testing::Files;
using testing::kRoot;
using testing::Writer;
using Result = HintParser::Result;

// Resolves each of `lines` alone; returns (valid, rejected) summed.
std::pair<uint64_t, uint64_t> Counts(const HintParser& parser,
                                     const std::vector<std::string>& lines) {
  Result r;
  for (const auto& l : lines) parser.ResolveLine(l, kRoot, &r);
  return {r.valid, r.rejected};
}

TEST_CASE("HintParser accepts absolute paths only below the mountpoint", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.ResolveLine("/mnt/alpha", kRoot, &r);
  parser.ResolveLine("/mnt/dir/gamma", kRoot, &r);
  parser.ResolveLine("/mnt//dir/./sub/delta", kRoot, &r);
  CHECK(r.files == fs.Ids({"alpha", "dir/gamma", "dir/sub/delta"}));
  CHECK(r.rejected == 0);
  CHECK(Counts(parser, {"/mnt2/alpha", "/mn/alpha", "/mntalpha", "/alpha", "/other/mnt/alpha",
                        "/MNT/alpha"}) == std::pair<uint64_t, uint64_t>{0, 6});
  // The mountpoint itself (or with a slash) is the root: a directory.
  CHECK(Counts(parser, {"/mnt", "/mnt/"}) == std::pair<uint64_t, uint64_t>{0, 2});
}

TEST_CASE("HintParser refuses .. anywhere", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  CHECK(Counts(parser, {"..", "../alpha", "a/../beta", "dir/../alpha", "dir/sub/../gamma",
                        "/mnt/../mnt/alpha", "/mnt/dir/..", "dir/.."}) ==
        std::pair<uint64_t, uint64_t>{0, 8});
  CHECK(Counts(parser, {"./alpha", "dir//gamma", "dir/./gamma"}) ==
        std::pair<uint64_t, uint64_t>{3, 0});
}

TEST_CASE("HintParser rejects lines with NUL bytes, symlinks and unknown names", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  using namespace std::string_literals;
  parser.Feed(Writer(1), 0, "alpha\0\nal\0pha\n\0\nbeta\nlink\nnope\nalpha/\n"s, &r);
  CHECK(r.files == fs.Ids({"beta", "alpha"}));  // "alpha/" is alpha
  CHECK(r.valid == 2);
  CHECK(r.rejected == 5);
}

TEST_CASE("HintParser expands directories for stage and rejects them for order", "[hint_parser]") {
  Files fs;
  HintParser order(fs.ns(), "/mnt", false);
  HintParser stage(fs.ns(), "/mnt", true);
  Result o, s;
  order.Feed(Writer(1), 0, "dir\n/mnt/dir/sub\nempty\n", &o);
  CHECK(o.files.empty());
  CHECK(o.rejected == 3);
  stage.Feed(Writer(1), 0, "dir\n/mnt/dir/sub\nempty\nbeta\n", &s);
  std::vector<NodeId> files = s.files;
  std::sort(files.begin(), files.end());
  std::vector<NodeId> want = fs.Ids({"dir/gamma", "dir/sub/delta", "dir/sub/delta", "beta"});
  std::sort(want.begin(), want.end());
  CHECK(files == want);
  CHECK(s.valid == 4);  // an empty directory still names something
  CHECK(s.rejected == 0);
  Result root;
  stage.ResolveLine("/mnt", kRoot, &root);
  CHECK(root.files.size() == 4);  // every file
}

// The reason ResolveLine gives for `line` ("" when accepted).
std::string Reason(const HintParser& parser, std::string_view line) {
  Result r;
  auto rejected = parser.ResolveLine(line, kRoot, &r);
  CHECK(r.rejected == (rejected ? 1u : 0u));
  return rejected ? rejected->reason : "";
}

TEST_CASE("HintParser says why it rejects a line", "[hint_parser]") {
  Files fs;
  HintParser order(fs.ns(), "/mnt", false, /*directives=*/true);
  CHECK(Reason(order, "alpha") == "");
  CHECK(Reason(order, "//epoch") == "");
  CHECK(Reason(order, "nope/x.jpg") == "not in the mount (paths are relative to its root)");
  CHECK(Reason(order, "dir/../alpha") ==
        "climbs with '..' (paths are relative to the mount's root)");
  CHECK(Reason(order, "/data/alpha") == "an absolute path outside the mount (/mnt)");
  CHECK(Reason(order, "dir") == "a directory (name its files)");
  CHECK(Reason(order, "link") == "not a regular file");
  CHECK(Reason(order, std::string("al\0pha", 6)) == "holds a NUL byte");
  CHECK(Reason(order, "//stream bad name") == "a stream name is 1-64 of [A-Za-z0-9._:-]");
  CHECK(Reason(order, "//rewind") == "an unknown directive (//stream NAME, //epoch)");
  HintParser stage(fs.ns(), "", true);
  CHECK(Reason(stage, "dir") == "");
  CHECK(Reason(stage, "//epoch") == "'//' begins a directive, and this file takes none");
  CHECK(Reason(stage, "/alpha") == "an absolute path (write it relative to the mount)");
  Result r;
  CHECK(stage.ResolveLine("/x/nope\r", kRoot, &r)->line == "/x/nope");
}

TEST_CASE("HintParser shows a rejected line bounded and printable", "[hint_parser]") {
  CHECK(HintParser::Shown("train/a b.jpg") == "train/a b.jpg");
  CHECK(HintParser::Shown("\x1b[2Jx\\y\x7f") == "\\x1b[2Jx\\x5cy\\x7f");
  CHECK(HintParser::Shown("caf\xc3\xa9/\xe6\x97\xa5.jpg") == "caf\xc3\xa9/\xe6\x97\xa5.jpg");
  // Invalid UTF-8: a lone continuation byte, a cut sequence, an overlong '/'.
  CHECK(HintParser::Shown("a\x80z\xc3") == "a\\x80z\\xc3");
  CHECK(HintParser::Shown("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(HintParser::Shown("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  // No lead byte above 0xf4 (found by hint_parser_fuzz: 0xf5 was taken for a 3-byte lead).
  CHECK(HintParser::Shown("\xf5\x9d\x9a") == "\\xf5\\x9d\\x9a");
  CHECK(HintParser::Shown("\xff\xbf\xbf\xbf") == "\\xff\\xbf\\xbf\\xbf");
  CHECK(HintParser::Shown("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");  // U+10FFFF
  const std::string longer(HintParser::kMaxShown + 1, 'x');
  // append, not string + "lit": GCC PR 105651 (a false -Warray-bounds)
  CHECK(HintParser::Shown(longer) == std::string(HintParser::kMaxShown, 'x').append("..."));
  CHECK(HintParser::Shown(longer.substr(1)) == longer.substr(1));
}

TEST_CASE("HintParser keeps the first rejected line of the latest stream of writes",
          "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  CHECK(!parser.last_rejected());
  parser.Feed(Writer(1), 0, "alpha\nfirst/bad\nsecond/bad\n", &r);
  REQUIRE(parser.last_rejected());
  CHECK(parser.last_rejected()->line == "first/bad");
  CHECK(parser.last_rejected()->reason == "not in the mount (paths are relative to its root)");
  parser.Feed(Writer(1), 27, "third/bad\nbe", &r);  // the same stream: its first one stays
  CHECK(parser.last_rejected()->line == "first/bad");
  parser.Feed(Writer(2), 0, "fourth/", &r);  // another writer, its line split over writes
  parser.Feed(Writer(2), 7, "bad\n", &r);
  CHECK(parser.last_rejected()->line == "fourth/bad");
  parser.Feed(Writer(1), 0, "x\ny\n", &r);  // writer 1 anew: "be" ends, then a new stream
  CHECK(parser.last_rejected()->line == "x");
  CHECK(r.rejected == 7);  // "be" too

  SECTION("an overlong line shows its beginning") {
    parser.Feed(Writer(3), 0, std::string(HintParser::kMaxLine, 'z'), &r);
    parser.Feed(Writer(3), HintParser::kMaxLine, "zz\n", &r);
    CHECK(parser.last_rejected()->line == std::string(HintParser::kMaxShown, 'z').append("..."));
    CHECK(parser.last_rejected()->reason == "longer than 4096 bytes");
  }
  SECTION("a last line without a newline, flushed") {
    parser.Feed(Writer(4), 0, "alpha\nno-newline", &r);
    parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);
    CHECK(parser.last_rejected()->line == "no-newline");
  }
}

// What uid 1000 may name: everything but beta, dir/sub and what is below it.
class HiddenFromBob final : public HintAccess {
 public:
  explicit HiddenFromBob(const Files& fs) : beta_(fs.Id("beta")), sub_(fs.Id("dir/sub")) {}
  bool MayName(const AccessCaller& caller, NodeId id) override {
    asked++;
    return caller.uid != 1000 || (id != beta_ && id != sub_ && id != sub_ + 1);
  }
  int asked = 0;

 private:
  const NodeId beta_, sub_;  // dir/sub's only child, delta, is sub_ + 1
};

TEST_CASE("HintParser rejects what the writer may not reach as a name not in the mount",
          "[hint_parser]") {
  Files fs;
  REQUIRE(fs.Id("dir/sub/delta") == fs.Id("dir/sub") + 1);
  HiddenFromBob access(fs);
  HintParser order(fs.ns(), "/mnt", false, /*directives=*/true);
  HintParser stage(fs.ns(), "/mnt", true);
  order.set_access(&access);
  stage.set_access(&access);
  const AccessCaller bob{1000, 1000, {}};
  const HintWriter writer{7, bob};
  for (HintParser* parser : {&order, &stage}) {
    for (std::string line : {"beta", "dir/sub/delta", "/mnt/dir/sub/delta"}) {
      Result hidden, missing;
      auto why = parser->ResolveLine(line, bob, &hidden);
      auto why_missing = parser->ResolveLine(line + "x", bob, &missing);
      REQUIRE(why);
      REQUIRE(why_missing);
      CHECK(why->reason == why_missing->reason);
      CHECK(hidden.rejected == 1);
      CHECK(hidden.files.empty());
      CHECK(parser->ResolveLine(line, kRoot, &hidden) == std::nullopt);  // root: there
    }
  }
  // A directory stands for what bob may name below it; dir/sub itself is
  // hidden, so rejected whatever it holds (order would say "a directory").
  Result r;
  stage.Feed(writer, 0, "dir\n/mnt\n", &r);
  std::sort(r.files.begin(), r.files.end());
  std::vector<NodeId> want = fs.Ids({"dir/gamma", "dir/gamma", "alpha"});
  std::sort(want.begin(), want.end());
  CHECK(r.files == want);
  CHECK(Reason(order, "dir/sub") == "a directory (name its files)");
  Result o;
  CHECK(order.ResolveLine("dir/sub", bob, &o)->reason ==
        "not in the mount (paths are relative to its root)");
  // A line is checked as the caller who wrote all of it: a thread id that
  // changes caller mid-line ends the old caller's part as a line.
  Result split;
  order.Feed(HintWriter{8, kRoot}, 0, "be", &split);
  order.Feed(HintWriter{8, bob}, 2, "ta\n", &split);
  CHECK(split.files.empty());
  CHECK(split.rejected == 2);  // "be" and "ta"
  // A last line without a newline, flushed later, is its writer's too.
  Result late;
  order.Feed(writer, 0, "beta", &late);
  order.FlushTails(std::chrono::steady_clock::duration::zero(), &late);
  CHECK(late.files.empty());
  CHECK(late.rejected == 1);
}

TEST_CASE("HintParser without a mountpoint rejects absolute paths", "[hint_parser]") {
  // A mount on /dev/fd/N has no mountpoint path: "/alpha" (or any absolute
  // path such as "/data/train/x") must not resolve relative to SOURCE's root.
  Files fs;
  HintParser parser(fs.ns(), "", false);
  CHECK(Counts(parser, {"/alpha", "/dir/gamma", "/", "//alpha"}) ==
        std::pair<uint64_t, uint64_t>{0, 4});
  CHECK(Counts(parser, {"alpha", "dir/gamma"}) == std::pair<uint64_t, uint64_t>{2, 0});
}

// Records the notes a parser shows (its other figures are not looked at).
class NoteRecorder final : public CounterVisitor {
 public:
  std::vector<std::string> notes;
  void Counter(std::string_view, uint64_t, const About&) override {}
  void Gauge(std::string_view, double, const About&) override {}
  void Flag(std::string_view, bool, const About&) override {}
  void Text(std::string_view, std::string_view, std::string_view) override {}
  void Note(std::string_view name, std::string_view value) override {
    notes.push_back(std::string(name) + "=" + std::string(value));
  }
  void Histogram(std::string_view, const LatencyHistogram&, const About&) override {}
  void BeginGroup(std::string_view) override {}
  void EndGroup() override {}
  void BeginList(std::string_view, std::string_view) override {}
  void BeginItem(const Labels&, std::string_view) override {}
  void EndItem() override {}
  void EndList() override {}
};

TEST_CASE("HintParser shown to every user says why a line was rejected, never the line",
          "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "someone/elses/secret/path\n", &r);
  NoteRecorder own;
  parser.VisitRejected(own);
  CHECK(own.notes == std::vector<std::string>{"line=someone/elses/secret/path",
                                              "reason=not in the mount (paths are relative to "
                                              "its root)"});
  HintParser shared(fs.ns(), "/mnt", false);
  shared.set_show_lines(false);  // control_owner=any: the stats are every user's
  shared.Feed(Writer(1), 0, "someone/elses/secret/path\n", &r);
  NoteRecorder others;
  shared.VisitRejected(others);
  CHECK(others.notes ==
        std::vector<std::string>{"reason=not in the mount (paths are relative to its root)"});
}

}  // namespace
}  // namespace tierfs
