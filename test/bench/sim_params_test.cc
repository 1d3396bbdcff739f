// pfs-sim options: values parse, bad input gives a message naming the key.
#include "sim_params.h"

#include <catch2/catch.hpp>

using pfssim::SimParams;

TEST_CASE("options set parameters", "[pfs-sim][params]") {
  SimParams p;
  CHECK(SetParam(p, "meta_ms", "0.5").empty());
  CHECK(SetParam(p, "parallel", "4").empty());
  CHECK(SetParam(p, "max_request", "128K").empty());
  CHECK(SetParam(p, "fail_files", "a/b.jpg:/c.jpg").empty());
  CHECK(p.meta_ms == 0.5);
  CHECK(p.parallel == 4);
  CHECK(p.max_request == 128 * 1024);
  CHECK(p.fail_files == std::vector<std::string>{"a/b.jpg", "c.jpg"});
  CHECK(pfssim::Validate(p).empty());
}

TEST_CASE("bad options are rejected with the key named", "[pfs-sim][params]") {
  SimParams p;
  CHECK_THAT(SetParam(p, "read_ms", "fast"), Catch::Contains("read_ms"));
  CHECK_THAT(SetParam(p, "read_ms", "-1"), Catch::Contains("read_ms"));
  CHECK_THAT(SetParam(p, "fail_rate", "1.5"), Catch::Contains("fail_rate"));
  CHECK_THAT(SetParam(p, "max_request", "2M"), Catch::Contains("max_request"));
  CHECK_THAT(SetParam(p, "bogus", "1"), Catch::Contains("unknown"));
  CHECK_THAT(SetParam(p, "threads", "257"), Catch::Contains("threads"));
  p.parallel = 0;
  CHECK_FALSE(pfssim::Validate(p).empty());
  p.parallel = 1;
  CHECK(pfssim::Validate(p).empty());
  CHECK(SetParam(p, "threads", "0").empty());
  CHECK_THAT(pfssim::Validate(p), Catch::Contains("threads"));
}

TEST_CASE("parameters print as JSON with every key", "[pfs-sim][params]") {
  SimParams p;
  p.fail_files = {"we\"ird"};
  const std::string json = pfssim::ParamsToJson(p);
  for (const char* key : {"meta_ms", "read_ms", "stream_mbps", "total_mbps", "parallel",
                          "fail_rate", "stall_ms", "seed", "threads"}) {
    CHECK_THAT(json, Catch::Contains(std::string("\"") + key + "\""));
  }
  CHECK_THAT(json, Catch::Contains("we\\\"ird"));
}
