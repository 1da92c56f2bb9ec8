#include "tools/local_capacity.h"

#include <catch2/catch.hpp>
#include <string>

namespace pplab::cli::local_capacity_test {
namespace {

TEST_CASE("local capacity: model state counts on the host for a CPU device only", "[capacity]") {
  // 1e9 parameters: 16 GB of state, plus 300 MB of LibTorch per process.
  CHECK(HostBytesNeeded(LocalLoad{2, 1e9, true}) == 16e9 + 600e6);
  CHECK(HostBytesNeeded(LocalLoad{2, 1e9, false}) == 600e6);
}

TEST_CASE("local capacity: the reason names the need, what is available and the way out", "[capacity]") {
  const LocalLoad cpu{2, 1e9, true};
  CHECK(WhyNotLocal(cpu, 2, 17e9, "--oversubscribe") == "");
  CHECK(WhyNotLocal(cpu, 2, 16e9, "--oversubscribe") ==
        "2 local worker processes need about 16600 MB (model state and LibTorch), this machine has 16000 MB "
        "available: use fewer ranks or a smaller model, or pass --oversubscribe");
  // One process is checked too (the kernel's OOM killer would end it).
  CHECK(WhyNotLocal(LocalLoad{1, 8e9, true}, 2, 24e9, "--oversubscribe") ==
        "1 local worker process needs about 128300 MB (model state and LibTorch), this machine has 24000 MB "
        "available: use fewer ranks or a smaller model, or pass --oversubscribe");
  // The same model on GPUs needs the host for LibTorch alone.
  CHECK(WhyNotLocal(LocalLoad{8, 8e9, false}, 16, 24e9, "--oversubscribe") == "");
  CHECK(WhyNotLocal(LocalLoad{8, 8e9, false}, 16, 2e9, "--oversubscribe") ==
        "8 local worker processes need about 2400 MB (LibTorch), this machine has 2000 MB available: use fewer ranks "
        "or a smaller model, or pass --oversubscribe");
  // At most 4 processes a core; unknown memory (0) is not checked.
  CHECK(WhyNotLocal(LocalLoad{9, 1, true}, 2, 0, "--oversubscribe") ==
        "9 local worker processes on 2 cores (at most 4 per core): use fewer ranks, start them on several nodes "
        "(torchrun), or pass --oversubscribe");
  CHECK(WhyNotLocal(LocalLoad{8, 1e12, true}, 2, 0, "--oversubscribe") == "");
}

}  // namespace
}  // namespace pplab::cli::local_capacity_test
