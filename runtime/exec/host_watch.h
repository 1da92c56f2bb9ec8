// A bound on how long the host may stay inside one action of a step.
//
// On a GPU the host only queues an action's kernels: it leaves the action
// within milliseconds, and every wait pplab makes for the device is a poll
// bounded by --comm-timeout. A host that stays inside one action far longer
// is blocked in a CUDA call that waits for kernels already running, such as
// a posted NCCL receive whose sender never sends: a wait pplab cannot bound
// itself. NCCL's watchdog would end the process some seconds later with its
// own dump; the watch says first, in one line, where the host stopped.
//
// With the line comes the host thread's native stack at that moment
// (HostStack): which CUDA, NCCL or LibTorch call it is blocked in, which
// tells a lazy kernel load from a device allocation or a library's set-up.
//
// Torch-free: a thread and a mutex. One watch serves one thread's steps.
#pragma once

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "schedules/action.h"

namespace pplab {

class HostWatch {
 public:
  // Called once, on the watch's thread, when the host has stayed inside one
  // action longer than `bound`, with a line that names the action, its step
  // and the time. It is meant to end the process; if it returns, the watch
  // reports nothing more.
  // `stack`: the host thread's frames, innermost first, as
  // HostStack gives them (empty when they could not be taken).
  using OnStuck = std::function<void(const std::string& line, const std::vector<std::string>& stack)>;
  // `bound_name` is how the line names the bound (e.g. "--comm-timeout (60
  // s) + 5 s").
  HostWatch(std::chrono::milliseconds bound, std::string bound_name, OnStuck on_stuck);
  ~HostWatch();
  HostWatch(const HostWatch&) = delete;
  HostWatch& operator=(const HostWatch&) = delete;

  // The step the next actions belong to (as the trainer counts them).
  void SetStep(int step);
  // The host (the calling thread) enters `action` now; Leave (or the next
  // Enter) ends it.
  void Enter(const Action& action);
  void Leave();

 private:
  void Run();

  const std::chrono::milliseconds bound_;
  const std::string bound_name_;
  const OnStuck on_stuck_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool reported_ = false;
  int step_ = 0;
  std::optional<Action> inside_;
  pthread_t host_{};  // the thread inside it
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;  // last: started once the members above exist
};

// The native stack of `thread` (another thread of this process), innermost
// first, one "library(function+offset)" a frame with C++ names demangled:
// the thread is interrupted by a signal (SIGURG, whose handler only records
// the return addresses) and its frames are named here. Empty when the
// thread does not take the signal within `wait`. One capture at a time.
std::vector<std::string> HostStack(pthread_t thread, std::chrono::milliseconds wait);

}  // namespace pplab
