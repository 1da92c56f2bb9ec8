// The main of the CPU test binaries (the GPU tests have their own,
// tests/gpu/gpu_main.cpp).
#include "tests/catch_main.h"

int main(int argc, char** argv) { return pplab::RunCatchTests(argc, argv); }
