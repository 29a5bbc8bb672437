//===- Gemm.cu - GEMMs through cuBLASLt -----------------------------------===//
//
// cuda::gemm (runtime/cuda/Kernels.h): cpu::gemm's batched products on
// cuBLASLt, on the transposed problem (row-major C is column-major C^T =
// op(B)^T op(A)^T), with CUBLAS_COMPUTE_32F for every element type (no
// TF32). Batch dims of 1 are dropped and contiguous ones merged; the
// longest is cuBLASLt's strided batch, the others a loop here. The
// algorithm chosen for a shape is cached; an epilogue that cuBLASLt has no
// algorithm with runs as a separate kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/KernelsCommon.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

namespace autopar::rt::cuda {

namespace {

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
    fail(&ctx, __FILE__, __LINE__, "cuda::gemm",
         "bias epilogue without a bias");
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
  const uint32_t alignA = alignmentOf(bBits), alignB = alignmentOf(aBits),
                 alignC = alignmentOf(cBits);
  const struct {
    cublasLtMatmulPreferenceAttributes_t attribute;
    const void *value;
    size_t size;
  } preferences[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
       sizeof(workspaceBytes)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof(alignA)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof(alignB)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof(alignC)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC, sizeof(alignC)},
  };
  for (const auto &p : preferences)
    AUTOPAR_CUBLAS_CHECK_CTX(
        &ctx, cublasLtMatmulPreferenceSetAttribute(plan.pref, p.attribute,
                                                   p.value, p.size));

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
        fail(&ctx, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic",
             reason);
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

/// The 16-bit overloads: element type T, cuBLASLt's `type` for it.
#define AUTOPAR_GEMM_16(T, type)                                               \
  void gemm(DeviceContext &ctx, const GemmDesc &d, const T *a, const T *b,     \
            T *c) {                                                            \
    gemmImpl(ctx, d, {type, 2}, a, b, c, Epilogue::None, nullptr);             \
  }
AUTOPAR_GEMM_16(__nv_bfloat16, CUDA_R_16BF)
AUTOPAR_GEMM_16(__half, CUDA_R_16F)
#undef AUTOPAR_GEMM_16

} // namespace autopar::rt::cuda
