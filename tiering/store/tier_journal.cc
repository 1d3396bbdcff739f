#include "tiering/store/tier_journal.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
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

// The content of `file` from `from` to its end. 0 or -errno.
int ReadFrom(LocalFile* file, uint64_t from, std::string* out) {
  constexpr size_t kStep = 64 * 1024;
  out->clear();
  while (true) {
    size_t have = out->size();
    out->resize(have + kStep);
    ssize_t n = file->pread(out->data() + have, kStep, from + have);
    if (n < 0) return static_cast<int>(n);
    out->resize(have + static_cast<size_t>(n));
    if (static_cast<size_t>(n) < kStep) return 0;
  }
}

int ReadAll(LocalFile* file, std::string* out) { return ReadFrom(file, 0, out); }

// The first line of a journal of `source`'s tier, with its newline.
std::string Header(const std::string& source) { return kMagic + Escape(source) + "\n"; }

// The directory holding `path`.
std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

void TierJournal::ApplyLines(const std::string& text, size_t begin, size_t stop, Entries* out) {
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos && end < stop;
       begin = end + 1) {
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
}

namespace {}  // namespace

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
  ApplyLines(text, header.size(), text.size(), out);
  return 0;
}

int TierJournal::WriteTemp(const std::string& text, std::unique_ptr<LocalFile>* out) {
  std::unique_ptr<LocalFile> file;
  int err = io_->open(path_ + ".tmp", O_WRONLY | O_CREAT | O_TRUNC, 0600, &file);
  if (err == 0) err = WriteAll(file.get(), text.data(), text.size());
  if (err == 0) err = file->fdatasync();  // the records durable before the name
  if (err < 0) {
    if (file) file->close();
    io_->unlink(path_ + ".tmp");
    return err;
  }
  *out = std::move(file);
  return 0;
}

int TierJournal::Install(std::unique_ptr<LocalFile> temp, std::unique_ptr<LocalFile>* appender) {
  const std::string tmp = path_ + ".tmp";
  int err = temp->close();
  if (err == 0) err = io_->rename(tmp, path_);
  if (err < 0) {
    io_->unlink(tmp);
    return err;
  }
  return io_->open(path_, O_WRONLY | O_APPEND, 0, appender);
}

int TierJournal::SyncName() {
  if (!rename_unsynced_.load()) return 0;
  // The new name durable too: a power cut must not bring the old journal back.
  int err = io_->sync_dir(DirOf(path_));
  if (err == 0) rename_unsynced_.store(false);
  return err;
}

int TierJournal::Rewrite(const std::string& source, const Entries& entries) {
  std::string text = Header(source);
  for (const auto& [seq, record] : entries) text += FormatPublish(seq, record);
  std::unique_ptr<LocalFile> file;
  if (int err = WriteTemp(text, &file); err < 0) return err;
  if (int err = Install(std::move(file), &file); err < 0) return err;
  rename_unsynced_.store(true);
  if (int err = SyncName(); err < 0) return err;
  {
    WriterMutexLock lock(file_mu_);
    file_.swap(file);
  }
  records_.store(entries.size(), std::memory_order_relaxed);
  return 0;  // the old file, now in `file`, closes here, outside the lock
}

int TierJournal::Compact(const std::string& source, const std::function<bool(uint64_t)>& keep) {
  {
    ReaderMutexLock lock(file_mu_);
    if (!file_) return -EBADF;
  }
  // The journal as it is now, read and shrunk outside the lock: appenders
  // go on (O_APPEND), and whatever they add past `cut` is copied as it is
  // at the swap. A line being written as this reads lies past the cut.
  std::unique_ptr<LocalFile> reader;
  if (int err = io_->open(path_, O_RDONLY, 0, &reader); err < 0) return err;
  std::string text;
  if (int err = ReadAll(reader.get(), &text); err < 0) return err;
  const std::string header = Header(source);
  if (text.compare(0, header.size(), header) != 0) return -EIO;  // not the journal Rewrite made
  const size_t cut = text.rfind('\n') + 1;
  Entries entries;
  ApplyLines(text, header.size(), cut, &entries);
  std::erase_if(entries, [&keep](const auto& e) { return !keep(e.first); });
  std::string fresh = header;
  for (const auto& [seq, record] : entries) fresh += FormatPublish(seq, record);
  std::unique_ptr<LocalFile> temp;
  if (int err = WriteTemp(fresh, &temp); err < 0) return err;  // the old journal stays
  std::unique_ptr<LocalFile> old;
  {
    // Appenders wait from here: what they appended since the cut is copied
    // over (few lines, one fdatasync), then the new journal takes its place.
    WriterMutexLock lock(file_mu_);
    std::string tail;
    int err = ReadFrom(reader.get(), cut, &tail);
    if (err == 0 && !tail.empty()) err = WriteAll(temp.get(), tail.data(), tail.size());
    if (err == 0 && !tail.empty()) err = temp->fdatasync();
    std::unique_ptr<LocalFile> appender;
    if (err == 0) err = Install(std::move(temp), &appender);
    if (err < 0) {
      if (temp) {
        temp->close();
        io_->unlink(path_ + ".tmp");
      }
      return err;  // the old journal stays in use
    }
    rename_unsynced_.store(true);  // before an append can reach the new file
    old = std::exchange(file_, std::move(appender));
    records_.store(
        entries.size() + static_cast<uint64_t>(std::count(tail.begin(), tail.end(), '\n')),
        std::memory_order_relaxed);
  }
  return SyncName();  // old closes after the lock; a Sync meanwhile syncs the name first
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
  if (int err = SyncName(); err < 0) return err;
  ReaderMutexLock lock(file_mu_);
  if (!file_) return -EBADF;
  return file_->fdatasync();
}

}  // namespace tierfs
