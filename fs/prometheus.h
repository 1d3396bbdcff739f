// The Prometheus text exposition of the daemon's figures, made from the
// .tierfs/stats JSON so that both always agree: every number becomes a
// metric named after its path (tierfs_source_read_bytes_total), tiers become
// a label (tierfs_tiers_used{tier="ram"}), the read latency a histogram, and
// strings (version, modes) labels of tierfs_info. No FUSE include.
#pragma once

#include <string>
#include <string_view>

namespace tierfs {

// Returns "" and sets *error if `json` is not valid JSON.
std::string PrometheusFromStatsJson(std::string_view json, std::string* error);

}  // namespace tierfs
