// The table of tierfs's own -o options: see option_table.h.
#include "fs/config/option_table.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <utility>

#include "tiering/base/units.h"
#include "tiering/peers/config/job_peers_config.h"
#include "tiering/peers/config/peer_list.h"
#include "tiering/peers/config/source_port.h"
#include "tiering/store/policy_names.h"

namespace tierfs::option_table {

void NotAbsolute(const std::string& opt, const std::string& value) {
  std::error_code error;
  const std::filesystem::path here = std::filesystem::current_path(error);
  throw OptionError(fmt::format(
      "option '{}': '{}' is not an absolute path; options take paths from / (fstab has no "
      "current directory){}",
      opt, value,
      error ? "" : fmt::format(": {}={}", opt, (here / value).lexically_normal().string())));
}

namespace {

// ParseSize for the option table: throws OptionError.
uint64_t SizeOrThrow(const std::string& text, const std::string& option) {
  Result<uint64_t> bytes = ParseSize(text, option);
  if (!bytes.ok()) throw OptionError(bytes.status().message(), bytes.status().code());
  return *bytes;
}

unsigned ParseUnsigned(const std::string& text, const std::string& opt, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < lo || v > hi) {
    throw OptionError(
        fmt::format("option '{}': '{}' is not a whole number from {} to {}", opt, text, lo, hi));
  }
  return static_cast<unsigned>(v);
}

double ParseSeconds(const std::string& text, const std::string& opt) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(v) ||
      v < 0 || v > 1e9) {
    throw OptionError(fmt::format("option '{}': '{}' is not a number of seconds >= 0", opt, text));
  }
  return v;
}

// A span of seconds within [lo, hi], in milliseconds.
std::chrono::milliseconds ParseSpan(const std::string& text, const std::string& opt, double lo,
                                    double hi) {
  double s = ParseSeconds(text, opt);
  if (s < lo || s > hi) {
    throw OptionError(fmt::format("option '{}': {} is not between {} and {}", opt, text, lo, hi));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// The value of the word `text` among `words`, in the order they are listed;
// any other word is an error naming them all.
template <class Enum>
Enum OneOf(const std::string& text, const std::string& opt,
           std::initializer_list<std::pair<const char*, Enum>> words) {
  std::string names;
  for (const auto& [word, value] : words) {
    if (text == word) return value;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", word);
  }
  throw OptionError(fmt::format("option '{}': '{}' is not one of {}", opt, text, names));
}

}  // namespace

const std::vector<OwnOption>& OwnOptions() {
  static const std::vector<OwnOption> options = {
      {"threads", "N", "max FUSE worker threads (1-1024, default 64)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.threads = ParseUnsigned(v, o, 1, 1024);
       }},
      {"scan_threads", "auto|N",
       "metadata requests in flight during the mount scan (1-1024; default auto: tuned while "
       "scanning towards the most operations per second)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.scan_threads = v == "auto" ? 0 : ParseUnsigned(v, o, 1, 1024);
       }},
      {"index", "FILE|auto",
       "mount from a saved namespace index (built by `tierfs index` or by a previous mount); "
       "auto = namespace.index in the first directory tier",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v.empty()) throw OptionError(fmt::format("option '{}' needs a file or auto", o));
         if (v != "auto" && v[0] != '/') NotAbsolute(o, v);
         c.index = v;
       }},
      {"index_check", "MODE",
       "how a saved index is checked against SOURCE: dirs (default: one stat per directory, "
       "changed ones listed again), full (scan everything) or none",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (!ParseIndexCheck(v, &c.index_check)) {
           throw OptionError(fmt::format("option '{}': '{}' is not one of full, dirs, none", o, v));
         }
       }},
      {"index_wait", "SECONDS",
       "how long to wait for another node that builds the index before scanning (default 600)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.index_wait = ParseUnsigned(v, o, 0, 86400);
       }},
      {"readdir", "MODE",
       "how the kernel lists directories: plus (default: READDIRPLUS, names with "
       "attributes), plain (READDIR) or auto (the kernel's adaptive READDIRPLUS)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.readdir = OneOf<ReaddirMode>(v, o,
                                        {{"plus", ReaddirMode::kPlus},
                                         {"plain", ReaddirMode::kPlain},
                                         {"auto", ReaddirMode::kAuto}});
       }},
      {"passthrough", "MODE",
       "FUSE passthrough, for files wholly in one tier: the kernel reads them from the tier's "
       "file, at the speed of memory, and they are not cached a second time; every open then "
       "costs a request. auto (default: on when the daemon has CAP_SYS_ADMIN and the kernel "
       "accepts it, unless small files hold most of the data and it fits in memory twice), on "
       "(refuse to mount without it) or off",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.passthrough = OneOf<PassthroughWant>(v, o,
                                                {{"auto", PassthroughWant::kAuto},
                                                 {"on", PassthroughWant::kOn},
                                                 {"off", PassthroughWant::kOff}});
       }},
      {"permissions", "MODE",
       "who decides whether a caller may open a file: source (SOURCE, asked as the caller: "
       "ACLs included; the default for a root daemon with allow_other) or snapshot (the "
       "mode bits scanned at mount)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.permissions = OneOf<PermissionsBy>(
             v, o, {{"source", PermissionsBy::kSource}, {"snapshot", PermissionsBy::kSnapshot}});
       }},
      {"perm_ttl", "SECONDS",
       "with permissions=source, how long SOURCE's answer for a caller and file is kept "
       "(default 60: a revoked permission holds for at most a minute; 0: until "
       ".tierfs/revalidate is written or the mount ends)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         double s = ParseSeconds(v, o);
         if (s < 0 || s > 86400 * 365) {
           throw OptionError(fmt::format("option '{}': {} is not between 0 and a year", o, v));
         }
         c.perm_ttl = s;
       }},
      {"control_owner", "UID[:GID]|any",
       "who may write the control files (.tierfs/order, stage, ...) and read .tierfs/changes "
       "besides root (default: the daemon's user); the Slurm prolog gives the job's user. any: "
       "every user may write order and stage (each write acting as its writer); the others "
       "stay root's and the daemon's user's",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v == "any") {
           c.control_any = true;
           c.control_uid = c.control_gid = -1;
           return;
         }
         c.control_any = false;
         size_t colon = v.find(':');
         c.control_uid = ParseUnsigned(v.substr(0, colon), o, 0, 0xFFFFFFFE);
         c.control_gid =
             colon == std::string::npos
                 ? -1
                 : static_cast<int64_t>(ParseUnsigned(v.substr(colon + 1), o, 0, 0xFFFFFFFE));
       }},
      {"open_as", "UID:GID",
       "a root daemon opens SOURCE and MOUNTPOINT once, with this user's permissions (and its "
       "groups), and never walks their paths again: the Slurm prolog's, for the job's user",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         size_t colon = v.find(':');
         if (colon == std::string::npos) {
           throw OptionError(fmt::format("option '{}': '{}' is not UID:GID", o, v));
         }
         c.open_as_uid = ParseUnsigned(v.substr(0, colon), o, 0, 0xFFFFFFFE);
         c.open_as_gid = ParseUnsigned(v.substr(colon + 1), o, 0, 0xFFFFFFFE);
       }},
      {"max_open_files", "N", "SOURCE files kept open (default: half of RLIMIT_NOFILE)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.max_open_files = ParseUnsigned(v, o, 16, 1u << 30);
       }},
      {"entry_timeout", "SECONDS", "how long the kernel caches names (default 86400)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.entry_timeout = ParseSeconds(v, o);
       }},
      {"attr_timeout", "SECONDS", "how long the kernel caches attributes (default 86400)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.attr_timeout = ParseSeconds(v, o);
       }},
      {"read_ahead_kb", "KB",
       "kernel readahead of the mount (default: the largest read request the kernel sends, "
       "at least 1024; 0 keeps the kernel's)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.read_ahead_kb = ParseUnsigned(v, o, 0, 1u << 20);
       }},
      {"stage_share", "PERCENT",
       "the part of the tiers each user but root may ask to stage through .tierfs/stage "
       "(default 100: no limit; files another user asked for first do not count): on a mount "
       "every user may steer (control_owner=any), one user cannot fill it for the others",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.stage_share_percent = ParseUnsigned(v, o, 1, 100);
       }},
      {"ram", "SIZE", "RAM tier budget, e.g. 8G (K/M/G/T suffixes; default 0: no RAM tier)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.ram = SizeOrThrow(v, o);
       }},
      {"tier", "PATH:SIZE",
       "a directory tier of yours alone (node-local NVMe; memory: mkdir -m 700 "
       "/dev/shm/tierfs-$USER) and its budget; repeat for more, fastest first",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         size_t colon = v.rfind(':');
         if (colon == std::string::npos || colon == 0 || colon + 1 == v.size()) {
           throw OptionError(fmt::format(
               "option '{}': '{}' is not PATH:SIZE (e.g. tier=/local/nvme/tierfs:400G)", o, v));
         }
         uint64_t budget = SizeOrThrow(v.substr(colon + 1), o);
         if (budget == 0) throw OptionError(fmt::format("option '{}': the budget is 0", o));
         c.tiering.dirs.push_back({v.substr(0, colon), budget});
       }},
      {"policy", "NAME",
       "eviction from a full tier: next-use (default: what is needed farthest ahead in the "
       "declared order goes first; with no order declared nothing is evicted) or lru (the least "
       "recently read goes first)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         std::string name = CanonicalPolicyName(v);
         if (name.empty()) {
           throw OptionError(fmt::format("option '{}': '{}' is not one of next-use, lru", o, v));
         }
         c.tiering.policy = name;
       }},
      {"promote_threads", "N",
       "promotion threads, i.e. parallel SOURCE copy streams (default 32; the number in use is "
       "auto-tuned between 1 and 32 from 8; a value given here is fixed)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.promote_threads = ParseUnsigned(v, o, 1, 256);
         c.tiering.prefetch.tune_parallelism = false;
       }},
      {"prefetch", "MODE",
       "on-access (default: promote on first read), stage-in (promote everything now) or "
       "order (follow .tierfs/order)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (!ParsePrefetchMode(v, &c.tiering.prefetch.mode)) {
           throw OptionError(
               fmt::format("option '{}': '{}' is not one of on-access, stage-in, order", o, v));
         }
       }},
      {"lookahead", "N",
       "files kept promoted ahead of the reader in order mode (default: auto-tuned, 8-8192)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.prefetch.lookahead = ParseUnsigned(v, o, 1, 1u << 20);
       }},
      {"promote_queue", "N",
       "promotions that may wait for a thread, for each of reads, read ahead and "
       "background, before new ones are refused (4096)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.promote_queue = ParseUnsigned(v, o, 1, 1u << 24);
       }},
      {"chunk_size", "SIZE", "large files are promoted in chunks of this size (default 8M)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         uint64_t size = SizeOrThrow(v, o);
         if (size < (1u << 20) || size > (4ull << 30)) {
           throw OptionError(fmt::format("option '{}': {} is not between 1M and 4G", o, v));
         }
         c.tiering.chunk_size = size;
       }},
      {"tier_reset", "", "start with empty directory tiers (default: reuse valid copies)",
       [](MountConfig& c, const std::string&, const std::string&) { c.tiering.reset = true; }},
      {"metrics", "[HOST:]PORT",
       "serve Prometheus metrics at http://HOST:PORT/metrics (HOST defaults to 127.0.0.1)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v.empty()) throw OptionError(fmt::format("option '{}' needs a port", o));
         c.metrics = v;
       }},
      {"shutdown_timeout", "SECONDS",
       "how long unmounting waits for running promotions before forcing (default 30)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.shutdown_timeout = ParseUnsigned(v, o, 1, 3600);
       }},
      {"idle_exit", "SECONDS",
       "unmount and exit (status 0) once, for SECONDS in a row, no other mount of this file "
       "system exists (a job's bind mount of it) and no process read the dataset through it; "
       "directory tiers stay for the next start (default 0: never)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.idle_exit = ParseUnsigned(v, o, 0, 86400 * 365);
       }},
      {"peers", "FILE|N1+N2+...",
       "the job's nodes, which serve each other's chunks: a file of 'NAME [HOST][:PORT]' lines "
       "or names joined by '+' (this node included; needs a tier)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v.empty()) throw OptionError(fmt::format("option '{}' needs a file or a list", o));
         c.peers = v;
       }},
      {"peer_name", "NAME", "this node in the peer list (default: the short host name)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (!ValidPeerName(v)) {
           throw OptionError(fmt::format("option '{}': '{}' is not a valid peer name", o, v));
         }
         c.peer_name = v;
       }},
      {"peer_port", "PORT", "the port the peer service listens on (default 7740)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.peer_port = ParseUnsigned(v, o, 1, 65535);
         c.peer_set = true;
       }},
      {"peer_listen", "ADDRESS",
       "the IPv4 address the peer service listens on (default: this node's address in the peer "
       "list)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         in_addr a{};
         if (::inet_pton(AF_INET, v.c_str(), &a) != 1) {
           throw OptionError(fmt::format("option '{}': '{}' is not an IPv4 address", o, v));
         }
         c.tiering.peers.listen = v;
         c.peer_set = true;
       }},
      {"peer_job", "ID",
       "the job's identity, the same on all its nodes (default slurm:CLUSTER:JOBID from "
       "SLURM_CLUSTER_NAME and SLURM_JOB_ID)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v.empty() || v.size() > 255) {
           throw OptionError(fmt::format("option '{}' needs 1 to 255 characters", o));
         }
         c.tiering.peers.job = v;
       }},
      {"munge_socket", "PATH", "munged's socket for the peers' credentials (default: libmunge's)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v.empty() || v[0] != '/') NotAbsolute(o, v);
         c.tiering.peers.munge_socket = v;
       }},
      {"peer_timeout", "SECONDS",
       "how long a read waits for another node's answer before it reads SOURCE itself (that "
       "node is then skipped for a while, and keeps its chunks; default 5)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.peers.timeout = ParseSpan(v, o, 0.05, 600);
         c.peer_set = true;
       }},
      {"peer_dead", "SECONDS",
       "how long a peer may stay silent (it is pinged) before it is taken for gone and other "
       "nodes keep its chunks (default 10)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.peers.dead_after = ParseSpan(v, o, 0.1, 3600);
         c.peer_set = true;
       }},
      {"peer_idle", "SECONDS",
       "close a connection to a peer unused this long (it is made again when needed; default "
       "1800)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.peers.idle_close = ParseSpan(v, o, 0.1, 86400);
         c.peer_set = true;
       }},
      {"peer_connections", "N",
       "most connections to other nodes open at once, each way; beyond, the least used is "
       "closed (default 1024)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.tiering.peers.max_connections = ParseUnsigned(v, o, 1, 65536);
         c.peer_set = true;
       }},
      {"peer_source_ports", "LO-HI|off",
       "the ports below 1024 a daemon run as root connects to other nodes from, for which their "
       "doors keep places other users cannot take; ports in net.ipv4.ip_local_reserved_ports "
       "are skipped; off: any port (default 600-1023)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         std::string why;
         if (!ParseSourcePorts(v, &c.tiering.peers.source_ports, &why)) {
           throw OptionError(fmt::format("option '{}': {}", o, why));
         }
         c.peer_set = true;
       }},
      {"nonempty", "", "allow mounting over a non-empty directory",
       [](MountConfig& c, const std::string&, const std::string&) { c.nonempty = true; }},
      {"log", "syslog|stderr|FILE",
       "where the daemon logs once detached (default: syslog; where there is none, a file in "
       "/var/log/tierfs for root, in ~/.local/state/tierfs for a user; the path is printed at "
       "mount)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (v != "syslog" && v != "stderr" && (v.empty() || v[0] != '/')) {
           throw OptionError(
               fmt::format("option '{}': '{}' is not syslog, stderr or an absolute path", o, v));
         }
         c.log_to = v;
       }},
      {"log_max", "SIZE",
       "the most a log that is a regular file (log=FILE, or stderr redirected to one) may hold; "
       "later lines are dropped and counted (default 64M; 0: no cap)",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         c.log_max = SizeOrThrow(v, o);
       }},
      {"log_level", "LEVEL", "error, warning, info (default) or debug",
       [](MountConfig& c, const std::string& v, const std::string& o) {
         if (!Log::ParseLevel(v, &c.log_level)) {
           throw OptionError(
               fmt::format("option '{}': '{}' is not one of error, warning, info, debug", o, v));
         }
       }},
  };
  return options;
}

}  // namespace tierfs::option_table
