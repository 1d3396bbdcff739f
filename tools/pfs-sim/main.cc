// pfs-sim: mounts a local directory read-only as a slow, busy parallel file
// system. See sim_params.h for the model and `pfs-sim --help` for options.
//
//   pfs-sim SOURCE MOUNTPOINT [-f] [-d] [-o meta_ms=1,read_ms=2,...]
//
// Without -f it daemonizes once the mount is ready. Counters and parameters:
// `cat MOUNTPOINT/.pfs-sim/stats`. Unmount with `fusermount3 -u MOUNTPOINT`.
#include <fmt/format.h>
#include <malloc.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_fs.h"

namespace {

struct CommandLine {
  std::string source;
  pfssim::SimParams params;
  std::string error;
  bool help = false;
};

// fuse_opt_parse callback: takes SOURCE and pfs-sim's own -o keys, leaves
// the mountpoint and FUSE options for fuse_parse_cmdline / fuse_session_new.
int TakeOption(void* data, const char* arg, int key, fuse_args*) {
  auto* cl = static_cast<CommandLine*>(data);
  if (key == FUSE_OPT_KEY_NONOPT) {
    if (cl->source.empty()) {
      cl->source = arg;
      return 0;
    }
    return 1;
  }
  if (key != FUSE_OPT_KEY_OPT) return 1;
  if (std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0) {
    cl->help = true;
    return 0;
  }
  const std::string text = arg;
  const size_t eq = text.find('=');
  const std::string name = text.substr(0, eq);
  if (!pfssim::IsParamKey(name)) return 1;
  if (eq == std::string::npos) {
    cl->error = fmt::format("option {} needs a value", name);
  } else if (std::string err = pfssim::SetParam(cl->params, name, text.substr(eq + 1));
             !err.empty() && cl->error.empty()) {
    cl->error = err;
  }
  return 0;
}

void PrintUsage() {
  fmt::print(
      "usage: pfs-sim SOURCE MOUNTPOINT [-f] [-d] [-o opt[,opt...]]\n"
      "Mounts SOURCE read-only at MOUNTPOINT, slowed down like a busy parallel\n"
      "file system. Counters: cat MOUNTPOINT/.pfs-sim/stats (JSON).\n"
      "  -f  stay in the foreground    -d  FUSE debug output\n"
      "pfs-sim options:\n{}",
      pfssim::ParamsHelp());
}

}  // namespace

int main(int argc, char* argv[]) {
  // Read buffers (up to 1 MiB) come from the heap and are reused, not
  // mapped and faulted in afresh per request.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  CommandLine cl;
  if (fuse_opt_parse(&args, &cl, nullptr, TakeOption) != 0) return 2;
  if (cl.help) {
    PrintUsage();
    return 0;
  }
  if (cl.error.empty()) cl.error = pfssim::Validate(cl.params);
  if (!cl.error.empty()) {
    fmt::print(stderr, "pfs-sim: {}\n", cl.error);
    return 2;
  }
  struct stat st;
  if (cl.source.empty() || stat(cl.source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fmt::print(stderr, "pfs-sim: SOURCE '{}' is not a directory (try --help)\n", cl.source);
    return 2;
  }
  char* real = realpath(cl.source.c_str(), nullptr);
  cl.source = real;
  free(real);

  fuse_cmdline_opts opts;
  if (fuse_parse_cmdline(&args, &opts) != 0) return 2;
  if (opts.mountpoint == nullptr) {
    fmt::print(stderr, "pfs-sim: no MOUNTPOINT given (try --help)\n");
    return 2;
  }
  fuse_opt_add_arg(&args, "-oro,fsname=pfs-sim,subtype=pfs-sim");

  int status = 1;
  pfssim::SimFs fs(cl.source, cl.params);
  fuse_session* se = fuse_session_new(&args, &pfssim::SimFs::Ops(), sizeof(fuse_lowlevel_ops), &fs);
  if (se != nullptr) {
    if (fuse_set_signal_handlers(se) == 0) {
      if (fuse_session_mount(se, opts.mountpoint) == 0) {
        // A PFS client looks up the names of one directory in parallel.
        if (int err = tierfs::InstallReplyPatch<pfssim::SimFs>(se); err != 0) {
          fmt::print(stderr, "pfs-sim: cannot set up the session's I/O: {}\n", std::strerror(-err));
          fuse_session_unmount(se);
          fuse_remove_signal_handlers(se);
          fuse_session_destroy(se);
          return 1;
        }
        fuse_daemonize(opts.foreground);
        fs.Start();
        fuse_loop_config* loop = fuse_loop_cfg_create();
        fuse_loop_cfg_set_max_threads(loop, cl.params.threads);
        fuse_loop_cfg_set_clone_fd(loop, 1);
        status = fuse_session_loop_mt(se, loop) == 0 ? 0 : 1;
        fuse_loop_cfg_destroy(loop);
        fs.Stop();
        fuse_session_unmount(se);
      }
      fuse_remove_signal_handlers(se);
    }
    fuse_session_destroy(se);
  }
  free(opts.mountpoint);
  fuse_opt_free_args(&args);
  return status;
}
