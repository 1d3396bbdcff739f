// Containing an abort inside UCX to the peer transport it happened in.
//
// UCX 1.13.1 built with assertions (Debian's and Ubuntu's libucx0) aborts
// the process when a reply endpoint's TCP connection fails while its
// wireup reply is queued: a peer killed or cut off while connecting to this
// node takes this node's daemon, and its job's mount, with it (see
// docs/ARCHITECTURE.md, "Peers"). No use of the API avoids it. With
// Contain(), an abort raised while a thread is inside a UCX call marked by
// InUcx does not end the process: that thread sets the worker's `wedged`
// flag and stops for good (signals blocked, in pause()); the worker is
// never touched again (UcxWorker: Post refuses work, Stop leaves it
// behind), so this node asks or serves no peer until it is remounted and
// reads SOURCE instead. An abort anywhere else (our own code, another
// thread, our callbacks run by UCX) goes to the handler that was there
// before, as without Contain().
#pragma once

#include <atomic>

namespace tierfs::ucx_abort {

// Installs the SIGABRT handler, once per process. The daemon calls it
// (UcxWorker::Options::contain_aborts); unit tests do not.
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

}  // namespace tierfs::ucx_abort
