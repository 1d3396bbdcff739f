#include "fs/mount/mount_inputs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tiering/peers/config/peer_list.h"

namespace tierfs {
namespace {

// The peer list file's text: a regular file, at most 1 MiB.
Result<std::string> ReadPeerFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    return Status::Error(
        err, fmt::format("option 'peers': cannot open '{}': {}", path, std::strerror(err)));
  }
  struct stat st;
  std::string text;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (1 << 20);
  if (ok) {
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    text.resize(done);
  }
  ::close(fd);
  if (!ok) {
    return Status::Error(
        EINVAL, fmt::format("option 'peers': '{}' is not a regular file of at most 1 MiB", path));
  }
  return text;
}

std::string Environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool IsPeerFile(const MountConfig& config) { return config.peers.find('/') != std::string::npos; }

}  // namespace

Result<PeerInputs> ReadPeerInputs(const MountConfig& config) {
  PeerInputs inputs;
  if (config.peers.empty()) return inputs;
  if (IsPeerFile(config)) {
    Result<std::string> text = ReadPeerFile(config.peers);
    if (!text.ok()) return text.status();
    inputs.file_text = std::move(text).value();
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  inputs.host = std::string(host).substr(0, std::string(host).find('.'));
  inputs.slurm_job_id = Environment("SLURM_JOB_ID");
  inputs.slurm_cluster = Environment("SLURM_CLUSTER_NAME");
  return inputs;
}

Status ResolvePeers(const PeerInputs& inputs, MountConfig* config) {
  if (config->peers.empty()) return Status::Ok();
  JobPeersConfig& p = config->tiering.peers;
  const auto port = static_cast<uint16_t>(config->peer_port);
  auto list = IsPeerFile(*config) ? ParsePeerFile(inputs.file_text, port)
                                  : ParsePeerInline(config->peers, port);
  if (!list.ok()) {
    return Status::Error(EINVAL, fmt::format("option 'peers': {}", list.status().message()));
  }
  p.peers = std::move(list).value();
  p.self = config->peer_name.empty() ? inputs.host : config->peer_name;
  auto self = std::find_if(p.peers.begin(), p.peers.end(),
                           [&](const PeerEntry& e) { return e.name == p.self; });
  if (self == p.peers.end()) {
    return Status::Error(
        EINVAL, fmt::format("option 'peers': this node, '{}', is not in the list (set peer_name=)",
                            p.self));
  }
  // This node listens where the list says (its own line may name a port).
  config->peer_port = self->port;
  if (p.job.empty()) {
    if (inputs.slurm_job_id.empty()) {
      return Status::Error(EINVAL, "peers= needs peer_job= (or SLURM_JOB_ID in the environment)");
    }
    p.job = fmt::format("slurm:{}:{}", inputs.slurm_cluster, inputs.slurm_job_id);
    if (p.job.size() > 255) {
      return Status::Error(EINVAL, "SLURM_CLUSTER_NAME and SLURM_JOB_ID are too long");
    }
  }
  return Status::Ok();
}

Result<MountConfig> ReadCommandLine(const std::vector<std::string>& args) {
  Result<MountConfig> parsed = ParseCommandLine(args);
  if (!parsed.ok() || parsed->action != MountConfig::Action::kMount) return parsed;
  Result<PeerInputs> inputs = ReadPeerInputs(*parsed);
  if (!inputs.ok()) return inputs.status();
  if (Status resolved = ResolvePeers(*inputs, &*parsed); !resolved.ok()) return resolved;
  return parsed;
}

}  // namespace tierfs
