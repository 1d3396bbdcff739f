// RecordingPolicy: forwards to a production eviction policy, records the
// victims it picks, and can run a hook just before Published is forwarded
// (a sequence point: what a reader does between the catalog's publish and
// the policy hearing of it).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tiering/store/eviction_policy.h"

namespace tierfs::testing {

class RecordingPolicy final : public EvictionPolicy {
 public:
  explicit RecordingPolicy(std::unique_ptr<EvictionPolicy> inner) : inner_(std::move(inner)) {}
  EvictionPolicy& inner() { return *inner_; }
  const char* name() const override { return inner_->name(); }
  bool Admit(int tier, const Candidate& c, Hold* hold) override {
    return inner_->Admit(tier, c, hold);
  }
  bool NextVictim(int tier, ChunkKey* victim) override {
    bool picked = inner_->NextVictim(tier, victim);
    if (picked) victims.push_back(victim->node);
    return picked;
  }
  bool SpareVictim(int tier, ChunkKey* victim) override {
    bool picked = inner_->SpareVictim(tier, victim);
    if (picked) victims.push_back(victim->node);
    return picked;
  }
  void Admitted(ChunkKey k, int t, Hold h) override {
    if (on_admitted) on_admitted(k);
    inner_->Admitted(k, t, h);
  }
  void Published(ChunkKey k, int t) override {
    if (before_published) before_published(k);
    inner_->Published(k, t);
  }
  void Abandoned(ChunkKey k, int t) override { inner_->Abandoned(k, t); }
  void Dropped(ChunkKey k, int t) override { inner_->Dropped(k, t); }
  void Touched(ChunkKey k) override { inner_->Touched(k); }
  size_t entries() const override { return inner_->entries(); }

  // Not thread-safe: for single-threaded tests.
  std::vector<NodeId> victims;
  std::function<void(ChunkKey)> before_published;
  // Called as a claim is placed: the catalog says "in flight" already.
  std::function<void(ChunkKey)> on_admitted;

 private:
  std::unique_ptr<EvictionPolicy> inner_;
};

}  // namespace tierfs::testing
