// Catch2's implementation, compiled once into pplab_catch_main and linked into
// every test binary. Catch2 declares its Session only where the implementation
// is, so each main runs the tests through RunCatchTests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/catch_main.h"

namespace pplab {

int RunCatchTests(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace pplab
