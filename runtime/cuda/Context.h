//===- Context.h - what CUDA kernels and generated code share ---*- C++ -*-===//
//
// The CUDA target's DeviceContext (runtime/Device.h): the stream every
// kernel of a step runs on, the cuBLASLt handle and workspace, and scratch
// for reductions. Created and owned by the Device (runtime/cuda/Device.cu).
//
// AUTOPAR_CUDA_CHECK_CTX(ctx, call) / AUTOPAR_CUBLAS_CHECK_CTX(ctx, call): a
// failing CUDA or cuBLASLt call is a broken program or machine, not bad input: it prints
// "FILE:LINE: rank R: CALL failed: REASON" and ends the process (exit 1).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CONTEXT_H
#define AUTOPAR_RUNTIME_CUDA_CONTEXT_H

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

namespace autopar::rt {

struct DeviceContext {
  int rank = 0;
  int deviceId = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  /// cuBLASLt workspace.
  void *gemmWorkspace = nullptr;
  int64_t gemmWorkspaceBytes = 0;
  /// Scratch for multi-pass reductions (loss means, layer-norm parameter
  /// gradients, norms), grown on demand by cuda::scratch().
  void *scratch = nullptr;
  int64_t scratchBytes = 0;
  int numSMs = 1;
  /// Which kernels the 16-bit attention runs (an rt::AttentionBackend:
  /// Device::setAttentionBackend).
  int32_t attentionBackend = 0;
  /// cuDNN's handle and the attention graphs built for it
  /// (runtime/cuda/CudnnAttention.cpp), made on first use.
  std::shared_ptr<void> cudnn;
};

namespace cuda {

[[noreturn]] void fail(const DeviceContext *ctx, const char *file, int line,
                       const char *call, const char *reason);
/// At least `bytes` bytes of ctx.scratch (synchronizes and reallocates
/// when it grows; generated code calls it only outside its kernels).
void *scratch(DeviceContext &ctx, int64_t bytes);

/// Kernels' loads and stores of float, bfloat16 and IEEE half elements:
/// computed in float, stored rounded to nearest even.
__device__ inline float toFloat(float x) { return x; }
__device__ inline float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ inline float toFloat(__half x) { return __half2float(x); }
template <typename T> __device__ T fromFloat(float x);
template <> __device__ inline float fromFloat(float x) { return x; }
template <> __device__ inline __nv_bfloat16 fromFloat(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ inline __half fromFloat(float x) {
  return __float2half_rn(x);
}

} // namespace cuda
} // namespace autopar::rt

#define AUTOPAR_CUDA_CHECK_CTX(ctx, call)                                      \
  do {                                                                         \
    cudaError_t autoparErr_ = (call);                                          \
    if (autoparErr_ != cudaSuccess)                                            \
      ::autopar::rt::cuda::fail((ctx), __FILE__, __LINE__, #call,             \
                                cudaGetErrorString(autoparErr_));              \
  } while (0)
#define AUTOPAR_CUBLAS_CHECK_CTX(ctx, call)                                    \
  do {                                                                         \
    cublasStatus_t autoparSt_ = (call);                                        \
    if (autoparSt_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::autopar::rt::cuda::fail((ctx), __FILE__, __LINE__, #call,             \
                                cublasLtGetStatusString(autoparSt_));            \
  } while (0)
/// Checks the last kernel launch.
#define AUTOPAR_CUDA_CHECK_LAUNCH(ctx)                                         \
  AUTOPAR_CUDA_CHECK_CTX(ctx, cudaGetLastError())

#endif // AUTOPAR_RUNTIME_CUDA_CONTEXT_H
