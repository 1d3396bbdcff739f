#include "sim_params.h"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <limits>
#include <optional>

#include "tiering/base/json_string.h"
#include "tiering/base/units.h"

namespace pfssim {
namespace {

// Parses a whole string as a finite, non-negative number.
bool ParseNumber(const std::string& text, double& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && out >= 0 && out <= std::numeric_limits<double>::max();
}

std::vector<std::string> SplitColons(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(start, end - start);
    while (!part.empty() && part.front() == '/') part.erase(part.begin());
    if (!part.empty()) parts.push_back(part);
    start = end + 1;
  }
  return parts;
}

struct ParamSpec {
  const char* key;
  const char* help;
  // Returns false if `value` does not parse.
  std::function<bool(SimParams&, const std::string&)> set;
};

// Setters for fields of one type, so the table below stays declarative.
template <typename Field>
std::function<bool(SimParams&, const std::string&)> Number(Field SimParams::*field,
                                                           double max_value) {
  return [field, max_value](SimParams& p, const std::string& v) {
    double d = 0;
    if (!ParseNumber(v, d) || d > max_value) return false;
    p.*field = static_cast<Field>(d);
    return true;
  };
}

const std::vector<ParamSpec>& Specs() {
  static const std::vector<ParamSpec> specs = {
      {"meta_ms", "metadata round trip per lookup/getattr/open/readdir (ms)",
       Number(&SimParams::meta_ms, 1e6)},
      {"meta_parallel", "metadata requests served at once",
       Number(&SimParams::meta_parallel, 4096)},
      {"read_ms", "latency per read request (ms)", Number(&SimParams::read_ms, 1e6)},
      {"stream_mbps", "bandwidth per read stream (10^6 B/s)", Number(&SimParams::stream_mbps, 1e9)},
      {"total_mbps", "aggregate bandwidth cap (10^6 B/s)", Number(&SimParams::total_mbps, 1e9)},
      {"parallel", "read requests served at once", Number(&SimParams::parallel, 4096)},
      {"max_request", "largest read request in bytes (K/M suffix ok, 4K..1M)",
       [](SimParams& p, const std::string& v) {
         const std::optional<uint64_t> bytes = tierfs::ParseByteSize(v);
         if (!bytes || *bytes < 4096 || *bytes > (1u << 20)) return false;
         p.max_request = static_cast<uint32_t>(*bytes);
         return true;
       }},
      {"entry_timeout", "kernel entry cache timeout (s)", Number(&SimParams::entry_timeout, 1e6)},
      {"attr_timeout", "kernel attribute cache timeout (s)", Number(&SimParams::attr_timeout, 1e6)},
      {"fail_rate", "fraction of reads failing with EIO (0..1)", Number(&SimParams::fail_rate, 1)},
      {"fail_files", "':'-separated paths whose every read fails with EIO",
       [](SimParams& p, const std::string& v) {
         p.fail_files = SplitColons(v);
         return true;
       }},
      {"fail_dirs", "':'-separated directories ('.' the root) whose opendir fails with EIO",
       [](SimParams& p, const std::string& v) {
         p.fail_dirs = SplitColons(v);
         for (std::string& d : p.fail_dirs) {
           if (d == ".") d.clear();
         }
         return true;
       }},
      {"stall_rate", "fraction of reads that stall (0..1)", Number(&SimParams::stall_rate, 1)},
      {"stall_ms", "extra delay of a stalled read (ms)", Number(&SimParams::stall_ms, 1e6)},
      {"seed", "seed of the fault hashes", Number(&SimParams::seed, 9e15)},
      {"renumber", "1: a forgotten inode gets a new number at its next lookup (0/1)",
       Number(&SimParams::renumber, 1)},
      {"threads", "FUSE worker threads of pfs-sim (1..256)", Number(&SimParams::threads, 256)},
  };
  return specs;
}

}  // namespace

std::string SetParam(SimParams& params, const std::string& key, const std::string& value) {
  for (const ParamSpec& spec : Specs()) {
    if (key != spec.key) continue;
    if (!spec.set(params, value))
      return fmt::format("bad value '{}' for {}: {}", value, key, spec.help);
    return "";
  }
  return fmt::format("unknown pfs-sim option '{}'", key);
}

bool IsParamKey(const std::string& key) {
  for (const ParamSpec& spec : Specs()) {
    if (key == spec.key) return true;
  }
  return false;
}

std::string Validate(const SimParams& p) {
  if (p.parallel < 1) return "parallel must be at least 1";
  if (p.meta_parallel < 1) return "meta_parallel must be at least 1";
  if (p.threads < 1) return "threads must be at least 1";
  if (p.stream_mbps <= 0) return "stream_mbps must be positive";
  if (p.total_mbps <= 0) return "total_mbps must be positive";
  return "";
}

std::string ParamsToJson(const SimParams& p) {
  std::string files;
  for (const std::string& f : p.fail_files) {
    if (!files.empty()) files += ",";
    files += tierfs::JsonString(f);
  }
  std::string dirs;
  for (const std::string& d : p.fail_dirs) {
    if (!dirs.empty()) dirs += ",";
    dirs += tierfs::JsonString(d);
  }
  return fmt::format(
      "{{\"meta_ms\": {}, \"meta_parallel\": {}, \"read_ms\": {}, \"stream_mbps\": {}, "
      "\"total_mbps\": {}, \"parallel\": {}, \"max_request\": {}, \"entry_timeout\": {}, "
      "\"attr_timeout\": {}, \"fail_rate\": {}, \"fail_files\": [{}], \"fail_dirs\": [{}], "
      "\"stall_rate\": {}, "
      "\"stall_ms\": {}, \"seed\": {}, \"renumber\": {}, \"threads\": {}}}",
      p.meta_ms, p.meta_parallel, p.read_ms, p.stream_mbps, p.total_mbps, p.parallel, p.max_request,
      p.entry_timeout, p.attr_timeout, p.fail_rate, files, dirs, p.stall_rate, p.stall_ms, p.seed,
      p.renumber, p.threads);
}

std::string ParamsHelp() {
  std::string out;
  SimParams defaults;
  std::string json = ParamsToJson(defaults);
  for (const ParamSpec& spec : Specs()) {
    out += fmt::format("    -o {:<15} {}\n", spec.key, spec.help);
  }
  out += "  defaults: " + json + "\n";
  return out;
}

}  // namespace pfssim
