#include "prefetch/planners/prefetch_config.h"

namespace tierfs {
namespace {

constexpr const char* kModeNames[] = {"on-access", "stage-in", "order"};

}  // namespace

const char* PrefetchModeName(PrefetchMode mode) { return kModeNames[static_cast<int>(mode)]; }

bool ParsePrefetchMode(std::string_view name, PrefetchMode* out) {
  for (int i = 0; i < 3; ++i) {
    if (name == kModeNames[i]) {
      *out = static_cast<PrefetchMode>(i);
      return true;
    }
  }
  return false;
}

}  // namespace tierfs
