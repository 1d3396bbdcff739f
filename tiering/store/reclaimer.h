// Reclaimer: keeps free room in each tier of a ChunkStore between two
// watermarks, so that a claim never evicts: it reserves room, or names the
// victims the policy picks for it, kicks the reclaimer and waits a few
// milliseconds for their room (ChunkStore::kRoomWait), then answers "no
// room". The reclaimer's job (ChunkStore::Reclaim) evicts the victims
// claims named, then what the policy gives up ahead of need
// (EvictionPolicy::SpareVictim) until the tier has `high` bytes free, then
// does the tier's upkeep (a directory tier's journal compaction). The job
// runs where the store's JobRunner puts it: first in the promotion pool's
// foreground lane in the daemon, so no reader's and no network thread
// removes a chunk's bytes, appends to a journal or compacts it for a claim. At most one job per
// tier is queued or running; a kick while it runs makes it run once more. (CacheLib navy's region
// reclaim keeps clean regions the same way.)
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace tierfs {

// Where a store's background work runs.
class JobRunner {
 public:
  virtual ~JobRunner() = default;
  // Runs `job` now or later, on any thread; false if refused (a full queue,
  // a shut down pool): `job` is then destroyed unrun.
  virtual bool Run(std::function<void()> job) = 0;
  // True if Run runs the job before it returns, on the caller's thread.
  virtual bool runs_inline() const { return false; }
};

// Runs each job at once on the caller's thread: a store given no runner
// (tools, unit tests) evicts on the claimer's thread, as before the
// reclaimer. One instance serves all: it holds nothing.
class InlineJobs final : public JobRunner {
 public:
  bool Run(std::function<void()> job) override {
    job();
    return true;
  }
  bool runs_inline() const override { return true; }
  static InlineJobs* Get();
};

// Marks the thread that makes it as a background thread for its lifetime
// (the prefetch planner's): a claim made there that the policy admits
// evicts for itself when the reclaimer has not made the room yet, instead
// of answering "no room". Never made on a reader's or the network's thread.
class BackgroundClaims {
 public:
  BackgroundClaims() { flag() = true; }
  ~BackgroundClaims() { flag() = false; }
  BackgroundClaims(const BackgroundClaims&) = delete;
  BackgroundClaims& operator=(const BackgroundClaims&) = delete;
  static bool here() { return flag(); }

 private:
  static bool& flag() {
    thread_local bool background = false;
    return background;
  }
};

// The free room a tier keeps: a claim that would leave less than `low`
// free asks the policy (Admit) and kicks the reclaimer, which evicts the
// victims named for claims, then spare chunks until `high` is free. The room between is
// what the reclaimer's hysteresis costs; what a claim takes below `low` is
// the room it takes while the reclaimer catches up.
struct Watermarks {
  uint64_t low = 0;
  uint64_t high = 0;
  // For a tier of `limit` bytes and chunks of `chunk_size` (the largest claimed): `high` is two
  // chunks or 1/64 of the tier, whichever is more, at most 1/8 of the tier;
  // `low` is half of it. Both 0 for an inline runner: it evicts for each
  // claim as it comes, so nothing need be kept free ahead.
  static Watermarks For(uint64_t limit, uint64_t chunk_size, bool runs_inline);
};

class Reclaimer {
 public:
  // `reclaim(t)` is tier t's job. REQUIRES: `runner` outlives the reclaimer,
  // and runs no job of it once the reclaimer is destroyed (the pool is shut
  // down first).
  Reclaimer(JobRunner* runner, size_t tiers, std::function<void(int)> reclaim);

  // Tier `t` is short of room or due for upkeep: its job is queued unless
  // it is queued or running already (then it runs once more).
  void Kick(int t);
  bool runs_inline() const { return runner_->runs_inline(); }

  uint64_t runs() const { return runs_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  void Run(int t);

  JobRunner* const runner_;
  const std::function<void(int)> reclaim_;
  // Per tier: kicks not yet served; non-zero while its job is queued or running.
  std::unique_ptr<std::atomic<uint64_t>[]> kicks_;
  std::atomic<uint64_t> runs_{0}, refused_{0};
};

}  // namespace tierfs
