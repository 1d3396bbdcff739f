#include "epoch_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t SinceNs(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// Hand-off between workers (which fill batches) and the trainer (which
// consumes them in order). Workers may run at most `depth` batches ahead.
class BatchBoard {
 public:
  BatchBoard(size_t batches, size_t depth) : done_(batches, false), depth_(depth) {}

  // Claims the next batch to read; false when all are claimed.
  bool Claim(size_t& batch) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return next_ >= done_.size() || next_ < consumed_ + depth_; });
    if (next_ >= done_.size()) return false;
    batch = next_++;
    return true;
  }
  void MarkDone(size_t batch) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[batch] = true;
    changed_.notify_all();
  }
  // Trainer: waits until `batch` is read, then frees its prefetch slot.
  void Consume(size_t batch) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return done_[batch]; });
    consumed_ = batch + 1;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;  // guards everything below
  std::condition_variable changed_;
  std::vector<bool> done_;
  size_t next_ = 0;
  size_t consumed_ = 0;
  const size_t depth_;
};

}  // namespace

EpochResult RunEpoch(const std::vector<std::string>& files, const std::vector<size_t>& order,
                     const EpochConfig& config, const FileReader& read) {
  const size_t batch_size = std::max(1u, config.batch);
  const size_t batches = (order.size() + batch_size - 1) / batch_size;
  const unsigned workers = std::max(1u, config.workers);
  const size_t depth = config.prefetch_batches ? config.prefetch_batches : 2 * workers;
  BatchBoard board(batches, depth);

  EpochResult result;
  result.reads_per_file.assign(files.size(), 0);
  std::mutex result_mu;  // guards result while workers merge into it
  const Clock::time_point start = Clock::now();

  auto worker = [&] {
    EpochResult mine;
    std::vector<std::pair<size_t, int64_t>> reads;  // (file index, latency)
    size_t b;
    while (board.Claim(b)) {
      const size_t end = std::min(order.size(), (b + 1) * batch_size);
      for (size_t i = b * batch_size; i < end; ++i) {
        const Clock::time_point t0 = Clock::now();
        const int64_t n = read(files[order[i]]);
        reads.emplace_back(order[i], SinceNs(t0));
        if (n < 0) {
          ++mine.errors;
        } else {
          ++mine.files_ok;
          mine.bytes += static_cast<uint64_t>(n);
        }
      }
      board.MarkDone(b);
    }
    std::lock_guard<std::mutex> lock(result_mu);
    result.files_ok += mine.files_ok;
    result.errors += mine.errors;
    result.bytes += mine.bytes;
    for (const auto& [index, latency] : reads) {
      ++result.reads_per_file[index];
      result.latencies_ns.push_back(latency);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) threads.emplace_back(worker);
  const auto compute = std::chrono::duration<double, std::milli>(config.compute_ms);
  for (size_t b = 0; b < batches; ++b) {
    board.Consume(b);
    if (config.compute_ms > 0) std::this_thread::sleep_for(compute);
  }
  for (std::thread& t : threads) t.join();
  result.wall_s = static_cast<double>(SinceNs(start)) / 1e9;
  return result;
}

double QuantileMs(std::vector<int64_t> values_ns, double q) {
  if (values_ns.empty()) return 0;
  const size_t k = std::min(values_ns.size() - 1,
                            static_cast<size_t>(q * static_cast<double>(values_ns.size())));
  std::nth_element(values_ns.begin(), values_ns.begin() + static_cast<ptrdiff_t>(k),
                   values_ns.end());
  return static_cast<double>(values_ns[k]) / 1e6;
}

}  // namespace bench
