#include "op_counters.h"

#include <fmt/format.h>

namespace pfssim {
namespace {

uint64_t Load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

}  // namespace

void OpCounters::LookupBegins() {
  const uint64_t now = lookups_in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t max = lookups_in_flight_max.load(std::memory_order_relaxed);
  while (now > max &&
         !lookups_in_flight_max.compare_exchange_weak(max, now, std::memory_order_relaxed)) {
  }
}

uint64_t OpCounters::MetaOps() const {
  return Load(lookups) + Load(getattrs) + Load(opens) + Load(opendirs) + Load(readdirs) +
         Load(statfs);
}

std::string OpCounters::ToJson() const {
  return fmt::format(
      "{{\"meta_ops\": {}, \"lookups\": {}, \"getattrs\": {}, \"opens\": {}, \"opendirs\": {}, "
      "\"readdirs\": {}, \"statfs\": {}, \"lookups_in_flight_max\": {}, \"releases\": {}, "
      "\"forgets\": {}, \"reads\": {}, "
      "\"eof_reads\": {}, "
      "\"read_bytes\": {}, \"read_errors\": {}, \"stalls\": {}, \"source_errors\": {}}}",
      MetaOps(), Load(lookups), Load(getattrs), Load(opens), Load(opendirs), Load(readdirs),
      Load(statfs), Load(lookups_in_flight_max), Load(releases), Load(forgets), Load(reads),
      Load(eof_reads), Load(read_bytes), Load(read_errors), Load(stalls), Load(source_errors));
}

}  // namespace pfssim
