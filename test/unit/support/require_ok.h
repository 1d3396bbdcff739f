// RequireOk: the value of a Result a test cannot go on without; the test
// stops there, with the Status's message, when there is none.
#pragma once

#include <catch2/catch.hpp>
#include <utility>

#include "tiering/base/status.h"

namespace tierfs {

template <class T>
T RequireOk(Result<T> result) {
  INFO(result.status().message());
  REQUIRE(result.ok());
  return std::move(result).value();
}

}  // namespace tierfs
