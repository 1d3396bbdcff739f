// What a mount's command line refers to beyond its words: the peers= file,
// this node's host name and the Slurm job's identity. ReadPeerInputs reads
// them (files, gethostname, the environment); ResolvePeers, pure, fills the
// peer configuration from them, so both halves can be tested apart.
#pragma once

#include <string>
#include <vector>

#include "fs/config/options.h"
#include "tiering/base/status.h"

namespace tierfs {

struct PeerInputs {
  std::string file_text;      // peers=FILE's text; "" for a list given inline
  std::string host;           // this node's short host name (up to the first '.')
  std::string slurm_job_id;   // SLURM_JOB_ID; "" outside a Slurm job
  std::string slurm_cluster;  // SLURM_CLUSTER_NAME; "" if unset
};

// Reads what `config`'s peers= needs: nothing without peers=. Fails with the
// errno of a peers= file that cannot be opened, or EINVAL for one that is
// not a regular file of at most 1 MiB.
Result<PeerInputs> ReadPeerInputs(const MountConfig& config);

// Fills config->tiering.peers from peers=, peer_name=, peer_port= and
// `inputs`; this node listens on its own line's port. Fails (EINVAL) with a
// message for the user: a bad list, this node not in it, no job identity.
// Nothing to do without peers=.
Status ResolvePeers(const PeerInputs& inputs, MountConfig* config);

// The mount's command line read whole: ParseCommandLine, then, for a mount,
// ReadPeerInputs and ResolvePeers. What tierfs's main() calls.
Result<MountConfig> ReadCommandLine(const std::vector<std::string>& args);

}  // namespace tierfs
