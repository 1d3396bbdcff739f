#include "tiering/store/tier_journal.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>
#include <sstream>

#include "tiering/base/mutex.h"

namespace tierfs {
namespace {

// Version 2: records carry ctime and inode; the header names the SOURCE.
// Version 3: a record names the tier file holding the chunk and its offset.
constexpr const char* kMagic = "tierfs-journal 3 ";

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

// The whole content of `file`. 0 or -errno.
int ReadAll(LocalFile* file, std::string* out) {
  constexpr size_t kStep = 64 * 1024;
  out->clear();
  while (true) {
    size_t have = out->size();
    out->resize(have + kStep);
    ssize_t n = file->pread(out->data() + have, kStep, have);
    if (n < 0) return static_cast<int>(n);
    out->resize(have + static_cast<size_t>(n));
    if (static_cast<size_t>(n) < kStep) return 0;
  }
}

// The first line of a journal of `source`'s tier, with its newline.
std::string Header(const std::string& source) { return kMagic + Escape(source) + "\n"; }

}  // namespace

std::string TierJournal::FormatPublish(uint64_t seq, const Record& r) {
  const ChunkOrigin& o = r.origin;
  return fmt::format("P {} {} {} {} {} {} {} {} {} {}\n", seq, r.file, o.offset, o.length,
                     o.file_size, o.mtime_ns, o.ctime_ns, o.ino, o.chunk, Escape(o.path));
}

bool TierJournal::ParseLine(const std::string& line, char* op, uint64_t* seq, Record* record) {
  std::istringstream in(line);
  std::string kind;
  if (!(in >> kind >> *seq) || kind.size() != 1 || *seq >= kSeqLimit) return false;
  *op = kind[0];
  if (*op == 'R') return in.peek() == EOF;
  if (*op != 'P') return false;
  ChunkOrigin* origin = &record->origin;
  if (!(in >> record->file >> origin->offset >> origin->length >> origin->file_size >>
        origin->mtime_ns >> origin->ctime_ns >> origin->ino >> origin->chunk) ||
      record->file >= kSeqLimit) {
    return false;
  }
  if (in.get() != ' ') return false;
  std::string rest;
  std::getline(in, rest);
  return Unescape(rest, &origin->path) && !origin->path.empty();
}

int TierJournal::Load(const std::string& source, Entries* out, bool* foreign) const {
  out->clear();
  if (foreign) *foreign = false;
  std::unique_ptr<LocalFile> file;
  if (int err = io_->open(path_, O_RDONLY, 0, &file); err < 0) return err == -ENOENT ? 0 : err;
  std::string text;
  if (int err = ReadAll(file.get(), &text); err < 0) return err;
  const std::string header = Header(source);
  if (text.compare(0, header.size(), header) != 0) {  // empty, older, or another SOURCE's
    if (foreign) *foreign = !text.empty();
    return 0;
  }
  size_t begin = header.size();
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    // A line without its newline is torn (a crash in its write): never read.
    char op;
    uint64_t seq;
    Record record;
    if (!ParseLine(text.substr(begin, end - begin), &op, &seq, &record)) continue;
    if (op == 'P') {
      (*out)[seq] = std::move(record);
    } else {
      out->erase(seq);
    }
  }
  return 0;
}

int TierJournal::WriteFresh(const std::string& source, const Entries& entries,
                            std::unique_ptr<LocalFile>* appender) {
  std::string text = Header(source);
  for (const auto& [seq, record] : entries) text += FormatPublish(seq, record);
  const std::string tmp = path_ + ".tmp";
  std::unique_ptr<LocalFile> file;
  int err = io_->open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600, &file);
  if (err < 0) return err;
  err = WriteAll(file.get(), text.data(), text.size());
  if (err == 0) err = file->fdatasync();  // the records durable before the name
  if (int closed = file->close(); err == 0) err = closed;
  if (err == 0) err = io_->rename(tmp, path_);
  if (err < 0) {
    io_->unlink(tmp);
    return err;
  }
  // The new name durable too: a power cut must not bring the old journal back.
  const size_t slash = path_.rfind('/');
  if (int synced = io_->sync_dir(slash == std::string::npos ? "." : path_.substr(0, slash));
      synced < 0) {
    return synced;
  }
  return io_->open(path_, O_WRONLY | O_APPEND, 0, appender);
}

int TierJournal::Rewrite(const std::string& source, const Entries& entries) {
  std::unique_ptr<LocalFile> file;
  if (int err = WriteFresh(source, entries, &file); err < 0) return err;
  {
    WriterMutexLock lock(file_mu_);
    file_.swap(file);
  }
  records_.store(entries.size(), std::memory_order_relaxed);
  return 0;  // the old file, now in `file`, closes here, outside the lock
}

int TierJournal::Compact(const std::string& source, const std::function<bool(uint64_t)>& keep) {
  std::unique_ptr<LocalFile> old;
  WriterMutexLock lock(file_mu_);  // appenders wait: no record may go to the old file
  if (!file_) return -EBADF;
  Entries entries;
  if (int err = Load(source, &entries); err < 0) return err;
  std::erase_if(entries, [&keep](const auto& e) { return !keep(e.first); });
  std::unique_ptr<LocalFile> file;
  if (int err = WriteFresh(source, entries, &file); err < 0) return err;  // the old one stays
  old = std::exchange(file_, std::move(file));
  records_.store(entries.size(), std::memory_order_relaxed);
  return 0;
}

int TierJournal::AppendLine(const std::string& line) {
  ReaderMutexLock lock(file_mu_);
  if (!file_) return -EBADF;
  records_.fetch_add(1, std::memory_order_relaxed);
  return WriteAll(file_.get(), line.data(), line.size());  // O_APPEND: one write per record
}
int TierJournal::AppendPublish(uint64_t seq, const Record& record) {
  return AppendLine(FormatPublish(seq, record));
}

int TierJournal::AppendRemove(uint64_t seq) { return AppendLine(fmt::format("R {}\n", seq)); }

int TierJournal::Sync() {
  ReaderMutexLock lock(file_mu_);
  if (!file_) return -EBADF;
  return file_->fdatasync();
}

}  // namespace tierfs
