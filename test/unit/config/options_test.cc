// ParseCommandLine and ParseSize.
#include "fs/config/options.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "require_ok.h"

namespace tierfs {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

Result<MountConfig> Attempt(std::vector<std::string> args) {
  args.insert(args.begin(), "tierfs");
  return ParseCommandLine(args);
}

MountConfig Parse(std::vector<std::string> args) { return RequireOk(Attempt(std::move(args))); }

// The message of the error parsing `args` fails with: a bad command line
// (EINVAL).
std::string ErrorOf(std::vector<std::string> args) {
  Result<MountConfig> parsed = Attempt(std::move(args));
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == EINVAL);
  return parsed.status().message();
}

TEST_CASE("ParseCommandLine takes SOURCE and MOUNTPOINT with defaults", "[options]") {
  MountConfig c = Parse({"/data", "/mnt"});
  CHECK(c.action == MountConfig::Action::kMount);
  CHECK(c.source == "/data");
  CHECK(c.mountpoint == "/mnt");
  CHECK_FALSE(c.foreground);
  CHECK_FALSE(c.debug);
  CHECK(c.threads == 64);
  CHECK(c.scan_threads == 0);  // auto: tuned while scanning
  CHECK(c.index.empty());
  CHECK(c.index_check == IndexCheck::kDirs);
  CHECK(c.index_wait == 600);
  CHECK(c.max_open_files == 0);
  CHECK(c.entry_timeout == 86400);
  CHECK(c.attr_timeout == 86400);
  CHECK(c.read_ahead_kb == MountConfig::kMaxRequestReadAhead);
  CHECK_FALSE(c.nonempty);
  CHECK(c.log_level == kInfo);
  CHECK(c.fuse_options.empty());
}

TEST_CASE("ParseCommandLine accepts positionals anywhere", "[options]") {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"-o", "threads=8", "/data", "-f", "/mnt"},
                                             {"/data", "-o", "threads=8", "/mnt", "-f"},
                                             {"-f", "-othreads=8", "/data", "/mnt"},
                                             {"-f", "-o", "threads=8", "--", "/data", "/mnt"}}) {
    MountConfig c = Parse(args);
    CHECK(c.source == "/data");
    CHECK(c.mountpoint == "/mnt");
    CHECK(c.threads == 8);
    CHECK(c.foreground);
  }
  CHECK(Parse({"--", "-odd", "-f"}).source == "-odd");  // after "--" nothing is an option
}

TEST_CASE("ParseCommandLine rejects the wrong number of positionals", "[options]") {
  CHECK(ErrorOf({}) == "expected SOURCE and MOUNTPOINT, got 0 paths (see --help)");
  CHECK(ErrorOf({"/data"}) == "expected SOURCE and MOUNTPOINT, got 1 path (see --help)");
  CHECK(ErrorOf({"/a", "/b", "/c"}) == "expected SOURCE and MOUNTPOINT, got 3 paths (see --help)");
  CHECK(ErrorOf({"-f", "-o", "threads=2"}) ==
        "expected SOURCE and MOUNTPOINT, got 0 paths (see --help)");
}

TEST_CASE("ParseCommandLine reads -o lists in every form", "[options]") {
  SECTION("a list") {
    MountConfig c = Parse({"s", "m", "-o", "threads=4,scan_threads=3,nonempty,log_level=debug"});
    CHECK(c.threads == 4);
    CHECK(c.scan_threads == 3);
    CHECK(c.nonempty);
    CHECK(c.log_level == kDebug);
  }
  SECTION("the -oX form") {
    MountConfig c = Parse({"s", "m", "-omax_open_files=100,read_ahead_kb=0"});
    CHECK(c.max_open_files == 100);
    CHECK(c.read_ahead_kb == 0);
  }
  SECTION("repeated -o: the last value wins") {
    MountConfig c = Parse(
        {"-o", "threads=4", "s", "m", "-o", "threads=9,entry_timeout=1.5", "-oattr_timeout=0"});
    CHECK(c.threads == 9);
    CHECK(c.entry_timeout == 1.5);
    CHECK(c.attr_timeout == 0);
  }
  SECTION("empty items are harmless") {
    MountConfig c = Parse({"s", "m", "-o", ",threads=5,,nonempty,"});
    CHECK(c.threads == 5);
    CHECK(c.nonempty);
  }
  SECTION("-o with no list") {
    CHECK_THAT(ErrorOf({"s", "m", "-o"}), StartsWith("-o needs an option list"));
  }
}

TEST_CASE("ParseCommandLine reads -f, -d, --help and --version", "[options]") {
  MountConfig f = Parse({"s", "m", "-f"});
  CHECK(f.foreground);
  CHECK_FALSE(f.debug);
  for (const char* d : {"-d", "--debug"}) {
    MountConfig c = Parse({"s", d, "m"});
    CHECK(c.debug);
    CHECK(c.foreground);  // -d implies -f
  }
  for (const char* h : {"-h", "--help"}) {
    CHECK(Parse({h}).action == MountConfig::Action::kHelp);
    CHECK(Parse({"s", "m", h}).action == MountConfig::Action::kHelp);
  }
  for (const char* v : {"-V", "--version"}) {
    CHECK(Parse({v}).action == MountConfig::Action::kVersion);
  }
  std::string usage = UsageText("tierfs");
  CHECK_THAT(usage, StartsWith("usage: tierfs SOURCE MOUNTPOINT"));
  CHECK_THAT(usage, Contains("max_open_files=N") && Contains("allow_other"));
}

TEST_CASE("ParseCommandLine names an unknown option and the one it was likely meant as",
          "[options]") {
  // One line: the nearest option a typo away, not a list of them all.
  CHECK(ErrorOf({"s", "m", "-o", "threads=2,bogus=1"}) ==
        "unknown option 'bogus' (tierfs --help lists the options)");
  CHECK(ErrorOf({"s", "m", "-o", "prefech=order"}) ==
        "unknown option 'prefech' (did you mean 'prefetch'?)");
  CHECK(ErrorOf({"s", "m", "-oThreads=2"}) == "unknown option 'Threads' (did you mean 'threads'?)");
  CHECK(ErrorOf({"s", "m", "-o", "alow_other"}) ==
        "unknown option 'alow_other' (did you mean 'allow_other'?)");
  CHECK(ErrorOf({"s", "m", "-o", "rm=1G"}) == "unknown option 'rm' (did you mean 'ram'?)");
  // Case does not count: all three letters of RAM differ from ram.
  CHECK(ErrorOf({"s", "m", "-o", "RAM=1G"}) == "unknown option 'RAM' (did you mean 'ram'?)");
  CHECK(ErrorOf({"s", "m", "-o", "Tier=/t:1G"}) == "unknown option 'Tier' (did you mean 'tier'?)");
  CHECK(ErrorOf({"s", "m", "-o", "xyz=1"}) ==
        "unknown option 'xyz' (tierfs --help lists the options)");
  // A FUSE flag given a value, or a FUSE option wanting a value given none.
  CHECK(ErrorOf({"s", "m", "-o", "allow_other=1"}) == "option 'allow_other' takes no value");
  CHECK(ErrorOf({"s", "m", "-o", "fsname"}) == "option 'fsname' needs a value: fsname=V");
  // Unknown command-line arguments.
  CHECK(ErrorOf({"s", "m", "-x"}) == "unknown argument '-x' (see --help)");
  CHECK(ErrorOf({"s", "m", "--foreground"}) == "unknown argument '--foreground' (see --help)");
}

TEST_CASE("ParseCommandLine checks whether an option takes a value", "[options]") {
  CHECK(ErrorOf({"s", "m", "-o", "threads"}) == "option 'threads' needs a value: threads=N");
  CHECK(ErrorOf({"s", "m", "-o", "log_level"}) ==
        "option 'log_level' needs a value: log_level=LEVEL");
  CHECK(ErrorOf({"s", "m", "-o", "nonempty=1"}) == "option 'nonempty' takes no value");
  CHECK(ErrorOf({"s", "m", "-o", "nonempty="}) == "option 'nonempty' takes no value");
}

TEST_CASE("ParseCommandLine rejects out-of-range and malformed numbers", "[options]") {
  for (const char* bad :
       {"threads=0", "threads=1025", "threads=-1", "threads=", "threads=4x", "threads= 4",
        "threads=0x10", "threads=99999999999999999999", "scan_threads=0", "max_open_files=15",
        "max_open_files=1073741825", "read_ahead_kb=1048577"}) {
    INFO(bad);
    CHECK_THAT(ErrorOf({"s", "m", "-o", bad}), Contains("is not a whole number from"));
  }
  CHECK(ErrorOf({"s", "m", "-o", "threads=1025"}) ==
        "option 'threads': '1025' is not a whole number from 1 to 1024");
  for (const char* bad :
       {"entry_timeout=-1", "entry_timeout=abc", "entry_timeout=inf", "entry_timeout=nan",
        "attr_timeout=1e10", "attr_timeout=", "attr_timeout=1s"}) {
    INFO(bad);
    CHECK_THAT(ErrorOf({"s", "m", "-o", bad}), Contains("is not a number of seconds >= 0"));
  }
  MountConfig edges = Parse({"s", "m", "-o",
                             "threads=1024,scan_threads=1,max_open_files=16,read_ahead_kb=1048576,"
                             "entry_timeout=1e9,attr_timeout=0.25"});
  CHECK(edges.threads == 1024);
  CHECK(edges.scan_threads == 1);
  CHECK(Parse({"s", "m", "-o", "scan_threads=4,scan_threads=auto"}).scan_threads == 0);
  CHECK_THAT(ErrorOf({"s", "m", "-o", "scan_threads=Auto"}),
             Contains("is not a whole number from"));
  CHECK(edges.max_open_files == 16);
  CHECK(edges.read_ahead_kb == 1048576);
  CHECK(edges.entry_timeout == 1e9);
  CHECK(edges.attr_timeout == 0.25);
}

TEST_CASE("ParseCommandLine reads log_level", "[options]") {
  CHECK(Parse({"s", "m", "-o", "log_level=error"}).log_level == kError);
  CHECK(Parse({"s", "m", "-o", "log_level=warning"}).log_level == kWarning);
  CHECK(Parse({"s", "m", "-o", "log_level=info"}).log_level == kInfo);
  CHECK(Parse({"s", "m", "-o", "log_level=debug"}).log_level == kDebug);
  CHECK(ErrorOf({"s", "m", "-o", "log_level=verbose"}) ==
        "option 'log_level': 'verbose' is not one of error, warning, info, debug");
  CHECK_THAT(ErrorOf({"s", "m", "-o", "log_level=DEBUG"}), Contains("is not one of"));
}

TEST_CASE("ParseCommandLine ignores fstab-only options", "[options]") {
  MountConfig c = Parse({"s", "m", "-o",
                         "defaults,nofail,_netdev,auto,noauto,user,users,nouser,owner,"
                         "x-systemd.automount,x-systemd.requires=/data,comment=hi"});
  CHECK(c.fuse_options.empty());
  CHECK(c.threads == 64);
}

TEST_CASE("ParseCommandLine passes FUSE options through in order", "[options]") {
  MountConfig c = Parse({"s", "-o", "allow_other,threads=2,fsname=mydata", "m", "-o",
                         "noatime,defaults,max_read=131072", "-osubtype=x"});
  CHECK(c.fuse_options == std::vector<std::string>{"allow_other", "fsname=mydata", "noatime",
                                                   "max_read=131072", "subtype=x"});
  CHECK(c.threads == 2);
}

TEST_CASE("ParseCommandLine reads an escaped comma as part of a value", "[options]") {
  // "\," is a literal comma, not a separator.
  CHECK_THAT(ErrorOf({"s", "m", "-o", "log_level=info\\,debug"}),
             Contains("'info,debug' is not one of"));
  CHECK_THAT(ErrorOf({"s", "m", "-o", "bogus=a\\,b,nonempty"}),
             StartsWith("unknown option 'bogus'"));
  MountConfig c = Parse({"s", "m", "-o", "fsname=a\\,b,allow_other"});
  CHECK(c.fuse_options.size() == 2);
  CHECK(c.fuse_options[1] == "allow_other");
}

// Regression: fuse_options were stored unescaped ("fsname=a,b") and then
// joined with commas into libfuse's -o list, where the value split into
// "fsname=a" and an unknown option "b", failing the mount.
TEST_CASE("Regression: escaped comma in a FUSE option value splits libfuse's -o list",
          "[options][regression]") {
  MountConfig c = Parse({"s", "m", "-o", "fsname=a\\,b,subtype=x\\y"});
  CHECK(c.fuse_options == std::vector<std::string>{"fsname=a\\,b", "subtype=x\\\\y"});
}

// The grammar of sizes is ParseByteSize's (units_test.cc); ParseSize adds the
// option's name to the error.
TEST_CASE("ParseSize returns ParseByteSize's bytes", "[options]") {
  CHECK(RequireOk(ParseSize("8GiB", "ram")) == 8ull << 30);
  CHECK(RequireOk(ParseSize("0", "ram")) == 0);
}

TEST_CASE("ParseSize names the option and the syntax when the value is not a size", "[options]") {
  for (const char* bad : {"", "-1G", "10X", "1.8e19"}) {
    INFO(bad);
    CHECK(ParseSize(bad, "cache_size").status().code() == EINVAL);
  }
  CHECK(ParseSize("10X", "cache_size").status().message() ==
        "option 'cache_size': '10X' is not a size (a number with an optional K, M, G "
        "or T suffix)");
}

TEST_CASE("ParseCommandLine takes the index options", "[options]") {
  MountConfig c = Parse({"s", "m", "-o", "index=/var/idx,index_check=none,index_wait=5"});
  CHECK(c.index == "/var/idx");
  CHECK(c.index_check == IndexCheck::kNone);
  CHECK(c.index_wait == 5);
  CHECK(Parse({"s", "m", "-o", "index=auto,index_check=full"}).index == "auto");
  CHECK(Parse({"s", "m", "-o", "index_check=full"}).index_check == IndexCheck::kFull);
  // Refused (fstab has no current directory), with the path it would be from here.
  CHECK(ErrorOf({"s", "m", "-o", "index=rel/idx"}) ==
        "option 'index': 'rel/idx' is not an absolute path; options take paths from / (fstab "
        "has no current directory): index=" +
            (std::filesystem::current_path() / "rel/idx").string());
  CHECK(ErrorOf({"s", "m", "-o", "index="}) == "option 'index' needs a file or auto");
  CHECK(ErrorOf({"s", "m", "-o", "index_check=some"}) ==
        "option 'index_check': 'some' is not one of full, dirs, none");
  CHECK_THAT(ErrorOf({"s", "m", "-o", "index_wait=86401"}), Contains("is not a whole number"));
}

TEST_CASE("ParseCommandLine takes the listing mode", "[options]") {
  CHECK(Parse({"s", "m"}).readdir == ReaddirMode::kPlus);
  CHECK(Parse({"s", "m", "-o", "readdir=plus"}).readdir == ReaddirMode::kPlus);
  CHECK(Parse({"s", "m", "-o", "readdir=plain"}).readdir == ReaddirMode::kPlain);
  CHECK(Parse({"s", "m", "-o", "readdir=auto"}).readdir == ReaddirMode::kAuto);
  CHECK(ErrorOf({"s", "m", "-o", "readdir=fast"}) ==
        "option 'readdir': 'fast' is not one of plus, plain, auto");
}

}  // namespace
}  // namespace tierfs

namespace tierfs {
namespace {

TEST_CASE("ParseCommandLine takes the passthrough mode", "[options]") {
  // Decided per mount (passthrough_backing.h: PassthroughNotPaying).
  CHECK(Parse({"s", "m"}).passthrough == PassthroughWant::kAuto);
  CHECK(Parse({"s", "m", "-o", "passthrough=auto"}).passthrough == PassthroughWant::kAuto);
  CHECK(Parse({"s", "m", "-o", "passthrough=on"}).passthrough == PassthroughWant::kOn);
  CHECK(Parse({"s", "m", "-o", "passthrough=off"}).passthrough == PassthroughWant::kOff);
  CHECK(ErrorOf({"s", "m", "-o", "passthrough=yes"}) ==
        "option 'passthrough': 'yes' is not one of auto, on, off");
}

TEST_CASE("ParseCommandLine takes who decides opens", "[options]") {
  CHECK(Parse({"s", "m"}).permissions == PermissionsBy::kDefault);
  CHECK(Parse({"s", "m", "-o", "permissions=source"}).permissions == PermissionsBy::kSource);
  CHECK(Parse({"s", "m", "-o", "permissions=snapshot"}).permissions == PermissionsBy::kSnapshot);
  CHECK(ErrorOf({"s", "m", "-o", "permissions=kernel"}) ==
        "option 'permissions': 'kernel' is not one of source, snapshot");
}

TEST_CASE("ParseCommandLine refuses peer options it cannot use", "[options][peer]") {
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "ram=1G,peers=rel/file,peer_name=n1,peer_job=j"}),
             Contains("not an absolute path"));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_name=x"}), Contains("need peers="));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_port=7000"}), Contains("need peers="));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_listen=10.0.0.1"}), Contains("need peers="));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_listen=node1"}), Contains("not an IPv4 address"));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "ram=1G,chunk_size=2G,peers=a+b,peer_name=a,peer_job=j"}),
             Contains("chunk_size up to 1024 MiB"));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_timeout=0"}), Contains("between 0.05 and 600"));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_name=a;b"}), Contains("not a valid peer name"));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "munge_socket=rel"}), Contains("not an absolute path"));
  CHECK_THAT(ErrorOf({"/d", "/m", "-o", "peer_source_ports=700-800"}), Contains("need peers="));
  // Parsing reads no file: peers= is kept as given, resolved later.
  MountConfig c = Parse({"/d", "/m", "-o", "ram=1G,peers=/nonexistent/peers,peer_job=j"});
  CHECK(c.peers == "/nonexistent/peers");
  CHECK_FALSE(c.tiering.peers_enabled());
}

TEST_CASE("ParseCommandLine takes the ports a root daemon connects to peers from",
          "[options][peer]") {
  const std::string peers = "ram=1G,peers=a+b,peer_name=a,peer_job=j";
  CHECK(Parse({"/d", "/m", "-o", peers}).tiering.peers.source_ports ==
        SourcePort::kReservedIfAllowed);
  CHECK(
      Parse({"/d", "/m", "-o", peers + ",peer_source_ports=700-799"}).tiering.peers.source_ports ==
      SourcePort{700, 799});
  CHECK(
      Parse({"/d", "/m", "-o", peers + ",peer_source_ports=900-900"}).tiering.peers.source_ports ==
      SourcePort{900, 900});
  CHECK(Parse({"/d", "/m", "-o", peers + ",peer_source_ports=off"}).tiering.peers.source_ports ==
        SourcePort::kAny);
  for (const char* bad : {"600-1024", "0-10", "800-700", "600", "600-", "a-b", "600-700x", "on", "",
                          "-1-5", "65536-70000"}) {
    INFO(bad);
    CHECK_THAT(ErrorOf({"/d", "/m", "-o", peers + ",peer_source_ports=" + bad}),
               Contains("option 'peer_source_ports': '" + std::string(bad) + "' is not"));
  }
}

}  // namespace
}  // namespace tierfs
