// A policy made by its name (the names: policy_names.h).
#include "tiering/store/eviction_policy.h"

namespace tierfs {

std::unique_ptr<EvictionPolicy> NewEvictionPolicy(const std::string& name, int tiers,
                                                  const Catalog* catalog,
                                                  const NextUseTable* next_uses) {
  const std::string canonical = CanonicalPolicyName(name);
  if (canonical == "next-use") return NewBeladyPolicy(tiers, catalog, next_uses);
  if (canonical == "lru") return NewLruPolicy(tiers);
  return nullptr;
}

}  // namespace tierfs
