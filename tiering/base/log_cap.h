// The log's bounds against a user who makes the daemon log: a cap on a log
// that is a regular file, and the counts of the lines left out (by the cap,
// and by sampling: log_limiter.h). Apart from log.h so that its every
// includer need not change with them.
#pragma once

#include <cstdint>

namespace tierfs {

// Caps what Log writes to a regular file (the log file of Log::UseFile, or
// stderr when it is redirected to one) at `bytes` in all, counting what the
// file held already: a line that would pass the cap is dropped and counted,
// and the first one dropped leaves one line saying so (if that fits).
// 0: no cap. Takes stderr's size now: call after any redirection of it; a
// later Log::UseFile keeps the cap and takes its file's size.
void SetLogFileCap(uint64_t bytes);

// Lines dropped by the cap, in this process.
uint64_t LogDroppedLines();

// Lines suppressed by sampling (LogLimiter), in this process.
uint64_t LogSuppressedLines();
void NoteLogSuppressed(uint64_t n);

}  // namespace tierfs
