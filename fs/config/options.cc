#include "fs/config/options.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <utility>

#include "fs/config/option_table.h"
#include "tiering/base/units.h"
#include "tiering/peers/config/job_peers_config.h"
#include "tiering/peers/config/peer_list.h"

namespace tierfs {
namespace {

using option_table::NotAbsolute;
using option_table::OptionError;
using option_table::OwnOptions;

// Standard options handed to libfuse's mount. A trailing '=' takes a value.
constexpr const char* kFuseOptions[] = {"allow_other",  "allow_root",
                                        "auto_unmount", "default_permissions",
                                        "ro",           "rw",
                                        "suid",         "nosuid",
                                        "dev",          "nodev",
                                        "exec",         "noexec",
                                        "atime",        "noatime",
                                        "relatime",     "norelatime",
                                        "strictatime",  "nostrictatime",
                                        "diratime",     "nodiratime",
                                        "sync",         "async",
                                        "dirsync",      "fsname=",
                                        "subtype=",     "max_read=",
                                        "blksize=",     "context=",
                                        "fscontext=",   "defcontext=",
                                        "rootcontext="};

// fstab-only words that mount(8) may hand over; they mean nothing to a mount.
constexpr const char* kIgnoredOptions[] = {"defaults", "auto",  "noauto", "user",   "users",
                                           "nouser",   "owner", "nofail", "_netdev"};

bool IsFuseOption(const std::string& name, bool has_value) {
  for (std::string_view o : kFuseOptions) {
    bool takes_value = o.back() == '=';
    if (takes_value) o.remove_suffix(1);
    if (o == name && takes_value == has_value) return true;
  }
  return false;
}

bool IsIgnored(const std::string& name) {
  if (name.rfind("x-", 0) == 0 || name.rfind("comment=", 0) == 0) return true;
  return std::find(std::begin(kIgnoredOptions), std::end(kIgnoredOptions), name) !=
         std::end(kIgnoredOptions);
}

// The edit distance of a and b: insertions, deletions and substitutions.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The option `name` was most likely meant to be: a known one at most two
// edits away (one for names of up to four letters), in any case; "" if none is.
std::string NearestOption(const std::string& name) {
  std::vector<std::string_view> known;
  for (const auto& o : OwnOptions()) known.emplace_back(o.name);
  for (std::string_view o : kFuseOptions)
    known.push_back(o.back() == '=' ? o.substr(0, o.size() - 1) : o);
  // Case does not count: RAM=1G meant ram=1G.
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string best;
  size_t best_distance = name.size() <= 4 ? 2 : 3;
  for (std::string_view o : known) {
    const size_t d = EditDistance(lower, o);
    if (d < best_distance) {
      best_distance = d;
      best = o;
    }
  }
  return best;
}

// Splits a -o argument on commas; "\," is a literal comma.
std::vector<std::string> SplitOptions(const std::string& arg) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] == '\\' && i + 1 < arg.size() && arg[i + 1] == ',') {
      out.back() += ',';
      ++i;
    } else if (arg[i] == ',') {
      out.emplace_back();
    } else {
      out.back() += arg[i];
    }
  }
  return out;
}

// A FUSE option as libfuse's -o list wants it: ',' and '\' escaped by '\', so
// that joining the list with commas cannot split a value ("fsname=a\,b").
std::string EscapeForFuse(const std::string& opt) {
  std::string out;
  for (char c : opt) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

void ApplyOption(MountConfig& config, const std::string& opt) {
  if (opt.empty()) return;  // "a,,b" and a trailing comma are harmless
  size_t eq = opt.find('=');
  std::string name = opt.substr(0, eq);
  bool has_value = eq != std::string::npos;
  std::string value = has_value ? opt.substr(eq + 1) : "";
  for (const auto& o : OwnOptions()) {
    if (name != o.name) continue;
    bool wants_value = *o.value != '\0';
    if (wants_value && !has_value) {
      throw OptionError(fmt::format("option '{}' needs a value: {}={}", name, name, o.value));
    }
    if (!wants_value && has_value) {
      throw OptionError(fmt::format("option '{}' takes no value", name));
    }
    o.apply(config, value, name);
    return;
  }
  if (IsIgnored(opt)) return;
  if (IsFuseOption(name, has_value)) {
    config.fuse_options.push_back(EscapeForFuse(opt));
    return;
  }
  if (IsFuseOption(name, !has_value)) {
    throw OptionError(has_value ? fmt::format("option '{}' takes no value", name)
                                : fmt::format("option '{}' needs a value: {}=V", name, name));
  }
  if (std::string meant = NearestOption(name); !meant.empty()) {
    throw OptionError(fmt::format("unknown option '{}' (did you mean '{}'?)", name, meant));
  }
  throw OptionError(fmt::format("unknown option '{}' (tierfs --help lists the options)", name));
}

// What peers= asks of the other peer options, checked before anything is
// read for it (ResolvePeers, fs/mount/mount_inputs.h, reads the rest).
void CheckPeerOptions(const MountConfig& config) {
  const JobPeersConfig& p = config.tiering.peers;
  if (config.peers.empty()) {
    if (!config.peer_name.empty() || !p.job.empty() || !p.munge_socket.empty() || config.peer_set) {
      throw OptionError(
          "peer_name=, peer_port=, peer_listen=, peer_job=, munge_socket=, peer_timeout=, "
          "peer_dead=, peer_idle=, peer_connections= and peer_source_ports= "
          "need peers=");
    }
    return;
  }
  if (config.tiering.chunk_size > kMaxWireChunk) {
    throw OptionError(fmt::format("peers= takes chunk_size up to {} MiB", kMaxWireChunk >> 20));
  }
  if (config.peers.find('/') != std::string::npos && config.peers[0] != '/') {
    NotAbsolute("peers", config.peers);
  }
}

MountConfig ParseOrThrow(const std::vector<std::string>& args) {
  MountConfig config;
  std::vector<std::string> positional;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      config.action = MountConfig::Action::kHelp;
      return config;
    }
    if (a == "-V" || a == "--version") {
      config.action = MountConfig::Action::kVersion;
      return config;
    }
    if (a == "-f") {
      config.foreground = true;
    } else if (a == "-d" || a == "--debug") {
      config.debug = config.foreground = true;
    } else if (a == "-o") {
      if (i + 1 == args.size()) throw OptionError("-o needs an option list, e.g. -o allow_other");
      for (const auto& o : SplitOptions(args[++i])) ApplyOption(config, o);
    } else if (a.rfind("-o", 0) == 0) {
      for (const auto& o : SplitOptions(a.substr(2))) ApplyOption(config, o);
    } else if (a == "--") {
      positional.insert(positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    } else if (!a.empty() && a[0] == '-') {
      throw OptionError(fmt::format("unknown argument '{}' (see --help)", a));
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    throw OptionError(fmt::format("expected SOURCE and MOUNTPOINT, got {} path{} (see --help)",
                                  positional.size(), positional.size() == 1 ? "" : "s"));
  }
  config.source = positional[0];
  config.mountpoint = positional[1];
  CheckPeerOptions(config);
  return config;
}

}  // namespace

Result<uint64_t> ParseSize(const std::string& text, const std::string& option) {
  std::optional<uint64_t> bytes = ParseByteSize(text);
  if (!bytes) {
    return Status::Error(
        EINVAL, fmt::format("option '{}': '{}' is not a size ({})", option, text, kByteSizeSyntax));
  }
  return *bytes;
}

Result<MountConfig> ParseCommandLine(const std::vector<std::string>& args) {
  try {
    return ParseOrThrow(args);
  } catch (const OptionError& e) {
    return Status::Error(e.code(), e.what());
  }
}

// --help's lines are at most this wide (a terminal of 100 columns).
constexpr size_t kHelpWidth = 100;

std::string UsageText(const std::string& program) {
  std::string s = fmt::format(
      "usage: {} SOURCE MOUNTPOINT [-o opt[,opt...]] [-f] [-d]\n\n"
      "Mounts a read-only mirror of the dataset directory SOURCE at MOUNTPOINT.\n"
      "Unmount with: fusermount3 -u MOUNTPOINT\n\n"
      "  -f              stay in the foreground (log to stderr)\n"
      "  -d, --debug     trace every FUSE request (implies -f)\n"
      "  -o opt,...      mount options, below\n"
      "  -h, --help      this text\n"
      "  -V, --version   the version\n\n"
      "tierfs options:\n",
      program);
  // Each option's help wrapped at kHelpWidth columns, below its name when
  // the name is too long to leave room.
  constexpr size_t kIndent = 30;
  for (const auto& o : OwnOptions()) {
    std::string name = fmt::format("  -o {}{}{}", o.name, *o.value ? "=" : "", o.value);
    std::string line = name.size() < kIndent ? fmt::format("{:<{}}", name, kIndent)
                                             : name + "\n" + std::string(kIndent, ' ');
    size_t col = kIndent;
    std::string_view help = o.help;
    while (!help.empty()) {
      const size_t end = help.find(' ');
      const std::string_view word = help.substr(0, end);
      if (col > kIndent && col + 1 + word.size() > kHelpWidth) {
        line += "\n" + std::string(kIndent, ' ');
        col = kIndent;
      } else if (col > kIndent) {
        line += ' ';
        col++;
      }
      line += word;
      col += word.size();
      help = end == std::string_view::npos ? std::string_view() : help.substr(end + 1);
    }
    s += line + "\n";
  }
  s += "\nFUSE mount options passed to the kernel:\n  ";
  size_t col = 2;
  for (std::string_view o : kFuseOptions) {
    std::string item = fmt::format("{}{} ", o, o.back() == '=' ? "V" : "");
    if (col + item.size() > 78) {
      s += "\n  ";
      col = 2;
    }
    s += item;
    col += item.size();
  }
  s +=
      "\n\nExit status, whose failure it is:\n"
      "  0  nobody's: a clean unmount, or the detached daemon is mounted\n"
      "  1  this machine: FUSE, memory, a tier's device, limits; a forced shutdown\n"
      "  2  the command line on its own: syntax, an unknown option, a combination, sizes\n"
      "  3  SOURCE: its path, permissions, contents (missing, not a directory, unreadable)\n"
      "  4  MOUNTPOINT: missing, not a directory, not empty, already mounted\n"
      "  5  a tier or index path it names: missing, its owner or mode, not writable, full, in use\n"
      "  6  SOURCE's file system failing: I/O errors, timeouts, a stale or disconnected mount\n";
  return s;
}

}  // namespace tierfs
