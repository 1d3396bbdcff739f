// A scratch directory for the benchmark suite's unit tests, removed with
// everything in it when the test ends.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace bench_test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/bench-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `size` bytes 'x' to path/rel, creating its directories.
  void Write(const std::string& rel, size_t size) const {
    std::filesystem::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << std::string(size, 'x');
  }
  // The whole of path/rel ("" if it cannot be read).
  std::string Read(const std::string& rel) const {
    std::ifstream in(path / rel);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

}  // namespace bench_test
