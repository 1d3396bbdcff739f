// ParallelFor: a one-shot fan-out over `count` items by up to `threads`
// threads, the caller's thread one of them; returns when every item is done.
// For work that is over in one go (a stat per directory or per file of a
// saved index); long-lived work with a queue and lanes goes to Executor
// (executor.h).
#pragma once

#include <cstddef>
#include <functional>

namespace tierfs {

// Calls `item(i)` once for each i in [0, count), from at most
// min(threads, count) threads (at least one: the caller's). `item` must be
// safe to call concurrently for different i.
void ParallelFor(size_t count, unsigned threads, const std::function<void(size_t)>& item);

}  // namespace tierfs
