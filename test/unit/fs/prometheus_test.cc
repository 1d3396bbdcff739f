// PrometheusCounterWriter names, scales and describes figures by their
// About: base units (bytes, seconds), _total on counters only, the HELP
// sentence, items of one series added up, words as tierfs_info's labels.
// test/integration/test_metrics_conventions.py checks a real mount's whole
// scrape against the same rules.
#include "fs/telemetry/prometheus.h"

#include <catch2/catch.hpp>

#include "fs/telemetry/counter_json.h"

namespace tierfs {
namespace {

TEST_CASE("Prometheus names carry base units, JSON keeps its keys and values", "[prometheus]") {
  auto walk = [](CounterVisitor& v) {
    v.BeginGroup("g");
    v.Gauge("latency_ms", 250, {"Mean latency of a thing.", Unit::kMilliseconds});
    v.Counter("spent_us", 1500000, {"Time spent on things.", Unit::kMicroseconds});
    v.Gauge("budget", 4096, {"Bytes a thing may hold.", Unit::kBytes});
    v.Counter("read_bytes", 10, {"Bytes read.", Unit::kBytes});
    v.Counter("bytes", 11, {"Bytes promoted.", Unit::kBytes});
    v.Counter("bytes_served", 12, {"Bytes served.", Unit::kBytes, "served"});
    v.Gauge("rate_bytes_per_s", 13, {"Bytes per second.", Unit::kBytesPerSecond});
    v.Gauge("uptime_seconds", 14, {"Time since start.", Unit::kSeconds});
    v.Counter("hits", 15, {"Things found."});
    v.Flag("on", true, {"1 if on."});
    v.Gauge("lookahead", 16, {"Files ahead.", Unit::kFiles});
    v.Gauge("queued_files", 17, {"Files queued.", Unit::kFiles});
    v.Counter("from_tiers", 18, {"Parts of reads from tiers.", Unit::kParts});
    v.Gauge("running", 19, {"Chunks running.", Unit::kChunks, "busy"});
    v.EndGroup();
  };
  PrometheusCounterWriter prometheus;
  walk(prometheus);
  const std::string text = prometheus.Finish();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("# HELP tierfs_g_latency_seconds Mean latency of a thing.\n"
                                   "# TYPE tierfs_g_latency_seconds gauge\n"
                                   "tierfs_g_latency_seconds 0.25\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE tierfs_g_spent_seconds_total counter\n"
                                   "tierfs_g_spent_seconds_total 1.5\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_budget_bytes 4096\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_read_bytes_total 10\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_bytes_total 11\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_served_bytes_total 12\n"));
  // A precomputed rate is for people: Prometheus takes rate() of a counter.
  CHECK_THAT(text, !Catch::Contains("tierfs_g_rate"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_uptime_seconds 14\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE tierfs_g_hits_total counter\ntierfs_g_hits_total 15\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE tierfs_g_on gauge\ntierfs_g_on 1\n"));
  // A count names what it counts, once.
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_lookahead_files 16\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_queued_files 17\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_from_tiers_parts_total 18\n"));
  CHECK_THAT(text, Catch::Contains("\ntierfs_g_busy_chunks 19\n"));
  CHECK_THAT(text, !Catch::Contains("_ms") && !Catch::Contains("_us") &&
                       !Catch::Contains("per_s ") && !Catch::Contains(".tierfs/stats"));

  JsonCounterWriter json;
  walk(json);
  CHECK(json.Finish() ==
        "{\n  \"g\": {\n    \"latency_ms\": 250,\n    \"spent_us\": 1500000,\n"
        "    \"budget\": 4096,\n    \"read_bytes\": 10,\n    \"bytes\": 11,\n"
        "    \"bytes_served\": 12,\n    \"rate_bytes_per_s\": 13,\n"
        "    \"uptime_seconds\": 14,\n    \"hits\": 15,\n    \"on\": true,\n"
        "    \"lookahead\": 16,\n    \"queued_files\": 17,\n    \"from_tiers\": 18,\n"
        "    \"running\": 19}\n}\n");
}

TEST_CASE("Prometheus adds up the items of one series, words label tierfs_info", "[prometheus]") {
  PrometheusCounterWriter prometheus;
  CounterVisitor& v = prometheus;
  v.Text("version", "1.2", "version");
  v.Text("source_path", "/pfs/data", "source");
  v.Text("mountpoint", "/mnt/\"x\"", "mount");
  v.Note("last", "free text");
  v.BeginList("streams", "stream");
  for (auto [name, series] : {std::pair{"pid:10", "process-0"},
                              {"rank1", "rank1"},
                              {"pid:11", "other"},
                              {"pid:12", "other"}}) {
    v.BeginItem({{"name", name}}, series);
    v.Gauge("declared", 5, {"Files declared in the stream."});
    v.Counter("misses", 2, {"Reads of the stream that missed."});
    v.EndItem();
  }
  v.EndList();
  LatencyHistogram h;
  h.Record(30);
  v.Histogram("read_latency", h, {"Time to answer a read."});
  const std::string text = prometheus.Finish();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("# HELP tierfs_streams_declared Files declared in the stream.\n"
                                   "# TYPE tierfs_streams_declared gauge\n"
                                   "tierfs_streams_declared{stream=\"process-0\"} 5\n"
                                   "tierfs_streams_declared{stream=\"rank1\"} 5\n"
                                   "tierfs_streams_declared{stream=\"other\"} 10\n#"));
  CHECK_THAT(text, Catch::Contains("tierfs_streams_misses_total{stream=\"other\"} 4\n"));
  CHECK_THAT(text, !Catch::Contains("pid:"));
  CHECK_THAT(text, Catch::Contains("# HELP tierfs_read_latency_seconds Time to answer a read.\n"
                                   "# TYPE tierfs_read_latency_seconds histogram\n"));
  CHECK_THAT(text, Catch::Contains("tierfs_read_latency_seconds_bucket{le=\"5e-05\"} 1\n"));
  CHECK_THAT(text, Catch::EndsWith("tierfs_info{version=\"1.2\",source=\"/pfs/data\","
                                   "mount=\"/mnt/\\\"x\\\"\"} 1\n"));
  CHECK_THAT(text, !Catch::Contains("free text"));
}

}  // namespace
}  // namespace tierfs
