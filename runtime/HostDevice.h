//===- HostDevice.h - functions for both targets ----------------*- C++ -*-===//
//
// AUTOPAR_RT_HOST_DEVICE marks the inline functions the CPU runtime and
// the CUDA kernels share (Float16.h, support/Philox.h, support/Quantize.h,
// optim/OptimizerMath.h): __host__ __device__ under nvcc, nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_HOSTDEVICE_H
#define AUTOPAR_RUNTIME_HOSTDEVICE_H

#if defined(__CUDACC__)
#define AUTOPAR_RT_HOST_DEVICE __host__ __device__
#else
#define AUTOPAR_RT_HOST_DEVICE
#endif

#endif // AUTOPAR_RUNTIME_HOSTDEVICE_H
