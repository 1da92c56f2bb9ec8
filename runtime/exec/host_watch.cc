#include "runtime/exec/host_watch.h"

#include <cxxabi.h>
#include <execinfo.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace pplab {
namespace {

// What the SIGURG handler records: the interrupted thread's return
// addresses. Written only by the handler, while HostStack holds kCapture.
constexpr int kMaxFrames = 64;
void* g_frames[kMaxFrames];
std::atomic<int> g_frame_count{-1};
std::mutex g_capture;

extern "C" void RecordFrames(int) {
  const int n = ::backtrace(g_frames, kMaxFrames);
  g_frame_count.store(n, std::memory_order_release);
}

// "lib.so(_ZN5pplab3FooEv+0x12) [0x7f...]" with the name demangled.
std::string Demangled(const std::string& symbol) {
  const size_t open = symbol.find('(');
  const size_t plus = open == std::string::npos ? std::string::npos : symbol.find('+', open);
  if (plus == std::string::npos || plus == open + 1) return symbol;
  int status = 0;
  char* name = abi::__cxa_demangle(symbol.substr(open + 1, plus - open - 1).c_str(), nullptr, nullptr, &status);
  std::string out = symbol;
  if (status == 0 && name != nullptr) out = symbol.substr(0, open + 1) + name + symbol.substr(plus);
  std::free(name);
  return out;
}

}  // namespace

std::vector<std::string> HostStack(pthread_t thread, std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(g_capture);
  void* warm[1];
  ::backtrace(warm, 1);  // loads the unwinder here, not inside the handler
  struct sigaction record {};
  struct sigaction previous {};
  record.sa_handler = RecordFrames;
  sigemptyset(&record.sa_mask);
  record.sa_flags = SA_RESTART;  // the interrupted call goes on as before
  if (::sigaction(SIGURG, &record, &previous) != 0) return {};
  g_frame_count.store(-1, std::memory_order_release);
  if (::pthread_kill(thread, SIGURG) == 0) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (g_frame_count.load(std::memory_order_acquire) < 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const int n = g_frame_count.load(std::memory_order_acquire);
  // SIGURG is ignored by default: a signal that comes after this is harmless.
  ::sigaction(SIGURG, &previous, nullptr);
  std::vector<std::string> frames;
  if (n <= 2) return frames;
  // The first two frames are the handler's and the kernel's signal return.
  char** names = ::backtrace_symbols(g_frames + 2, n - 2);
  if (names == nullptr) return frames;
  for (int i = 0; i < n - 2; ++i) frames.push_back(Demangled(names[i]));
  std::free(names);
  return frames;
}

HostWatch::HostWatch(std::chrono::milliseconds bound, std::string bound_name, OnStuck on_stuck)
    : bound_(bound), bound_name_(std::move(bound_name)), on_stuck_(std::move(on_stuck)), thread_([this] { Run(); }) {}

HostWatch::~HostWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HostWatch::SetStep(int step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

void HostWatch::Enter(const Action& action) {
  std::lock_guard<std::mutex> lock(mutex_);
  inside_ = action;
  host_ = ::pthread_self();
  since_ = std::chrono::steady_clock::now();
}

void HostWatch::Leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  inside_.reset();
}

void HostWatch::Run() {
  // Looks a few times per bound (at most once a second): the line comes at
  // most a quarter of the bound, or a second, after the bound has passed.
  const auto period = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(1000), std::max<std::chrono::milliseconds>(bound_ / 4, std::chrono::milliseconds(1)));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && !reported_) {
    wake_.wait_for(lock, period);
    if (stopping_ || !inside_) continue;
    const auto inside_for = std::chrono::steady_clock::now() - since_;
    if (inside_for <= bound_) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f", std::chrono::duration<double>(inside_for).count());
    const std::string line = "the host has been inside " + FormatAction(*inside_) + " of step " +
                             std::to_string(step_) + " for " + seconds + " s, more than " + bound_name_ +
                             ": a CUDA call there is blocked, most likely behind a posted NCCL operation whose peer "
                             "never came";
    reported_ = true;
    const pthread_t host = host_;
    lock.unlock();
    on_stuck_(line, HostStack(host, std::chrono::seconds(2)));
    lock.lock();
  }
}

}  // namespace pplab
