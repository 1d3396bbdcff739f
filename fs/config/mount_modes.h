// The mount's modes that options name by a word: parsed once, into these
// enums, by fs/config/options.cc; an unknown word is a command-line error. No
// FUSE include, so options.h (unit-tested and fuzzed) can hold them.
#pragma once

namespace tierfs {

// How the kernel lists directories: always READDIRPLUS (names with
// attributes: one listing primes every lookup), plain READDIR (names only;
// each entry costs a LOOKUP when used), or the kernel's adaptive choice
// (READDIRPLUS_AUTO: plus for the first chunk, then plus only if lookups
// followed). See docs/DECISIONS.md "Listing". -o readdir=plus|plain|auto.
enum class ReaddirMode { kPlus, kPlain, kAuto };

// FUSE passthrough for files wholly in one tier file (fs/fuse/passthrough.h).
// -o passthrough=auto|on|off.
enum class PassthroughWant { kAuto, kOn, kOff };

// Who decides whether a caller may open a file: SOURCE asked as the caller,
// or the kernel on the snapshot's mode bits. kDefault: source for a root
// daemon with allow_other, else snapshot. -o permissions=source|snapshot.
enum class PermissionsBy { kDefault, kSource, kSnapshot };

}  // namespace tierfs
