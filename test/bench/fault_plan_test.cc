// pfs-sim fault injection: fractions match, named files always fail, and the
// decisions depend only on the seed, path and offset.
#include "fault_plan.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>

using pfssim::FaultPlan;
using pfssim::SimParams;

namespace {

int CountFailures(const FaultPlan& plan, int reads) {
  int failed = 0;
  for (int i = 0; i < reads; ++i) {
    failed += plan.FailsRead(fmt::format("dir/file{}", i % 97), static_cast<uint64_t>(i) * 4096);
  }
  return failed;
}

}  // namespace

TEST_CASE("fail_rate fails that fraction of reads", "[pfs-sim][faults]") {
  SimParams p;
  p.fail_rate = 0.1;
  // 20000 draws: binomial sd is ~42, so +-300 is > 7 sd.
  CHECK(CountFailures(FaultPlan(p), 20000) == Approx(2000).margin(300));
  p.fail_rate = 0;
  CHECK(CountFailures(FaultPlan(p), 20000) == 0);
  p.fail_rate = 1;
  CHECK(CountFailures(FaultPlan(p), 2000) == 2000);
}

TEST_CASE("named files fail every read, others none", "[pfs-sim][faults]") {
  SimParams p;
  p.fail_files = {"class1/bad.jpg"};
  FaultPlan plan(p);
  CHECK(plan.FailsRead("class1/bad.jpg", 0));
  CHECK(plan.FailsRead("class1/bad.jpg", 1 << 20));
  CHECK_FALSE(plan.FailsRead("class1/good.jpg", 0));
  CHECK_FALSE(plan.FailsRead("bad.jpg", 0));
}

TEST_CASE("named directories fail every opendir, '.' the root", "[pfs-sim][faults]") {
  SimParams p;
  REQUIRE(pfssim::SetParam(p, "fail_dirs", ".:class1").empty());
  FaultPlan plan(p);
  CHECK(plan.FailsOpendir(""));
  CHECK(plan.FailsOpendir("class1"));
  CHECK_FALSE(plan.FailsOpendir("class2"));
  CHECK_FALSE(plan.FailsRead("class1", 0));
}

TEST_CASE("fault decisions are deterministic per seed", "[pfs-sim][faults]") {
  SimParams p;
  p.fail_rate = 0.3;
  p.stall_rate = 0.3;
  FaultPlan a(p), b(p);
  p.seed = 2;
  FaultPlan other(p);
  int same = 0, differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string path = fmt::format("f{}", i);
    REQUIRE(a.FailsRead(path, 0) == b.FailsRead(path, 0));
    REQUIRE(a.StallsRead(path, 0) == b.StallsRead(path, 0));
    (a.FailsRead(path, 0) == other.FailsRead(path, 0) ? same : differ)++;
  }
  CHECK(differ > 100);  // another seed picks other reads
}

TEST_CASE("stalls and failures are drawn independently", "[pfs-sim][faults]") {
  SimParams p;
  p.fail_rate = 0.5;
  p.stall_rate = 0.5;
  FaultPlan plan(p);
  int both = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string path = fmt::format("f{}", i);
    both += plan.FailsRead(path, 0) && plan.StallsRead(path, 0);
  }
  CHECK(both == Approx(1000).margin(200));  // 0.25 of 4000 if independent
}
