// JsonString: the escaper every JSON writer uses, checked against ParseJson.
#include "tiering/base/json_string.h"

#include <catch2/catch.hpp>
#include <string>

#include "require_ok.h"
#include "tiering/base/json_value.h"

namespace tierfs {
namespace {

TEST_CASE("JsonString quotes plain text as is") {
  CHECK(JsonString("") == R"("")");
  CHECK(JsonString("ram") == R"("ram")");
  CHECK(JsonString("/nvme/tierfs dir/é") == "\"/nvme/tierfs dir/é\"");
}

TEST_CASE("JsonString escapes quotes, backslashes and control bytes") {
  CHECK(JsonString(R"(a"b\c)") == R"("a\"b\\c")");
  CHECK(JsonString("line\nnext\ttab") == R"("line\u000anext\u0009tab")");
  CHECK(JsonString(std::string("nul\0x\x1f", 6)) == R"("nul\u0000x\u001f")");
  CHECK(JsonString("\x7f") == "\"\x7f\"");  // DEL is not a control character in JSON
}

TEST_CASE("AppendJsonString appends to what is there") {
  std::string out = "{\"name\": ";
  AppendJsonString("t\"0", &out);
  out += "}";
  CHECK(out == R"({"name": "t\"0"})");
}

TEST_CASE("ParseJson reads back every byte JsonString wrote") {
  std::string all;
  for (int b = 1; b < 256; ++b) all.push_back(static_cast<char>(b));
  all.push_back('\0');
  JsonValue v = RequireOk(ParseJson(JsonString(all)));
  REQUIRE(v.is_string());
  CHECK(v.string() == all);
}

}  // namespace
}  // namespace tierfs
