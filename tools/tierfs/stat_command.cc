// tierfs stat: a human summary of `.tierfs/stats` (or the raw JSON).
// Sections the daemon does not report (an older version, no tiers) are
// omitted or marked, never an error.
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "tools/tierfs/commands.h"

namespace tierfs::cli {
namespace {

std::string Uptime(double seconds) {
  auto s = static_cast<uint64_t>(seconds);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m {:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h {:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d {:02}h", s / 86400, s % 86400 / 3600);
}

void Line(const char* label, const std::string& text) {
  std::printf("%-11s %s\n", label, text.c_str());
}

// The "peers" group (a mount with -o peers=): who is up, what moved between
// the nodes, and what fell back to SOURCE. Nothing without peers.
void PrintPeers(const JsonValue& s) {
  const JsonValue* p = s.Member("peers");
  if (p == nullptr || !p->is_object()) return;
  std::string down;
  if (const JsonValue* remote = p->Member("remote"); remote && remote->is_array()) {
    for (const JsonValue& r : remote->items()) {
      const JsonValue* up = r.Member("up");
      if (up != nullptr && up->type() == JsonValue::Type::kBool && !up->boolean()) {
        down += (down.empty() ? "" : ", ") + r.String("name", "?");
      }
    }
  }
  Line("peers",
       fmt::format("'{}' of {} nodes, {} up{}", p->String("self", "?"), Grouped(p->Uint("size")),
                   Grouped(p->Uint("up")), down.empty() ? "" : fmt::format(" (down: {})", down)));
  Line("", fmt::format("fetched {} in {} requests (SOURCE reads saved), served {} in {}, "
                       "{} fell back to SOURCE",
                       HumanBytes(p->Uint("fetched_bytes")), Grouped(p->Uint("fetched_chunks")),
                       HumanBytes(p->Uint("served_bytes")), Grouped(p->Uint("served_chunks")),
                       Grouped(p->Uint("source_fallbacks"))));
}

void PrintTiers(const JsonValue& stats) {
  const JsonValue* tiers = stats.Member("tiers");
  if (!tiers || !tiers->is_array() || tiers->items().empty()) {
    Line("tiers", "none (every read goes to SOURCE; mount with -o ram=SIZE or tier=PATH:SIZE)");
    return;
  }
  uint64_t pieces = ReadPieces(stats);
  const char* label = "tiers";
  for (const JsonValue& t : tiers->items()) {
    uint64_t budget = t.Uint("budget"), limit = t.Uint("limit", budget), used = t.Uint("used");
    std::string room =
        fmt::format("{} / {} ({})", HumanBytes(used), HumanBytes(limit), Percent(used, limit));
    if (limit < budget)
      room += fmt::format(" [budget {}, lowered after ENOSPC]", HumanBytes(budget));
    Line(label,
         fmt::format("{:<8} {:<9} {}  hits {} ({} of reads), served {}", t.String("name", "?"),
                     t.String("kind", "?"), room, Grouped(t.Uint("hits")),
                     Percent(t.Uint("hits"), pieces), HumanBytes(t.Uint("bytes_served"))));
    label = "";
  }
}

// " (last: 'LINE': REASON)" for a control file's group with a rejected line.
std::string LastRejected(const JsonValue& group) {
  const JsonValue* last = group.Member("last_rejected");
  if (last == nullptr || !last->is_object()) return "";
  return fmt::format(" (last: '{}': {})", last->String("line"), last->String("reason"));
}

// The "autotune" group in words: what is tuned, where it stands, why.
std::string Autotune(const JsonValue& a) {
  auto yes = [&a](const char* key) {
    const JsonValue* v = a.Member(key);
    return v != nullptr && v->type() == JsonValue::Type::kBool && v->boolean();
  };
  std::string out = fmt::format(
      "{} SOURCE reads at once ({}), look-ahead window {}; SOURCE latency {:.1f} ms (best "
      "{:.1f} ms), {} backoffs, {} decisions",
      Grouped(a.Uint("parallelism")), yes("tune_parallelism") ? "tuned" : "fixed",
      yes("tune_lookahead") ? "tuned" : "fixed", a.Number("source_latency_ms"),
      a.Number("best_source_latency_ms"), Grouped(a.Uint("backoffs")),
      Grouped(a.Uint("decisions")));
  if (std::string last = a.String("last"); !last.empty()) out += "; last: " + last;
  return out;
}

void PrintPrefetch(const JsonValue& stats) {
  const JsonValue* p = stats.Member("prefetch");
  if (!p || !p->is_object()) {
    Line("prefetch", "not reported (a daemon without prefetch modes)");
    return;
  }
  Line("prefetch", fmt::format("mode {}", p->String("mode", "?")));
  if (const JsonValue* o = p->Member("order"); o && o->is_object()) {
    uint64_t declared = o->Uint("declared"), position = o->Uint("position");
    Line("  order", fmt::format("readers past {} of {} declared files ({}); look-ahead window {} "
                                "files, {} resident ahead of the readers",
                                Grouped(position), Grouped(declared), Percent(position, declared),
                                Grouped(o->Uint("lookahead")), Grouped(o->Uint("lead"))));
    std::string dropped;
    if (const JsonValue* d = o->Member("dropped"); d && d->is_number()) {
      dropped = fmt::format(", {} declared files dropped (the order held too many)",
                            Grouped(o->Uint("dropped")));
    }
    Line("", fmt::format("hint lines accepted {}, rejected {}{}{}", Grouped(o->Uint("valid_lines")),
                         Grouped(o->Uint("rejected_lines")), LastRejected(*o), dropped));
  }
  if (const JsonValue* s = p->Member("stage"); s && s->is_object()) {
    uint64_t files = s->Uint("requested_files"), bytes = s->Uint("requested_bytes");
    Line("  stage", fmt::format("{} of {} requested files staged ({} of {}), {} failed, {} "
                                "queued; {} paths rejected{}",
                                Grouped(s->Uint("done_files")), Grouped(files),
                                HumanBytes(s->Uint("done_bytes")), HumanBytes(bytes),
                                Grouped(s->Uint("failed_files")), Grouped(s->Uint("queued_files")),
                                Grouped(s->Uint("rejected_lines")), LastRejected(*s)));
  }
  if (const JsonValue* a = p->Member("autotune"); a && a->is_object() && !a->members().empty()) {
    Line("  autotune", Autotune(*a));
  }
}

}  // namespace

uint64_t ReadPieces(const JsonValue& stats) {
  return stats.Uint("reads.from_tiers") + stats.Uint("reads.after_promotion") +
         stats.Uint("reads.early") + stats.Uint("reads.from_copy") +
         stats.Uint("reads.from_source") + stats.Uint("reads.from_peers");
}

int RunStat(const MountControl& mount, bool json) {
  if (json) {
    std::string text = mount.ReadStatsText();
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  JsonValue s = mount.ReadStats();
  std::printf("tierfs %s at %s, up %s\n", s.String("version", "?").c_str(), mount.mount().c_str(),
              Uptime(s.Number("uptime_seconds")).c_str());
  Line("namespace", fmt::format("{} files, {} directories, {}", Grouped(s.Uint("namespace.files")),
                                Grouped(s.Uint("namespace.directories")),
                                HumanBytes(s.Uint("namespace.file_bytes"))));
  PrintTiers(s);
  if (s.Member("reads")) {
    const uint64_t early = s.Uint("reads.early");
    const uint64_t from_copy = s.Uint("reads.from_copy");
    const uint64_t from_tiers = s.Uint("reads.from_tiers");
    const uint64_t promoted = s.Uint("reads.after_promotion");
    const uint64_t from_peers = s.Uint("reads.from_peers");
    const uint64_t pieces = ReadPieces(s);
    Line("reads",
         fmt::format("{} served from tiers ({}), {} from the tier once their miss was promoted "
                     "({}), {} from copies still being made from SOURCE "
                     "({}), {} from the copy their reader had just made from SOURCE ({}), {} "
                     "directly from SOURCE ({}), {} waited for a promotion{}",
                     Grouped(from_tiers), Percent(from_tiers, pieces), Grouped(promoted),
                     Percent(promoted, pieces), Grouped(early), Percent(early, pieces),
                     Grouped(from_copy), Percent(from_copy, pieces),
                     Grouped(s.Uint("reads.from_source")), HumanBytes(s.Uint("reads.source_bytes")),
                     Grouped(s.Uint("reads.waits")),
                     from_peers == 0 ? "" : fmt::format(", {} from peers", Grouped(from_peers))));
  }
  if (const JsonValue* pt = s.Member("passthrough"); pt && pt->is_object()) {
    const JsonValue* active = pt->Member("active");
    Line("passthrough",
         active && active->boolean()
             ? fmt::format("on: {} opens read by the kernel from tier files ({}), {} opened "
                           "through the daemon{}",
                           Grouped(pt->Uint("opens")), HumanBytes(pt->Uint("opened_bytes")),
                           Grouped(pt->Uint("cached_opens")),
                           pt->String("shmem_huge_pages", "") == "never"
                               ? "; huge pages are off for shared memory, so large files in "
                                 "the RAM tier read slower (shmem_enabled: see OPERATIONS)"
                               : "")
             : fmt::format("off ({})", pt->String("why_not", "?")));
  }
  Line("SOURCE", fmt::format("{} read in {} reads, {} opens, {} metadata ops, {} errors",
                             HumanBytes(s.Uint("source.read_bytes")),
                             Grouped(s.Uint("source.reads")), Grouped(s.Uint("source.opens")),
                             Grouped(s.Uint("source.meta_ops")), Grouped(s.Uint("source.errors"))));
  Line("requests",
       fmt::format("{} reads ({}) from the kernel, {} lookups, {} errors",
                   Grouped(s.Uint("requests.read")), HumanBytes(s.Uint("requests.read_bytes")),
                   Grouped(s.Uint("requests.lookup")), Grouped(s.Uint("requests.errors"))));
  if (const JsonValue* p = s.Member("promotions"); p && p->is_object()) {
    // Counts of chunks (of up to chunk_size bytes), and of files where said.
    Line("promotions",
         fmt::format("{} chunks copied into the tiers ({}), {} failed, {} running; queued {} "
                     "foreground (being read), {} look-ahead, {} background",
                     Grouped(p->Uint("done")), HumanBytes(p->Uint("bytes")),
                     Grouped(p->Uint("failed")), Grouped(p->Uint("running")),
                     Grouped(p->Uint("queued_foreground")), Grouped(p->Uint("queued_lookahead")),
                     Grouped(p->Uint("queued_background"))));
    Line("", fmt::format("{} refused (queue full), {} fit in no tier, {} evicted; {} of {} files "
                         "fully resident",
                         Grouped(p->Uint("rejected")), Grouped(p->Uint("no_room")),
                         Grouped(p->Uint("evicted")), Grouped(p->Uint("files_resident")),
                         Grouped(s.Uint("namespace.files"))));
  }
  PrintPrefetch(s);
  PrintPeers(s);
  return 0;
}

}  // namespace tierfs::cli
