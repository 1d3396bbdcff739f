// ReadPeerInputs, ResolvePeers and ReadCommandLine: what peers= refers to.
#include "fs/mount/mount_inputs.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "require_ok.h"
#include "temp_tree.h"

namespace tierfs {
namespace {

using Catch::Matchers::Contains;

MountConfig Parsed(const std::string& options) {
  return RequireOk(ParseCommandLine({"tierfs", "/d", "/m", "-o", options}));
}

// The configuration `options` resolve to with `inputs`, or the error.
Result<MountConfig> Resolved(const std::string& options, const PeerInputs& inputs) {
  MountConfig config = Parsed(options);
  if (Status s = ResolvePeers(inputs, &config); !s.ok()) return s;
  return config;
}

TEST_CASE("ResolvePeers fills the peers from the options", "[options][peer]") {
  MountConfig c =
      RequireOk(Resolved("ram=1G,peers=n1+n2+n3,peer_name=n2,peer_port=7800,peer_job=j1,"
                         "munge_socket=/run/m.socket,peer_timeout=0.5",
                         PeerInputs{}));
  const JobPeersConfig& p = c.tiering.peers;
  REQUIRE(c.tiering.peers_enabled());
  CHECK(p.peers.size() == 3);
  CHECK(p.peers[0].port == 7800);
  CHECK(p.self == "n2");
  CHECK(p.job == "j1");
  CHECK(p.munge_socket == "/run/m.socket");
  CHECK(p.timeout == std::chrono::milliseconds(500));
  CHECK_FALSE(RequireOk(Resolved("ram=1G", PeerInputs{})).tiering.peers_enabled());
}

TEST_CASE("ResolvePeers takes the host name, the job and the file from its inputs",
          "[options][peer]") {
  PeerInputs in;
  in.host = "n2";
  in.slurm_job_id = "4242";
  in.slurm_cluster = "alps";
  in.file_text = "n1\nn2 n2:7801\n";
  MountConfig c = RequireOk(Resolved("ram=1G,peers=/etc/peers", in));
  CHECK(c.tiering.peers.self == "n2");
  CHECK(c.tiering.peers.job == "slurm:alps:4242");
  CHECK(c.tiering.peers.peers.size() == 2);
  CHECK(c.peer_port == 7801);  // this node's own line
  CHECK(RequireOk(Resolved("ram=1G,peers=n1+n2,peer_job=mine", in)).tiering.peers.job == "mine");
}

TEST_CASE("ResolvePeers refuses peers it cannot use", "[options][peer]") {
  PeerInputs in;
  in.host = "n9";
  Status outside = Resolved("ram=1G,peers=n1+n2,peer_job=j", in).status();
  CHECK_THAT(outside.message(), Contains("'n9', is not in the list"));
  CHECK(outside.code() == EINVAL);
  CHECK_THAT(Resolved("ram=1G,peers=n1+n2,peer_name=n3,peer_job=j", in).status().message(),
             Contains("'n3', is not in the list"));
  CHECK_THAT(Resolved("ram=1G,peers=n1+n2,peer_name=n1", in).status().message(),
             Contains("needs peer_job="));
  in.slurm_job_id = std::string(300, '7');
  CHECK_THAT(Resolved("ram=1G,peers=n1+n2,peer_name=n1", in).status().message(),
             Contains("too long"));
}

TEST_CASE("ReadPeerInputs reads the peers file, the host name and the job", "[options][peer]") {
  testing::TempTree tree;
  tree.Write("peers", "a\nb\n");
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_CLUSTER_NAME", "alps", 1);
  PeerInputs in = RequireOk(ReadPeerInputs(Parsed("ram=1G,peers=" + tree.Abs("peers"))));
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_CLUSTER_NAME");
  CHECK(in.file_text == "a\nb\n");
  CHECK(in.slurm_job_id == "4242");
  CHECK(in.slurm_cluster == "alps");
  CHECK(in.host.find('.') == std::string::npos);
  CHECK(RequireOk(ReadPeerInputs(Parsed("ram=1G"))).host.empty());  // nothing without peers=

  Status unopened = ReadPeerInputs(Parsed("ram=1G,peers=/nonexistent/peers,peer_job=j")).status();
  CHECK_THAT(unopened.message(), Contains("cannot open '/nonexistent/peers'"));
  CHECK(unopened.code() == ENOENT);
  CHECK_THAT(ReadPeerInputs(Parsed("ram=1G,peers=/dev/zero,peer_job=j")).status().message(),
             Contains("not a regular file"));
}

TEST_CASE("ReadCommandLine resolves the peers of a mount only", "[options][peer]") {
  MountConfig c = RequireOk(
      ReadCommandLine({"tierfs", "/d", "/m", "-o", "ram=1G,peers=n1+n2,peer_name=n1,peer_job=j"}));
  CHECK(c.tiering.peers.self == "n1");
  Status unopened =
      ReadCommandLine({"tierfs", "/d", "/m", "-o", "ram=1G,peers=/nonexistent/p,peer_job=j"})
          .status();
  CHECK(unopened.code() == ENOENT);
  // --help reads nothing.
  CHECK(RequireOk(ReadCommandLine({"tierfs", "-o", "peers=/nonexistent/p", "--help"})).action ==
        MountConfig::Action::kHelp);
}

}  // namespace
}  // namespace tierfs
