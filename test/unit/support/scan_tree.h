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
  auto backend = RequireOk(NewPosixBackend(tree.root()));
  auto ns = RequireOk(ScanNamespace(backend.get(), ScanOptions{}));
  return ns;
}

}  // namespace tierfs::testing
