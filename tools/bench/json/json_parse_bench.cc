// Parses a stats document 100k times, three rounds: tierfs's JsonValue
// (ParseJson) vs Boost.JSON (default allocator, and a monotonic buffer).
// Not part of the build: Boost.JSON needs Boost >= 1.75 and Debian 12's
// default Boost is 1.74. Measured with the 1.81 headers unpacked beside the
// system (apt-get download libboost1.81-dev libboost-json1.81-dev
// libboost-container1.81-dev; dpkg -x each into DIR), from the source root:
//   g++ -std=c++20 -O3 -DNDEBUG -IDIR/usr/include -I. \
//     tools/bench/json/json_parse_bench.cc tiering/base/json_value.cc -lfmt -o json_bench
//   ./json_bench STATS.json
// docs/DECISIONS.md ("JSON reading") has the figures and the decision.
#include <boost/json.hpp>
#include <boost/json/src.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tiering/base/json_value.h"

int main(int argc, char** argv) {
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const int n = 100000;
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      auto v = tierfs::ParseJson(text);
      sum += v->Uint("namespace.files");
    }
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      boost::json::error_code ec;
      boost::json::value v = boost::json::parse(text, ec);
      sum += v.at("namespace").at("files").as_int64();
    }
    auto t2 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      boost::json::error_code ec;
      unsigned char buf[16384];
      boost::json::monotonic_resource mr(buf, sizeof(buf));
      boost::json::value v = boost::json::parse(text, ec, &mr);
      sum += v.at("namespace").at("files").as_int64();
    }
    auto t3 = std::chrono::steady_clock::now();
    auto us = [&](auto a, auto b) {
      return std::chrono::duration<double, std::micro>(b - a).count() / n;
    };
    std::printf(
        "%zu bytes x %d: tierfs ParseJson %.2f us/doc, boost::json::parse %.2f us/doc, "
        "boost::json::parse+monotonic %.2f us/doc (sum %lu)\n",
        text.size(), n, us(t0, t1), us(t1, t2), us(t2, t3), (unsigned long)sum);
  }
}
