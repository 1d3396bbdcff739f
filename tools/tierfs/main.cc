// tierfs: mount a tiered read-only mirror of a dataset directory, or (with a
// subcommand: stat, hint, stage) talk to a running mount, or (index) save
// SOURCE's namespace index.
#include <sys/prctl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fs/config/options.h"
#include "fs/mount/mount_inputs.h"
#include "fs/mount/session.h"
#include "tierfs/version.h"
#include "tools/tierfs/index_command.h"
#include "tools/tierfs/subcommands.h"

namespace {

int PrintHelp() {
  std::fputs(tierfs::UsageText("tierfs").c_str(), stdout);
  std::fputs(tierfs::cli::SubcommandUsage("tierfs").c_str(), stdout);
  std::fputs("\nWithout a mount:\n", stdout);
  std::fputs(tierfs::cli::IndexUsage("tierfs").c_str(), stdout);
  // Last, where a reader looks for it; the man page is what an installed
  // system has (no docs/ tree there).
  std::fputs("\nThe full reference: man tierfs (in a source tree: man docs/tierfs.1).\n", stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Not dumpable, before anything else: no option parsed, SOURCE not yet
  // read. A daemon run as the job's user could otherwise be ptrace()d, or
  // its environment, open files and memory read through /proc, by that
  // user's other processes during the scan (its /proc entries become
  // root's), and no core file holds what it read. Kept across the fork
  // that detaches the daemon; an exec (fusermount3) starts afresh.
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) {
    std::fprintf(stderr, "tierfs: prctl(PR_SET_DUMPABLE, 0): %s\n", std::strerror(errno));
  }
  std::vector<std::string> args(argv, argv + argc);
  // `tierfs help` is --help; `tierfs help stat` is `tierfs stat --help`.
  if (args.size() > 1 && args[1] == "help") {
    if (args.size() == 2) return PrintHelp();
    if (args.size() > 3 || (args[2] != "index" && !tierfs::cli::IsSubcommand(args[2]))) {
      std::fprintf(stderr, "tierfs help: expected one subcommand (index, stat, hint, stage)\n");
      return 2;
    }
    args = {args[0], args[2], "--help"};
  }
  if (args.size() > 1 && args[1] == "index") return tierfs::cli::RunIndexCommand(args);
  if (args.size() > 1 && tierfs::cli::IsSubcommand(args[1])) {
    return tierfs::cli::RunSubcommand(args);
  }
  tierfs::Result<tierfs::MountConfig> parsed = tierfs::ReadCommandLine(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "tierfs: %s\n", parsed.status().message().c_str());
    return 2;
  }
  const tierfs::MountConfig& config = *parsed;
  switch (config.action) {
    case tierfs::MountConfig::Action::kHelp:
      return PrintHelp();
    case tierfs::MountConfig::Action::kVersion:
      std::printf("tierfs %s\n", TIERFS_VERSION);
      return 0;
    case tierfs::MountConfig::Action::kMount:
      break;
  }
  return tierfs::RunMount(config);
}
