// The Catch2 runner of the tierfs command-line tools' unit tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
