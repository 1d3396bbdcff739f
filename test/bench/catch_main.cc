// The Catch2 runner of the benchmark-suite unit tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
