// JsonString: the one JSON string escaper of tierfs. Every writer of JSON
// (.tierfs/stats, pfs-sim's stats, the benchmark's result lines) quotes text
// through it, so a path with a quote, a backslash or a control character can
// never break a document that ParseJson must read back.
#pragma once

#include <string>
#include <string_view>

namespace tierfs {

// `text` as a JSON string literal, quotes included: '"' and '\' are preceded
// by '\', bytes below 0x20 become \u00XX, every other byte is copied as is (a
// path is bytes, not necessarily UTF-8: ParseJson gives the same bytes back).
std::string JsonString(std::string_view text);

// Appends JsonString(text) to *out.
void AppendJsonString(std::string_view text, std::string* out);

}  // namespace tierfs
