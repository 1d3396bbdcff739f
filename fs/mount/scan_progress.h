// ScanProgress: while SOURCE is scanned (by a mount or `tierfs index`), one
// line of stderr redrawn every 250 ms on a terminal: seconds, directories
// listed (and taken from an index), entries and their rate, metadata
// operations. Nothing when stderr is not a terminal; the line is erased when
// the scan ends, before its figures are printed.
#pragma once

#include <string>
#include <thread>

#include "tiering/base/mutex.h"
#include "tiering/namespace/namespace.h"

namespace tierfs {

class ScanProgress {
 public:
  // Starts drawing `scan`'s figures, led by `label` ("scanning SOURCE"), if
  // `enabled` and stderr is a terminal.
  ScanProgress(const ScanReport* scan, std::string label, bool enabled = true);
  ~ScanProgress();
  ScanProgress(const ScanProgress&) = delete;
  ScanProgress& operator=(const ScanProgress&) = delete;

  // The line for `seconds` into the scan (at most 100 columns for counts
  // below a billion and a short label).
  static std::string Line(const std::string& label, const ScanReport& scan, double seconds);

 private:
  void Run();

  const ScanReport* const scan_;
  const std::string label_;
  Mutex mu_;  // guards stop_; a leaf lock
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // not started when nothing is drawn
};

}  // namespace tierfs
