//===- Device.h - memory and math of the target a program runs on -*- C++
//-*-===//
//
// The emitted program's trainer (runtime/train/) is the same for every
// target; what differs is where tensors live and who updates them. A Device
// is that difference: host memory and OpenMP loops on the CPU target
// (runtime/cpu/Device.cpp), GPU memory, a stream and CUDA kernels on the
// CUDA target (runtime/cuda/Device.cu). A program links exactly one.
//
// Pointers from allocate() are device pointers: the generated step
// functions take them (runtime/Model.h StepIO), the optimizer methods
// below update them, and the host reads or writes them only through
// upload() / download(). All work is issued in order on one queue (the
// CUDA stream); download() waits for what was issued before it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DEVICE_H
#define AUTOPAR_RUNTIME_DEVICE_H

#include "runtime/Model.h"
#include "runtime/Status.h"
#include "runtime/cpu/Attention.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autopar::rt {

struct OptimizerConfig;
struct ParamSlice;

/// What generated code needs of the device (a stream, library handles,
/// scratch): defined by each target (runtime/cuda/Context.h; empty on the
/// CPU).
struct DeviceContext;

struct DeviceFree {
  void operator()(char *p) const;
};
/// Device memory, freed on destruction.
using DeviceBuffer = std::unique_ptr<char, DeviceFree>;

class Device {
public:
  /// Opens the device of this process: on the CUDA target GPU
  /// `localRank % count` of this node (errors name the rank). `rank` is
  /// the world rank, for messages.
  static Status create(int localRank, int rank, std::unique_ptr<Device> &out);
  /// What the target needs first thing in main(), before anything else
  /// (the CPU target: the threads of a rank sharing its node's cores, which
  /// may re-execute the program with `argv`; see runtime/cpu/Kernels.h
  /// setRankThreads).
  static void prepareProcess(char **argv);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  /// What the log summary calls it ("cpu", "NVIDIA H100 80GB HBM3").
  const std::string &name() const;
  /// Which kernels compute attention (plan attention_backend), before the
  /// first step: on the CUDA target the 16-bit attention runs through
  /// cuDNN where it may (runtime/cuda/CudnnAttention.h); the CPU target has
  /// only its own kernels. A backend the device cannot run is an error.
  Status setAttentionBackend(AttentionBackend backend);
  /// What computes, in one line `train` prints at start: the CPU's GEMM
  /// library (oneDNN), its kernels and the OpenMP threads; the GPU's name
  /// and what runs its attention.
  std::string describe() const;
  /// One line when the environment makes the device slower than it can be
  /// (the CPU target: an ONEDNN_MAX_CPU_ISA capping oneDNN's kernels below
  /// what the CPU runs), else "".
  std::string performanceWarning() const;
  /// Whether device pointers are host pointers (the CPU target).
  bool hostMemory() const;
  DeviceContext *context();
  /// The queue all work of the device is issued on: the CUDA stream (a
  /// cudaStream_t), null on the CPU. The communicator orders its
  /// collectives after it (Communicator::setComputeStream).
  void *queue();

  /// `bytes` zeroed bytes of device memory, aligned for any element type
  /// (64 bytes at least); null when out of memory.
  DeviceBuffer allocate(int64_t bytes);
  /// Host -> device and device -> host copies; download() returns when the
  /// bytes are on the host (after the work issued before it).
  void upload(void *device, const void *host, int64_t bytes);
  void download(void *host, const void *device, int64_t bytes);
  /// A device -> device copy, ordered with the work issued before and
  /// after it.
  void copy(void *to, const void *from, int64_t bytes);
  /// Sets `bytes` bytes of device memory to 0.
  void zero(void *device, int64_t bytes);
  /// Waits for all issued work.
  void synchronize();

  /// Runs the generated step function `fn` on the device's queue. The CUDA
  /// target runs the first call of each (fn, io.accumulate) eagerly (so
  /// that scratch buffers reach their size), records the second into a CUDA
  /// graph and replays that graph from then on: one launch per step instead
  /// of one per kernel. The graph holds the pointers and scalars of `io` and
  /// of io.inputs / io.outputs (numInputs and numOutputs pointers) as they
  /// were when it was recorded; a call with other ones records again.
  void runStep(StepFunction fn, const StepIO &io, int numInputs,
               int numOutputs);

  /// The optimizer over tensors in device memory (runtime/optim/Optimizer.h
  /// for the semantics): the sum of the squares of every gradient (in
  /// double, in an order that does not depend on the thread count), and
  /// one AdamW / SGD step, its gradients multiplied by `gradScale` first
  /// (the clipping coefficient, over the loss scale of fp16-mixed).
  double gradSquaredSum(const std::vector<ParamSlice> &slices);
  void optimizerStep(const OptimizerConfig &config,
                     const std::vector<ParamSlice> &slices, int64_t stepCount,
                     double lr, float gradScale = 1.0f);

private:
  struct Impl;
  Device();
  std::unique_ptr<Impl> impl;
};

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_DEVICE_H
