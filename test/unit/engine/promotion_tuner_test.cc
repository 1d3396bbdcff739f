// PromotionTuner over a real promotion stack and a SOURCE whose reads take a
// set time: it raises parallelism while that pays, and backs off when
// SOURCE's latency climbs.
#include "tiering/engine/promotion_tuner.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <thread>

#include "fault_backend.h"
#include "require_ok.h"
#include "temp_tree.h"
#include "tiering/engine/promoter.h"

namespace tierfs {
namespace {

using namespace std::chrono_literals;

TEST_CASE("PromotionTuner raises parallelism that pays and backs off when SOURCE slows",
          "[promotion_tuner]") {
  testing::TempTree tree;
  const size_t kFiles = 3000;
  for (size_t i = 0; i < kFiles; ++i) tree.Write(fmt::format("f{}", i), std::string(16384, 'x'));
  auto faults = std::make_shared<testing::FaultBackend>(RequireOk(NewPosixBackend(tree.root())));
  auto ns = RequireOk(ScanNamespace(faults.get(), ScanOptions{}));
  SourceReader reader(faults.get(), ns.get(), 4096);
  faults->SetDelay(10ms);  // every SOURCE call: parallel reads all pay (no contention)
  auto catalog = std::make_unique<Catalog>(*ns, 1 << 20);
  auto policy = NewEvictionPolicy("first-fit", 1, catalog.get());
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(NewMemoryTier("ram", 1ull << 30));
  ChunkStore store(ns.get(), std::move(catalog), std::move(tiers), std::move(policy));
  Executor executor(32, 8192);
  ChunkSource source(&reader, 1 << 20);
  Promoter promoter(&store, &source, &executor);
  ReadPath read_path(ns.get(), &source, &store, &promoter);
  PromotionTuner tuner(&executor, &store, &read_path.counters(), &reader, true, 0);
  CHECK(executor.active_limit() == PromotionTuner::kStartParallel);
  for (size_t i = 0; i < kFiles; ++i) {
    promoter.Request(ChunkKey{*ns->Resolve(fmt::format("f{}", i)), 0}, Executor::Lane::kBackground);
  }
  executor.Start();
  auto period = [&] {
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(500ms);
    return tuner.Tune(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                      0, false);
  };
  unsigned most = 0;
  for (int i = 0; i < 3; ++i) {
    period();
    most = std::max(most, executor.active_limit());
  }
  CHECK(most >= 20);  // 8 -> 16 -> 32 while each doubling pays (one period to spare)
  // SOURCE now answers 8x slower (a loaded PFS): the tuner backs off.
  const unsigned before = executor.active_limit();
  faults->SetDelay(80ms);
  period();
  period();
  CHECK(executor.active_limit() < before);
  executor.Shutdown();
}

}  // namespace
}  // namespace tierfs
