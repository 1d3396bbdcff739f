// `tierfs index SOURCE FILE`: builds or updates a saved namespace index
// without mounting. Exit status: 0 the index is written (or valid and
// unchanged), 1 SOURCE cannot be scanned or the index cannot be written,
// 2 bad command line.
#pragma once

#include <string>
#include <vector>

namespace tierfs::cli {

// Runs `tierfs index` with args[2...]; returns the exit status.
int RunIndexCommand(const std::vector<std::string>& args);
// Its lines in `tierfs --help`.
std::string IndexUsage(const std::string& program);

}  // namespace tierfs::cli
