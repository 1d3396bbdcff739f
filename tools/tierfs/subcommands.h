// The tierfs subcommands, which talk to a running mount through `.tierfs/`:
//   tierfs stat MOUNT [--json]         a summary of the daemon's counters
//   tierfs hint MOUNT FILE|-           declare the coming read order
//   tierfs stage MOUNT [PATH...]       promote paths now, with a progress bar
// Exit status: 0 done, 1 failure (not a tierfs mount, nothing accepted, ...),
// 2 bad command line, 130 interrupted (stage).
#pragma once

#include <string>
#include <vector>

namespace tierfs::cli {

// Whether `word` (argv[1]) names a subcommand.
bool IsSubcommand(const std::string& word);
// Runs the subcommand args[1] with args[2...]; returns the exit status.
int RunSubcommand(const std::vector<std::string>& args);
// The "subcommands" section appended to `tierfs --help`.
std::string SubcommandUsage(const std::string& program);

}  // namespace tierfs::cli
