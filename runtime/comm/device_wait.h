// Bounded host waits for a device. On a GPU the NCCL waits only order
// streams (c10d_group.h), so the first place the host blocks on a message is
// where it reads a result back or waits for the stream. These helpers make
// that place a poll bounded by --comm-timeout.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <string>

namespace pplab {

// Blocks until `device` has run everything queued so far on its current
// stream, at most `timeout`; then throws pplab::Error: "`what`: the GPU has
// not finished the queued work after N s (--comm-timeout) ...". Returns at
// once on the CPU, where every wait already blocked the host.
void WaitForDevice(const c10::Device& device, std::chrono::milliseconds timeout, const std::string& what);

// `tensor` on the host, after a bounded WaitForDevice of its device: the
// read-back of a collective's result.
at::Tensor HostCopy(const at::Tensor& tensor, std::chrono::milliseconds timeout, const std::string& what);

}  // namespace pplab
