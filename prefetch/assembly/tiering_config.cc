#include "prefetch/assembly/tiering_config.h"

#include <fmt/format.h>

#include <cerrno>

namespace tierfs {

Status TieringConfig::CheckNeedsTier() const {
  if (enabled()) return Status::Ok();
  if (peers_enabled()) return Status::Error(EINVAL, "peers= needs a tier to share (ram= or tier=)");
  if (prefetch.mode != PrefetchMode::kOnAccess) {
    return Status::Error(EINVAL,
                         fmt::format("prefetch={} needs a tier to promote into (ram= or tier=)",
                                     PrefetchModeName(prefetch.mode)));
  }
  return Status::Ok();
}

}  // namespace tierfs
