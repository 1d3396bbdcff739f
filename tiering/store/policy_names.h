// The eviction policies by name: what -o policy= accepts. A leaf: the
// option parser reads it without the store; eviction_policy.h makes a
// policy of a name.
#pragma once

#include <string>
#include <vector>

namespace tierfs {

// The policies' names ("next-use" is the Belady policy).
inline const std::vector<std::string>& EvictionPolicyNames() {
  static const std::vector<std::string> names = {"next-use", "lru"};
  return names;
}

// The name `name` stands for ("first-fit" is next-use's earlier name); "" if
// none.
inline std::string CanonicalPolicyName(const std::string& name) {
  if (name == "first-fit") return "next-use";  // its earlier name, still accepted
  for (const std::string& n : EvictionPolicyNames()) {
    if (n == name) return n;
  }
  return "";
}

// True for the clairvoyant policy (NewBeladyPolicy), by any of its names.
inline bool IsNextUsePolicy(const std::string& name) {
  return CanonicalPolicyName(name) == "next-use";
}

}  // namespace tierfs
