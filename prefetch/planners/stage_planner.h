// StagePlanner: the files asked to be staged (all of SOURCE in stage-in
// mode, in namespace order; or those named in .tierfs/stage) and the queue
// of those not yet fed to the promoter, with the progress they make. Each
// naming of a file in .tierfs/stage is an ask that ends (settles) resident
// or failed, by reason: what `tierfs stage` waits for and reports.
// Thread-safe; its lock is a leaf, and the progress walk over every staged
// file runs outside it (on a copy of the list), so a stats read never stalls
// the planner or a reader.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "prefetch/planners/hint_parser.h"
#include "tiering/base/counter_visitor.h"
#include "tiering/base/mutex.h"
#include "tiering/store/catalog.h"
#include "tiering/store/chunk_store.h"

namespace tierfs {

class StagePlanner {
 public:
  // Why an ask ended with its file not resident.
  enum class Failure : uint8_t {
    kNoRoom,      // no tier had room (the file or the tiers' other files)
    kTierFull,    // a tier's device filled up
    kTierError,   // a tier could not be written
    kSource,      // SOURCE could not be read
    kPermission,  // permission denied (SOURCE, or a tier)
    kOverShare,   // over the asker's share of the tiers (stage_share)
    kNotKept,     // tried, then not resident (evicted, or another node keeps it)
  };
  static constexpr size_t kFailures = 7;

  // `catalog` null: nothing can be staged (no tiers). `user_share`: the
  // bytes of files each user but root may ask for (a file someone asked
  // for first costs nothing); 0: no limit. What is over it is not staged
  // and is counted (over_share_files).
  StagePlanner(const Namespace* ns, const Catalog* catalog, uint64_t user_share = 0);

  // Why a failed promotion failed, per file (null: unknown, kNotKept).
  void set_store(const ChunkStore* store) { store_ = store; }
  // Stage-in: every regular file, in namespace order (directory by directory).
  void StageAll();
  // The files of a .tierfs/stage write (one writer's: result.uid), and its
  // line counts.
  void Add(const HintParser::Result& result);
  // The next file to feed to the promoter; false when none is queued.
  bool Next(NodeId* id);
  size_t queued() const;
  // File `id`, just fed, found no room in any tier (some chunk of it).
  void NoRoom(NodeId id);
  // Ends the asks whose files are resident, or were fed and are neither
  // queued nor in flight (failed: counted by reason; each reason is logged
  // with its first files, at most once in kLogEvery). Call on the planner's
  // thread after feeding, so that a file fed is in flight by then.
  void Settle();
  static constexpr std::chrono::seconds kLogEvery{10};

  // The "stage" group's figures. `background_idle`: no stage-in promotion
  // is queued (a fed file that is not resident has then failed or found no
  // room). Counts the staged files first seen resident (made_resident_bytes).
  void VisitCounters(CounterVisitor& v, bool background_idle) const;
  // What a reason is called in the counters (failed_<name>_files) and said.
  static const char* FailureName(Failure f);
  static const char* FailureText(Failure f);
  static const char* FailureShort(Failure f);  // a few words: "fit in no tier"

 private:
  // Bits of marks_, per node.
  static constexpr uint8_t kStaged = 1;    // in staged_
  static constexpr uint8_t kNamedNow = 2;  // named in the Add() under way
  static constexpr uint8_t kCounted = 4;   // resident when named, or counted since
  static constexpr uint8_t kQueued = 8;    // in queue_
  // `uid` asks for it (root: StageAll); `ask`: a .tierfs/stage naming, to
  // settle.
  void AddFile(NodeId id, uid_t uid = 0, bool ask = false) REQUIRES(mu_);
  bool Resident(NodeId id) const;  // every chunk resident in a tier
  bool InFlight(NodeId id) const;  // some chunk being copied
  Failure Why(NodeId id) const REQUIRES(mu_);

  const Namespace* const ns_;
  const Catalog* const catalog_;
  const uint64_t user_share_;
  mutable Mutex mu_;  // guards the rest but marks_' loads. Lock order: a leaf.
  std::deque<NodeId> queue_ GUARDED_BY(mu_);    // files still to feed to the executor
  std::vector<NodeId> staged_ GUARDED_BY(mu_);  // every file ever asked for
  // Per node (none without a catalog): stored under mu_, loaded anywhere.
  std::unique_ptr<std::atomic<uint8_t>[]> marks_;
  uint64_t valid_ GUARDED_BY(mu_) = 0;
  uint64_t rejected_ GUARDED_BY(mu_) = 0;
  std::map<uid_t, uint64_t> share_used_ GUARDED_BY(mu_);  // bytes each user asked for first
  uint64_t over_share_ GUARDED_BY(mu_) = 0;               // files refused: over their asker's share
  uint64_t named_ GUARDED_BY(mu_) = 0;                    // files named, each time (once per write)
  uint64_t resident_when_named_ GUARDED_BY(mu_) = 0;      // ...of which resident then
  mutable uint64_t made_resident_bytes_ GUARDED_BY(mu_) = 0;
  const ChunkStore* store_ = nullptr;
  // Asks not settled yet, per file (several writes may name it meanwhile),
  // and those of them that found no room when fed.
  std::unordered_map<NodeId, uint32_t> pending_ GUARDED_BY(mu_);
  std::unordered_set<NodeId> no_room_ GUARDED_BY(mu_);
  uint64_t asked_ GUARDED_BY(mu_) = 0;           // asks
  uint64_t asked_resident_ GUARDED_BY(mu_) = 0;  // ...and those settled resident
  std::array<uint64_t, kFailures> failed_
      GUARDED_BY(mu_){};  // asks settled not resident, by reason
  // When each reason was last logged (the planner's thread alone).
  std::array<std::chrono::steady_clock::time_point, kFailures> logged_{};
  std::chrono::steady_clock::time_point started_ GUARDED_BY(mu_){};  // the first file asked for
};

}  // namespace tierfs
