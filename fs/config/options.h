// Command-line and -o option parsing for the tierfs mount. tierfs's own
// options are parsed and validated here; standard FUSE/mount options are
// checked against a list and handed to libfuse. Pure: no file, host name or
// environment variable is read here (fs/mount/mount_inputs.h reads what peers=
// refers to). No FUSE include and no engine: it includes only the config
// leaf headers and the base, so that it is unit-tested and fuzzed without
// UCX, MUNGE or libcrypto (tierfs_fs_options).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fs/config/mount_modes.h"
#include "prefetch/assembly/tiering_config.h"
#include "tiering/base/log.h"
#include "tiering/base/status.h"
#include "tiering/namespace/index_check.h"

namespace tierfs {

struct MountConfig {
  enum class Action { kMount, kHelp, kVersion };
  Action action = Action::kMount;

  std::string source;      // as given; resolved by the caller
  std::string mountpoint;  // as given
  bool foreground = false;
  bool debug = false;  // libfuse's request trace (implies foreground)

  // tierfs's own options.
  unsigned threads = 64;      // max FUSE worker threads
  unsigned scan_threads = 0;  // metadata requests in flight during the scan; 0: auto (tuned)
  std::string index;          // saved namespace index: a file, "auto" or "" (none)
  IndexCheck index_check = IndexCheck::kDirs;
  unsigned index_wait = 600;  // seconds to wait for another node building the index
  ReaddirMode readdir = ReaddirMode::kPlus;
  PassthroughWant passthrough = PassthroughWant::kAuto;  // decided per mount
  uint64_t max_open_files = 0;   // SOURCE fd cache; 0 = half of RLIMIT_NOFILE
  double entry_timeout = 86400;  // seconds the kernel may cache names
  double attr_timeout = 86400;   // seconds the kernel may cache attributes
  // Kernel readahead of the mount in KiB; 0 = the kernel's default;
  // kMaxRequestReadAhead = the largest read request (max_pages), at least 1 MiB.
  static constexpr unsigned kMaxRequestReadAhead = ~0u;
  unsigned read_ahead_kb = kMaxRequestReadAhead;
  bool nonempty = false;  // allow mounting over a non-empty directory
  LogLevel log_level = kInfo;
  // Where a detached daemon logs: "" (syslog where there is one, else a
  // file of its own), "syslog", "stderr", or an absolute file path.
  std::string log_to;
  // The most bytes the daemon writes to a log that is a regular file (its
  // log= file, or stderr redirected to one); 0: no cap.
  uint64_t log_max = 64ull << 20;
  std::string metrics;             // [HOST:]PORT of the Prometheus endpoint; "" = off
  unsigned shutdown_timeout = 30;  // seconds to finish promotions at unmount
  // Seconds without a bind mount of the mount and without a request for
  // the dataset after which the daemon unmounts itself; 0 = never.
  unsigned idle_exit = 0;
  PermissionsBy permissions = PermissionsBy::kDefault;  // who decides a caller's open
  double perm_ttl = 60;  // seconds an answer of SOURCE is kept; 0 = until revalidated
  // The control files' owner (who may steer the mount besides root);
  // -1 = the daemon's user.
  int64_t control_uid = -1, control_gid = -1;
  // control_owner=any: every user may write the order and stage files
  // (each write acts as its writer); the others stay root's and the daemon's user's.
  bool control_any = false;
  // open_as=: the user whose permissions open SOURCE and MOUNTPOINT; -1 = none.
  int64_t open_as_uid = -1, open_as_gid = -1;

  // Tiers and promotion (ram=, tier=, policy=, ...), and the peers.
  TieringConfig tiering;
  // Peers as given (peers=, peer_name=, peer_port=): resolved into
  // tiering.peers by ResolvePeers (fs/mount/mount_inputs.h).
  std::string peers;
  std::string peer_name;
  unsigned peer_port = 7740;
  bool peer_set = false;  // peer_port=, peer_listen= or peer_timeout= given

  // Options for libfuse's mount (allow_other, fsname=..., ...), in order,
  // escaped for a -o list (',' and '\' preceded by '\').
  std::vector<std::string> fuse_options;
};

// Parses argv (argv[0] is the program). Fails (EINVAL) with a complete
// message for the user. peers= is kept as given: tiering.peers is empty
// until ResolvePeers.
Result<MountConfig> ParseCommandLine(const std::vector<std::string>& args);

// ParseByteSize (tiering/base/units.h) for the value of -o `option`: "512", "64K",
// "8G", "1.5T" (binary units) into bytes. Fails (EINVAL) naming `option`.
Result<uint64_t> ParseSize(const std::string& text, const std::string& option);

// The --help text.
std::string UsageText(const std::string& program);

}  // namespace tierfs
