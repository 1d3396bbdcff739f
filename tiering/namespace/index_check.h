// IndexCheck: how much of SOURCE a saved namespace index is checked against
// before it is used (-o index_check=; namespace_open.h tells what each
// does). A leaf: the option parser reads it without the namespace.
#pragma once

#include <string>

namespace tierfs {

enum class IndexCheck { kFull, kDirs, kNone };

// "full", "dirs", "none".
inline bool ParseIndexCheck(const std::string& text, IndexCheck* out) {
  if (text == "full") {
    *out = IndexCheck::kFull;
  } else if (text == "dirs") {
    *out = IndexCheck::kDirs;
  } else if (text == "none") {
    *out = IndexCheck::kNone;
  } else {
    return false;
  }
  return true;
}

}  // namespace tierfs
