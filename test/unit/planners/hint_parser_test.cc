// HintParser: lines written to .tierfs/order and .tierfs/stage by several
// writers, split across writes, and hostile input.
#include "prefetch/planners/hint_parser.h"

#include <malloc.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <thread>

#include "scan_tree.h"

namespace tierfs {
namespace {

using testing::TempTree;
using namespace std::chrono_literals;
using Result = HintParser::Result;

// Lines written by root, whom nothing is hidden from (none of these
// parsers is given a HintAccess, but for the writers' own case below).
const AccessCaller kRoot{};
HintWriter Writer(uint64_t id) { return HintWriter{id, kRoot}; }

// SOURCE: alpha, beta, dir/gamma, dir/sub/delta, a symlink and an empty
// directory, mounted (for absolute paths) at /mnt.
class Files {
 public:
  Files() {
    tree_.Write("alpha", "a");
    tree_.Write("beta", "b");
    tree_.Mkdir("dir");
    tree_.Write("dir/gamma", "g");
    tree_.Mkdir("dir/sub");
    tree_.Write("dir/sub/delta", "d");
    tree_.Mkdir("empty");
    tree_.Symlink("alpha", "link");
    ns_ = testing::ScanTree(tree_);
  }
  const Namespace* ns() const { return ns_.get(); }
  NodeId Id(const std::string& rel) const { return *ns_->Resolve(rel); }
  std::vector<NodeId> Ids(const std::vector<std::string>& rels) const {
    std::vector<NodeId> out;
    for (const auto& r : rels) out.push_back(Id(r));
    return out;
  }

 private:
  TempTree tree_;
  std::unique_ptr<Namespace> ns_;
};

// Resolves each of `lines` alone; returns (valid, rejected) summed.
std::pair<uint64_t, uint64_t> Counts(const HintParser& parser,
                                     const std::vector<std::string>& lines) {
  Result r;
  for (const auto& l : lines) parser.ResolveLine(l, kRoot, &r);
  return {r.valid, r.rejected};
}

TEST_CASE("HintParser joins a line split across writes by one writer", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "di", &r);
  parser.Feed(Writer(1), 2, "r/gam", &r);
  CHECK(r.files.empty());
  parser.Feed(Writer(1), 7, "ma\nbe", &r);
  CHECK(r.files == fs.Ids({"dir/gamma"}));
  parser.Feed(Writer(1), 12, "ta", &r);
  CHECK(r.files.size() == 1);
  parser.Feed(Writer(1), 14, "\nalpha\n", &r);
  CHECK(r.files == fs.Ids({"dir/gamma", "beta", "alpha"}));
  CHECK(r.valid == 3);
  CHECK(r.rejected == 0);
}

TEST_CASE("HintParser keeps two interleaved writers' lines apart", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "dir/", &r);
  parser.Feed(Writer(2), 0, "alpha\nbe", &r);
  CHECK(r.files == fs.Ids({"alpha"}));
  parser.Feed(Writer(1), 4, "sub/delta\n", &r);
  parser.Feed(Writer(2), 8, "ta\n", &r);
  CHECK(r.files == fs.Ids({"alpha", "dir/sub/delta", "beta"}));
  CHECK(r.valid == 3);
  CHECK(r.rejected == 0);
}

TEST_CASE("HintParser ends a writer's tail when it writes at another offset", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "alpha", &r);  // no newline: kept
  CHECK(r.files.empty());
  parser.Feed(Writer(1), 0, "beta\n", &r);  // the writer started over (a new open)
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  // A gap is a new start too: "dir/" is a line of its own (a directory: rejected).
  parser.Feed(Writer(1), 5, "dir/", &r);
  parser.Feed(Writer(1), 100, "gamma\n", &r);
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  CHECK(r.rejected == 2);  // "dir/" and "gamma" (not at the root)
}

TEST_CASE("HintParser FlushTails ends only tails older than the age", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "alpha", &r);
  std::this_thread::sleep_for(300ms);
  parser.Feed(Writer(2), 0, "beta", &r);
  parser.FlushTails(150ms, &r);
  CHECK(r.files == fs.Ids({"alpha"}));
  parser.FlushTails(1h, &r);
  CHECK(r.files.size() == 1);
  parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);  // all
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  // A flushed writer continuing at its old offset starts a new line.
  parser.Feed(Writer(1), 5, "\n", &r);
  CHECK(r.files.size() == 2);
  CHECK(r.rejected == 0);
}

TEST_CASE("HintParser accepts CRLF and ignores empty lines", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  Result r;
  parser.Feed(Writer(1), 0, "\n\nalpha\r\n\r\n\n beta\nbeta\r\n\n", &r);
  CHECK(r.files == fs.Ids({"alpha", "beta"}));
  CHECK(r.valid == 2);
  CHECK(r.rejected == 1);  // " beta": names are taken as written
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

TEST_CASE("HintParser survives binary garbage", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", true);
  std::mt19937 rng(42);
  Result r;
  uint64_t off = 0;
  for (int i = 0; i < 200; ++i) {
    std::string piece(1 + rng() % 3000, '\0');
    for (char& c : piece) c = static_cast<char>(rng() & 0xff);
    parser.Feed(Writer(static_cast<uint64_t>(i % 7)), off, piece, &r);
    off += piece.size();
  }
  parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);
  CHECK(r.valid == 0);
  CHECK(r.files.empty());
  CHECK(r.rejected > 100);
  // And still works afterwards.
  Result ok;
  parser.Feed(Writer(99), 0, "alpha\n", &ok);
  CHECK(ok.files == fs.Ids({"alpha"}));
}

TEST_CASE("HintParser rejects a 10 MB line once and stores at most kMaxLine of it",
          "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  const std::string piece(64 << 10, 'x');
  Result r;
  parser.Feed(Writer(1), 0, "alpha\n", &r);
  uint64_t off = 6;
  const size_t heap_before = ::mallinfo2().uordblks;
  for (int i = 0; i < 160; ++i) {  // 10 MiB, one line, 64 KiB per write
    parser.Feed(Writer(1), off, piece, &r);
    off += piece.size();
  }
  const size_t heap_after = ::mallinfo2().uordblks;
  // (Under ASan mallinfo reports nothing and this holds trivially.)
  CHECK(heap_after < heap_before + 4 * HintParser::kMaxLine);
  CHECK(r.rejected == 0);  // not ended yet
  parser.Feed(Writer(1), off, "x\nbeta\n", &r);
  CHECK(r.rejected == 1);
  CHECK(r.files == fs.Ids({"alpha", "beta"}));

  SECTION("in a single write") {
    Result one;
    const std::string line(10 << 20, 'y');
    parser.Feed(Writer(2), 0, line, &one);
    parser.Feed(Writer(2), line.size(), "\ndir/gamma\n", &one);
    CHECK(one.rejected == 1);
    CHECK(one.files == fs.Ids({"dir/gamma"}));
  }
  SECTION("left unfinished, then flushed") {
    Result one;
    parser.Feed(Writer(3), 0, piece, &one);
    parser.FlushTails(std::chrono::steady_clock::duration::zero(), &one);
    CHECK(one.rejected == 1);
    CHECK(one.valid == 0);
  }
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

TEST_CASE("HintParser keeps at most kMaxWriters unfinished lines", "[hint_parser]") {
  Files fs;
  HintParser parser(fs.ns(), "/mnt", false);
  const size_t writers = HintParser::kMaxWriters + 44;
  Result r;
  for (size_t w = 0; w < writers; ++w) parser.Feed(Writer(w), 0, "alpha", &r);
  // Each writer beyond the limit ended the stalest one's line.
  CHECK(r.files.size() == 44);
  CHECK(r.valid == 44);
  parser.FlushTails(std::chrono::steady_clock::duration::zero(), &r);
  CHECK(r.files.size() == writers);
  CHECK(r.rejected == 0);
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
  CHECK(HintParser::Shown(longer) == std::string(HintParser::kMaxShown, 'x') + "...");
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
    CHECK(parser.last_rejected()->line == std::string(HintParser::kMaxShown, 'z') + "...");
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

}  // namespace
}  // namespace tierfs
