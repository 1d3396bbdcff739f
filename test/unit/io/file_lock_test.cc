// FileIo::lock and LockHolder: a second process (here a second open file
// description, which flock treats alike) learns who holds a tier.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "temp_tree.h"
#include "tiering/io/file_io.h"

namespace tierfs {
namespace {

using testing::TempTree;

TEST_CASE("LockHolder names the holder while the lock is held, and nobody after", "[file_lock]") {
  TempTree dir;
  const std::string path = dir.Abs("lock");
  std::string note = "stale";
  CHECK_FALSE(LockHolder(path, &note));  // no lock file
  CHECK(note.empty());

  auto io = NewPosixFileIo();
  std::unique_ptr<FileLock> lock;
  REQUIRE(io->lock(path, &lock) == 0);
  CHECK(LockHolder(path, &note));
  CHECK(note.empty());  // held, nothing noted yet

  REQUIRE(lock->Note("pid=1\nmount=/a long/mount\nstate=mounted\n") == 0);
  REQUIRE(LockHolder(path, &note));
  CHECK(note == "pid=1\nmount=/a long/mount\nstate=mounted\n");
  REQUIRE(lock->Note("state=stopping\n") == 0);  // replaces, not appends
  REQUIRE(LockHolder(path, &note));
  CHECK(note == "state=stopping\n");

  // What a holder wrote reaches a terminal only printable.
  REQUIRE(lock->Note(std::string("pid=\x1b[2J\x01", 9)) == 0);
  REQUIRE(LockHolder(path, &note));
  CHECK(note == "pid=?[2J?");

  // Asking does not take the lock from its holder or keep it.
  std::unique_ptr<FileLock> second;
  CHECK(io->lock(path, &second) == -EWOULDBLOCK);
  lock.reset();
  CHECK_FALSE(LockHolder(path, &note));
  CHECK(io->lock(path, &second) == 0);
}

}  // namespace
}  // namespace tierfs
