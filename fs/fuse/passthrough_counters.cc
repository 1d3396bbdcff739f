// PassthroughOpens' counters: the passthrough group of the stats walk
// (.tierfs/stats, Prometheus), and the node's setting for huge pages in
// shared memory that governs the RAM tier's memfds.
#include <fstream>
#include <string>

#include "fs/fuse/passthrough.h"

namespace tierfs {
namespace {

// The administrator's setting for huge pages in shared memory, the
// bracketed word of shmem_enabled ("never", "advise", ...), or "" if this
// kernel has none. The RAM tier's memory files ask for them (advise): with
// "never", passthrough reads of large files copy from 4 KiB pages.
std::string ShmemHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string line;
  if (!std::getline(in, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close != std::string::npos && close > open
             ? line.substr(open + 1, close - open - 1)
             : "";
}

}  // namespace

void PassthroughOpens::VisitCounters(CounterVisitor& v) const {
  v.BeginGroup("passthrough");
  v.Flag("active", active(),
         {"1 if files wholly in one tier file are read by the kernel from that file (FUSE "
          "passthrough)."});
  v.Note("why_not", why_not());
  v.Text("shmem_huge_pages", ShmemHugePages(), "passthrough_shmem_huge_pages");
  v.Text("memory_files", memory_files_, "passthrough_memory_files");
  v.Counter("opens", passed_opens_.load(std::memory_order_relaxed),
            {"Opens answered in passthrough mode: their reads never reach the daemon."});
  v.Counter("opened_bytes", opened_bytes_.load(std::memory_order_relaxed),
            {"Sizes of the files opened in passthrough mode, added up at each open (the kernel "
             "reads them from the tier without the daemon: tier hits do not count them).",
             Unit::kBytes, "opened"});
  v.Counter("cached_opens", cached_opens_.load(std::memory_order_relaxed),
            {"Opens answered without passthrough (the file was not wholly in one tier file)."});
  v.Counter("busy", busy_.load(std::memory_order_relaxed),
            {"Opens of a resident file answered without passthrough because the file was open "
             "without it."});
  v.Counter("slow_registrations", slow_registrations_.load(std::memory_order_relaxed),
            {"Opens answered without passthrough because another open of the file was still "
             "registering its backing file after 1 s (a slow tier file open)."});
  v.Counter("cache_drops", cache_drops_.load(std::memory_order_relaxed),
            {"Files whose page cache in the mount was dropped because a tier file holds them "
             "(so their bytes are not held twice)."});
  v.Counter("register_failures", register_failed_.load(std::memory_order_relaxed),
            {"Backing files the kernel refused to register."});
  v.Gauge("cached_open_files", static_cast<double>(cached_now_.load(std::memory_order_relaxed)),
          {"Files open now without passthrough (not yet released by the kernel)."});
  v.Counter("registrations", registrations_.load(std::memory_order_relaxed),
            {"Backing files registered with the kernel (an open of the tier file and an ioctl "
             "each)."});
  v.Counter("reused_registrations", reused_.load(std::memory_order_relaxed),
            {"Passthrough opens that found their file's backing file registered still (no open "
             "of a tier file, no ioctl)."});
  v.Gauge("backing_files", static_cast<double>(backing_files_.load(std::memory_order_relaxed)),
          {"Backing files registered now: one per file open in passthrough mode, and those kept "
           "for closed files still whole in their tier."});
  v.EndGroup();
}

}  // namespace tierfs
