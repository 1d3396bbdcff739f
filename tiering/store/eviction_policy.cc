// The policies by name: what the `policy=` option accepts.
#include "tiering/store/eviction_policy.h"

namespace tierfs {

const std::vector<std::string>& EvictionPolicyNames() {
  static const std::vector<std::string> names = {"next-use", "lru"};
  return names;
}

std::string CanonicalPolicyName(const std::string& name) {
  if (name == "first-fit") return "next-use";  // its earlier name, still accepted
  for (const std::string& n : EvictionPolicyNames()) {
    if (n == name) return n;
  }
  return "";
}

bool IsNextUsePolicy(const std::string& name) { return CanonicalPolicyName(name) == "next-use"; }

std::unique_ptr<EvictionPolicy> NewEvictionPolicy(const std::string& name, int tiers,
                                                  const Catalog* catalog,
                                                  const NextUseTable* next_uses) {
  const std::string canonical = CanonicalPolicyName(name);
  if (canonical == "next-use") return NewBeladyPolicy(tiers, catalog, next_uses);
  if (canonical == "lru") return NewLruPolicy(tiers);
  return nullptr;
}

}  // namespace tierfs
