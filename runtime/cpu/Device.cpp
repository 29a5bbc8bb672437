//===- Device.cpp - the CPU target's Device: host memory, OpenMP loops ----===//
//
// Device memory is host memory (64-byte aligned, zeroed; buffers of 2 MiB
// and more are 2 MiB aligned and asked to be backed by transparent huge
// pages, which cuts the TLB misses of kernels streaming through the arena);
// copies are memcpy; the optimizer is runtime/optim/Optimizer.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/Device.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/optim/Optimizer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

namespace autopar::rt {

/// The CPU target's generated code needs nothing from the device.
struct DeviceContext {};

struct Device::Impl {
  DeviceContext context;
  std::string name = "cpu";
};

void DeviceFree::operator()(char *p) const { std::free(p); }

Device::Device() : impl(std::make_unique<Impl>()) {}
Device::~Device() = default;

void Device::prepareProcess(char **argv) { cpu::setRankThreads(argv); }

Status Device::create(int, int, std::unique_ptr<Device> &out) {
  out.reset(new Device());
  return Status::ok();
}

const std::string &Device::name() const { return impl->name; }
Status Device::setAttentionBackend(AttentionBackend backend) {
  if (backend == AttentionBackend::Cudnn)
    return Status::error("attention_backend \"cudnn\": the CPU target has "
                         "no cuDNN");
  return Status::ok();
}
std::string Device::describe() const {
  return "cpu (" + cpu::blasDescription() + ")";
}
std::string Device::performanceWarning() const {
  return cpu::blasKernelWarning();
}
bool Device::hostMemory() const { return true; }
DeviceContext *Device::context() { return &impl->context; }
void *Device::queue() { return nullptr; }

DeviceBuffer Device::allocate(int64_t bytes) {
  // aligned_alloc needs a multiple of the alignment, and never 0 bytes.
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytesNeeded = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  const size_t alignment = bytesNeeded >= kHugePage ? kHugePage : 64;
  const size_t size = (bytesNeeded + alignment - 1) / alignment * alignment;
  char *p = static_cast<char *>(std::aligned_alloc(alignment, size));
#ifdef MADV_HUGEPAGE
  if (p && alignment == kHugePage)
    madvise(p, size, MADV_HUGEPAGE); // advice only: failure changes nothing
#endif
  if (p)
    std::memset(p, 0, size);
  return DeviceBuffer(p);
}

void Device::upload(void *device, const void *host, int64_t bytes) {
  if (device != host && bytes > 0)
    std::memcpy(device, host, static_cast<size_t>(bytes));
}

void Device::download(void *host, const void *device, int64_t bytes) {
  if (device != host && bytes > 0)
    std::memcpy(host, device, static_cast<size_t>(bytes));
}

void Device::copy(void *to, const void *from, int64_t bytes) {
  if (to != from && bytes > 0)
    std::memcpy(to, from, static_cast<size_t>(bytes));
}

void Device::zero(void *device, int64_t bytes) {
  if (bytes > 0)
    std::memset(device, 0, static_cast<size_t>(bytes));
}

void Device::synchronize() {}

void Device::runStep(StepFunction fn, const StepIO &io, int, int) { fn(io); }

double Device::gradSquaredSum(const std::vector<ParamSlice> &slices) {
  return autopar::rt::gradSquaredSum(slices);
}

void Device::optimizerStep(const OptimizerConfig &config,
                           const std::vector<ParamSlice> &slices,
                           int64_t stepCount, double lr,
                           float gradScale) {
  autopar::rt::optimizerStep(config, slices, stepCount, lr, gradScale);
}

} // namespace autopar::rt
