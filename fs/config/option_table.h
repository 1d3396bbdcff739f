// The table of tierfs's own -o options (option_table.cc): each option's
// name, value, help and how it sets MountConfig. Internal to fs/config:
// ParseCommandLine (options.cc) applies it, UsageText lists it.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fs/config/options.h"

namespace tierfs::option_table {

// A bad command line: what() is a complete message for the user, code() an
// errno. Thrown deep in the option table and while the command line is
// parsed, and turned into a Status by ParseCommandLine: it never leaves it.
class OptionError : public std::runtime_error {
 public:
  explicit OptionError(const std::string& message, int code = EINVAL)
      : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Throws OptionError for option `opt`'s path `value` that is not absolute:
// option values are read where there is no current directory to be relative
// to (an fstab line, a unit), so they are refused with the absolute path it
// would be from here. Positional arguments (SOURCE, MOUNTPOINT, FILE of
// `tierfs index`) may be relative.
[[noreturn]] void NotAbsolute(const std::string& opt, const std::string& value);

// One tierfs -o option: its name, the value it takes ("" for a flag), help.
struct OwnOption {
  const char* name;
  const char* value;
  const char* help;
  std::function<void(MountConfig&, const std::string& value, const std::string& opt)> apply;
};

// Every option, in the order --help lists them.
const std::vector<OwnOption>& OwnOptions();

}  // namespace tierfs::option_table
