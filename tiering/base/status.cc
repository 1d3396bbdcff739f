#include "tiering/base/status.h"

#include <cstring>
#include <string>

namespace tierfs {

Status Status::FromErrno(int code, std::string_view what) {
  if (code <= 0) code = EIO;
  std::string message(what);
  message += ": ";
  message += std::strerror(code);
  return Status(code, std::move(message));
}

Status Status::Context(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Status(code_, std::move(message));
}

}  // namespace tierfs
