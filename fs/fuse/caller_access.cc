#include "fs/fuse/caller_access.h"

#include <algorithm>

namespace tierfs {

bool CallerAccess::MayName(const AccessCaller& caller, NodeId id) {
  if (caller.uid == 0) return true;
  const Node& n = ns_->node(id);
  if (S_ISREG(n.mode)) return Allows(caller, id, R_OK);
  if (S_ISDIR(n.mode)) return Allows(caller, id, R_OK | X_OK);
  return Allows(caller, n.parent, X_OK);  // its name and type are seen where it is
}

bool CallerAccess::Allows(const AccessCaller& caller, NodeId id, int mask) {
  bool group_decided = false;
  auto in_group = [&caller, &group_decided](gid_t g) {
    group_decided = true;
    return std::find(caller.groups.begin(), caller.groups.end(), g) != caller.groups.end();
  };
  if (!ModeAllows(*ns_, caller.uid, caller.gid, in_group, id, mask)) return false;
  if (group_decided && !caller.groups_known) return false;  // her groups might refuse her
  return permissions_ == nullptr || permissions_->Check(caller, id, mask) == 0;
}

}  // namespace tierfs
