// PrefetchConfig: what the prefetcher (prefetch/planners/prefetcher.h) is
// told by the mount's options: its mode, the look-ahead window, who may
// write hints. A leaf: the option parser and its fuzz target read it
// without the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tierfs {

// -o prefetch=on-access|stage-in|order (prefetcher.h tells what each does).
enum class PrefetchMode { kOnAccess = 0, kStageIn = 1, kOrder = 2 };
const char* PrefetchModeName(PrefetchMode mode);
bool ParsePrefetchMode(std::string_view name, PrefetchMode* out);

struct PrefetchConfig {
  PrefetchMode mode = PrefetchMode::kOnAccess;
  unsigned lookahead = 0;        // files ahead of the reader; 0 = auto-tuned
  bool tune_parallelism = true;  // off when promote_threads is fixed by the user
  size_t max_order_entries = 64u << 20;
  // Bytes the look-ahead may hold ahead of the reader (set from the tiers'
  // size): a window of files larger than the tiers would only thrash.
  uint64_t max_lookahead_bytes = UINT64_MAX;
  std::string mountpoint;  // absolute hint paths below it are accepted
  // Every user may write hints (control_owner=any): the stats, which every
  // user may read, say why a line was rejected but never the line, and
  // name declared streams by slot only ("stream-K").
  bool shared_control = false;
  // Bytes one user (not root) may ask to stage (files another asked for
  // first cost nothing); 0: no limit (stage_share=).
  uint64_t stage_share_bytes = 0;
};

}  // namespace tierfs
