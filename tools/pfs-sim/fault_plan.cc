#include "fault_plan.h"

namespace pfssim {
namespace {

// splitmix64 finaliser: a well-mixed 64-bit hash of a 64-bit value.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a over the bytes of a string.
uint64_t HashString(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

constexpr uint64_t kFailSalt = 0x6661696cull;   // "fail"
constexpr uint64_t kStallSalt = 0x7374616cull;  // "stal"

}  // namespace

FaultPlan::FaultPlan(const SimParams& params)
    : seed_(params.seed),
      fail_rate_(params.fail_rate),
      stall_rate_(params.stall_rate),
      fail_files_(params.fail_files.begin(), params.fail_files.end()),
      fail_dirs_(params.fail_dirs.begin(), params.fail_dirs.end()) {}

double FaultPlan::Uniform(uint64_t salt, const std::string& path, uint64_t offset) const {
  uint64_t h = Mix(seed_ ^ Mix(salt));
  h = Mix(h ^ HashString(path));
  h = Mix(h ^ offset);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

bool FaultPlan::FailsRead(const std::string& path, uint64_t offset) const {
  if (!fail_files_.empty() && fail_files_.count(path) != 0) return true;
  return fail_rate_ > 0 && Uniform(kFailSalt, path, offset) < fail_rate_;
}

bool FaultPlan::FailsOpendir(const std::string& path) const { return fail_dirs_.count(path) != 0; }

bool FaultPlan::StallsRead(const std::string& path, uint64_t offset) const {
  return stall_rate_ > 0 && Uniform(kStallSalt, path, offset) < stall_rate_;
}

}  // namespace pfssim
