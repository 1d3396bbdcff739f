#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace bench {

std::vector<std::string> ListFiles(const std::string& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, ec), end;
  if (ec) throw std::runtime_error("cannot list " + root + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw std::runtime_error("cannot list " + root + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

int64_t ReadWholeFile(const std::string& path, size_t block) {
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, FreeDeleter> buffer;
  thread_local size_t buffer_size = 0;
  if (buffer_size < block) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, block) != 0) return -ENOMEM;
    buffer.reset(static_cast<char*>(p));
    buffer_size = block;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int64_t total = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer.get(), block);
    if (n < 0) {
      if (errno == EINTR) continue;
      total = -errno;
      break;
    }
    if (n == 0) break;
    total += n;
  }
  close(fd);
  return total;
}

std::map<std::string, uint64_t> ReadCounters(const std::string& stats_path,
                                             const std::string& section) {
  std::map<std::string, uint64_t> counters;
  std::ifstream in(stats_path);
  if (!in) return counters;
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  const size_t at = json.find("\"" + section + "\"");
  if (at == std::string::npos) return counters;
  const size_t open = json.find('{', at);
  const size_t close = json.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return counters;
  // Flat object: "key": number pairs.
  size_t pos = open;
  while ((pos = json.find('"', pos + 1)) < close) {
    const size_t key_end = json.find('"', pos + 1);
    const size_t colon = json.find(':', key_end);
    if (key_end >= close || colon >= close) break;
    const std::string key = json.substr(pos + 1, key_end - pos - 1);
    char* end = nullptr;
    const unsigned long long value = std::strtoull(json.c_str() + colon + 1, &end, 10);
    if (end != json.c_str() + colon + 1) counters[key] = value;
    pos = json.find_first_of(",}", colon);
    if (pos >= close) break;
  }
  return counters;
}

std::map<std::string, uint64_t> CounterDelta(const std::map<std::string, uint64_t>& before,
                                             const std::map<std::string, uint64_t>& after) {
  std::map<std::string, uint64_t> delta;
  for (const auto& [key, value] : after) {
    const auto it = before.find(key);
    const uint64_t old = it == before.end() ? 0 : it->second;
    delta[key] = value >= old ? value - old : 0;
  }
  return delta;
}

}  // namespace bench
