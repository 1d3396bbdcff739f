// One definition, two outputs: the whole daemon's counters walk (FsContext
// over a real tiered store that has promoted and served files) is written
// as .tierfs/stats JSON and as Prometheus text by one tee'd walk, and every
// figure of each appears in the other with the same value.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "fs/fuse/filesystem.h"
#include "fs/mount/mount_stats.h"
#include "fs/telemetry/counter_json.h"
#include "fs/telemetry/prometheus.h"
#include "require_ok.h"
#include "scan_tree.h"
#include "tiering/base/json_value.h"
#include "tiering/io/counting_backend.h"

namespace tierfs {
namespace {

using testing::TempTree;

// Sends one walk to two visitors.
class TeeVisitor final : public CounterVisitor {
 public:
  TeeVisitor(CounterVisitor* a, CounterVisitor* b) : a_(a), b_(b) {}
  void Counter(std::string_view n, uint64_t v, const About& a) override {
    a_->Counter(n, v, a), b_->Counter(n, v, a);
  }
  void Gauge(std::string_view n, double v, const About& a) override {
    a_->Gauge(n, v, a), b_->Gauge(n, v, a);
  }
  void Flag(std::string_view n, bool v, const About& a) override {
    a_->Flag(n, v, a), b_->Flag(n, v, a);
  }
  void Text(std::string_view n, std::string_view v, std::string_view l) override {
    a_->Text(n, v, l), b_->Text(n, v, l);
  }
  void Note(std::string_view n, std::string_view v) override { a_->Note(n, v), b_->Note(n, v); }
  void Histogram(std::string_view n, const LatencyHistogram& h, const About& a) override {
    a_->Histogram(n, h, a), b_->Histogram(n, h, a);
  }
  void BeginGroup(std::string_view n) override { a_->BeginGroup(n), b_->BeginGroup(n); }
  void EndGroup() override { a_->EndGroup(), b_->EndGroup(); }
  void BeginList(std::string_view n, std::string_view l) override {
    a_->BeginList(n, l), b_->BeginList(n, l);
  }
  void BeginItem(const Labels& l, std::string_view s) override {
    a_->BeginItem(l, s), b_->BeginItem(l, s);
  }
  void EndItem() override { a_->EndItem(), b_->EndItem(); }
  void EndList() override { a_->EndList(), b_->EndList(); }

 private:
  CounterVisitor* a_;
  CounterVisitor* b_;
};

using Samples = std::map<std::pair<std::string, std::string>, double>;  // (name, labels) -> value

// The figures whose Prometheus name is not their path's: the unit named in
// its base form, and the value in it.
struct Renamed {
  const char* prometheus;
  double scale;
};
const std::map<std::string, Renamed> kRenamed = {
    {"tierfs_tiers_budget", {"tierfs_tiers_budget_bytes", 1}},
    {"tierfs_tiers_limit", {"tierfs_tiers_limit_bytes", 1}},
    {"tierfs_tiers_used", {"tierfs_tiers_used_bytes", 1}},
    {"tierfs_tiers_bytes_served", {"tierfs_tiers_served_bytes", 1}},
    {"tierfs_promotions_chunk_size", {"tierfs_promotions_chunk_size_bytes", 1}},
    // Counts name what they count: parts of reads, files, chunks, entries.
    {"tierfs_tiers_hits", {"tierfs_tiers_hit_parts", 1}},
    {"tierfs_reads_from_tiers", {"tierfs_reads_from_tiers_parts", 1}},
    {"tierfs_reads_after_promotion", {"tierfs_reads_after_promotion_parts", 1}},
    {"tierfs_reads_from_source", {"tierfs_reads_from_source_parts", 1}},
    {"tierfs_reads_waits", {"tierfs_reads_waited_parts", 1}},
    {"tierfs_reads_early", {"tierfs_reads_early_parts", 1}},
    {"tierfs_reads_wait_timeouts", {"tierfs_reads_wait_timeout_parts", 1}},
    {"tierfs_reads_tier_errors", {"tierfs_reads_tier_error_parts", 1}},
    {"tierfs_reads_from_peers", {"tierfs_reads_from_peers_parts", 1}},
    {"tierfs_reads_from_copy", {"tierfs_reads_from_copy_parts", 1}},
    {"tierfs_reads_bypass_kept", {"tierfs_reads_bypass_kept_parts", 1}},
    {"tierfs_promotions_queued_foreground", {"tierfs_promotions_queued_for_reads_chunks", 1}},
    {"tierfs_promotions_queued_lookahead", {"tierfs_promotions_queued_read_ahead_chunks", 1}},
    {"tierfs_promotions_queued_background", {"tierfs_promotions_queued_background_chunks", 1}},
    {"tierfs_promotions_running", {"tierfs_promotions_running_chunks", 1}},
    {"tierfs_promotions_files_resident", {"tierfs_promotions_resident_files", 1}},
    {"tierfs_prefetch_order_lookahead", {"tierfs_prefetch_order_lookahead_files", 1}},
    {"tierfs_prefetch_order_declared", {"tierfs_prefetch_order_declared_files", 1}},
    {"tierfs_prefetch_order_position", {"tierfs_prefetch_order_position_files", 1}},
    {"tierfs_prefetch_order_lead", {"tierfs_prefetch_order_lead_files", 1}},
    {"tierfs_prefetch_order_streams_declared", {"tierfs_prefetch_order_streams_declared_files", 1}},
    {"tierfs_prefetch_order_streams_position", {"tierfs_prefetch_order_streams_position_files", 1}},
    {"tierfs_prefetch_order_streams_outstanding",
     {"tierfs_prefetch_order_streams_outstanding_files", 1}},
    {"tierfs_prefetch_order_streams_lead", {"tierfs_prefetch_order_streams_lead_files", 1}},
    {"tierfs_prefetch_autotune_parallelism", {"tierfs_prefetch_autotune_parallel_promotions", 1}},
    {"tierfs_prefetch_autotune_tune_parallelism",
     {"tierfs_prefetch_autotune_parallelism_tuned", 1}},
    {"tierfs_prefetch_autotune_tune_lookahead", {"tierfs_prefetch_autotune_lookahead_tuned", 1}},
    {"tierfs_open_files_open", {"tierfs_open_files_held_files", 1}},
    {"tierfs_open_files_capacity", {"tierfs_open_files_capacity_files", 1}},
    {"tierfs_namespace_skipped", {"tierfs_namespace_skipped_entries", 1}},
    {"tierfs_requests_reader_uids", {"tierfs_requests_reader_uids_entries", 1}},
    {"tierfs_prefetch_autotune_source_latency_ms",
     {"tierfs_prefetch_autotune_source_latency_seconds", 1e-3}},
    {"tierfs_prefetch_autotune_best_source_latency_ms",
     {"tierfs_prefetch_autotune_best_source_latency_seconds", 1e-3}},
};

// Figures of the JSON only: rates (Prometheus computes them from counters).
const std::set<std::string> kJsonOnly = {"tierfs_prefetch_stage_rate_bytes_per_s"};

void Put(const std::string& name, const std::string& labels, double value, Samples* out) {
  if (kJsonOnly.count(name)) return;
  auto r = kRenamed.find(name);
  if (r == kRenamed.end()) {
    (*out)[{name, labels}] = value;
  } else {
    (*out)[{r->second.prometheus, labels}] = value * r->second.scale;
  }
}

// Every number and boolean of the JSON, named as Prometheus names it.
void Flatten(const std::string& prefix, const JsonValue& v, const std::string& labels, Samples* out,
             std::vector<std::string>* words) {
  if (v.is_object()) {
    if (v.Member("bounds_us")) {  // the histogram: its count stands for it
      (*out)[{prefix + "_seconds_count", labels}] = v.Member("count")->number();
      return;
    }
    for (const auto& [k, m] : v.members()) {
      if (m.is_string() && labels.empty()) words->push_back((prefix + "_" + k).substr(7));
      Flatten(prefix + "_" + k, m, labels, out, words);
    }
  } else if (v.is_array()) {
    for (const JsonValue& item : v.items()) {
      std::string l = fmt::format("tier=\"{}\",kind=\"{}\",path=\"{}\"", item.String("name"),
                                  item.String("kind"), item.String("path"));
      for (const auto& [k, m] : item.members()) {
        if (!m.is_string()) Flatten(prefix + "_" + k, m, l, out, words);
      }
    }
  } else if (v.type() == JsonValue::Type::kNumber) {
    Put(prefix, labels, v.number(), out);
  } else if (v.type() == JsonValue::Type::kBool) {
    Put(prefix, labels, v.boolean() ? 1 : 0, out);
  }
}

TEST_CASE("Every counter appears in the stats JSON and in Prometheus with one value",
          "[counters]") {
  TempTree tree, tier_dir;
  for (int i = 0; i < 6; ++i) tree.Write(fmt::format("f{}", i), std::string(20000 + i, 'x'));
  CountingBackend backend(RequireOk(NewPosixBackend(tree.root())));
  auto ns = RequireOk(ScanNamespace(&backend, ScanOptions{}));
  SourceReader reader(&backend, ns.get(), 16);
  TieringConfig config;
  config.ram = 50000;
  config.dirs.push_back({tier_dir.root(), 1 << 20});
  auto store = RequireOk(Engine::Open(config, ns.get(), &reader, 0));
  store->Start();
  FsParts parts;
  parts.ns = ns.get();
  parts.reader = &reader;
  parts.engine = store.get();
  parts.source = &backend.counters();
  FsContext ctx(std::move(parts));
  std::vector<char> scratch(1 << 16);
  for (int i = 0; i < 6; ++i) {
    TierRead out;
    REQUIRE(store->read_path().Read(*ns->Resolve(fmt::format("f{}", i)), 0, 30000, scratch.data(),
                                    &out) == 20000 + i);
    ctx.requests().read_latency.Record(10 * static_cast<uint64_t>(i));
  }
  store->Shutdown();

  JsonCounterWriter json;
  PrometheusCounterWriter prometheus;
  TeeVisitor tee(&json, &prometheus);
  MountStatsParts figures;
  figures.fs = &ctx;
  figures.ns = ns.get();
  figures.source = &backend.counters();
  figures.reader = &reader;
  figures.engine = store.get();
  MountStats(std::move(figures)).VisitCounters(tee);
  const std::string json_text = json.Finish();
  const std::string prom_text = prometheus.Finish();

  INFO(json_text);
  JsonValue root = RequireOk(ParseJson(json_text));
  Samples from_json;
  std::vector<std::string> words;
  Flatten("tierfs", root, "", &from_json, &words);

  Samples from_prom;
  std::map<std::string, std::string> types;
  std::string info;
  std::istringstream lines(prom_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      types[name] = type;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    // NAME[{LABELS}] VALUE (no <regex>: GCC 12 warns falsely inside it under ASan).
    INFO(line);
    const size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    std::string head = line.substr(0, space), value_text = line.substr(space + 1);
    std::string name = head, labels;
    if (size_t brace = head.find('{'); brace != std::string::npos) {
      REQUIRE(head.back() == '}');
      name = head.substr(0, brace);
      labels = head.substr(brace + 1, head.size() - brace - 2);
    }
    REQUIRE(!name.empty());
    REQUIRE(name.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:") ==
            std::string::npos);
    if (name == "tierfs_info") {
      info = labels;
      continue;
    }
    if (name.find("_seconds_bucket") != std::string::npos ||
        name.find("_seconds_sum") != std::string::npos) {
      continue;
    }
    double value = std::stod(value_text);
    if (types[name] == "counter") name = name.substr(0, name.size() - 6);  // "_total"
    from_prom[{name, labels}] = value;
  }
  INFO(prom_text);
  CHECK(from_json.size() > 60);
  CHECK(from_json == from_prom);
  // Counters end in _total, and only counters.
  for (const auto& [name, type] : types) {
    CHECK((type == "counter") == (name.size() > 6 && name.substr(name.size() - 6) == "_total"));
  }
  // The words are tierfs_info's labels (the free-text notes aside).
  for (const auto& w : words) {
    if (w == "prefetch_autotune_last" || w == "passthrough_why_not") continue;
    CHECK(info.find(w + "=\"") != std::string::npos);
  }
  CHECK(info.find("version=\"") == 0);
  // And the walk saw what happened: reads from SOURCE and promotions.
  CHECK(from_json[{"tierfs_promotions_done", ""}] >= 2);
  CHECK(from_json[{"tierfs_requests_read_latency_seconds_count", ""}] == 6);
}

}  // namespace
}  // namespace tierfs
