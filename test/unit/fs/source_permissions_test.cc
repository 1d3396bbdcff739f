// SourcePermissions: SOURCE's answers kept per caller (uid, gid and the set
// of supplementary groups), for the ttl or until revalidated.
#include "fs/fuse/source_permissions.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <thread>

#include "require_ok.h"
#include "scan_tree.h"

namespace tierfs {
namespace {

constexpr gid_t kProj = 4242;

// SOURCE as an ACL entry "group:proj:---" would answer on every file:
// members of kProj are refused, everyone else allowed. Counts the asks.
class GroupAclBackend final : public BackendWrapper {
 public:
  using BackendWrapper::BackendWrapper;
  int access_as(const std::string&, const AccessCaller& who, int) override {
    asked++;
    for (gid_t g : who.groups) {
      if (g == kProj) return -EACCES;
    }
    return 0;
  }
  int asked = 0;
};

struct Fixture {
  testing::TempTree tree;
  std::unique_ptr<Namespace> ns;
  std::unique_ptr<GroupAclBackend> backend;
  NodeId file = 0;

  Fixture() {
    tree.Write("neg.txt", "secret");
    ns = testing::ScanTree(tree);
    backend = std::make_unique<GroupAclBackend>(
        std::shared_ptr<Backend>(RequireOk(NewPosixBackend(tree.root()))));
    file = *ns->Resolve("neg.txt");
  }
};

TEST_CASE("SourcePermissions asks anew when the caller's groups differ", "[permissions]") {
  Fixture f;
  SourcePermissions perms(f.backend.get(), f.ns.get(), std::chrono::milliseconds(0));
  const AccessCaller plain{1000, 1000, {1000}};
  const AccessCaller in_proj{1000, 1000, {1000, kProj}};
  CHECK(perms.Check(plain, f.file, R_OK) == 0);
  CHECK(perms.Check(in_proj, f.file, R_OK) == -EACCES);  // was: the kept "allowed"
  CHECK(f.backend->asked == 2);
  // Each answer kept for its own set of groups, whatever their order or repeats.
  CHECK(perms.Check(AccessCaller{1000, 1000, {kProj, 1000, kProj}}, f.file, R_OK) == -EACCES);
  CHECK(perms.Check(plain, f.file, R_OK) == 0);
  CHECK(f.backend->asked == 2);
  // Another uid, gid or mask is another question.
  CHECK(perms.Check(AccessCaller{1001, 1000, {1000}}, f.file, R_OK) == 0);
  CHECK(perms.Check(AccessCaller{1000, 1001, {1000}}, f.file, R_OK) == 0);
  CHECK(perms.Check(plain, f.file, R_OK | X_OK) == 0);
  CHECK(f.backend->asked == 5);
}

TEST_CASE("Regression: a caller whose groups cannot be read is refused, not checked without them",
          "[permissions]") {
  Fixture f;
  SourcePermissions perms(f.backend.get(), f.ns.get(), std::chrono::milliseconds(0));
  AccessCaller unknown{1000, 1000, {}};
  unknown.groups_known = false;  // pid 0 (another pid namespace), or a caller gone
  CHECK(perms.Check(unknown, f.file, R_OK) == -EACCES);  // was: allowed, kProj never seen
  CHECK(perms.Check(unknown, f.file, R_OK) == -EACCES);
  CHECK(f.backend->asked == 0);
  // The same uid with groups read is asked, and its answer is not the refusal's.
  CHECK(perms.Check(AccessCaller{1000, 1000, {}}, f.file, R_OK) == 0);
  CHECK(f.backend->asked == 1);
}

TEST_CASE("SourcePermissions keeps an answer for its ttl, with 0 until revalidated",
          "[permissions]") {
  Fixture f;
  const auto ttl = GENERATE(std::chrono::milliseconds(50), std::chrono::milliseconds(0));
  SourcePermissions perms(f.backend.get(), f.ns.get(), ttl);
  const AccessCaller plain{1000, 1000, {}};
  CHECK(perms.Check(plain, f.file, R_OK) == 0);
  CHECK(perms.Check(plain, f.file, R_OK) == 0);
  CHECK(f.backend->asked == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  CHECK(perms.Check(plain, f.file, R_OK) == 0);
  CHECK(f.backend->asked == (ttl.count() > 0 ? 2 : 1));
  perms.Revalidate();
  CHECK(perms.Check(plain, f.file, R_OK) == 0);
  CHECK(f.backend->asked == (ttl.count() > 0 ? 3 : 2));
}

TEST_CASE("SourcePermissions stays right when its sets of groups overflow", "[permissions]") {
  Fixture f;
  SourcePermissions perms(f.backend.get(), f.ns.get(), std::chrono::milliseconds(0));
  // More distinct sets of groups than are kept: everything is forgotten
  // at the overflow, and no set is ever taken for another.
  for (gid_t g = 0; g < SourcePermissions::kMaxGroupSets + 10; ++g) {
    CHECK(perms.Check(AccessCaller{1000, 1000, {g + 10000}}, f.file, R_OK) == 0);
  }
  CHECK(perms.Check(AccessCaller{1000, 1000, {kProj}}, f.file, R_OK) == -EACCES);
  CHECK(perms.Check(AccessCaller{1000, 1000, {10000}}, f.file, R_OK) == 0);
}

}  // namespace
}  // namespace tierfs
