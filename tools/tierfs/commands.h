// Internal to the subcommands: one function per subcommand (arguments already
// parsed) and the shared number formatting. Each returns an exit status and
// throws ControlError for a one-line failure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiering/base/units.h"  // Grouped, Counted
#include "tools/tierfs/mount_control.h"

namespace tierfs::cli {

int RunStat(const MountControl& mount, bool json);
// Redraws the mount's rates every `seconds` until Ctrl-C (or `count` times; 0 = no end).
int RunWatch(const MountControl& mount, double seconds, uint64_t count);
int RunHint(const MountControl& mount, const std::string& list_path);
int RunStage(const MountControl& mount, const std::vector<std::string>& paths, bool quiet);

// Read pieces served, wherever from (the "reads" group of the stats): a
// tier's finished copy (from_tiers: the hits), a copy still being made from
// SOURCE (early), the copy its reader just made from SOURCE before a
// directory tier committed it (from_copy), SOURCE (from_source), a peer
// (from_peers). The one denominator of the hit ratio, from_tiers / this:
// `tierfs stat`, `stat --watch` and tools/grafana/tierfs.json divide by it.
uint64_t ReadPieces(const JsonValue& stats);

// How `tierfs stat` and `stat --watch` name a tier of the stats' "tiers"
// list: "RAM", or a directory tier's path.
std::string TierLabel(const JsonValue& tier);

// "rejected R of N lines; first: 'LINE': REASON", from a control file's
// stats group (prefetch.order or prefetch.stage) read after the write.
std::string RejectedLines(const JsonValue& group, uint64_t rejected, uint64_t lines);

// "MOUNT is in prefetch mode MODE: the declared order is kept but not
// followed; to follow it: echo order > MOUNT/.tierfs/prefetch".
std::string UnusedOrder(const MountControl& mount, const std::string& mode);

// 1536 -> "1.5 KiB"; below 1 KiB "N B".
std::string HumanBytes(uint64_t bytes);
// part / whole as "37.5%", or "-" when whole is 0.
std::string Percent(uint64_t part, uint64_t whole);

}  // namespace tierfs::cli
