// Containing UCX's own failed assertion to the peer transport it happened in.
//
// UCX 1.13.1 built with assertions (Debian's and Ubuntu's libucx0) aborts
// the process when a reply endpoint's TCP connection fails while its
// wireup reply is queued: a peer killed or cut off while connecting to this
// node takes this node's daemon, and its job's mount, with it (see
// docs/DECISIONS.md, "A worker that goes"). No use of the API avoids it.
//
// With Contain(), a SIGABRT is parked only when all of these hold: the
// process raised it itself (si_code SI_TKILL from this pid: abort()), on a
// thread inside a UCX call marked by InUcx, and from UCX's fatal-error path
// (a return address on the thread's stack lies in libucs's
// ucs_fatal_error_message or ucs_fatal_error_format). Then, first, a copy
// of the process with that one thread (the raw clone system call, no
// atfork handlers) dies of SIGABRT, leaving a core of the moment where the
// system allows cores of this process (fs.suid_dumpable, core limits);
// then the thread sets the worker's `wedged` flag, writes one line to
// stderr and stops for good (signals blocked, in pause()). The worker is
// never touched again (UcxWorker: Post refuses work, Stop leaves it
// behind), so that side of this node's peers reads SOURCE until a
// TransportWatch (transport_watch.h) gives it a new UCX context and worker;
// the first normal thread that sees the flag reports it to syslog and the
// daemon's log (ReportWedged).
//
// Any other SIGABRT (our own code, UCX's callbacks into it, glibc's heap
// checks, another process's kill -ABRT) goes to the handler that was there
// before Contain() (in the daemon: the default action, a core where the
// system allows it).
#pragma once

#include <atomic>

namespace tierfs::ucx_abort {

// Installs the SIGABRT handler, once per process, and finds UCX's
// fatal-error functions (if libucs has none, nothing is ever parked). The
// daemon calls it (UcxWorker::Options::contain_aborts).
void Contain();

// Marks this thread as inside a UCX call for the worker whose flag is
// `wedged` (nullptr: in our own code, which UCX called back) while alive.
class InUcx {
 public:
  explicit InUcx(std::atomic<bool>* wedged);
  ~InUcx();
  InUcx(const InUcx&) = delete;
  InUcx& operator=(const InUcx&) = delete;

 private:
  std::atomic<bool>* prev_;
};

// Says, once per process, to syslog and to the daemon's log, that UCX
// failed on a worker's thread. Called by
// a normal thread that found a `wedged` flag set, never by the handler.
void ReportWedged();

}  // namespace tierfs::ucx_abort
