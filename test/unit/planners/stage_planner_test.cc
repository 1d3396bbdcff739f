// StagePlanner: what is asked to be staged, in which order, fed once, and
// the progress it reports.
#include "prefetch/planners/stage_planner.h"

#include <catch2/catch.hpp>
#include <map>

#include "fs/telemetry/counter_json.h"
#include "require_ok.h"
#include "scan_tree.h"
#include "tiering/base/json_value.h"

namespace tierfs {
namespace {

TEST_CASE("StagePlanner stages every file once, in namespace order", "[stage_planner]") {
  testing::TempTree tree;
  tree.Write("b", "bb");
  tree.Mkdir("d");
  tree.Write("d/a", "a");
  tree.Write("empty", "");
  tree.Write("a", "aaa");
  auto ns = testing::ScanTree(tree);
  Catalog catalog(*ns, 4096);
  StagePlanner stage(ns.get(), &catalog);
  HintParser::Result named;
  named.files = {*ns->Resolve("d/a"), *ns->Resolve("d/a")};
  named.valid = 2;
  stage.Add(named);
  stage.StageAll();
  CHECK(stage.queued() == 3);  // d/a once; the empty file has nothing to stage
  std::vector<std::string> fed;
  NodeId id;
  while (stage.Next(&id)) fed.push_back(ns->Path(id));
  CHECK(fed == std::vector<std::string>{"d/a", "a", "b"});
  CHECK_FALSE(stage.Next(&id));

  // Progress: a resident file is done; a fed one that is not, once nothing
  // is queued in the background, failed (no room, or its copy failed).
  REQUIRE(catalog.TryBegin(ChunkKey{*ns->Resolve("a"), 0}));
  catalog.Publish(ChunkKey{*ns->Resolve("a"), 0}, 0);
  JsonCounterWriter json;
  stage.VisitCounters(json, true);
  auto stats = RequireOk(ParseJson(json.Finish()));
  CHECK(stats.Uint("requested_files") == 3);
  CHECK(stats.Uint("requested_bytes") == 6);
  CHECK(stats.Uint("done_files") == 1);
  CHECK(stats.Uint("done_bytes") == 3);
  CHECK(stats.Uint("not_resident_files") == 2);
  CHECK(stats.Uint("failed_files") == 0);  // no ask settled: Settle() not called
  CHECK(stats.Uint("queued_files") == 0);
  CHECK(stats.Uint("valid_lines") == 2);
}

TEST_CASE("StagePlanner stages for a user no more than her share, root and shared files for free",
          "[stage_planner]") {
  testing::TempTree tree;
  for (const char* name : {"a", "b", "c", "d"}) tree.Write(name, std::string(100, 'x'));
  auto ns = testing::ScanTree(tree);
  Catalog catalog(*ns, 4096);
  StagePlanner stage(ns.get(), &catalog, /*user_share=*/250);  // two files and a half
  auto asks = [&](uid_t uid, std::vector<const char*> names) {
    HintParser::Result r;
    for (const char* n : names) r.files.push_back(*ns->Resolve(n));
    r.valid = names.size();
    r.uid = uid;
    stage.Add(r);
  };
  asks(1000, {"a", "b", "c", "d"});  // she asks for all: two fit her share
  CHECK(stage.queued() == 2);
  asks(1001, {"a", "c"});  // another user: a is staged already (free), c is hers
  CHECK(stage.queued() == 3);
  asks(1000, {"d"});  // her share is still spent
  CHECK(stage.queued() == 3);
  asks(0, {"d"});  // root: no share
  CHECK(stage.queued() == 4);
  JsonCounterWriter json;
  stage.VisitCounters(json, false);
  auto stats = RequireOk(ParseJson(json.Finish()));
  CHECK(stats.Uint("over_share_files") == 3);  // c and d, then d again
}

TEST_CASE("StagePlanner settles every ask, by reason, and tries a failed file again when asked",
          "[stage_planner]") {
  testing::TempTree tree;
  for (const char* name : {"a", "b", "c"}) tree.Write(name, "xyz");
  auto ns = testing::ScanTree(tree);
  Catalog catalog(*ns, 4096);
  StagePlanner stage(ns.get(), &catalog);
  const NodeId a = *ns->Resolve("a"), b = *ns->Resolve("b"), c = *ns->Resolve("c");
  auto ask = [&](std::vector<NodeId> files) {
    HintParser::Result r;
    r.files = std::move(files);
    r.valid = r.files.size();
    stage.Add(r);
  };
  auto counters = [&] {
    JsonCounterWriter json;
    stage.VisitCounters(json, true);
    return RequireOk(ParseJson(json.Finish()));
  };
  ask({a, b, c});
  // Fed: a is made resident, b finds no room, c is in flight.
  NodeId id;
  std::vector<NodeId> fed;
  while (stage.Next(&id)) fed.push_back(id);
  CHECK(fed == std::vector<NodeId>{a, b, c});
  REQUIRE(catalog.TryBegin(ChunkKey{a, 0}));
  catalog.Publish(ChunkKey{a, 0}, 0);
  stage.NoRoom(b);
  REQUIRE(catalog.TryBegin(ChunkKey{c, 0}));
  stage.Settle();
  auto stats = counters();
  CHECK(stats.Uint("asked_files") == 3);
  CHECK(stats.Uint("asked_resident_files") == 1);
  CHECK(stats.Uint("failed_files") == 1);
  CHECK(stats.Uint("failed_no_room_files") == 1);
  // c's copy fails (no store: the reason is unknown); asked again, b is
  // queued again and fails again: every ask is counted, never settled twice.
  catalog.Abort(ChunkKey{c, 0});
  stage.Settle();
  ask({b});
  REQUIRE(stage.Next(&id));
  CHECK(id == b);
  stage.NoRoom(b);
  stage.Settle();
  stats = counters();
  CHECK(stats.Uint("asked_files") == 4);
  CHECK(stats.Uint("asked_resident_files") == 1);
  CHECK(stats.Uint("failed_files") == 3);
  CHECK(stats.Uint("failed_no_room_files") == 2);
  CHECK(stats.Uint("failed_not_kept_files") == 1);
  // A resident file asked again is settled at once.
  ask({a});
  CHECK_FALSE(stage.Next(&id));
  CHECK(counters().Uint("asked_resident_files") == 2);
}

TEST_CASE("StagePlanner without tiers stages nothing", "[stage_planner]") {
  testing::TempTree tree;
  tree.Write("a", "aaa");
  auto ns = testing::ScanTree(tree);
  StagePlanner stage(ns.get(), nullptr);
  stage.StageAll();
  NodeId id;
  CHECK_FALSE(stage.Next(&id));
}

}  // namespace
}  // namespace tierfs
