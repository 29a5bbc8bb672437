//===- Kernels.cu - CUDA kernels of the emitted programs ------------------===//
//
// The CUDA implementations of runtime/cuda/Kernels.h, each with the
// semantics of its CPU reference (runtime/cpu/Kernels.cpp):
//
//  - Element kernels are grid-stride loops over int64_t indices, so every
//    size fits the grid; row kernels (layer norm, softmax, cross-entropy)
//    use one block per row in a block-stride loop over the rows.
//  - Block reductions use a fixed tree (warp butterflies, then the
//    per-warp values) and blocks of a fixed size, so results do not change
//    from run to run. Sums accumulate in double where the CPU reference
//    does (statistics, softmax denominators of the strided path, losses,
//    reductions).
//  - Sums across blocks (layer-norm parameter gradients, loss sums, column
//    reductions) go through per-block partials in cuda::scratch that a
//    second kernel adds in a fixed order. No float atomics anywhere.
//  - gatherBackward sorts (index, position) pairs with CUB's stable radix
//    sort and adds each index's rows in position order: bit-identical to
//    the CPU reference, which adds them in the same order.
//  - GEMMs run through cuBLASLt on the transposed problem (row-major C is
//    column-major C^T = op(B)^T op(A)^T).
//
// GemmDesc, shapes, strides and the reduced-dim flags are host memory;
// every tensor pointer is device memory. Indices and labels out of range
// (the CPU reference's undefined behavior) never fault here: gather writes
// zeros, gatherBackward skips them, cross-entropy produces NaN.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>

namespace autopar::rt::cuda {

namespace {

/// Threads per block of every kernel but the single-block reductions.
constexpr int kBlock = 256;
/// Threads of the single-block final reductions.
constexpr int kFinalBlock = 1024;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Blocks for a grid-stride loop over `n` items: enough to fill the
/// device, never more than the items need, at least 1.
unsigned gridFor(const DeviceContext &ctx, int64_t n, int block = kBlock) {
  const int64_t needed = ceilDiv(std::max<int64_t>(n, 1), block);
  const int64_t cap = std::max<int64_t>(ctx.numSMs, 1) * 32;
  return static_cast<unsigned>(std::min(needed, cap));
}

/// Blocks for a kernel with one block per row (block-stride loop).
unsigned rowGrid(const DeviceContext &ctx, int64_t rows) {
  return gridFor(ctx, rows, 1);
}

[[noreturn]] void failCall(DeviceContext &ctx, int line, const char *call,
                           const char *reason) {
  fail(&ctx, __FILE__, line, call, reason);
}

/// Rounds a scratch offset up to 256 bytes.
int64_t alignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

__device__ inline int64_t threadIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t threadCount() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
/// fmaxf: a NaN operand is ignored, as std::max(max, x) in the CPU
/// softmax ignores NaN elements (their exp makes the result NaN anyway).
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
/// The max of cpu::reduce: NaN wins.
struct MaxNaNOp {
  __device__ double operator()(double a, double b) const {
    if (isnan(a))
      return a;
    return isnan(b) || b > a ? b : a;
  }
};

/// Reduces `v` over the warp in a fixed butterfly; every lane gets lane
/// 0's result.
template <typename T, typename Op> __device__ T warpReduce(T v, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return __shfl_sync(kFullMask, v, 0);
}

/// Reduces `v` over the block in a fixed tree; every thread gets the
/// result. Every thread of the block must call it (it synchronizes);
/// blockDim.x is a multiple of 32. `shared` holds kWarp values and may be
/// reused by the next call.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T identity, T *shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int numWarps = blockDim.x / kWarp;
  v = warpReduce(v, op);
  __syncthreads(); // the previous call's readers are done with `shared`
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  // Every warp reduces the same per-warp values the same way.
  return warpReduce(lane < numWarps ? shared[lane] : identity, op);
}

template <typename I>
__device__ inline int64_t loadIndex(const I *p, int64_t i) {
  return static_cast<int64_t>(p[i]);
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// The tanh approximation of GELU (cuBLASLt's epilogue).
__device__ inline float geluTanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

/// For matrices of mn = m*n elements, `matrixStride` apart: c = act(c +
/// bias) (the epilogue where cuBLASLt has no algorithm with it), or with
/// `zero` c = act(bias) (k == 0: the product is 0); bias [n] per row, may
/// be null. `total` elements in all.
__global__ void __launch_bounds__(kBlock)
    epilogueKernel(float *c, const float *bias, int64_t total, int64_t mn,
                   int64_t matrixStride, int64_t n, bool gelu, bool zero) {
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t within = t % mn;
    float *p = c + (t / mn) * matrixStride + within;
    float v = zero ? 0.0f : *p;
    if (bias)
      v += bias[within % n];
    *p = gelu ? geluTanh(v) : v;
  }
}

/// Alignment in bytes (a power of two, 4 to 256) that every address
/// or byte offset in `bits` (OR-ed together) has.
uint32_t alignmentOf(uint64_t bits) {
  uint32_t align = 256;
  while (align > 4 && bits % align != 0)
    align /= 2;
  return align;
}

/// cuBLASLt objects of one GEMM call, destroyed with it.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t aLayout = nullptr, bLayout = nullptr,
                         cLayout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t algo = {};
  /// Batch count the layouts were made for (0: none yet).
  int64_t count = 0;
  bool epilogue = false;

  void destroyLayouts() {
    if (aLayout)
      cublasLtMatrixLayoutDestroy(aLayout);
    if (bLayout)
      cublasLtMatrixLayoutDestroy(bLayout);
    if (cLayout)
      cublasLtMatrixLayoutDestroy(cLayout);
    aLayout = bLayout = cLayout = nullptr;
    count = 0;
  }
  ~LtPlan() {
    destroyLayouts();
    if (op)
      cublasLtMatmulDescDestroy(op);
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
  }
};

/// What cuBLASLt's algorithm choice depends on: the handle, element type,
/// operations, matrix shapes, leading dims and batch strides, batch count,
/// alignments, epilogue and workspace.
struct LtKey {
  std::tuple<cublasLtHandle_t, int, int, int, uint64_t, uint64_t, int64_t,
             int64_t, uint64_t, uint64_t, int64_t, int64_t, int64_t, int64_t,
             int64_t, int64_t>
      shape;
  std::tuple<uint32_t, uint32_t, uint32_t, int, uint64_t> config;
  bool operator<(const LtKey &o) const {
    return std::tie(shape, config) < std::tie(o.shape, o.config);
  }
};
/// The heuristic's pick for a key, and whether it includes the epilogue.
struct LtChoice {
  cublasLtMatmulHeuristicResult_t algo;
  bool epilogue;
};

/// Algorithm choices made so far: cublasLtMatmulAlgoGetHeuristic costs
/// tens of microseconds, and a step without a CUDA graph (one with
/// collectives, the first steps) calls gemm() hundreds of times on a few
/// distinct shapes. gemm() runs on the thread that issues the step.
std::map<LtKey, LtChoice> &ltCache() {
  static std::map<LtKey, LtChoice> cache;
  return cache;
}

/// One batch dim after collapsing: extent and the element strides of A
/// and B.
struct BatchDim {
  int64_t extent, aStride, bStride;
};

/// The most matrices one cuBLASLt call multiplies (its grids' z extent).
constexpr int64_t kMaxBatchCount = 65535;

} // namespace

namespace {

/// The element type of a GEMM's A, B and C.
struct GemmType {
  cudaDataType_t type;
  int64_t bytes;
};

/// gemm() for A, B, C of element type `t` (32-bit compute); epilogues only
/// for float (checked by the callers).
void gemmImpl(DeviceContext &ctx, const GemmDesc &desc, GemmType t,
              const void *aData, const void *bData, void *cData,
              Epilogue epilogue, const float *bias) {
  // Activations times a weight as one product of batch * m rows: larger
  // tiles than a strided batch of m-row products.
  GemmDesc d = desc;
  foldBatchIntoRows(d);
  const char *a = static_cast<const char *>(aData);
  const char *b = static_cast<const char *>(bData);
  char *c = static_cast<char *>(cData);
  const int64_t eb = t.bytes;
  int64_t batch = 1;
  for (int i = 0; i < d.batchRank; ++i)
    batch *= d.batchShape[i];
  if (batch <= 0 || d.m <= 0 || d.n <= 0)
    return;
  const bool hasBias =
      epilogue == Epilogue::Bias || epilogue == Epilogue::BiasGelu;
  const bool gelu =
      epilogue == Epilogue::Gelu || epilogue == Epilogue::BiasGelu;
  if (hasBias && !bias)
    failCall(ctx, __LINE__, "cuda::gemm", "bias epilogue without a bias");
  const int64_t mn = d.m * d.n;
  if (d.k <= 0) {
    // An empty product: C = act(0 + bias) (0 in every element type).
    if (t.type != CUDA_R_32F) {
      AUTOPAR_CUDA_CHECK_CTX(
          &ctx, cudaMemsetAsync(c, 0, static_cast<size_t>(batch * mn * eb),
                                ctx.stream));
      return;
    }
    epilogueKernel<<<gridFor(ctx, batch * mn), kBlock, 0, ctx.stream>>>(
        reinterpret_cast<float *>(c), hasBias ? bias : nullptr, batch * mn,
        mn, mn, d.n, gelu, /*zero=*/true);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }

  // Collapse the batch dims: drop extents of 1, merge a dim into the one
  // before it where both A and B advance contiguously (C is dense).
  BatchDim dims[cpu::kMaxRank];
  int numDims = 0;
  for (int i = 0; i < d.batchRank; ++i) {
    const int64_t e = d.batchShape[i];
    if (e == 1)
      continue;
    const int64_t sa = d.aBatchStrides[i], sb = d.bBatchStrides[i];
    if (numDims > 0 && dims[numDims - 1].aStride == sa * e &&
        dims[numDims - 1].bStride == sb * e) {
      dims[numDims - 1] = {dims[numDims - 1].extent * e, sa, sb};
    } else {
      dims[numDims++] = {e, sa, sb};
    }
  }
  // C's batch strides (C is dense). The longest dim is cuBLASLt's strided
  // batch (`inner`), the others a loop here.
  int64_t cStrides[cpu::kMaxRank];
  int64_t running = mn;
  int batchDim = -1;
  for (int i = numDims - 1; i >= 0; --i) {
    cStrides[i] = running;
    running *= dims[i].extent;
    if (batchDim < 0 || dims[i].extent > dims[batchDim].extent)
      batchDim = i;
  }
  const BatchDim inner = batchDim >= 0 ? dims[batchDim] : BatchDim{1, 0, 0};
  const int64_t innerCStride = batchDim >= 0 ? cStrides[batchDim] : mn;
  const int64_t outerCount = batch / inner.extent;

  // Alignments over every matrix the calls touch.
  // (Leading dims count too: the algorithms load rows as vectors.)
  uint64_t aBits = reinterpret_cast<uintptr_t>(a) |
                   static_cast<uint64_t>(d.lda * eb);
  uint64_t bBits = reinterpret_cast<uintptr_t>(b) |
                   static_cast<uint64_t>(d.ldb * eb);
  for (int i = 0; i < numDims; ++i) {
    aBits |= static_cast<uint64_t>(std::abs(dims[i].aStride) * eb);
    bBits |= static_cast<uint64_t>(std::abs(dims[i].bStride) * eb);
  }
  uint64_t cBits = reinterpret_cast<uintptr_t>(c);
  if (batch > 1)
    cBits |= static_cast<uint64_t>(mn * eb);

  // cuBLASLt computes D = op(A') op(B') column-major with A' = our B and
  // B' = our A: D [n, m] column-major with ld n is C [m, n] row-major.
  LtPlan plan;
  const cublasOperation_t opA = d.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = d.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t aRows = d.transB ? d.k : d.n, aCols = d.transB ? d.n : d.k;
  const uint64_t bRows = d.transA ? d.m : d.k, bCols = d.transA ? d.k : d.m;
  const cublasLtEpilogue_t ltEpilogue =
      epilogue == Epilogue::Bias       ? CUBLASLT_EPILOGUE_BIAS
      : epilogue == Epilogue::Gelu     ? CUBLASLT_EPILOGUE_GELU
      : epilogue == Epilogue::BiasGelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                       : CUBLASLT_EPILOGUE_DEFAULT;
  AUTOPAR_CUBLAS_CHECK_CTX(
      &ctx, cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  AUTOPAR_CUBLAS_CHECK_CTX(
      &ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &opA, sizeof(opA)));
  AUTOPAR_CUBLAS_CHECK_CTX(
      &ctx, cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &opB, sizeof(opB)));
  AUTOPAR_CUBLAS_CHECK_CTX(&ctx, cublasLtMatmulPreferenceCreate(&plan.pref));
  const uint64_t workspaceBytes =
      static_cast<uint64_t>(std::max<int64_t>(ctx.gemmWorkspaceBytes, 0));
  AUTOPAR_CUBLAS_CHECK_CTX(&ctx,
                   cublasLtMatmulPreferenceSetAttribute(
                       plan.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                       &workspaceBytes, sizeof(workspaceBytes)));
  const uint32_t alignA = alignmentOf(bBits), alignB = alignmentOf(aBits),
                 alignC = alignmentOf(cBits);
  AUTOPAR_CUBLAS_CHECK_CTX(&ctx,
                   cublasLtMatmulPreferenceSetAttribute(
                       plan.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                       &alignA, sizeof(alignA)));
  AUTOPAR_CUBLAS_CHECK_CTX(&ctx,
                   cublasLtMatmulPreferenceSetAttribute(
                       plan.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                       &alignB, sizeof(alignB)));
  AUTOPAR_CUBLAS_CHECK_CTX(&ctx,
                   cublasLtMatmulPreferenceSetAttribute(
                       plan.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                       &alignC, sizeof(alignC)));
  AUTOPAR_CUBLAS_CHECK_CTX(&ctx,
                   cublasLtMatmulPreferenceSetAttribute(
                       plan.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                       &alignC, sizeof(alignC)));

  // Sets the epilogue (on or off) on the descriptor.
  auto setEpilogue = [&](bool on) {
    const cublasLtEpilogue_t e = on ? ltEpilogue : CUBLASLT_EPILOGUE_DEFAULT;
    AUTOPAR_CUBLAS_CHECK_CTX(
        &ctx, cublasLtMatmulDescSetAttribute(
                  plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (on && hasBias) {
      AUTOPAR_CUBLAS_CHECK_CTX(&ctx, cublasLtMatmulDescSetAttribute(
                                 plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                 &bias, sizeof(bias)));
    }
    plan.epilogue = on;
  };
  // Creates layouts for `count` matrices per call and picks an algorithm:
  // with the epilogue where cuBLASLt has one, else without it (the
  // epilogue then runs as a separate kernel).
  auto makePlan = [&](int64_t count) {
    plan.destroyLayouts();
    auto layout = [&](cublasLtMatrixLayout_t &l, uint64_t rows, uint64_t cols,
                      int64_t ld, int64_t stride) {
      AUTOPAR_CUBLAS_CHECK_CTX(
          &ctx, cublasLtMatrixLayoutCreate(&l, t.type, rows, cols, ld));
      if (count > 1) {
        const int32_t count32 = static_cast<int32_t>(count);
        AUTOPAR_CUBLAS_CHECK_CTX(&ctx, cublasLtMatrixLayoutSetAttribute(
                                   l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                   &count32, sizeof(count32)));
        AUTOPAR_CUBLAS_CHECK_CTX(&ctx,
                         cublasLtMatrixLayoutSetAttribute(
                             l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                             &stride, sizeof(stride)));
      }
    };
    layout(plan.aLayout, aRows, aCols, d.ldb, inner.bStride);
    layout(plan.bLayout, bRows, bCols, d.lda, inner.aStride);
    layout(plan.cLayout, d.n, d.m, d.n, innerCStride);
    plan.count = count;
    const LtKey key{{ctx.lt, static_cast<int>(t.type), static_cast<int>(opA),
                     static_cast<int>(opB), aRows, aCols, d.ldb,
                     inner.bStride, bRows, bCols, d.lda, inner.aStride, d.n,
                     d.m, innerCStride, count},
                    {alignA, alignB, alignC, static_cast<int>(epilogue),
                     workspaceBytes}};
    if (auto it = ltCache().find(key); it != ltCache().end()) {
      setEpilogue(it->second.epilogue);
      plan.algo = it->second.algo;
      return;
    }
    for (bool on : {epilogue != Epilogue::None, false}) {
      setEpilogue(on);
      int returned = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
          ctx.lt, plan.op, plan.aLayout, plan.bLayout, plan.cLayout,
          plan.cLayout, plan.pref, 1, &plan.algo, &returned);
      if (st == CUBLAS_STATUS_SUCCESS && returned > 0) {
        ltCache().emplace(key, LtChoice{plan.algo, on});
        return;
      }
      if (!on) {
        char reason[256];
        std::snprintf(reason, sizeof(reason),
                      "%s; no algorithm for m=%lld n=%lld k=%lld batch=%lld",
                      cublasLtGetStatusString(st), static_cast<long long>(d.m),
                      static_cast<long long>(d.n), static_cast<long long>(d.k),
                      static_cast<long long>(count));
        failCall(ctx, __LINE__, "cublasLtMatmulAlgoGetHeuristic", reason);
      }
    }
  };

  const float alpha = d.alpha, beta = 0.0f;
  for (int64_t q = 0; q < outerCount; ++q) {
    // Offsets of index q over the dims other than batchDim (row-major).
    int64_t aOff = 0, bOff = 0, cOff = 0, rem = q;
    for (int i = numDims - 1; i >= 0; --i) {
      if (i == batchDim)
        continue;
      const int64_t idx = rem % dims[i].extent;
      rem /= dims[i].extent;
      aOff += idx * dims[i].aStride;
      bOff += idx * dims[i].bStride;
      cOff += idx * cStrides[i];
    }
    for (int64_t start = 0; start < inner.extent; start += kMaxBatchCount) {
      const int64_t count = std::min(kMaxBatchCount, inner.extent - start);
      if (count != plan.count)
        makePlan(count);
      const char *aPtr = a + (aOff + start * inner.aStride) * eb;
      const char *bPtr = b + (bOff + start * inner.bStride) * eb;
      char *cPtr = c + (cOff + start * innerCStride) * eb;
      AUTOPAR_CUBLAS_CHECK_CTX(
          &ctx, cublasLtMatmul(ctx.lt, plan.op, &alpha, bPtr, plan.aLayout,
                               aPtr, plan.bLayout, &beta, cPtr, plan.cLayout,
                               cPtr, plan.cLayout, &plan.algo.algo,
                               ctx.gemmWorkspace, workspaceBytes, ctx.stream));
      if (epilogue != Epilogue::None && !plan.epilogue) {
        epilogueKernel<<<gridFor(ctx, count * mn), kBlock, 0, ctx.stream>>>(
            reinterpret_cast<float *>(cPtr), hasBias ? bias : nullptr,
            count * mn, mn, innerCStride, d.n, gelu, /*zero=*/false);
        AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
      }
    }
  }
}

} // namespace

void gemm(DeviceContext &ctx, const GemmDesc &d, const float *a, const float *b,
          float *c, Epilogue epilogue, const float *bias) {
  gemmImpl(ctx, d, {CUDA_R_32F, 4}, a, b, c, epilogue, bias);
}

void gemm(DeviceContext &ctx, const GemmDesc &d, const __nv_bfloat16 *a,
          const __nv_bfloat16 *b, __nv_bfloat16 *c) {
  gemmImpl(ctx, d, {CUDA_R_16BF, 2}, a, b, c, Epilogue::None, nullptr);
}

void gemm(DeviceContext &ctx, const GemmDesc &d, const __half *a,
          const __half *b, __half *c) {
  gemmImpl(ctx, d, {CUDA_R_16F, 2}, a, b, c, Epilogue::None, nullptr);
}

//===----------------------------------------------------------------------===//
// Layer normalization
//===----------------------------------------------------------------------===//

namespace {

/// Mean and 1 / sqrt(biased variance + epsilon) of one row in double, as
/// cpu::rowStatistics; every thread of the block gets them.
template <typename T>
__device__ void rowStatistics(const T *xr, int64_t cols, double epsilon,
                              double *shared, double &mean, double &rstd) {
  double sum = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += toFloat(xr[j]);
  sum = blockReduce(sum, SumOp(), 0.0, shared);
  const double m = sum / static_cast<double>(cols);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const double dv = toFloat(xr[j]) - m;
    sq += dv * dv;
  }
  sq = blockReduce(sq, SumOp(), 0.0, shared);
  mean = m;
  rstd = 1.0 / sqrt(sq / static_cast<double>(cols) + epsilon);
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    layerNormForwardKernel(const T *x, const T *scale, const T *bias, T *y,
                           int64_t rows, int64_t cols, double epsilon) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    double meanD, rstdD;
    rowStatistics(xr, cols, epsilon, shared, meanD, rstdD);
    const float m = static_cast<float>(meanD);
    const float rstd = static_cast<float>(rstdD);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = (toFloat(xr[j]) - m) * rstd * toFloat(scale[j]);
      yr[j] = fromFloat<T>(bias ? v + toFloat(bias[j]) : v);
    }
  }
}

/// dx of each row; block b handles the contiguous rows
/// [rows*b/G, rows*(b+1)/G) and, when `partial` is set, writes its sums
/// of dy*xhat and dy per column to partial[b][0][:] and partial[b][1][:]
/// (each thread owns its columns: no races).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    layerNormBackwardKernel(const T *x, const T *scale, const T *dy, T *dx,
                            double *partial, int64_t rows, int64_t cols,
                            double epsilon) {
  __shared__ double shared[kWarp];
  const int64_t numBlocks = gridDim.x;
  const int64_t r0 = rows * blockIdx.x / numBlocks;
  const int64_t r1 = rows * (blockIdx.x + 1) / numBlocks;
  double *ps = partial ? partial + 2 * cols * blockIdx.x : nullptr;
  double *pb = partial ? ps + cols : nullptr;
  if (partial) {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      ps[j] = 0.0;
      pb[j] = 0.0;
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = x + r * cols, *gr = dy + r * cols;
    T *dxr = dx + r * cols;
    double mean, rstd;
    rowStatistics(xr, cols, epsilon, shared, mean, rstd);
    double sumGh = 0, sumGhXhat = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xhat = (toFloat(xr[j]) - mean) * rstd;
      const double g = toFloat(gr[j]);
      const double gh = g * toFloat(scale[j]);
      sumGh += gh;
      sumGhXhat += gh * xhat;
      if (partial) {
        ps[j] += g * xhat;
        pb[j] += g;
      }
    }
    sumGh = blockReduce(sumGh, SumOp(), 0.0, shared);
    sumGhXhat = blockReduce(sumGhXhat, SumOp(), 0.0, shared);
    const double n = static_cast<double>(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xhat = (toFloat(xr[j]) - mean) * rstd;
      const double gh =
          static_cast<double>(toFloat(gr[j])) * toFloat(scale[j]);
      dxr[j] = fromFloat<T>(
          static_cast<float>(rstd / n * (n * gh - sumGh - xhat * sumGhXhat)));
    }
  }
}

/// dscale[j] and dbias[j]: the partials of layerNormBackwardKernel added
/// in a fixed order. A block of kFinalBlock threads takes 32 adjacent
/// columns (each warp reads 32 consecutive doubles of a partial row): warp
/// w adds partials w, w + W, w + 2W, ... (W warps), then the block adds
/// the warps' sums in warp order.
template <typename T>
__global__ void __launch_bounds__(kFinalBlock)
    layerNormParamGradKernel(const double *partial, int64_t numPartials,
                             int64_t cols, T *dscale, T *dbias) {
  constexpr int kWarps = kFinalBlock / kWarp;
  __shared__ double sums[2][kWarps][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t j = blockIdx.x * int64_t{kWarp} + lane;
  double s = 0, b = 0;
  if (j < cols)
    for (int64_t p = warp; p < numPartials; p += kWarps) {
      s += partial[2 * cols * p + j];
      b += partial[2 * cols * p + cols + j];
    }
  sums[0][warp][lane] = s;
  sums[1][warp][lane] = b;
  __syncthreads();
  if (warp != 0 || j >= cols)
    return;
  s = b = 0;
  for (int w = 0; w < kWarps; ++w) {
    s += sums[0][w][lane];
    b += sums[1][w][lane];
  }
  if (dscale)
    dscale[j] = fromFloat<T>(static_cast<float>(s));
  if (dbias)
    dbias[j] = fromFloat<T>(static_cast<float>(b));
}

/// Blocks of layerNormBackwardKernel: a function of the shape only (not
/// of the device's SM count), so the sums do not depend on the GPU; at
/// most 1024 (a full wave of 256-thread blocks on 128 SMs), fewer for wide
/// rows so that the partials stay within 16 MiB.
int64_t layerNormBackwardBlocks(int64_t rows, int64_t cols) {
  const int64_t cap = std::max<int64_t>(
      1,
      (int64_t{16} << 20) / (2 * cols * static_cast<int64_t>(sizeof(double))));
  return std::max<int64_t>(1, std::min({rows, int64_t{1024}, cap}));
}

template <typename T>
void layerNormForwardT(DeviceContext &ctx, const T *x, const T *scale,
                       const T *bias, T *y, int64_t rows, int64_t cols,
                       double epsilon) {
  if (rows <= 0 || cols <= 0)
    return;
  layerNormForwardKernel<<<rowGrid(ctx, rows), kBlock, 0, ctx.stream>>>(
      x, scale, bias, y, rows, cols, epsilon);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename T>
void layerNormBackwardT(DeviceContext &ctx, const T *x, const T *scale,
                        const T *dy, T *dx, T *dscale, T *dbias, int64_t rows,
                        int64_t cols, double epsilon) {
  if (cols <= 0)
    return;
  const bool paramGrads = dscale || dbias;
  const int64_t numBlocks = layerNormBackwardBlocks(rows, cols);
  double *partial = nullptr;
  if (paramGrads)
    partial = static_cast<double *>(scratch(
        ctx, numBlocks * 2 * cols * static_cast<int64_t>(sizeof(double))));
  layerNormBackwardKernel<<<static_cast<unsigned>(numBlocks), kBlock, 0,
                            ctx.stream>>>(
      x, scale, dy, dx, partial, std::max<int64_t>(rows, 0), cols, epsilon);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  if (!paramGrads)
    return;
  layerNormParamGradKernel<<<static_cast<unsigned>((cols + kWarp - 1) /
                                                    kWarp),
                             kFinalBlock, 0, ctx.stream>>>(
      partial, numBlocks, cols, dscale, dbias);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void layerNormForward(DeviceContext &ctx, const float *x, const float *scale,
                      const float *bias, float *y, int64_t rows, int64_t cols,
                      double epsilon) {
  layerNormForwardT(ctx, x, scale, bias, y, rows, cols, epsilon);
}
void layerNormForward(DeviceContext &ctx, const __nv_bfloat16 *x,
                      const __nv_bfloat16 *scale, const __nv_bfloat16 *bias,
                      __nv_bfloat16 *y, int64_t rows, int64_t cols,
                      double epsilon) {
  layerNormForwardT(ctx, x, scale, bias, y, rows, cols, epsilon);
}
void layerNormForward(DeviceContext &ctx, const __half *x, const __half *scale,
                      const __half *bias, __half *y, int64_t rows,
                      int64_t cols, double epsilon) {
  layerNormForwardT(ctx, x, scale, bias, y, rows, cols, epsilon);
}

void layerNormBackward(DeviceContext &ctx, const float *x, const float *scale,
                       const float *dy, float *dx, float *dscale, float *dbias,
                       int64_t rows, int64_t cols, double epsilon) {
  layerNormBackwardT(ctx, x, scale, dy, dx, dscale, dbias, rows, cols,
                     epsilon);
}
void layerNormBackward(DeviceContext &ctx, const __nv_bfloat16 *x,
                       const __nv_bfloat16 *scale, const __nv_bfloat16 *dy,
                       __nv_bfloat16 *dx, __nv_bfloat16 *dscale,
                       __nv_bfloat16 *dbias, int64_t rows, int64_t cols,
                       double epsilon) {
  layerNormBackwardT(ctx, x, scale, dy, dx, dscale, dbias, rows, cols,
                     epsilon);
}
void layerNormBackward(DeviceContext &ctx, const __half *x, const __half *scale,
                       const __half *dy, __half *dx, __half *dscale,
                       __half *dbias, int64_t rows, int64_t cols,
                       double epsilon) {
  layerNormBackwardT(ctx, x, scale, dy, dx, dscale, dbias, rows, cols,
                     epsilon);
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

namespace {

/// Softmax of contiguous rows of n: one block per row. T: float, or a
/// 16-bit type read as float and rounded once on the write (Megatron's
/// fused softmax: 16-bit scores in and probabilities out, f32 inside).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxRowsKernel(const T *x, T *y, int64_t rows, int64_t n) {
  __shared__ float shared[kWarp];
  const float kNegInf = -INFINITY;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    float max = kNegInf;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      max = fmaxf(max, toFloat(xr[j]));
    max = blockReduce(max, MaxOp(), kNegInf, shared);
    float sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += expf(toFloat(xr[j]) - max);
    sum = blockReduce(sum, SumOp(), 0.0f, shared);
    const float inv = 1.0f / sum;
    // Each thread reads xr[j] before writing yr[j]: y may alias x.
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = fromFloat<T>(expf(toFloat(xr[j]) - max) * inv);
  }
}

/// Softmax along an axis with `inner` > 1: one thread per (outer, inner)
/// column, consecutive threads on consecutive addresses.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxStridedKernel(const T *x, T *y, int64_t outer, int64_t n,
                         int64_t inner) {
  const float kNegInf = -INFINITY;
  const int64_t columns = outer * inner;
  for (int64_t t = threadIndex(); t < columns; t += threadCount()) {
    const int64_t o = t / inner, i = t % inner;
    const T *xr = x + o * n * inner + i;
    T *yr = y + o * n * inner + i;
    float max = kNegInf;
    for (int64_t j = 0; j < n; ++j)
      max = fmaxf(max, toFloat(xr[j * inner]));
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += expf(toFloat(xr[j * inner]) - max);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j)
      yr[j * inner] = fromFloat<T>(expf(toFloat(xr[j * inner]) - max) * inv);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxBackwardRowsKernel(const T *y, const T *dy, T *dx, int64_t rows,
                              int64_t n) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *yr = y + r * n, *gr = dy + r * n;
    T *dxr = dx + r * n;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dot += static_cast<double>(toFloat(yr[j])) * toFloat(gr[j]);
    const float d = static_cast<float>(blockReduce(dot, SumOp(), 0.0, shared));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dxr[j] = fromFloat<T>(toFloat(yr[j]) * (toFloat(gr[j]) - d));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxBackwardStridedKernel(const T *y, const T *dy, T *dx, int64_t outer,
                                 int64_t n, int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t t = threadIndex(); t < columns; t += threadCount()) {
    const int64_t o = t / inner, i = t % inner;
    const int64_t base = o * n * inner + i;
    double dot = 0;
    for (int64_t j = 0; j < n; ++j)
      dot += static_cast<double>(toFloat(y[base + j * inner])) *
             toFloat(dy[base + j * inner]);
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < n; ++j)
      dx[base + j * inner] = fromFloat<T>(toFloat(y[base + j * inner]) *
                                          (toFloat(dy[base + j * inner]) - d));
  }
}

template <typename T>
void softmaxForwardT(DeviceContext &ctx, const T *x, T *y, int64_t outer,
                     int64_t n, int64_t inner) {
  if (outer <= 0 || n <= 0 || inner <= 0)
    return;
  if (inner == 1) {
    softmaxRowsKernel<<<rowGrid(ctx, outer), kBlock, 0, ctx.stream>>>(x, y,
                                                                      outer, n);
  } else {
    softmaxStridedKernel<<<gridFor(ctx, outer * inner), kBlock, 0,
                           ctx.stream>>>(x, y, outer, n, inner);
  }
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename T>
void softmaxBackwardT(DeviceContext &ctx, const T *y, const T *dy, T *dx,
                      int64_t outer, int64_t n, int64_t inner) {
  if (outer <= 0 || n <= 0 || inner <= 0)
    return;
  if (inner == 1) {
    softmaxBackwardRowsKernel<<<rowGrid(ctx, outer), kBlock, 0, ctx.stream>>>(
        y, dy, dx, outer, n);
  } else {
    softmaxBackwardStridedKernel<<<gridFor(ctx, outer * inner), kBlock, 0,
                                   ctx.stream>>>(y, dy, dx, outer, n, inner);
  }
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void softmaxForward(DeviceContext &ctx, const float *x, float *y, int64_t outer,
                    int64_t n, int64_t inner) {
  softmaxForwardT(ctx, x, y, outer, n, inner);
}
void softmaxForward(DeviceContext &ctx, const __nv_bfloat16 *x,
                    __nv_bfloat16 *y, int64_t outer, int64_t n, int64_t inner) {
  softmaxForwardT(ctx, x, y, outer, n, inner);
}
void softmaxForward(DeviceContext &ctx, const __half *x, __half *y,
                    int64_t outer, int64_t n, int64_t inner) {
  softmaxForwardT(ctx, x, y, outer, n, inner);
}

void softmaxBackward(DeviceContext &ctx, const float *y, const float *dy,
                     float *dx, int64_t outer, int64_t n, int64_t inner) {
  softmaxBackwardT(ctx, y, dy, dx, outer, n, inner);
}
void softmaxBackward(DeviceContext &ctx, const __nv_bfloat16 *y,
                     const __nv_bfloat16 *dy, __nv_bfloat16 *dx, int64_t outer,
                     int64_t n, int64_t inner) {
  softmaxBackwardT(ctx, y, dy, dx, outer, n, inner);
}
void softmaxBackward(DeviceContext &ctx, const __half *y, const __half *dy,
                     __half *dx, int64_t outer, int64_t n, int64_t inner) {
  softmaxBackwardT(ctx, y, dy, dx, outer, n, inner);
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

namespace {

/// max and sum of exp(s - max) over the classes of one row (class c at
/// s[c * inner]); every thread of the block gets them.
template <typename S>
__device__ void rowLogSumExp(const S *s, int64_t classes, int64_t inner,
                             float *sharedF, double *sharedD, float &max,
                             double &sum) {
  const float kNegInf = -INFINITY;
  float mx = kNegInf;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    mx = fmaxf(mx, toFloat(s[c * inner]));
  mx = blockReduce(mx, MaxOp(), kNegInf, sharedF);
  double sm = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    sm += expf(toFloat(s[c * inner]) - mx);
  sum = blockReduce(sm, SumOp(), 0.0, sharedD);
  max = mx;
}

/// Per-element losses: one block per element e = (o, i). Ignored labels
/// give 0, labels out of range NaN. Writes perElement[e] (double, for
/// Sum / Mean) or lossNone[e].
template <typename S, typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyForwardKernel(const S *scores, const L *labels,
                              double *perElement, float *lossNone,
                              int64_t count, int64_t classes, int64_t inner,
                              bool hasIgnoreIndex, int64_t ignoreIndex) {
  __shared__ float sharedF[kWarp];
  __shared__ double sharedD[kWarp];
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t label = loadIndex(labels, e);
    double value = 0.0;
    // The branch depends on e only: the whole block takes it.
    if (!(hasIgnoreIndex && label == ignoreIndex)) {
      const int64_t o = e / inner, i = e % inner;
      const S *s = scores + o * classes * inner + i;
      float max;
      double sum;
      rowLogSumExp(s, classes, inner, sharedF, sharedD, max, sum);
      value = label >= 0 && label < classes
                  ? log(sum) + max - toFloat(s[label * inner])
                  : static_cast<double>(NAN);
    }
    if (threadIdx.x == 0) {
      if (perElement)
        perElement[e] = value;
      else
        lossNone[e] = static_cast<float>(value);
    }
  }
}

/// loss[0] = sum of perElement (or its mean over the labels that are not
/// ignored): one block, each thread adding a fixed strided subset, then
/// the block tree.
template <typename L>
__global__ void __launch_bounds__(kFinalBlock)
    crossEntropyReduceKernel(const double *perElement, const L *labels,
                             int64_t count, bool hasIgnoreIndex,
                             int64_t ignoreIndex, bool mean, float *loss) {
  __shared__ double sharedD[kWarp];
  __shared__ long long sharedI[kWarp];
  double total = 0;
  long long valid = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    total += perElement[e];
    valid += !(hasIgnoreIndex && loadIndex(labels, e) == ignoreIndex);
  }
  total = blockReduce(total, SumOp(), 0.0, sharedD);
  valid = blockReduce(valid, SumOp(), 0LL, sharedI);
  if (threadIdx.x == 0) {
    if (mean)
      total /= static_cast<double>(valid); // all ignored: 0/0 = NaN (torch)
    loss[0] = static_cast<float>(total);
  }
}

/// *valid = the number of labels that are not ignored (one block).
template <typename L>
__global__ void __launch_bounds__(kFinalBlock)
    countValidLabelsKernel(const L *labels, int64_t count, bool hasIgnoreIndex,
                           int64_t ignoreIndex, long long *valid) {
  __shared__ long long sharedI[kWarp];
  long long n = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x)
    n += !(hasIgnoreIndex && loadIndex(labels, e) == ignoreIndex);
  n = blockReduce(n, SumOp(), 0LL, sharedI);
  if (threadIdx.x == 0)
    *valid = n;
}

/// dscores, one block per element e = (o, i): 0 for ignored labels,
/// (softmax - onehot) * g otherwise (NaN for labels out of range).
template <typename S, typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyBackwardKernel(const S *scores, const L *labels,
                               const float *dloss, S *dscores,
                               int64_t count, int64_t classes, int64_t inner,
                               int reduction, bool hasIgnoreIndex,
                               int64_t ignoreIndex, const long long *valid) {
  __shared__ float sharedF[kWarp];
  __shared__ double sharedD[kWarp];
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t label = loadIndex(labels, e);
    const int64_t o = e / inner, i = e % inner;
    const S *s = scores + o * classes * inner + i;
    S *ds = dscores + o * classes * inner + i;
    if (hasIgnoreIndex && label == ignoreIndex) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        ds[c * inner] = fromFloat<S>(0.0f);
      continue;
    }
    double g =
        reduction == static_cast<int>(Reduction::None) ? dloss[e] : dloss[0];
    if (reduction == static_cast<int>(Reduction::Mean))
      g /= static_cast<double>(*valid);
    if (label < 0 || label >= classes)
      g = static_cast<double>(NAN);
    float max;
    double sum;
    rowLogSumExp(s, classes, inner, sharedF, sharedD, max, sum);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const double p =
          static_cast<double>(expf(toFloat(s[c * inner]) - max)) / sum;
      ds[c * inner] = fromFloat<S>(
          static_cast<float>((p - (c == label ? 1.0 : 0.0)) * g));
    }
  }
}

template <typename S, typename L>
void crossEntropyForwardT(DeviceContext &ctx, const S *scores,
                          const L *labels, float *loss, int64_t count,
                          int64_t classes, int64_t inner, Reduction reduction,
                          bool hasIgnoreIndex, int64_t ignoreIndex) {
  if (reduction == Reduction::None) {
    if (count <= 0)
      return;
    crossEntropyForwardKernel<S, L>
        <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
            scores, labels, nullptr, loss, count, classes, inner,
            hasIgnoreIndex, ignoreIndex);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }
  double *perElement = static_cast<double *>(scratch(
      ctx, std::max<int64_t>(count, 1) * static_cast<int64_t>(sizeof(double))));
  if (count > 0) {
    crossEntropyForwardKernel<S, L>
        <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
            scores, labels, perElement, nullptr, count, classes, inner,
            hasIgnoreIndex, ignoreIndex);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  }
  crossEntropyReduceKernel<L><<<1, kFinalBlock, 0, ctx.stream>>>(
      perElement, labels, std::max<int64_t>(count, 0), hasIgnoreIndex,
      ignoreIndex, reduction == Reduction::Mean, loss);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename S, typename L>
void crossEntropyBackwardT(DeviceContext &ctx, const S *scores,
                           const L *labels, const float *dloss, S *dscores,
                           int64_t count, int64_t classes, int64_t inner,
                           Reduction reduction, bool hasIgnoreIndex,
                           int64_t ignoreIndex) {
  if (count <= 0 || classes <= 0)
    return;
  long long *valid = nullptr;
  if (reduction == Reduction::Mean) {
    valid = static_cast<long long *>(scratch(ctx, sizeof(long long)));
    countValidLabelsKernel<L><<<1, kFinalBlock, 0, ctx.stream>>>(
        labels, count, hasIgnoreIndex, ignoreIndex, valid);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  }
  crossEntropyBackwardKernel<S, L>
      <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
      scores, labels, dloss, dscores, count, classes, inner,
      static_cast<int>(reduction), hasIgnoreIndex, ignoreIndex, valid);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// Vocab-parallel statistics, one block per element e = (o, i).
template <typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyShardStatsKernel(const float *scores, const L *labels,
                                 const float *max, const int64_t *offset,
                                 float *sumExp, float *target, int64_t count,
                                 int64_t classes, int64_t inner) {
  __shared__ double sharedD[kWarp];
  const int64_t first = *offset;
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t o = e / inner, i = e % inner;
    const float *s = scores + o * classes * inner + i;
    const float m = max[e];
    double sm = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      sm += expf(s[c * inner] - m);
    sm = blockReduce(sm, SumOp(), 0.0, sharedD);
    if (threadIdx.x == 0) {
      const int64_t c = loadIndex(labels, e) - first;
      sumExp[e] = static_cast<float>(sm);
      target[e] = c >= 0 && c < classes ? s[c * inner] : 0.0f;
    }
  }
}

/// The block's dscores of a vocab-parallel cross-entropy, one block per
/// element: (exp(s - lse) - onehot(label - offset)) * g, 0 when ignored.
template <typename L>
__global__ void __launch_bounds__(kBlock)
    crossEntropyShardBackwardKernel(const float *scores, const L *labels,
                                    const float *dloss, const float *lse,
                                    const int64_t *offset, float *dscores,
                                    int64_t count, int64_t classes,
                                    int64_t inner, int reduction,
                                    bool hasIgnoreIndex, int64_t ignoreIndex,
                                    const long long *valid) {
  const int64_t first = *offset;
  for (int64_t e = blockIdx.x; e < count; e += gridDim.x) {
    const int64_t label = loadIndex(labels, e);
    const int64_t o = e / inner, i = e % inner;
    const float *s = scores + o * classes * inner + i;
    float *ds = dscores + o * classes * inner + i;
    if (hasIgnoreIndex && label == ignoreIndex) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        ds[c * inner] = 0.0f;
      continue;
    }
    double g =
        reduction == static_cast<int>(Reduction::None) ? dloss[e] : dloss[0];
    if (reduction == static_cast<int>(Reduction::Mean))
      g /= static_cast<double>(*valid);
    const float gf = static_cast<float>(g), l = lse[e];
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      ds[c * inner] =
          expf(s[c * inner] - l) * gf - (c == label - first ? gf : 0.0f);
  }
}

template <typename L>
void crossEntropyShardBackwardT(DeviceContext &ctx, const float *scores,
                                const L *labels, const float *dloss,
                                const float *lse, const int64_t *offset,
                                float *dscores, int64_t count, int64_t classes,
                                int64_t inner, Reduction reduction,
                                bool hasIgnoreIndex, int64_t ignoreIndex) {
  if (count <= 0 || classes <= 0)
    return;
  long long *valid = nullptr;
  if (reduction == Reduction::Mean) {
    valid = static_cast<long long *>(scratch(ctx, sizeof(long long)));
    countValidLabelsKernel<L><<<1, kFinalBlock, 0, ctx.stream>>>(
        labels, count, hasIgnoreIndex, ignoreIndex, valid);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  }
  crossEntropyShardBackwardKernel<L>
      <<<rowGrid(ctx, count), kBlock, 0, ctx.stream>>>(
          scores, labels, dloss, lse, offset, dscores, count, classes, inner,
          static_cast<int>(reduction), hasIgnoreIndex, ignoreIndex, valid);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// The public entry points' label dispatch.
template <typename S>
void crossEntropyForwardS(DeviceContext &ctx, const S *scores,
                          const void *labels, bool labels64, float *loss,
                          int64_t outer, int64_t classes, int64_t inner,
                          Reduction reduction, bool hasIgnoreIndex,
                          int64_t ignoreIndex) {
  const int64_t count = outer * inner;
  if (labels64)
    crossEntropyForwardT(ctx, scores, static_cast<const int64_t *>(labels),
                         loss, count, classes, inner, reduction, hasIgnoreIndex,
                         ignoreIndex);
  else
    crossEntropyForwardT(ctx, scores, static_cast<const int32_t *>(labels),
                         loss, count, classes, inner, reduction, hasIgnoreIndex,
                         ignoreIndex);
}

template <typename S>
void crossEntropyBackwardS(DeviceContext &ctx, const S *scores,
                           const void *labels, bool labels64,
                           const float *dloss, S *dscores, int64_t outer,
                           int64_t classes, int64_t inner, Reduction reduction,
                           bool hasIgnoreIndex, int64_t ignoreIndex) {
  const int64_t count = outer * inner;
  if (labels64)
    crossEntropyBackwardT(ctx, scores, static_cast<const int64_t *>(labels),
                          dloss, dscores, count, classes, inner, reduction,
                          hasIgnoreIndex, ignoreIndex);
  else
    crossEntropyBackwardT(ctx, scores, static_cast<const int32_t *>(labels),
                          dloss, dscores, count, classes, inner, reduction,
                          hasIgnoreIndex, ignoreIndex);
}

} // namespace

void softmaxCrossEntropyForward(DeviceContext &ctx, const float *scores,
                                const void *labels, bool labels64, float *loss,
                                int64_t outer, int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex) {
  crossEntropyForwardS(ctx, scores, labels, labels64, loss, outer, classes,
                       inner, reduction, hasIgnoreIndex, ignoreIndex);
}

void softmaxCrossEntropyForward(DeviceContext &ctx, const __nv_bfloat16 *scores,
                                const void *labels, bool labels64, float *loss,
                                int64_t outer, int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex) {
  crossEntropyForwardS(ctx, scores, labels, labels64, loss, outer, classes,
                       inner, reduction, hasIgnoreIndex, ignoreIndex);
}

void softmaxCrossEntropyForward(DeviceContext &ctx, const __half *scores,
                                const void *labels, bool labels64, float *loss,
                                int64_t outer, int64_t classes, int64_t inner,
                                Reduction reduction, bool hasIgnoreIndex,
                                int64_t ignoreIndex) {
  crossEntropyForwardS(ctx, scores, labels, labels64, loss, outer, classes,
                       inner, reduction, hasIgnoreIndex, ignoreIndex);
}

void softmaxCrossEntropyBackward(DeviceContext &ctx, const float *scores,
                                 const void *labels, bool labels64,
                                 const float *dloss, float *dscores,
                                 int64_t outer, int64_t classes, int64_t inner,
                                 Reduction reduction, bool hasIgnoreIndex,
                                 int64_t ignoreIndex) {
  crossEntropyBackwardS(ctx, scores, labels, labels64, dloss, dscores, outer,
                        classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
}

void softmaxCrossEntropyBackward(DeviceContext &ctx,
                                 const __nv_bfloat16 *scores,
                                 const void *labels, bool labels64,
                                 const float *dloss, __nv_bfloat16 *dscores,
                                 int64_t outer, int64_t classes, int64_t inner,
                                 Reduction reduction, bool hasIgnoreIndex,
                                 int64_t ignoreIndex) {
  crossEntropyBackwardS(ctx, scores, labels, labels64, dloss, dscores, outer,
                        classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
}

void softmaxCrossEntropyBackward(DeviceContext &ctx, const __half *scores,
                                 const void *labels, bool labels64,
                                 const float *dloss, __half *dscores,
                                 int64_t outer, int64_t classes, int64_t inner,
                                 Reduction reduction, bool hasIgnoreIndex,
                                 int64_t ignoreIndex) {
  crossEntropyBackwardS(ctx, scores, labels, labels64, dloss, dscores, outer,
                        classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
}

void crossEntropyShardStats(DeviceContext &ctx, const float *scores,
                            const void *labels, bool labels64, const float *max,
                            const int64_t *offset, float *sumExp, float *target,
                            int64_t outer, int64_t classes, int64_t inner) {
  const int64_t count = outer * inner;
  if (count <= 0)
    return;
  if (labels64)
    crossEntropyShardStatsKernel<<<rowGrid(ctx, count), kBlock, 0,
                                   ctx.stream>>>(
        scores, static_cast<const int64_t *>(labels), max, offset, sumExp,
        target, count, classes, inner);
  else
    crossEntropyShardStatsKernel<<<rowGrid(ctx, count), kBlock, 0,
                                   ctx.stream>>>(
        scores, static_cast<const int32_t *>(labels), max, offset, sumExp,
        target, count, classes, inner);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

void crossEntropyShardBackward(DeviceContext &ctx, const float *scores,
                               const void *labels, bool labels64,
                               const float *dloss, const float *lse,
                               const int64_t *offset, float *dscores,
                               int64_t outer, int64_t classes, int64_t inner,
                               Reduction reduction, bool hasIgnoreIndex,
                               int64_t ignoreIndex) {
  const int64_t count = outer * inner;
  if (labels64)
    crossEntropyShardBackwardT(
        ctx, scores, static_cast<const int64_t *>(labels), dloss, lse, offset,
        dscores, count, classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
  else
    crossEntropyShardBackwardT(
        ctx, scores, static_cast<const int32_t *>(labels), dloss, lse, offset,
        dscores, count, classes, inner, reduction, hasIgnoreIndex, ignoreIndex);
}

//===----------------------------------------------------------------------===//
// Gather and its backward
//===----------------------------------------------------------------------===//

namespace {

/// The widest word (16, 8, 4, 2 or 1 bytes) that divides every address,
/// size and pitch in `bits` (OR-ed together).
int wordBytes(uint64_t bits) {
  int w = 16;
  while (w > 1 && bits % static_cast<uint64_t>(w) != 0)
    w /= 2;
  return w;
}

/// out[o, i, w] = data[o, idx(i), w] in words W (zeros for an index out
/// of range).
template <typename W, typename I>
__global__ void __launch_bounds__(kBlock)
    gatherKernel(const W *data, const I *indices, W *out, int64_t outer,
                 int64_t axisSize, int64_t innerWords, int64_t numIndices) {
  const int64_t total = outer * numIndices * innerWords;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t w = t % innerWords, row = t / innerWords;
    const int64_t i = row % numIndices, o = row / numIndices;
    int64_t idx = loadIndex(indices, i);
    if (idx < 0)
      idx += axisSize;
    out[t] = idx >= 0 && idx < axisSize
                 ? data[(o * axisSize + idx) * innerWords + w]
                 : W();
  }
}

template <typename W>
void gatherWords(DeviceContext &ctx, const void *data, const void *indices,
                 bool indices64, void *out, int64_t outer, int64_t axisSize,
                 int64_t innerBytes, int64_t numIndices) {
  const int64_t innerWords = innerBytes / static_cast<int64_t>(sizeof(W));
  const unsigned grid = gridFor(ctx, outer * numIndices * innerWords);
  if (indices64)
    gatherKernel<W, int64_t><<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const W *>(data), static_cast<const int64_t *>(indices),
        static_cast<W *>(out), outer, axisSize, innerWords, numIndices);
  else
    gatherKernel<W, int32_t><<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const W *>(data), static_cast<const int32_t *>(indices),
        static_cast<W *>(out), outer, axisSize, innerWords, numIndices);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

/// keys[i] = the index of position i from the front (axisSize, sorting
/// last, when out of range), positions[i] = i.
template <typename I>
__global__ void __launch_bounds__(kBlock)
    sortKeysKernel(const I *indices, int64_t numIndices, int64_t axisSize,
                   uint32_t *keys, uint32_t *positions) {
  for (int64_t i = threadIndex(); i < numIndices; i += threadCount()) {
    int64_t idx = loadIndex(indices, i);
    if (idx < 0)
      idx += axisSize;
    keys[i] =
        static_cast<uint32_t>(idx >= 0 && idx < axisSize ? idx : axisSize);
    positions[i] = static_cast<uint32_t>(i);
  }
}

/// With (keys, positions) sorted stably by key: the thread of (o, k, j)
/// where k starts a run of equal keys a < axisSize writes
/// ddata[o, a, j] = the sum of dout[o, position, j] over the run, in
/// position order (the CPU reference's order).
__global__ void __launch_bounds__(kBlock)
    gatherBackwardRunsKernel(const uint32_t *keys, const uint32_t *positions,
                             const float *dout, float *ddata, int64_t outer,
                             int64_t axisSize, int64_t inner,
                             int64_t numIndices) {
  const int64_t total = outer * numIndices * inner;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t j = t % inner, q = t / inner;
    const int64_t k = q % numIndices, o = q / numIndices;
    const uint32_t key = keys[k];
    if ((k > 0 && keys[k - 1] == key) || key >= axisSize)
      continue;
    float sum = 0.0f;
    for (int64_t r = k; r < numIndices && keys[r] == key; ++r)
      sum += dout[(o * numIndices + positions[r]) * inner + j];
    ddata[(o * axisSize + key) * inner + j] = sum;
  }
}

/// The fallback for more than 2^31 indices or axes of 2^32 - 1 or more:
/// one thread per (o, j) adding every index's row in order.
template <typename I>
__global__ void __launch_bounds__(kBlock)
    gatherBackwardOwnerKernel(const I *indices, const float *dout, float *ddata,
                              int64_t outer, int64_t axisSize, int64_t inner,
                              int64_t numIndices) {
  const int64_t total = outer * inner;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t o = t / inner, j = t % inner;
    for (int64_t i = 0; i < numIndices; ++i) {
      int64_t idx = loadIndex(indices, i);
      if (idx < 0)
        idx += axisSize;
      if (idx >= 0 && idx < axisSize)
        ddata[(o * axisSize + idx) * inner + j] +=
            dout[(o * numIndices + i) * inner + j];
    }
  }
}

template <typename I>
void gatherBackwardT(DeviceContext &ctx, const I *indices, const float *dout,
                     float *ddata, int64_t outer, int64_t axisSize,
                     int64_t inner, int64_t numIndices) {
  if (numIndices > std::numeric_limits<int32_t>::max() ||
      axisSize >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) {
    gatherBackwardOwnerKernel<I>
        <<<gridFor(ctx, outer * inner), kBlock, 0, ctx.stream>>>(
            indices, dout, ddata, outer, axisSize, inner, numIndices);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }
  // Keys take the bits of 0..axisSize (axisSize marks out-of-range).
  int endBit = 1;
  while (endBit < 32 && (int64_t{1} << endBit) <= axisSize)
    ++endBit;
  const int n = static_cast<int>(numIndices);
  size_t sortBytes = 0;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cub::DeviceRadixSort::SortPairs(
                nullptr, sortBytes, static_cast<const uint32_t *>(nullptr),
                static_cast<uint32_t *>(nullptr),
                static_cast<const uint32_t *>(nullptr),
                static_cast<uint32_t *>(nullptr), n, 0, endBit, ctx.stream));
  const int64_t arrayBytes = alignUp(numIndices * 4);
  char *base = static_cast<char *>(
      scratch(ctx, 4 * arrayBytes + alignUp(static_cast<int64_t>(sortBytes))));
  uint32_t *keysIn = reinterpret_cast<uint32_t *>(base);
  uint32_t *keysOut = reinterpret_cast<uint32_t *>(base + arrayBytes);
  uint32_t *posIn = reinterpret_cast<uint32_t *>(base + 2 * arrayBytes);
  uint32_t *posOut = reinterpret_cast<uint32_t *>(base + 3 * arrayBytes);
  void *sortTemp = base + 4 * arrayBytes;
  sortKeysKernel<I><<<gridFor(ctx, numIndices), kBlock, 0, ctx.stream>>>(
      indices, numIndices, axisSize, keysIn, posIn);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
  AUTOPAR_CUDA_CHECK_CTX(&ctx, cub::DeviceRadixSort::SortPairs(
                                   sortTemp, sortBytes, keysIn, keysOut, posIn,
                                   posOut, n, 0, endBit, ctx.stream));
  gatherBackwardRunsKernel<<<gridFor(ctx, outer * numIndices * inner), kBlock,
                             0, ctx.stream>>>(
      keysOut, posOut, dout, ddata, outer, axisSize, inner, numIndices);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void gather(DeviceContext &ctx, const void *data, const void *indices,
            bool indices64, void *out, int64_t outer, int64_t axisSize,
            int64_t innerBytes, int64_t numIndices) {
  if (outer <= 0 || numIndices <= 0 || innerBytes <= 0)
    return;
  const int w = wordBytes(reinterpret_cast<uintptr_t>(data) |
                          reinterpret_cast<uintptr_t>(out) |
                          static_cast<uint64_t>(innerBytes));
  switch (w) {
  case 16:
    return gatherWords<uint4>(ctx, data, indices, indices64, out, outer,
                              axisSize, innerBytes, numIndices);
  case 8:
    return gatherWords<uint2>(ctx, data, indices, indices64, out, outer,
                              axisSize, innerBytes, numIndices);
  case 4:
    return gatherWords<uint32_t>(ctx, data, indices, indices64, out, outer,
                                 axisSize, innerBytes, numIndices);
  case 2:
    return gatherWords<uint16_t>(ctx, data, indices, indices64, out, outer,
                                 axisSize, innerBytes, numIndices);
  default:
    return gatherWords<uint8_t>(ctx, data, indices, indices64, out, outer,
                                axisSize, innerBytes, numIndices);
  }
}

void gatherBackward(DeviceContext &ctx, const void *indices, bool indices64,
                    const float *dout, float *ddata, int64_t outer,
                    int64_t axisSize, int64_t inner, int64_t numIndices) {
  if (outer <= 0 || axisSize <= 0 || inner <= 0)
    return;
  AUTOPAR_CUDA_CHECK_CTX(
      &ctx, cudaMemsetAsync(ddata, 0,
                            static_cast<size_t>(outer * axisSize * inner) *
                                sizeof(float),
                            ctx.stream));
  if (numIndices <= 0)
    return;
  if (indices64)
    gatherBackwardT(ctx, static_cast<const int64_t *>(indices), dout, ddata,
                    outer, axisSize, inner, numIndices);
  else
    gatherBackwardT(ctx, static_cast<const int32_t *>(indices), dout, ddata,
                    outer, axisSize, inner, numIndices);
}

//===----------------------------------------------------------------------===//
// Strided copies and axis blocks
//===----------------------------------------------------------------------===//

namespace {

/// out[outOffset + sum_d i_d outStrides[d]] = in[inOffset + sum_d i_d
/// inStrides[d]] over the index space `shape` (passed by value).
struct StridedMove {
  int rank = 0;
  int64_t shape[cpu::kMaxRank] = {};
  int64_t inStrides[cpu::kMaxRank] = {};
  int64_t outStrides[cpu::kMaxRank] = {};
  int64_t inOffset = 0, outOffset = 0;
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    stridedMoveKernel(const T *in, T *out, StridedMove m, int64_t total) {
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    int64_t rem = t, src = m.inOffset, dst = m.outOffset;
    for (int d = m.rank - 1; d >= 0; --d) {
      const int64_t i = rem % m.shape[d];
      rem /= m.shape[d];
      src += i * m.inStrides[d];
      dst += i * m.outStrides[d];
    }
    out[dst] = in[src];
  }
}

/// The same move with unit dims dropped and dims merged into the one
/// before them where both sides advance contiguously (fewer divisions;
/// the row-major order of the elements is unchanged).
StridedMove simplify(const StridedMove &m) {
  StridedMove s;
  s.inOffset = m.inOffset;
  s.outOffset = m.outOffset;
  for (int d = 0; d < m.rank; ++d) {
    const int64_t e = m.shape[d];
    if (e == 1)
      continue;
    const int n = s.rank;
    if (n > 0 && s.inStrides[n - 1] == m.inStrides[d] * e &&
        s.outStrides[n - 1] == m.outStrides[d] * e) {
      s.shape[n - 1] *= e;
      s.inStrides[n - 1] = m.inStrides[d];
      s.outStrides[n - 1] = m.outStrides[d];
    } else {
      s.shape[n] = e;
      s.inStrides[n] = m.inStrides[d];
      s.outStrides[n] = m.outStrides[d];
      s.rank = n + 1;
    }
  }
  return s;
}

void launchStridedMove(DeviceContext &ctx, const void *in, void *out,
                       const StridedMove &move, int64_t elementBytes) {
  int64_t total = 1;
  for (int d = 0; d < move.rank; ++d)
    total *= move.shape[d];
  if (total <= 0)
    return;
  const StridedMove m = simplify(move);
  const unsigned grid = gridFor(ctx, total);
  switch (elementBytes) {
  case 1:
    stridedMoveKernel<<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const uint8_t *>(in), static_cast<uint8_t *>(out), m,
        total);
    break;
  case 2:
    stridedMoveKernel<<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out), m,
        total);
    break;
  case 4:
    stridedMoveKernel<<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out), m,
        total);
    break;
  case 8:
    stridedMoveKernel<<<grid, kBlock, 0, ctx.stream>>>(
        static_cast<const uint64_t *>(in), static_cast<uint64_t *>(out), m,
        total);
    break;
  default:
    failCall(ctx, __LINE__, "cuda::stridedCopy/stridedScatter",
             "element size is not 1, 2, 4 or 8 bytes");
  }
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

void checkRank(DeviceContext &ctx, int rank) {
  if (rank < 0 || rank > cpu::kMaxRank)
    failCall(ctx, __LINE__, "cuda::stridedCopy/stridedScatter",
             "rank out of range");
}

/// dst[r * dstPitch + w] = src[r * srcPitch + w] for w < rowWords, in
/// words W.
template <typename W>
__global__ void __launch_bounds__(kBlock)
    copyRowsKernel(const W *src, W *dst, int64_t rows, int64_t rowWords,
                   int64_t srcPitch, int64_t dstPitch) {
  const int64_t total = rows * rowWords;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t r = t / rowWords, w = t % rowWords;
    dst[r * dstPitch + w] = src[r * srcPitch + w];
  }
}

template <typename W>
void copyRowsWords(DeviceContext &ctx, const char *src, char *dst, int64_t rows,
                   int64_t rowBytes, int64_t srcPitchBytes,
                   int64_t dstPitchBytes) {
  const int64_t w = sizeof(W);
  copyRowsKernel<W>
      <<<gridFor(ctx, rows * (rowBytes / w)), kBlock, 0, ctx.stream>>>(
          reinterpret_cast<const W *>(src), reinterpret_cast<W *>(dst), rows,
          rowBytes / w, srcPitchBytes / w, dstPitchBytes / w);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void stridedCopy(DeviceContext &ctx, const void *in, void *out, int rank,
                 const int64_t *shape, const int64_t *inStrides,
                 int64_t inOffset, int64_t elementBytes) {
  checkRank(ctx, rank);
  StridedMove m;
  m.rank = rank;
  m.inOffset = inOffset;
  int64_t dense = 1;
  for (int d = rank - 1; d >= 0; --d) {
    m.shape[d] = shape[d];
    m.inStrides[d] = inStrides[d];
    m.outStrides[d] = dense;
    dense *= shape[d];
  }
  launchStridedMove(ctx, in, out, m, elementBytes);
}

void stridedScatter(DeviceContext &ctx, const void *in, void *out,
                    int64_t outElements, int rank, const int64_t *shape,
                    const int64_t *outStrides, int64_t outOffset,
                    int64_t elementBytes) {
  checkRank(ctx, rank);
  if (outElements > 0)
    AUTOPAR_CUDA_CHECK_CTX(
        &ctx,
        cudaMemsetAsync(out, 0, static_cast<size_t>(outElements * elementBytes),
                        ctx.stream));
  StridedMove m;
  m.rank = rank;
  m.outOffset = outOffset;
  int64_t dense = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (outStrides[d] == 0 && shape[d] > 1) {
      // Every index along d writes the same place; the reference's last
      // write (the last index) wins, so only it is moved (no race).
      m.shape[d] = 1;
      m.inOffset += (shape[d] - 1) * dense;
    } else {
      m.shape[d] = shape[d];
    }
    m.inStrides[d] = dense;
    m.outStrides[d] = outStrides[d];
    dense *= shape[d];
  }
  launchStridedMove(ctx, in, out, m, elementBytes);
}

void copyAxisBlock(DeviceContext &ctx, const void *in, void *out, int64_t outer,
                   int64_t n, int64_t bigN, int64_t offset, int64_t innerBytes,
                   bool intoBig) {
  const int64_t rowBytes = n * innerBytes;
  if (outer <= 0 || rowBytes <= 0)
    return;
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  const int64_t bigPitch = bigN * innerBytes;
  int64_t srcPitch = rowBytes, dstPitch = rowBytes;
  if (intoBig) {
    dst += offset * innerBytes;
    dstPitch = bigPitch;
  } else {
    src += offset * innerBytes;
    srcPitch = bigPitch;
  }
  const int w = wordBytes(
      reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
      static_cast<uint64_t>(rowBytes) | static_cast<uint64_t>(bigPitch));
  switch (w) {
  case 16:
    return copyRowsWords<uint4>(ctx, src, dst, outer, rowBytes, srcPitch,
                                dstPitch);
  case 8:
    return copyRowsWords<uint2>(ctx, src, dst, outer, rowBytes, srcPitch,
                                dstPitch);
  case 4:
    return copyRowsWords<uint32_t>(ctx, src, dst, outer, rowBytes, srcPitch,
                                   dstPitch);
  case 2:
    return copyRowsWords<uint16_t>(ctx, src, dst, outer, rowBytes, srcPitch,
                                   dstPitch);
  default:
    return copyRowsWords<uint8_t>(ctx, src, dst, outer, rowBytes, srcPitch,
                                  dstPitch);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {

/// One more element `v` into the accumulator, as cpu::reduce.
__device__ inline double combine(bool isMax, double acc, float v) {
  if (!isMax)
    return acc + v;
  return isnan(v) || v > acc ? static_cast<double>(v) : acc;
}
/// Two accumulators (partials in order).
__device__ inline double combinePartial(bool isMax, double acc, double p) {
  return isMax ? MaxNaNOp()(acc, p) : acc + p;
}
__device__ inline double reduceInit(bool isMax) {
  return isMax ? -static_cast<double>(INFINITY) : 0.0;
}
__device__ inline float finish(bool isMean, double acc, int64_t n) {
  return static_cast<float>(isMean ? acc / static_cast<double>(n) : acc);
}

/// [rows, cols] reduced over rows, in segments of `segRows` rows: the
/// thread of (segment s, column j) combines its rows in order. With one
/// segment it writes out[j] (finished); otherwise partial[s * cols + j].
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceColumnsKernel(const T *in, int64_t rows, int64_t cols,
                        int64_t numSegs, int64_t segRows, bool isMax,
                        bool isMean, T *out, double *partial) {
  const int64_t total = numSegs * cols;
  for (int64_t t = threadIndex(); t < total; t += threadCount()) {
    const int64_t s = t / cols, j = t % cols;
    const int64_t r0 = s * segRows, r1 = min(rows, r0 + segRows);
    double acc = reduceInit(isMax);
    for (int64_t r = r0; r < r1; ++r)
      acc = combine(isMax, acc, toFloat(in[r * cols + j]));
    if (partial)
      partial[t] = acc;
    else
      out[j] = fromFloat<T>(finish(isMean, acc, rows));
  }
}

/// out[j] = the partials of reduceColumnsKernel combined in segment order.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceColumnPartialsKernel(const double *partial, int64_t numSegs,
                               int64_t rows, int64_t cols, bool isMax,
                               bool isMean, T *out) {
  for (int64_t j = threadIndex(); j < cols; j += threadCount()) {
    double acc = reduceInit(isMax);
    for (int64_t s = 0; s < numSegs; ++s)
      acc = combinePartial(isMax, acc, partial[s * cols + j]);
    out[j] = fromFloat<T>(finish(isMean, acc, rows));
  }
}

/// [rows, cols] reduced over cols, one thread per row (short rows).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceRowsThreadKernel(const T *in, int64_t rows, int64_t cols,
                           bool isMax, bool isMean, T *out) {
  for (int64_t r = threadIndex(); r < rows; r += threadCount()) {
    double acc = reduceInit(isMax);
    for (int64_t j = 0; j < cols; ++j)
      acc = combine(isMax, acc, toFloat(in[r * cols + j]));
    out[r] = fromFloat<T>(finish(isMean, acc, cols));
  }
}

/// [rows, cols] reduced over cols, one block per row.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceRowsBlockKernel(const T *in, int64_t rows, int64_t cols,
                          bool isMax, bool isMean, T *out) {
  __shared__ double shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double acc = reduceInit(isMax);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      acc = combine(isMax, acc, toFloat(in[r * cols + j]));
    acc = isMax ? blockReduce(acc, MaxNaNOp(), reduceInit(true), shared)
                : blockReduce(acc, SumOp(), 0.0, shared);
    if (threadIdx.x == 0)
      out[r] = fromFloat<T>(finish(isMean, acc, cols));
  }
}

/// Any pattern: one thread per output, combining its elements in the
/// row-major order of the reduced dims (the reference's order).
struct ReducePattern {
  int numKept = 0, numReduced = 0;
  int64_t keptShape[cpu::kMaxRank] = {}, keptStrides[cpu::kMaxRank] = {};
  int64_t redShape[cpu::kMaxRank] = {}, redStrides[cpu::kMaxRank] = {};
  int64_t outCount = 1, redCount = 1;
};

template <typename T>
__global__ void __launch_bounds__(kBlock)
    reduceGeneralKernel(const T *in, ReducePattern p, bool isMax,
                        bool isMean, T *out) {
  for (int64_t o = threadIndex(); o < p.outCount; o += threadCount()) {
    int64_t base = 0, rem = o;
    for (int d = p.numKept - 1; d >= 0; --d) {
      base += (rem % p.keptShape[d]) * p.keptStrides[d];
      rem /= p.keptShape[d];
    }
    double acc = reduceInit(isMax);
    for (int64_t r = 0; r < p.redCount; ++r) {
      int64_t offset = base, rr = r;
      for (int d = p.numReduced - 1; d >= 0; --d) {
        offset += (rr % p.redShape[d]) * p.redStrides[d];
        rr /= p.redShape[d];
      }
      acc = combine(isMax, acc, toFloat(in[offset]));
    }
    out[o] = fromFloat<T>(finish(isMean, acc, p.redCount));
  }
}

/// Column reductions with fewer columns than this are split into row
/// segments (partials summed in order) to keep the device busy.
constexpr int64_t kColumnThreads = 65536;
/// Rows per segment at least.
constexpr int64_t kMinSegmentRows = 64;
/// Row reductions of at most this many elements per row use one thread
/// per row.
constexpr int64_t kThreadRowMax = 32;

} // namespace

namespace {

template <typename T>
void reduceT(DeviceContext &ctx, ReduceKind kind, const T *in, T *out,
             int rank, const int64_t *shape, const bool *reduced) {
  if (rank < 0 || rank > cpu::kMaxRank)
    failCall(ctx, __LINE__, "cuda::reduce", "rank out of range");
  // Alternating kept / reduced groups of dims, as cpu::reduce.
  const cpu::ReduceGroups g = cpu::reduceGroups(rank, shape, reduced);
  if (g.count == 0) {
    AUTOPAR_CUDA_CHECK_CTX(&ctx, cudaMemcpyAsync(out, in, sizeof(T),
                                                 cudaMemcpyDeviceToDevice,
                                                 ctx.stream));
    return;
  }
  const bool isMax = kind == ReduceKind::Max;
  const bool isMean = kind == ReduceKind::Mean;
  if (g.count <= 2 && g.reduced[0] && (g.count == 1 || !g.reduced[1])) {
    // [rows reduced, cols kept]: column reductions.
    const int64_t rows = g.extents[0], cols = g.count == 2 ? g.extents[1] : 1;
    if (cols == 0)
      return;
    int64_t numSegs = 1, segRows = rows;
    if (cols < kColumnThreads && rows > kMinSegmentRows) {
      numSegs = std::min(ceilDiv(kColumnThreads, cols),
                         ceilDiv(rows, kMinSegmentRows));
      segRows = ceilDiv(rows, numSegs);
      numSegs = ceilDiv(rows, segRows);
    }
    double *partial = nullptr;
    if (numSegs > 1)
      partial = static_cast<double *>(
          scratch(ctx, numSegs * cols * static_cast<int64_t>(sizeof(double))));
    reduceColumnsKernel<<<gridFor(ctx, numSegs * cols), kBlock, 0,
                          ctx.stream>>>(in, rows, cols, numSegs, segRows, isMax,
                                        isMean, out, partial);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    if (partial) {
      reduceColumnPartialsKernel<<<gridFor(ctx, cols), kBlock, 0, ctx.stream>>>(
          partial, numSegs, rows, cols, isMax, isMean, out);
      AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    }
    return;
  }
  if (g.count == 2 && !g.reduced[0] && g.reduced[1]) {
    // [rows kept, cols reduced]: row reductions.
    const int64_t rows = g.extents[0], cols = g.extents[1];
    if (rows == 0)
      return;
    if (cols <= kThreadRowMax)
      reduceRowsThreadKernel<<<gridFor(ctx, rows), kBlock, 0, ctx.stream>>>(
          in, rows, cols, isMax, isMean, out);
    else
      reduceRowsBlockKernel<<<rowGrid(ctx, rows), kBlock, 0, ctx.stream>>>(
          in, rows, cols, isMax, isMean, out);
    AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
    return;
  }
  // General case.
  int64_t strides[cpu::kMaxRank];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  ReducePattern p;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    if (reduced[d]) {
      p.redShape[p.numReduced] = shape[d];
      p.redStrides[p.numReduced++] = strides[d];
      p.redCount *= shape[d];
    } else {
      p.keptShape[p.numKept] = shape[d];
      p.keptStrides[p.numKept++] = strides[d];
      p.outCount *= shape[d];
    }
  }
  if (p.outCount == 0)
    return;
  reduceGeneralKernel<<<gridFor(ctx, p.outCount), kBlock, 0, ctx.stream>>>(
      in, p, isMax, isMean, out);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

} // namespace

void reduce(DeviceContext &ctx, ReduceKind kind, const float *in, float *out,
            int rank, const int64_t *shape, const bool *reduced) {
  reduceT(ctx, kind, in, out, rank, shape, reduced);
}
void reduce(DeviceContext &ctx, ReduceKind kind, const __nv_bfloat16 *in,
            __nv_bfloat16 *out, int rank, const int64_t *shape,
            const bool *reduced) {
  reduceT(ctx, kind, in, out, rank, shape, reduced);
}
void reduce(DeviceContext &ctx, ReduceKind kind, const __half *in, __half *out,
            int rank, const int64_t *shape, const bool *reduced) {
  reduceT(ctx, kind, in, out, rank, shape, reduced);
}

//===----------------------------------------------------------------------===//
// Accumulation and copies
//===----------------------------------------------------------------------===//

namespace {

/// dst = (accumulate ? dst : 0) + scale * src, rounded as the reference
/// (a product, then a sum: no contraction into an FMA).
__global__ void __launch_bounds__(kBlock)
    accumulateKernel(float *dst, const float *src, int64_t numElements,
                     float scale, bool accumulate) {
  for (int64_t i = threadIndex(); i < numElements; i += threadCount())
    dst[i] = __fadd_rn(accumulate ? dst[i] : 0.0f, __fmul_rn(scale, src[i]));
}

/// accumulateKernel on 16-bit floats (T: __nv_bfloat16 or __half, whose
/// conversions from and to float round to nearest even).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    accumulate16Kernel(T *dst, const T *src, int64_t numElements, float scale,
                       bool accumulate) {
  for (int64_t i = threadIndex(); i < numElements; i += threadCount())
    dst[i] = T(__fadd_rn(accumulate ? static_cast<float>(dst[i]) : 0.0f,
                         __fmul_rn(scale, static_cast<float>(src[i]))));
}

} // namespace

void accumulateInto(DeviceContext &ctx, float *dst, const float *src,
                    int64_t numElements, float scale, bool accumulate) {
  if (numElements <= 0)
    return;
  accumulateKernel<<<gridFor(ctx, numElements), kBlock, 0, ctx.stream>>>(
      dst, src, numElements, scale, accumulate);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

template <typename T>
static void accumulate16(DeviceContext &ctx, T *dst, const T *src,
                         int64_t numElements, float scale, bool accumulate) {
  if (numElements <= 0)
    return;
  accumulate16Kernel<<<gridFor(ctx, numElements), kBlock, 0, ctx.stream>>>(
      dst, src, numElements, scale, accumulate);
  AUTOPAR_CUDA_CHECK_LAUNCH(&ctx);
}

void accumulateInto(DeviceContext &ctx, __nv_bfloat16 *dst,
                    const __nv_bfloat16 *src, int64_t numElements, float scale,
                    bool accumulate) {
  accumulate16(ctx, dst, src, numElements, scale, accumulate);
}

void accumulateInto(DeviceContext &ctx, __half *dst, const __half *src,
                    int64_t numElements, float scale, bool accumulate) {
  accumulate16(ctx, dst, src, numElements, scale, accumulate);
}

void copy(DeviceContext &ctx, void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0)
    return;
  AUTOPAR_CUDA_CHECK_CTX(&ctx,
                         cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                         cudaMemcpyDeviceToDevice, ctx.stream));
}

} // namespace autopar::rt::cuda
