#include "tiering/base/json_value.h"

#include <catch2/catch.hpp>
#include <string>

#include "require_ok.h"

namespace tierfs {
namespace {

JsonValue Parse(std::string_view text) { return RequireOk(ParseJson(text)); }

// The message of the error ParseJson fails with; its code is always EINVAL.
std::string ErrorOf(std::string_view text) {
  Result<JsonValue> v = ParseJson(text);
  REQUIRE_FALSE(v.ok());
  CHECK(v.status().code() == EINVAL);
  return v.status().message();
}

TEST_CASE("JsonValue reads a stats-shaped document by dotted paths") {
  JsonValue v = Parse(R"({
    "version": "0.1.0", "uptime_seconds": 12.5,
    "source": {"read_bytes": 18446744073709551615, "errors": 0},
    "tiers": [{"name": "ram", "used": 3}, {"name": "nvme", "used": 9007199254740993}],
    "prefetch": {"mode": "order", "order": {"declared": 7, "valid_lines": 7}}
  })");
  CHECK(v.String("version") == "0.1.0");
  CHECK(v.Number("uptime_seconds") == 12.5);
  CHECK(v.Uint("source.read_bytes") == 18446744073709551615ull);  // exact, not via double
  CHECK(v.Uint("prefetch.order.declared") == 7);
  CHECK(v.String("prefetch.mode") == "order");
  REQUIRE(v.Member("tiers")->items().size() == 2);
  CHECK(v.Member("tiers")->items()[1].Uint("used") == 9007199254740993ull);
}

TEST_CASE("JsonValue: absent fields and other types read as the fallback") {
  JsonValue v = Parse(R"({"a": {"b": "text", "n": -3, "f": 2.75, "big": 1e30}})");
  CHECK(v.Find("a.c") == nullptr);
  CHECK(v.Find("a.b.c") == nullptr);
  CHECK(v.Uint("a.b", 42) == 42);
  CHECK(v.String("a.n", "none") == "none");
  CHECK(v.Uint("missing.path", 5) == 5);
  CHECK(v.Uint("a.n") == 0);  // negative clamps
  CHECK(v.Uint("a.f") == 2);  // truncates
  CHECK(v.Uint("a.big") == UINT64_MAX);
  CHECK(Parse("[1]").Find("x") == nullptr);
}

TEST_CASE("JsonValue decodes string escapes") {
  JsonValue v = Parse(R"(["a\"b\\c\/\n\t", "\u00e9\u20ac", "\ud83d\ude00"])");
  CHECK(v.items()[0].string() == "a\"b\\c/\n\t");
  CHECK(v.items()[1].string() == "\xc3\xa9\xe2\x82\xac");
  CHECK(v.items()[2].string() == "\xf0\x9f\x98\x80");
}

TEST_CASE("JsonValue rejects malformed text with the offset") {
  CHECK(ErrorOf("") == "expected a value at byte 0");
  CHECK(ErrorOf(R"({"a": 1,})") == "expected a string key at byte 8");
  CHECK(ErrorOf(R"({"a" 1})") == "expected ':' at byte 5");
  CHECK(ErrorOf("[1 2]") == "expected ',' or ']' at byte 3");
  CHECK(ErrorOf(R"("abc)") == "unterminated string at byte 4");
  CHECK(ErrorOf("01") == "leading zero in number at byte 2");
  CHECK(ErrorOf("{} x") == "unexpected text after the JSON value at byte 3");
  CHECK(ErrorOf(R"("\x")") == "bad escape in string at byte 3");
  CHECK(ErrorOf("tru") == "invalid literal at byte 0");
  CHECK(ErrorOf(std::string(100, '[') + std::string(100, ']')) == "nesting too deep at byte 65");
  CHECK(ErrorOf("\"a\nb\"") == "control character in string at byte 3");
}

}  // namespace
}  // namespace tierfs
