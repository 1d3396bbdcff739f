// The dataset of HintParser's tests (Files), and the writers of their lines
// (kRoot, Writer). Shared by hint_parser_test.cc (lines cut from writes) and
// hint_parser_resolve_test.cc (what a line names, and why one is rejected).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "scan_tree.h"
#include "temp_tree.h"

namespace tierfs::testing {

// Lines written by root, whom nothing is hidden from (none of these
// parsers is given a HintAccess, but for the writers' own case below).
inline const AccessCaller kRoot{};
inline HintWriter Writer(uint64_t id) { return HintWriter{id, kRoot}; }

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

}  // namespace tierfs::testing
