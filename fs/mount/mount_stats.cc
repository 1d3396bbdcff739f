#include "fs/mount/mount_stats.h"

#include "fs/fuse/control.h"
#include "fs/telemetry/counter_json.h"
#include "fs/telemetry/prometheus.h"
#include "tierfs/version.h"
#include "tiering/base/log_cap.h"
#include "tiering/base/log_limiter.h"

namespace tierfs {

void MountStats::VisitCounters(CounterVisitor& v) const {
  v.Text("version", TIERFS_VERSION, "version");
  // Not "source": that is the group of SOURCE's counters.
  if (!parts_.source_path.empty()) v.Text("source_path", parts_.source_path, "source");
  if (!parts_.mount_path.empty()) v.Text("mountpoint", parts_.mount_path, "mount");
  v.Gauge("uptime_seconds",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(),
          {"Time since the mount started.", Unit::kSeconds});
  parts_.fs->VisitSession(v);
  v.BeginGroup("namespace");
  parts_.ns->VisitCounters(v);
  v.EndGroup();
  v.BeginGroup("source");
  parts_.source->VisitCounters(v);
  v.Counter("failed_reads", parts_.reader->failed_reads(),
            {"Reads from SOURCE that failed and were answered with an error."});
  v.EndGroup();
  if (parts_.permissions != nullptr) parts_.permissions->VisitCounters(v);
  v.BeginGroup("requests");
  parts_.fs->requests().VisitCounters(v);
  v.EndGroup();
  parts_.engine->VisitCounters(v);
  if (const JobPeers* peers = parts_.engine->peers()) {
    v.BeginGroup("peers");
    peers->VisitCounters(v);
    PeerService::VisitCounters(peer_service_.load(), v);
    v.EndGroup();
  }
  v.BeginGroup("open_files");
  parts_.reader->open_files().VisitCounters(v);
  v.EndGroup();
  v.BeginGroup("log");
  v.Counter("suppressed_lines", LogSuppressedLines(),
            {"Log lines a user's actions caused that sampling left out."});
  v.Counter("dropped_lines", LogDroppedLines(),
            {"Log lines dropped because the log file reached its size cap."});
  v.EndGroup();
}

std::string MountStats::Json(uid_t reader) const {
  JsonCounterWriter json;
  VisitCounters(json);
  // JSON only: /metrics is one text for everyone, and names no user.
  if (reader != ControlDir::kListing) parts_.fs->VisitReader(json, reader);
  return json.Finish();
}

std::string MountStats::Prometheus() const {
  PrometheusCounterWriter prometheus;
  VisitCounters(prometheus);
  return prometheus.Finish();
}

}  // namespace tierfs
