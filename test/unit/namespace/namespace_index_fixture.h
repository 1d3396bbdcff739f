// The fixture of the saved namespace index's tests: a small dataset under
// SOURCE, its index beside it, and dumps of a snapshot to compare by. Shared
// by namespace_index_test.cc (the index file), namespace_open_test.cc
// (OpenNamespace over it) and namespace_index_faults_test.cc (both through a
// failing FileIo).
#pragma once

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/namespace/namespace_index.h"
#include "tiering/namespace/namespace_open.h"

namespace tierfs::testing {

// Every attribute of every node, atime included, and the totals.
inline std::string Dump(const Namespace& ns, bool atime = true) {
  std::string out =
      fmt::format("files={} dirs={} links={} bytes={} skipped={}\n", ns.file_count(),
                  ns.dir_count(), ns.symlink_count(), ns.total_file_bytes(), ns.skipped_count());
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& n = ns.node(id);
    out += fmt::format("{} '{}' p={} m={:o} s={} b={} t={},{},{} u={} g={} l={} c={}+{}", id,
                       ns.name(id), n.parent, n.mode, n.size, n.blocks, atime ? n.atime_ns : 0,
                       n.mtime_ns, n.ctime_ns, n.uid, n.gid, n.nlink, n.first_child, n.child_count);
    if (S_ISLNK(n.mode)) out += fmt::format(" -> '{}'", ns.link_target(id));
    out += '\n';
  }
  return out;
}

// Like Dump, by path and without tree positions or directory times (which a
// change moves), so a snapshot after a change compares with a fresh scan.
inline std::string Listing(const Namespace& ns) {
  std::string out;
  for (NodeId id = 0; id < ns.size(); ++id) {
    const Node& n = ns.node(id);
    out += fmt::format("'{}' m={:o} s={}", ns.Path(id), n.mode, S_ISDIR(n.mode) ? 0 : n.size);
    if (!S_ISDIR(n.mode)) out += fmt::format(" t={}", n.mtime_ns);
    if (S_ISLNK(n.mode)) out += fmt::format(" -> '{}'", ns.link_target(id));
    out += '\n';
  }
  return out;
}

// A small dataset: class directories of files, a symlink, an empty directory.
// Waits for the clock to move on: the tests open indexes with no racy margin.
inline std::unique_ptr<TempTree> Dataset() {
  auto t = std::make_unique<TempTree>();
  for (int c = 0; c < 5; ++c) {
    t->Mkdir(fmt::format("class{}", c));
    for (int f = 0; f < 20; ++f) {
      t->Write(fmt::format("class{}/img{:03}.jpg", c, f), std::string(f * 10, 'x'));
    }
  }
  t->Mkdir("class0/nested");
  t->Write("class0/nested/deep.txt", "deep");
  t->Symlink("class1/img001.jpg", "alias");
  t->Mkdir("empty");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return t;
}

// What OpenNamespace says it did.
inline void Expect(const OpenReport& r, bool from_index, bool scanned, bool written) {
  CHECK(r.from_index == from_index);
  CHECK(r.scanned == scanned);
  CHECK(r.written == written);
}

struct Fixture {
  std::unique_ptr<TempTree> tree = Dataset();
  std::shared_ptr<Backend> backend;
  SourceIdentity id;
  std::string index;
  std::shared_ptr<FileIo> io_for_open;  // OpenQuietly's; null: the local file system

  Fixture() {
    backend = RequireOk(NewPosixBackend(tree->root()));
    struct stat st = tree->Lstat("");
    id = {tree->root(), st.st_dev, st.st_ino};
    index = tree->root() + ".index";
  }
  ~Fixture() {
    ::unlink(index.c_str());
    ::unlink((index + ".lock").c_str());
  }
  std::unique_ptr<Namespace> Scan() { return RequireOk(ScanNamespace(backend.get(), {4})); }
  void Save() { REQUIRE(WriteIndex(*Scan(), id, RealtimeNanos(), index).ok()); }
  // Why LoadIndex refuses the index.
  Status Refusal(const SourceIdentity* expected) {
    Result<std::unique_ptr<Namespace>> ns = LoadIndex(index, expected);
    CHECK_FALSE(ns.ok());
    return ns.status();
  }
  std::string Bytes() {
    std::ifstream in(index, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Put(const std::string& bytes) {
    std::ofstream(index, std::ios::binary | std::ios::trunc) << bytes;
  }
  // No Catch2 assertion in here: threads call it (Catch2's are not thread-safe).
  Result<std::unique_ptr<Namespace>> OpenQuietly(IndexCheck check, OpenReport* report,
                                                 Backend* via) {
    OpenOptions o;
    o.index = index;
    o.check = check;
    o.scan_threads = 4;
    o.wait_s = 20;
    o.racy_margin_ns = 0;
    o.io = io_for_open;
    return OpenNamespace(via ? via : backend.get(), id, o, report);
  }
  std::unique_ptr<Namespace> Open(IndexCheck check, OpenReport* report, Backend* via = nullptr) {
    return RequireOk(OpenQuietly(check, report, via));
  }
};

}  // namespace tierfs::testing
