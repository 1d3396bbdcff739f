#include "tiering/tier_journal.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace tierfs {
namespace {

constexpr const char* kHeader = "tierfs-journal 1";

// Paths may hold any byte but NUL: escape the two that break a line.
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool Unescape(const std::string& s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      *out += s[i];
      continue;
    }
    if (++i == s.size()) return false;
    if (s[i] == '\\') {
      *out += '\\';
    } else if (s[i] == 'n') {
      *out += '\n';
    } else {
      return false;
    }
  }
  return true;
}

int WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

TierJournal::~TierJournal() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TierJournal::FormatPublish(uint64_t seq, const ChunkOrigin& o) {
  return fmt::format("P {} {} {} {} {} {}\n", seq, o.length, o.file_size, o.mtime_ns, o.chunk,
                     Escape(o.path));
}

bool TierJournal::ParseLine(const std::string& line, char* op, uint64_t* seq, ChunkOrigin* origin) {
  std::istringstream in(line);
  std::string kind;
  if (!(in >> kind >> *seq) || kind.size() != 1) return false;
  *op = kind[0];
  if (*op == 'R') return in.peek() == EOF;
  if (*op != 'P') return false;
  if (!(in >> origin->length >> origin->file_size >> origin->mtime_ns >> origin->chunk)) {
    return false;
  }
  if (in.get() != ' ') return false;
  std::string rest;
  std::getline(in, rest);
  return Unescape(rest, &origin->path) && !origin->path.empty();
}

std::map<uint64_t, ChunkOrigin> TierJournal::Load(const std::string& path) {
  std::map<uint64_t, ChunkOrigin> entries;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return entries;  // missing or foreign
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: a torn last line
    char op;
    uint64_t seq;
    ChunkOrigin origin;
    if (!ParseLine(line, &op, &seq, &origin)) continue;
    if (op == 'P') {
      entries[seq] = std::move(origin);
    } else {
      entries.erase(seq);
    }
  }
  return entries;
}

int TierJournal::Rewrite(const std::string& path, const std::map<uint64_t, ChunkOrigin>& entries) {
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [seq, origin] : entries) text += FormatPublish(seq, origin);
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  int err = WriteAll(fd, text);
  if (err == 0 && ::fsync(fd) != 0) err = -errno;
  ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = -errno;
  if (err < 0) {
    ::unlink(tmp.c_str());
    return err;
  }
  std::lock_guard lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  return fd_ < 0 ? -errno : 0;
}

int TierJournal::AppendLine(const std::string& line) {
  std::lock_guard lock(mu_);
  if (fd_ < 0) return -EBADF;
  return WriteAll(fd_, line);  // O_APPEND: one write per record
}

int TierJournal::AppendPublish(uint64_t seq, const ChunkOrigin& origin) {
  return AppendLine(FormatPublish(seq, origin));
}

int TierJournal::AppendRemove(uint64_t seq) { return AppendLine(fmt::format("R {}\n", seq)); }

}  // namespace tierfs
