// Status and Result<T>: the one error shape of the cold path (mount, scan,
// index, tier start-up, peers start-up, option and file checks).
//
// A Status is ok, or an errno and a message a user can act on ("tier
// '/nvme/t': cannot create the lock file: Permission denied"). The errno
// lets a caller decide (ENOENT: create it; EBUSY: wait); the message is
// what gets printed. Result<T> is a T, or the Status saying why there is
// none. Objects that can fail to start are made by a factory returning
// Result<std::unique_ptr<X>>, not by a constructor that throws, and a
// factory or a connection step says why it failed in its Result or Status:
// no `int* err` or `std::string* error` out-parameter.
//
// The hot path (read, promote, fetch) keeps 0 or -errno: no allocation per
// call.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tierfs {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  // `code` is an errno (> 0); 0 or less is taken as EIO, never as ok.
  static Status Error(int code, std::string message) {
    return Status(code > 0 ? code : EIO, std::move(message));
  }
  // "what: strerror(code)".
  static Status FromErrno(int code, std::string_view what);

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }  // 0 when ok
  // "" when ok.
  const std::string& message() const { return message_; }
  // The message, or "ok".
  std::string ToString() const { return ok() ? std::string("ok") : message_; }
  // The same error with "context: " before its message; ok stays ok.
  Status Context(std::string_view context) const;

 private:
  Status(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code_ = 0;
  std::string message_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as a return value
  Result(Status error) : status_(std::move(error)) {
    if (status_.ok()) status_ = Status::Error(EINVAL, "internal: a Result made of an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }  // ok when there is a value
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tierfs
