// tierfs stat: a human summary of `.tierfs/stats` (or the raw JSON).
// Sections the daemon does not report (an older version, no tiers) are
// omitted or marked, never an error.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "prefetch/planners/stage_planner.h"
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

constexpr size_t kWidth = 100;  // no line longer, but for a single word that is
constexpr int kLabel = 11;      // the label column, then a space

// `text` after `label`, wrapped at spaces to kWidth columns (a number kept
// with its unit), the further lines indented under the text.
void Line(const char* label, const std::string& text) {
  const char* shown = label;
  for (const std::string& line : WrapWords(text, kWidth - kLabel - 1)) {
    std::printf("%-*s %s\n", kLabel, shown, line.c_str());
    shown = "";
  }
}

// The "peers" group (a mount with -o peers=): how many are connected (on
// first need), which are taken for gone, what moved between the nodes, and
// what fell back to SOURCE. Nothing without peers.
void PrintPeers(const JsonValue& s) {
  const JsonValue* p = s.Member("peers");
  if (p == nullptr || !p->is_object()) return;
  std::string gone;
  if (const JsonValue* remote = p->Member("remote"); remote && remote->is_array()) {
    for (const JsonValue& r : remote->items()) {
      const JsonValue* dead = r.Member("dead");
      if (dead != nullptr && dead->type() == JsonValue::Type::kBool && dead->boolean()) {
        gone += (gone.empty() ? "" : ", ") + r.String("name", "?");
      }
    }
  }
  Line("peers", fmt::format("'{}' of {} nodes, {} connected{}", p->String("self", "?"),
                            Grouped(p->Uint("size")), Grouped(p->Uint("up")),
                            gone.empty() ? "" : fmt::format(" (taken for gone: {})", gone)));
  Line("", fmt::format("fetched {} in {} requests (SOURCE reads saved), served {} in {}, "
                       "{} fell back to SOURCE",
                       HumanBytes(p->Uint("fetched_bytes")), Grouped(p->Uint("fetched_chunks")),
                       HumanBytes(p->Uint("served_bytes")), Grouped(p->Uint("served_chunks")),
                       Grouped(p->Uint("source_fallbacks"))));
}

// Each tier by where it is (RAM, or its directory): how full, its hits.
void PrintTiers(const JsonValue& stats) {
  const JsonValue* tiers = stats.Member("tiers");
  if (!tiers || !tiers->is_array() || tiers->items().empty()) {
    Line("tiers",
         "none: a mirror only, every read goes to SOURCE (mount with -o ram=SIZE or "
         "tier=PATH:SIZE to keep copies)");
    return;
  }
  uint64_t pieces = ReadPieces(stats);
  const char* label = "tiers";
  for (const JsonValue& t : tiers->items()) {
    uint64_t budget = t.Uint("budget"), limit = t.Uint("limit", budget), used = t.Uint("used");
    const std::string where = TierLabel(t);
    std::string room = fmt::format("{} of {} used ({})", HumanBytes(used), HumanBytes(limit),
                                   Percent(used, limit));
    if (limit < budget)
      room += fmt::format(" [budget {}, lowered after ENOSPC]", HumanBytes(budget));
    Line(label, fmt::format("{}: {}, {} hits ({} of reads), {} served", where, room,
                            Grouped(t.Uint("hits")), Percent(t.Uint("hits"), pieces),
                            HumanBytes(t.Uint("bytes_served"))));
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
// `window`: the read-ahead window applies (order mode).
void Autotune(const JsonValue& a, bool window) {
  auto yes = [&a](const char* key) {
    const JsonValue* v = a.Member(key);
    return v != nullptr && v->type() == JsonValue::Type::kBool && v->boolean();
  };
  std::string tuned = fmt::format("{} SOURCE reads at once ({})", Grouped(a.Uint("parallelism")),
                                  yes("tune_parallelism") ? "tuned" : "fixed");
  if (window) {
    tuned += fmt::format(", read-ahead window {}", yes("tune_lookahead") ? "tuned" : "fixed");
  }
  Line("  autotune", tuned);
  std::string seen = fmt::format(
      "SOURCE latency {:.1f} ms (best {:.1f} ms), {} backoffs, {} "
      "decisions",
      a.Number("source_latency_ms"), a.Number("best_source_latency_ms"),
      Grouped(a.Uint("backoffs")), Grouped(a.Uint("decisions")));
  if (std::string last = a.String("last"); !last.empty()) seen += "; last: " + last;
  Line("", seen);
}

// What each prefetch mode does, for the mode line.
std::string ModeMeaning(const std::string& mode) {
  if (mode == "on-access") return "a file is copied into the tiers when it is first read";
  if (mode == "stage-in") return "every file is copied into the tiers now, in the background";
  if (mode == "order") return "files are copied just ahead of the order declared by hints";
  return "";
}

// Only what applies to the mount: nothing without tiers; the order's lines
// in order mode (or, if hints were declared in another mode, that they are
// not followed); staging once asked for; the tuner's read-ahead window in
// order mode.
void PrintPrefetch(const JsonValue& stats, const std::string& mount) {
  const JsonValue* p = stats.Member("prefetch");
  const JsonValue* tiers = stats.Member("tiers");
  if (!tiers || !tiers->is_array() || tiers->items().empty()) return;
  if (!p || !p->is_object()) {
    Line("prefetch", "not reported (a daemon without prefetch modes)");
    return;
  }
  const std::string mode = p->String("mode", "?");
  const std::string meaning = ModeMeaning(mode);
  Line("prefetch", meaning.empty() ? "mode " + mode : fmt::format("mode {}: {}", mode, meaning));
  if (const JsonValue* o = p->Member("order"); o && o->is_object()) {
    uint64_t declared = o->Uint("declared"), position = o->Uint("position");
    const uint64_t directives = o->Uint("directive_lines");
    const uint64_t paths = o->Uint("valid_lines") - std::min(o->Uint("valid_lines"), directives);
    std::string hints =
        fmt::format("hints: {}{} accepted, {} rejected{}", Counted(paths, "path"),
                    directives == 0 ? "" : " and " + Counted(directives, "directive"),
                    Counted(o->Uint("rejected_lines"), "line"), LastRejected(*o));
    if (o->Uint("dropped") > 0) {
      hints += fmt::format("; {} dropped (the order held too many)",
                           Counted(o->Uint("dropped"), "declared file"));
    }
    if (mode == "order") {
      Line("  order", fmt::format("readers past {} of {} ({})", Grouped(position),
                                  Counted(declared, "declared file"), Percent(position, declared)));
      Line("", fmt::format("read ahead: up to {}, {} resident ahead of the readers",
                           Counted(o->Uint("lookahead"), "file"), Grouped(o->Uint("lead"))));
      Line("", hints);
    } else if (paths > 0 || declared > 0) {
      Line("  order", fmt::format("{}, not followed in mode {}; to follow them: "
                                  "echo order > {}/.tierfs/prefetch",
                                  Counted(declared, "declared file"), mode, mount));
      Line("", hints);
    }
  }
  if (const JsonValue* s = p->Member("stage");
      s && s->is_object() && (mode == "stage-in" || s->Uint("requested_files") > 0)) {
    uint64_t files = s->Uint("requested_files"), bytes = s->Uint("requested_bytes");
    Line("  stage",
         fmt::format("{} of {} asked for {} resident ({} of {})", Grouped(s->Uint("done_files")),
                     Counted(files, "file"), s->Uint("done_files") == 1 ? "is" : "are",
                     HumanBytes(s->Uint("done_bytes")), HumanBytes(bytes)));
    const uint64_t not_resident =
        s->Member("not_resident_files") ? s->Uint("not_resident_files") : s->Uint("failed_files");
    Line("", fmt::format("{} tried and not resident, {} queued; {} rejected{}",
                         Grouped(not_resident), Grouped(s->Uint("queued_files")),
                         Counted(s->Uint("rejected_lines"), "path"), LastRejected(*s)));
    if (s->Member("asked_files") && s->Uint("failed_files") > 0) {
      // The counters `tierfs stage` reports from: asks ended not resident, by reason.
      std::string why;
      for (size_t f = 0; f < StagePlanner::kFailures; ++f) {
        const auto failure = static_cast<StagePlanner::Failure>(f);
        if (uint64_t n =
                s->Uint(fmt::format("failed_{}_files", StagePlanner::FailureName(failure)))) {
          why += fmt::format("{}{} {}", why.empty() ? "" : "; ", Grouped(n),
                             StagePlanner::FailureShort(failure));
        }
      }
      Line("", fmt::format("asks failed since the mount: {}", why));
    }
  }
  if (const JsonValue* a = p->Member("autotune"); a && a->is_object() && !a->members().empty()) {
    Autotune(*a, mode == "order");
  }
}

}  // namespace

uint64_t ReadPieces(const JsonValue& stats) {
  return stats.Uint("reads.from_tiers") + stats.Uint("reads.after_promotion") +
         stats.Uint("reads.early") + stats.Uint("reads.from_copy") +
         stats.Uint("reads.from_source") + stats.Uint("reads.from_peers");
}

std::string TierLabel(const JsonValue& tier) {
  if (tier.String("kind") == "memory") return "RAM";
  std::string path = tier.String("path");
  return path.empty() ? tier.String("name", "?") : path;
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
  Line("namespace", fmt::format("{}, {}, {}", Counted(s.Uint("namespace.files"), "file"),
                                Counted(s.Uint("namespace.directories"), "directory"),
                                HumanBytes(s.Uint("namespace.file_bytes"))));
  PrintTiers(s);
  if (s.Member("reads")) {
    const uint64_t pieces = ReadPieces(s);
    auto part = [pieces](uint64_t n) {
      return fmt::format("{} ({})", Grouped(n), Percent(n, pieces));
    };
    Line("reads", fmt::format("{} parts of reads served (a read is one part per chunk it spans):",
                              Grouped(pieces)));
    if (s.Member("tiers") && !s.Member("tiers")->items().empty()) {
      Line("", part(s.Uint("reads.from_tiers")) + " from a tier, resident when asked (hits)");
      Line("", part(s.Uint("reads.after_promotion")) + " from a tier once their miss was promoted");
      Line("", part(s.Uint("reads.early")) + " from copies still being made from SOURCE");
      Line("", part(s.Uint("reads.from_copy")) +
                   " from the copy their reader had just made from SOURCE");
    }
    Line("", fmt::format(
                 "{} directly from SOURCE ({}){}", part(s.Uint("reads.from_source")),
                 HumanBytes(s.Uint("reads.source_bytes")),
                 s.Member("tiers") && !s.Member("tiers")->items().empty()
                     ? fmt::format("; {} waited for a promotion", Grouped(s.Uint("reads.waits")))
                     : ""));
    if (const uint64_t from_peers = s.Uint("reads.from_peers"); from_peers > 0) {
      Line("", part(from_peers) + " from other nodes");
    }
  }
  Line("page cache", "not seen: reads the kernel serves from its page cache never reach tierfs,");
  Line("", "so no figure here counts them (an epoch read again from memory adds no reads here)");
  if (const JsonValue* pt = s.Member("passthrough"); pt && pt->is_object()) {
    const JsonValue* active = pt->Member("active");
    const bool huge = pt->String("memory_files", "") == "tmpfs with huge pages" ||
                      pt->String("shmem_huge_pages", "never") != "never";
    // What a warm read costs on this node, in one line.
    Line("warm reads",
         active && active->boolean()
             ? fmt::format("at memory speed: files whole in a tier are read by the kernel from "
                           "its file (passthrough on), {}",
                           huge ? "in huge pages"
                                : "in 4 KiB pages (huge pages off for shared memory: random "
                                  "reads of large files slower, see OPERATIONS)")
             : fmt::format("through the daemon and the page cache (passthrough off: {})",
                           pt->String("why_not", "?")));
    if (active && active->boolean()) {
      Line("passthrough",
           fmt::format("{} opens read by the kernel from tier files ({}; {} of them without a new "
                       "registration), {} opened through the daemon",
                       Grouped(pt->Uint("opens")), HumanBytes(pt->Uint("opened_bytes")),
                       Grouped(pt->Uint("reused_registrations")),
                       Grouped(pt->Uint("cached_opens"))));
    }
  }
  // Every metadata operation since the daemon started: the mount's line
  // counts the scan's alone; statfs (df) and access checks come later.
  Line("SOURCE",
       fmt::format(
           "{} read in {}, {}, {}; {} since the start ({} stat, {} list, {} "
           "readlink, {} statfs, {} access)",
           HumanBytes(s.Uint("source.read_bytes")), Counted(s.Uint("source.reads"), "read"),
           Counted(s.Uint("source.opens"), "open"), Counted(s.Uint("source.errors"), "error"),
           Counted(s.Uint("source.meta_ops"), "metadata op"), Grouped(s.Uint("source.stats")),
           Grouped(s.Uint("source.lists")), Grouped(s.Uint("source.readlinks")),
           Grouped(s.Uint("source.statfs")), Grouped(s.Uint("source.access"))));
  Line("requests",
       fmt::format("{} ({}) from the kernel, {}, {}", Counted(s.Uint("requests.read"), "read"),
                   HumanBytes(s.Uint("requests.read_bytes")),
                   Counted(s.Uint("requests.lookup"), "lookup"),
                   Counted(s.Uint("requests.errors"), "error")));
  const JsonValue* tiers = s.Member("tiers");
  const bool tiered = tiers && tiers->is_array() && !tiers->items().empty();
  if (const JsonValue* p = s.Member("promotions"); tiered && p && p->is_object()) {
    // Counts of chunks (of up to chunk_size bytes), and of files where said.
    Line("promotions", fmt::format("{} copied into the tiers ({}), {} failed, {} running",
                                   Counted(p->Uint("done"), "chunk"), HumanBytes(p->Uint("bytes")),
                                   Grouped(p->Uint("failed")), Grouped(p->Uint("running"))));
    Line("",
         fmt::format("waiting for a thread: {} for reads, {} to read ahead, {} in the "
                     "background",
                     Grouped(p->Uint("queued_foreground")), Grouped(p->Uint("queued_lookahead")),
                     Grouped(p->Uint("queued_background"))));
    Line("", fmt::format("{} refused (queue full), {} fit in no tier, {} evicted; {} of {} "
                         "fully resident",
                         Grouped(p->Uint("rejected")), Grouped(p->Uint("no_room")),
                         Grouped(p->Uint("evicted")), Grouped(p->Uint("files_resident")),
                         Counted(s.Uint("namespace.files"), "file")));
  }
  PrintPrefetch(s, mount.mount());
  PrintPeers(s);
  return 0;
}

}  // namespace tierfs::cli
