// JsonCounterWriter and JsonNumber: the figures of .tierfs/stats are for
// people, rounded to six significant digits (a latency of 140.035 ms, not
// 140.03527659574468), and still a JSON document a program can parse.
#include "fs/telemetry/counter_json.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "require_ok.h"
#include "tiering/base/json_value.h"

namespace tierfs {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("JsonNumber rounds to six significant digits, integers exactly", "[counter_json]") {
  CHECK(JsonNumber(140.03527659574468) == "140.035");
  CHECK(JsonNumber(0.1 + 0.2) == "0.3");
  CHECK(JsonNumber(2.0 / 3.0) == "0.666667");
  CHECK(JsonNumber(-1.0 / 7.0) == "-0.142857");
  CHECK(JsonNumber(0.000123456789) == "0.000123457");
  CHECK(JsonNumber(1234567.891) == "1.23457e+06");
  // Whole numbers keep every digit, up to 10^15.
  CHECK(JsonNumber(42) == "42");
  CHECK(JsonNumber(0) == "0");
  CHECK(JsonNumber(-3) == "-3");
  CHECK(JsonNumber(123456789012345.0) == "123456789012345");
  // No NaN or Infinity in JSON.
  CHECK(JsonNumber(std::nan("")) == "null");
  CHECK(JsonNumber(std::numeric_limits<double>::infinity()) == "null");
}

TEST_CASE("JsonCounterWriter writes rounded gauges that parse back", "[counter_json]") {
  JsonCounterWriter json;
  json.BeginGroup("autotune");
  json.Gauge("source_latency_ms", 140.03527659574468, {"SOURCE latency."});
  json.Gauge("ratio", 2.0 / 3.0, {"A ratio."});
  json.Gauge("tiny", 1.23456789e-9, {"A small figure."});
  json.Gauge("whole", 4096, {"A whole figure."});
  json.Counter("reads", 18446744073709551615u, {"A counter: an integer, exact."});
  json.EndGroup();
  const std::string text = json.Finish();
  INFO(text);
  CHECK_THAT(text, Contains("\"source_latency_ms\": 140.035,") &&
                       Contains("\"ratio\": 0.666667,") && Contains("\"tiny\": 1.23457e-09,") &&
                       Contains("\"whole\": 4096,") && Contains("\"reads\": 18446744073709551615"));
  CHECK_THAT(text, !Contains("140.0352"));
  JsonValue root = RequireOk(ParseJson(text));
  CHECK(root.Number("autotune.source_latency_ms") == Approx(140.035));
  CHECK(root.Number("autotune.tiny") == Approx(1.23457e-9));
  CHECK(root.Uint("autotune.whole") == 4096);
}

}  // namespace
}  // namespace tierfs
