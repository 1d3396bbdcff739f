// The pfs-sim FUSE file system: a read-only view of a local directory whose
// every operation is timed by the ServicePool model and counted.
//
// The kernel is kept from caching anything (direct_io on every open, entry
// and attribute timeouts from the parameters, 0 by default), so each epoch of
// a reader really reaches the simulated PFS.
//
// Control: the hidden, unlisted directory `.pfs-sim/` at the root holds
// `stats`, a JSON snapshot {"params": {...}, "ops": {...}} taken at open.
// It costs no simulated time and is not counted.
#pragma once

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse3/fuse_lowlevel.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fault_plan.h"
#include "fs/fuse/parallel_dirops.h"
#include "op_counters.h"
#include "reply_scheduler.h"
#include "service_model.h"
#include "sim_params.h"

namespace pfssim {

class SimFs {
 public:
  // `source_root` must be an existing directory (checked by the caller).
  SimFs(std::string source_root, const SimParams& params);

  // The low-level operation table; userdata must be a SimFs*.
  static const fuse_lowlevel_ops& Ops();

  // Starts the reply thread. Call after fuse_daemonize (fork drops threads).
  void Start();
  // Sends every pending reply. Call after the session loop, before destroy.
  void Stop();

  // The INIT exchange, for tierfs::InstallReplyPatch<SimFs>.
  tierfs::InitReplyPatch& init_patch() { return init_patch_; }

  // The JSON served by .pfs-sim/stats.
  std::string StatsJson() const;

  // Handlers, public so the C callbacks in sim_fs.cc can reach them.
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Getattr(fuse_req_t req, fuse_ino_t ino);
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void Releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Readlink(fuse_req_t req, fuse_ino_t ino);
  void Statfs(fuse_req_t req, fuse_ino_t ino);
  void Init(fuse_conn_info* conn);
  OpCounters& counters() { return counters_; }

 private:
  // Reserved inode numbers of the control files.
  static constexpr fuse_ino_t kControlDirIno = 2;
  static constexpr fuse_ino_t kStatsIno = 3;

  // Path of `ino` relative to the root ("" for the root); false if unknown.
  bool PathOf(fuse_ino_t ino, std::string& path) const;
  // The inode number for `path`, assigned on first sight. Never forgotten.
  fuse_ino_t InoOf(const std::string& path);
  // The kernel forgot `ino`: with renumber=1 its path gets a new number.
  void Forget(fuse_ino_t ino);
  std::string SourcePath(const std::string& path) const { return source_root_ + "/" + path; }

  // Replies after a metadata round trip.
  void AfterMeta(std::function<void()> reply);
  void ControlAttr(fuse_ino_t ino, struct stat& st) const;

  const std::string source_root_;
  const SimParams params_;
  const FaultPlan faults_;
  ServicePool meta_pool_;
  ServicePool data_pool_;
  OpCounters counters_;
  std::unique_ptr<ReplyScheduler> scheduler_;
  tierfs::InitReplyPatch init_patch_;

  mutable std::mutex inodes_mu_;    // guards paths_ and inos_; a leaf lock
  std::vector<std::string> paths_;  // index = inode number
  std::unordered_map<std::string, fuse_ino_t> inos_;
};

}  // namespace pfssim
