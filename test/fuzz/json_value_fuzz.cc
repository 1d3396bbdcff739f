// Fuzz target: ParseJson (tiering/base), the reader of .tierfs/stats in the
// subcommands and the benchmark. The input is the document.
//
// Besides crashes, it checks what the reader and the writer promise, and
// aborts on a breach:
//   - a failure always says what is wrong;
//   - every string parsed (keys and values), written back with JsonString,
//     parses to the same bytes;
//   - the lookups (Find, Member, Uint, Number, String) of every key path
//     in the document answer without crashing, and Find finds the value the
//     walk reached (for keys without a '.', which Find would split, and
//     not repeated in their object).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tiering/base/json_string.h"
#include "tiering/base/json_value.h"

namespace tierfs {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "json_value_fuzz: %s\n", what.c_str());
  std::abort();
}

void CheckStringRoundTrip(const std::string& s) {
  Result<JsonValue> again = ParseJson(JsonString(s));
  if (!again.ok() || !again->is_string() || again->string() != s) {
    Fail("JsonString of a parsed string does not parse back to it: " + again.status().message());
  }
}

// Walks `v`, reached from `root` by the dotted `path` ("" for the root;
// `dotted`: every key on the way is free of '.').
void Walk(const JsonValue& root, const JsonValue& v, const std::string& path, bool dotted,
          int depth) {
  if (depth > JsonValue::kMaxDepth + 1) Fail("deeper than kMaxDepth");
  if (dotted && !path.empty() && root.Find(path) == nullptr) Fail("Find misses " + path);
  (void)root.Uint(path, 7);
  (void)root.Number(path, 7);
  (void)root.String(path, "fallback");
  if (v.is_string()) CheckStringRoundTrip(v.string());
  if (v.is_array()) {
    for (const JsonValue& item : v.items()) Walk(root, item, path + ".[]", false, depth + 1);
  }
  if (v.is_object()) {
    for (const auto& [key, member] : v.members()) {
      CheckStringRoundTrip(key);
      if (v.Member(key) == nullptr) Fail("Member misses a key of its object");
      std::string sub = path.empty() ? key : path + "." + key;
      // Find takes the first member of a name: a later duplicate is not found.
      bool plain =
          dotted && !key.empty() && key.find('.') == std::string::npos && v.Member(key) == &member;
      Walk(root, member, sub, plain, depth + 1);
    }
  }
}

}  // namespace
}  // namespace tierfs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierfs;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<JsonValue> v = ParseJson(text);
  if (!v.ok()) {
    if (v.status().message().empty()) Fail("a refused document without an error message");
    return 0;
  }
  Walk(*v, *v, "", true, 0);
  return 0;
}
