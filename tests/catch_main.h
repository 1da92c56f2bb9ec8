// The one entry to Catch2's runner (tests/catch_impl.cpp), for the mains of
// the test binaries.
#pragma once

namespace pplab {

// Runs the test cases linked into this binary, as Catch2's own main would.
int RunCatchTests(int argc, char** argv);

}  // namespace pplab
