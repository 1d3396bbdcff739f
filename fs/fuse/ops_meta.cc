// Metadata handlers: all served from the namespace snapshot in memory.
#include <sys/statvfs.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fs/fuse/handler.h"

namespace tierfs {
namespace {

void FillEntry(FsContext& ctx, NodeId id, fuse_entry_param* e) {
  *e = {};
  e->ino = FsContext::InoOf(id);
  ctx.ns().Fill(id, 1, &e->attr);
  e->attr_timeout = ctx.timeouts().attr;
  e->entry_timeout = ctx.timeouts().entry;
}

// Attributes of any inode: 0, or a positive errno.
int AttrOf(FsContext& ctx, fuse_ino_t ino, struct stat* st) {
  if (ctx.IsNode(ino)) {
    ctx.ns().Fill(FsContext::NodeOf(ino), 1, st);
    return 0;
  }
  if (ctx.control().Owns(ino)) return -ctx.control().GetAttr(ino, st);
  return ENOENT;
}

// The i-th entry of directory `ino` (".", "..", then the children in name
// order): its name and inode, or 0 for a control entry with no inode yet.
// Returns false past the end.
bool EntryAt(FsContext& ctx, fuse_ino_t ino, size_t i, std::string_view* name,
             fuse_ino_t* entry_ino) {
  bool control = ino == ctx.control().dir_ino();
  if (i < 2) {
    *name = i == 0 ? "." : "..";
    if (i == 0 || control) {
      *entry_ino = i == 0 ? ino : FUSE_ROOT_ID;
    } else {
      *entry_ino = FsContext::InoOf(ctx.ns().node(FsContext::NodeOf(ino)).parent);
    }
    return true;
  }
  if (control) {
    auto entries = ctx.control().Entries();
    if (i - 2 >= entries.size()) return false;
    *name = entries[i - 2];
    *entry_ino = 0;
    return true;
  }
  auto [begin, end] = ctx.ns().Children(FsContext::NodeOf(ino));
  if (i - 2 >= end - begin) return false;
  NodeId child = begin + static_cast<NodeId>(i - 2);
  *name = ctx.ns().name(child);
  *entry_ino = FsContext::InoOf(child);
  return true;
}

void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  FsContext& ctx = Ctx(req);
  ctx.requests().readdir.fetch_add(1, std::memory_order_relaxed);
  if (ino != ctx.control().dir_ino()) {
    if (!ctx.IsNode(ino)) return ReplyError(req, ENOENT);
    ctx.requests().NoteUse();
    if (!S_ISDIR(ctx.ns().node(FsContext::NodeOf(ino)).mode)) return ReplyError(req, ENOTDIR);
  }
  // A listing of 1.28 M files is ~40,000 of these: the reply buffer is kept
  // per thread (not zeroed and faulted in per request) and names are copied
  // to the stack (not a heap string per entry).
  thread_local std::unique_ptr<char[]> storage;
  thread_local size_t storage_size = 0;
  if (storage_size < size) {
    storage.reset(new char[size]);
    storage_size = size;
  }
  char* const buf = storage.get();
  char name[NAME_MAX + 1];
  size_t used = 0;
  std::string_view view;
  fuse_ino_t entry_ino;
  for (size_t i = static_cast<size_t>(std::max<off_t>(off, 0));
       EntryAt(ctx, ino, i, &view, &entry_ino); ++i) {
    if (ino == FUSE_ROOT_ID && view == ControlDir::kName) continue;  // the control dir shadows it
    if (view.size() > NAME_MAX) continue;                            // no Linux file system has one
    std::memcpy(name, view.data(), view.size());
    name[view.size()] = '\0';
    fuse_entry_param e{};
    if (entry_ino != 0) {
      if (AttrOf(ctx, entry_ino, &e.attr) != 0) continue;
      e.ino = entry_ino;
      e.attr_timeout = ctx.timeouts().attr;
      e.entry_timeout = ctx.timeouts().entry;
    } else if (!plus) {
      e.attr.st_mode = S_IFREG | 0444;  // plain readdir uses only type and d_ino
      e.attr.st_ino = ctx.control().dir_ino();
    } else if (ctx.control().Lookup(name, ControlDir::kListing, &e.attr) != 0) {
      continue;
    } else {
      e.ino = e.attr.st_ino;  // readdirplus hands a lookup of a fresh snapshot over
    }
    char* at = buf + used;
    size_t room = size - used;
    size_t need = plus ? fuse_add_direntry_plus(req, at, room, name, &e, off_t(i + 1))
                       : fuse_add_direntry(req, at, room, name, &e.attr, off_t(i + 1));
    if (need > room) {
      if (plus && entry_ino == 0) ctx.control().Forget(e.ino, 1);  // not handed over
      break;
    }
    used += need;
  }
  fuse_reply_buf(req, buf, used);
}

}  // namespace

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "lookup", [&] {
    FsContext& ctx = Ctx(req);
    ctx.requests().lookup.fetch_add(1, std::memory_order_relaxed);
    fuse_entry_param e{};
    if (parent == FUSE_ROOT_ID && name == ControlDir::kName) {
      ctx.control().DirAttr(&e.attr);
      e.ino = ctx.control().dir_ino();
      e.attr_timeout = e.entry_timeout = ctx.timeouts().attr;
      return (void)fuse_reply_entry(req, &e);
    }
    if (parent == ctx.control().dir_ino()) {
      const uid_t caller = fuse_req_ctx(req)->uid;
      if (int err = ctx.control().Lookup(name, caller, &e.attr)) return ReplyError(req, -err);
      e.ino = e.attr.st_ino;
      e.attr_timeout = ctx.timeouts().attr;  // a snapshot inode never changes
      e.entry_timeout = 0;                   // but every lookup should get a new one
      return (void)fuse_reply_entry(req, &e);
    }
    if (!ctx.IsNode(parent)) return ReplyError(req, ENOENT);
    ctx.requests().NoteUse();
    NodeId dir = FsContext::NodeOf(parent);
    if (!S_ISDIR(ctx.ns().node(dir).mode)) return ReplyError(req, ENOTDIR);
    // Without the kernel's checks (see FsContext::check_access), a lookup
    // needs search permission on the directory and those above it. (An
    // entry the kernel has cached from another caller is not asked again:
    // names and attributes may show; contents are checked at open.)
    if (ctx.check_access() && !ctx.MayAccess(req, dir, X_OK)) return ReplyError(req, EACCES);
    auto child = ctx.ns().Lookup(dir, name);
    if (!child) {
      e.ino = 0;  // a negative entry: the kernel caches the absence too
      e.entry_timeout = ctx.timeouts().entry;
      return (void)fuse_reply_entry(req, &e);
    }
    FillEntry(ctx, *child, &e);
    fuse_reply_entry(req, &e);
  });
}

void OpForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  FsContext& ctx = Ctx(req);
  if (ctx.control().Owns(ino)) ctx.control().Forget(ino, nlookup);
  fuse_reply_none(req);  // namespace nodes live as long as the mount
}

void OpForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  FsContext& ctx = Ctx(req);
  for (size_t i = 0; i < count; ++i) {
    if (ctx.control().Owns(forgets[i].ino))
      ctx.control().Forget(forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info*) {
  Guarded(req, "getattr", [&] {
    FsContext& ctx = Ctx(req);
    ctx.requests().getattr.fetch_add(1, std::memory_order_relaxed);
    if (ctx.IsNode(ino)) ctx.requests().NoteUse();
    struct stat st;
    if (int err = AttrOf(ctx, ino, &st)) return ReplyError(req, err);
    fuse_reply_attr(req, &st, ctx.timeouts().attr);
  });
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  Guarded(req, "readlink", [&] {
    FsContext& ctx = Ctx(req);
    ctx.requests().readlink.fetch_add(1, std::memory_order_relaxed);
    ctx.requests().NoteUse();
    if (!ctx.IsNode(ino)) return ReplyError(req, EINVAL);
    NodeId id = FsContext::NodeOf(ino);
    if (!S_ISLNK(ctx.ns().node(id).mode)) return ReplyError(req, EINVAL);
    fuse_reply_readlink(req, std::string(ctx.ns().link_target(id)).c_str());
  });
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info*) {
  Guarded(req, "readdir", [&] { Readdir(req, ino, size, off, false); });
}

void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info*) {
  Guarded(req, "readdirplus", [&] { Readdir(req, ino, size, off, true); });
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  FsContext& ctx = Ctx(req);
  ctx.requests().statfs.fetch_add(1, std::memory_order_relaxed);
  struct statvfs st = ctx.ns().fs_stats();  // SOURCE's, as seen at the scan
  st.f_files = ctx.ns().size();
  st.f_ffree = st.f_favail = 0;
  st.f_flag |= ST_RDONLY;
  if (st.f_namemax == 0) st.f_namemax = 255;
  fuse_reply_statfs(req, &st);
}

void OpGetxattr(fuse_req_t req, fuse_ino_t, const char*, size_t) {
  Ctx(req).requests().xattr.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, ENODATA);  // no extended attributes are mirrored
}

void OpListxattr(fuse_req_t req, fuse_ino_t, size_t size) {
  Ctx(req).requests().xattr.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) {
    fuse_reply_xattr(req, 0);
  } else {
    fuse_reply_buf(req, nullptr, 0);
  }
}

}  // namespace tierfs
