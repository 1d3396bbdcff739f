// ScanTree: the namespace snapshot of a TempTree, as a mount would take it.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/namespace/namespace.h"

namespace tierfs::testing {

inline std::unique_ptr<Namespace> ScanTree(const TempTree& tree) {
  int err = 0;
  auto backend = NewPosixBackend(tree.root(), &err);
  REQUIRE(backend != nullptr);
  auto ns = RequireOk(ScanNamespace(backend.get(), ScanOptions{}));
  return ns;
}

}  // namespace tierfs::testing
